"""Run an audit: verify the receipt's signature, gather the kit's facts, run every rule.

The signature comes first and is not negotiable: an unverifiable receipt yields one R01 error and
no other finding, because nothing in unsigned bytes is worth auditing. Evidence files are used
only when their bytes match the sha256 the receipt signs (R03 reports the others).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k3kit._digest import sha256_hex
from k3kit._fs import walk
from k3kit.audit.context import Context, EvidenceFacts, KitFacts, Policy, build_context
from k3kit.audit.findings import ERROR, RANK, SEVERITIES, Finding, Out, ordered_rules
from k3kit.errors import InputError, K3kitError, VerificationError
from k3kit.evidence import MAX_EVIDENCE_BYTES, RunData, parse_evidence, summarize
from k3kit.formats.documents import read_bounded, read_kit_info
from k3kit.formats.kitpath import classify, open_kit
from k3kit.formats.manifest import (
    EVIDENCE_DIR,
    MANIFEST_NAME,
    RECEIPT_NAME,
    ExpectedEvidence,
    read_bound_evidence,
)
from k3kit.models import KIT_SUBJECT, KitInfo, ReceiptPredicate, Run
from k3kit.node.verify import LOCK_NAME, MAX_DOC_BYTES
from k3kit.signing.keys import PublicKey
from k3kit.signing.sign import read_receipt
from k3kit.signing.trust.source import TrustSource, trusted_keys_of


@dataclass
class AuditReport:
    target: str
    findings: list[Finding]
    facts: dict[str, Any] = field(default_factory=dict)

    def at_or_above(self, threshold: str) -> list[Finding]:
        return [f for f in self.findings if RANK[f.severity] >= RANK[threshold]]

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITIES}

    def as_json(self, fail_on: str) -> dict[str, Any]:
        return {
            "ok": not self.at_or_above(fail_on),
            "target": self.target,
            "fail_on": fail_on,
            "counts": self.counts(),
            **self.facts,
            "findings": [f.as_json() for f in self.findings],
        }


def run_rules(ctx: Context) -> list[Finding]:
    """Every registered rule, in id order; a rule with nothing to say is reported as such."""
    findings: list[Finding] = []
    for rule in ordered_rules():
        out = Out(rule.id)
        try:
            rule.check(ctx, out)
        except (ArithmeticError, ValueError) as exc:  # numbers a rule cannot compute with
            out.findings.clear()
            out.not_checkable(None, f"the receipt's numbers defeat this rule's arithmetic: {exc}")
        if not out.findings:
            out.info(None, "nothing in this receipt for this rule to check")
        findings += out.findings
    return findings


def _sha256_of(path: Path) -> str | None:
    """The sha256 of a kit document read by the one bounded reader; None when unreadable
    (rule R03 then reports the subject as unbound)."""
    try:
        data = read_bounded(
            path, MAX_DOC_BYTES, what=path.name, error=VerificationError, code="AUDIT_UNREADABLE"
        )
    except VerificationError:
        return None
    return sha256_hex(data)


def _kit_info(kit_dir: Path, kit_sha256: str | None) -> KitInfo | None:
    """kit.json only when its bytes are the ones the signed manifest lists (else None)."""
    if not kit_sha256:
        return None
    try:
        return read_kit_info(kit_dir, kit_sha256, max_bytes=MAX_DOC_BYTES)
    except K3kitError:
        return None


def read_evidence(folder: Path, pred: ReceiptPredicate) -> tuple[EvidenceFacts, dict[str, RunData]]:
    """Every run's evidence file under ``folder`` (a kit, or an acceptance report's folder),
    bound to its signed sha256 by the verifier's own reader; what became of each is recorded in
    the returned :class:`EvidenceFacts`, the only thing rules ask about evidence."""
    facts = EvidenceFacts()
    results: dict[str, RunData] = {}
    listed = set()
    for run in pred.runs:
        if run.evidence is None:
            continue
        listed.add(run.evidence)
        signed = ExpectedEvidence(
            run.evidence,
            min(run.evidence_bytes or 0, MAX_EVIDENCE_BYTES),
            run.evidence_sha256 or "",
        )
        try:  # the verifier's own binding (manifest.read_bound_evidence), not a second one
            data = read_bound_evidence(folder, signed)
        except VerificationError as exc:
            state = "missing or unreadable" if exc.code == "EVIDENCE_FILE_MISSING" else "changed"
            facts.status[run.id] = f"{state}: {exc.message}"
            continue
        admit_evidence(run, data, facts, results)
    ev_dir = folder / EVIDENCE_DIR
    if ev_dir.is_dir() and not ev_dir.is_symlink():
        facts.extra = [
            f"{EVIDENCE_DIR}/{e.rel}"
            for e in walk(ev_dir)
            if e.kind != "dir" and f"{EVIDENCE_DIR}/{e.rel}" not in listed
        ]
    return facts, results


def admit_evidence(
    run: Run, data: bytes, facts: EvidenceFacts, results: dict[str, RunData]
) -> None:
    """Parse bytes already bound to the run's signed sha256 and admit them when their tool
    summary is the one the receipt records; the outcome goes into ``facts.status``."""
    try:
        result = parse_evidence(
            data,
            source=run.evidence or run.id,
            tool=run.evidence_tool,
            record=run.evidence_record,
            error=VerificationError,
        )
    except VerificationError as exc:
        facts.status[run.id] = f"unparseable: {exc.message}"
        return
    # Notes about version drift may grow between k3kit versions; the numbers may not differ.
    recorded = run.evidence_summary
    drift: dict[str, list[str]] = {"notes": [], "unmapped": []}
    if recorded is None or summarize(result).model_copy(update=drift) != recorded.model_copy(
        update=drift
    ):
        facts.status[run.id] = "its tool summary differs from the receipt's"
        return
    facts.status[run.id] = "ok"
    results[run.id] = result


def audit_receipt(
    receipt: Path,
    trusted: list[PublicKey],
    *,
    kit_dir: Path | None,
    label: str,
    policy: Policy | None = None,
) -> AuditReport:
    """Audit one receipt; with ``kit_dir`` also its subjects and evidence files."""
    try:
        verified = read_receipt(receipt, trusted)
    except VerificationError as exc:
        finding = Finding(
            "R01",
            ERROR,
            "receipt",
            f"receipt not verified: {exc.message}",
            "a receipt signed by a trusted key",
            exc.code,
        )
        return AuditReport(label, [finding], {"verified": False})
    statement = verified.statement
    pred = statement.predicate
    subjects = {s.name: s.digest.get("sha256", "") for s in statement.subject}
    kit: KitFacts | None = None
    evidence: EvidenceFacts | None = None
    results: dict[str, RunData] = {}
    if kit_dir is not None:
        kit = KitFacts(
            _sha256_of(kit_dir / MANIFEST_NAME),
            _sha256_of(kit_dir / LOCK_NAME),
            _kit_info(kit_dir, subjects.get(KIT_SUBJECT)),
        )
        evidence, results = read_evidence(kit_dir, pred)
    ctx = build_context(
        pred,
        signer_keyid=verified.signer_keyid,
        kit=kit,
        evidence=evidence,
        results=results,
        subjects=subjects,
        policy=policy,
    )
    facts = {
        "verified": True,
        "receipt": {
            "kit": pred.kit.name,
            "version": pred.kit.version,
            "issued_at": pred.issued_at,
            "signer_keyid": verified.signer_keyid,
            "evidence": {rv.id: rv.run.evidence_level for rv in ctx.runs},
            "with_kit": kit is not None,
        },
    }
    facts["policy"] = "strict" if ctx.policy.strict else "default"
    return AuditReport(label, run_rules(ctx), facts)


ACCEPTANCE_NAME = "acceptance.dsse.json"


def audit_path(target: Path, trusted: TrustSource, policy: Policy | None = None) -> AuditReport:
    """Audit a kit directory, a ``.kit.tar.gz``, a lone ``*.dsse.json`` receipt, or a buyer's
    acceptance report (``acceptance.dsse.json``, written by ``k3kit accept``).

    What ``target`` is comes from :func:`k3kit.formats.kitpath.classify`; a lock is refused.
    ``trusted`` is any trust source (keys, a ``Trust``, a root anchor resolved against the kit's
    own ``root/`` chain); a receipt not signed by one of its current release keys is R01.
    """
    kind = classify(target)
    if kind == "lock":
        raise InputError(
            f"{target} is a weights lock; audit takes a kit directory, a .kit.tar.gz or a "
            "*.dsse.json receipt",
            code="KIT_NOT_RECOGNISED",
        )
    acceptance = target / ACCEPTANCE_NAME if kind == "directory" else target
    if acceptance.name == ACCEPTANCE_NAME and not (target / RECEIPT_NAME).exists():
        from k3kit.audit.acceptance import audit_acceptance  # a buyer's report (k3kit accept)

        return audit_acceptance(acceptance, trusted_keys_of(trusted, None), policy)
    if kind == "receipt":
        keys = trusted_keys_of(trusted, None)
        return audit_receipt(target, keys, kit_dir=None, label=str(target), policy=policy)
    with open_kit(target) as opened:
        report = audit_receipt(
            opened.path / RECEIPT_NAME,
            trusted_keys_of(trusted, opened.path),
            kit_dir=opened.path,
            label=opened.label,
            policy=policy,
        )
        if opened.archive_sha256 is not None:
            report.facts["archive_sha256"] = opened.archive_sha256
        return report
