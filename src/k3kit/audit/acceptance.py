"""Audit a buyer's signed acceptance report like a receipt (the hook ``k3kit accept`` needs).

The report's ``measured`` runs are a receipt predicate with per-request evidence files beside the
report, so the receipt rules apply unchanged: the signature (the buyer's key, the acceptance
``payloadType``) first, then the evidence bytes against their signed sha256, then every rule.
There is no kit here, so the kit-binding rules say "not checkable", never "passed"; the evidence
is there, so R03 and every rule that uses evidence read it exactly as they read a kit's.

``k3kit accept`` runs the same rules on what it measured *before* it signs
(:func:`audit_measured`): a report the audit would reject is never signed as *reproduced*.
"""

from __future__ import annotations

from pathlib import Path

from k3kit._canonical import strict_loads
from k3kit._digest import sha256_hex
from k3kit._fs import read_capped
from k3kit.audit.context import EvidenceFacts, Policy, build_context
from k3kit.audit.engine import AuditReport, admit_evidence, read_evidence, run_rules
from k3kit.audit.findings import ERROR, Finding
from k3kit.errors import VerificationError
from k3kit.evidence import RunData
from k3kit.models import ReceiptPredicate, load
from k3kit.models.acceptance import ACCEPTANCE_PAYLOAD_TYPE, AcceptanceStatement
from k3kit.signing.keys import PublicKey
from k3kit.signing.sign import MAX_ENVELOPE_BYTES, verify_envelope

ACCEPTANCE_NAME = "acceptance.dsse.json"


def audit_acceptance(
    report: Path, trusted: list[PublicKey], policy: Policy | None = None
) -> AuditReport:
    label = str(report)
    try:
        data = read_capped(
            report,
            MAX_ENVELOPE_BYTES,
            what="acceptance report",
            error=VerificationError,
            code="RECEIPT_MISSING",
        )
        verified = verify_envelope(
            data, trusted, expected_type=ACCEPTANCE_PAYLOAD_TYPE, source=report.name
        )
        obj = strict_loads(
            verified.payload,
            source="acceptance payload",
            max_bytes=len(verified.payload),
            code="RECEIPT_MALFORMED",
        )
        statement = load(
            AcceptanceStatement,
            obj,
            source="acceptance payload",
            error=VerificationError,
            code="RECEIPT_MALFORMED",
        )
    except VerificationError as exc:
        finding = Finding(
            "R01",
            ERROR,
            "receipt",
            f"acceptance report not verified: {exc.message}",
            "a report signed by a trusted key",
            exc.code,
        )
        return AuditReport(label, [finding], {"verified": False})
    acceptance = statement.predicate
    facts = {
        "verified": True,
        "acceptance": {
            "partial": acceptance.partial,
            "profile": acceptance.profile,
            "signer_keyid": verified.signer_keyid,
            "verdicts": {v.verdict: 0 for v in acceptance.verdicts},
        },
    }
    for v in acceptance.verdicts:
        facts["acceptance"]["verdicts"][v.verdict] += 1  # type: ignore[index]
    if acceptance.measured is None:
        note = Finding("R01", "not-checkable", "receipt", "no run finished: nothing to audit")
        return AuditReport(label, [note], facts)
    pred = acceptance.measured
    evidence, results = read_evidence(report.parent, pred)
    subjects = {s.name: s.digest.get("sha256", "") for s in statement.subject}
    findings = _rules(pred, evidence, results, verified.signer_keyid, subjects, policy)
    return AuditReport(label, findings, facts)


def _rules(
    pred: ReceiptPredicate,
    evidence: EvidenceFacts,
    results: dict[str, RunData],
    signer_keyid: str,
    subjects: dict[str, str],
    policy: Policy | None,
) -> list[Finding]:
    """Every rule over the measured runs; the evidence sits beside the report (or in memory),
    so every evidence rule, R03 included, reads it through ``evidence`` as it would a kit's."""
    ctx = build_context(
        pred,
        signer_keyid=signer_keyid,
        kit=None,
        evidence=evidence,
        results=results,
        subjects=subjects,
        policy=policy,
    )
    return run_rules(ctx)


def audit_measured(
    pred: ReceiptPredicate,
    evidence: dict[str, bytes],
    *,
    signer_keyid: str,
    subjects: dict[str, str],
) -> list[Finding]:
    """The audit's findings on an acceptance report not yet signed (``evidence`` by run id).

    The same rules ``k3kit audit acceptance.dsse.json`` runs later, on the same bytes, so what
    accept signs and what the audit says of it cannot disagree.
    """
    facts = EvidenceFacts()
    results: dict[str, RunData] = {}
    for run in pred.runs:
        if run.evidence is None:
            continue
        data = evidence.get(run.id)
        if data is None:
            facts.status[run.id] = "missing: accept measured no evidence for this run"
        elif sha256_hex(data) != run.evidence_sha256:
            facts.status[run.id] = "changed: its sha256 is not the one the report records"
        else:
            admit_evidence(run, data, facts, results)
    return _rules(pred, facts, results, signer_keyid, subjects, None)
