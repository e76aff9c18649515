"""The verifier: the numbered checklist of docs/design.md, run in order, failing closed.

The checklist in detail, with every code, is docs/verification.md. Each step either passes,
fails with a stable error code, or is *not checked* because a step it depends on failed or its
input was not given; a step that could not run is never reported as passed. This module is the
small trusted base that runs on the GPU node: it must not import huggingface_hub, jinja2,
``weights.pin``, ``render``, ``publish`` or ``commerce`` (import-linter enforces it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from k3kit._digest import sha256_hex
from k3kit._immutable import NamedTuple
from k3kit.errors import InputError, UsageProblem, VerificationError
from k3kit.formats.documents import (
    MAX_DOCUMENT_BYTES,
    Document,
    check_document,
    read_bounded,
    read_document,
    read_listed,
)
from k3kit.formats.kitpath import KIT_KINDS, Authenticate, open_kit, require
from k3kit.formats.manifest import (
    MANIFEST_NAME,
    RECEIPT_NAME,
    ROOT_DIR,
    UNLISTED,
    ExpectedEvidence,
    diff_evidence,
    diff_tree,
)
from k3kit.formats.names import KIT_INFO_NAME as KIT_INFO_NAME  # their home; re-exported
from k3kit.formats.names import LOCK_NAME as LOCK_NAME
from k3kit.formats.names import MANIFEST_SIG_NAME
from k3kit.formats.vocab import CheckStatus, Problem
from k3kit.models import KIT_SUBJECT, WEIGHTS_SUBJECT, lite
from k3kit.models._lite import Record
from k3kit.signing.sign import (
    MAX_ENVELOPE_BYTES,
    parse_signed_statement,
    read_envelope,
    subject_digest,
)
from k3kit.signing.trust import RollbackPolicy, RootAnchor, Trust
from k3kit.signing.trust import rollback as rollback_state
from k3kit.signing.trust.root import MAX_ROOT_BYTES, indexed_roots, kit_roots
from k3kit.signing.trust.source import TrustSource as TrustSource  # its home; re-exported

if TYPE_CHECKING:  # the hashing engine is imported only when --weights asks for it
    from k3kit.archive import ArchiveIndex
    from k3kit.signing.memo import SignatureMemo
    from k3kit.weights import WeightsOptions

MAX_DOC_BYTES = MAX_DOCUMENT_BYTES
SSHSIG_NAME = MANIFEST_SIG_NAME
MAX_SSHSIG_BYTES = 64 * 1024

PASSED, FAILED, NOT_CHECKED = CheckStatus.PASSED, CheckStatus.FAILED, CheckStatus.NOT_CHECKED

# The documents are read as records of k3kit.models.lite: the pydantic models' checks without
# importing pydantic (a node's start-up; docs/performance.md, "Start-up").
M = TypeVar("M", bound=Record)


# Check and Report are plain classes, not dataclasses: this module is imported on every node
# start, where creating a dataclass costs ~0.5 ms of CPU (docs/performance.md, "Start-up").
class Check:
    """One step of the checklist: its outcome, why, and the code of a failure."""

    __slots__ = ("code", "detail", "id", "problems", "status", "title")

    def __init__(
        self,
        id: str,
        title: str,
        status: CheckStatus = NOT_CHECKED,
        detail: str = "",
        code: str | None = None,
        problems: list[Problem] | None = None,
    ) -> None:
        self.id, self.title, self.status, self.detail = id, title, status, detail
        self.code = code
        self.problems: list[Problem] = [] if problems is None else problems

    def __repr__(self) -> str:
        return f"Check({self.id!r}, {self.status!r}, code={self.code!r}, detail={self.detail!r})"

    def as_json(self) -> dict[str, Any]:
        ok = None if self.status == NOT_CHECKED else self.status == PASSED
        out: dict[str, Any] = {
            "id": self.id,
            "ok": ok,
            "status": self.status,
            "detail": self.detail,
        }
        if self.code:
            out["code"] = self.code
        if self.problems:
            out["problems"] = [p.as_json() for p in self.problems]
        return out


if TYPE_CHECKING:  # re-exported for type checkers: docs/api.md names them here
    from k3kit.node._facts import ReceiptFacts as ReceiptFacts
    from k3kit.node._facts import RollbackFacts as RollbackFacts
    from k3kit.node._facts import VerifyFacts as VerifyFacts
    from k3kit.node._facts import WeightsFacts as WeightsFacts

#: The facts' types, importable from here as before (k3kit.node._facts builds them on first use).
_FACT_TYPES = ("ReceiptFacts", "RollbackFacts", "VerifyFacts", "WeightsFacts")


def __getattr__(name: str) -> Any:
    if name in _FACT_TYPES:
        from k3kit.node import _facts

        return getattr(_facts, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Report:
    """A verdict: every check in order, and the facts learnt (see :class:`VerifyFacts`)."""

    __slots__ = ("checks", "facts", "kit")

    def __init__(
        self, kit: str, checks: list[Check] | None = None, facts: VerifyFacts | None = None
    ) -> None:
        self.kit = kit
        self.checks: list[Check] = [] if checks is None else checks
        self.facts: VerifyFacts = {} if facts is None else facts

    def __repr__(self) -> str:
        return f"Report({self.kit!r}, ok={self.ok}, checks={self.checks!r})"

    @property
    def kit_sha256(self) -> str:
        """The checksum of the kit this verdict is about; only a report whose kit was read has
        one (every caller asks after ``ok``)."""
        return self.facts["kit_sha256"]

    @property
    def ok(self) -> bool:
        """Only a full run of passed checks is a pass; weights not given is stated, not failed."""
        return all(
            c.status == PASSED or (c.id == "weights" and c.code == "WEIGHTS_NOT_GIVEN")
            for c in self.checks
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "kit": self.kit,
            "checks": [c.as_json() for c in self.checks],
            **self.facts,
        }


class _State:
    """What the steps of one run learn, in order. A plain class, not a dataclass: a dataclass
    costs ~0.5 ms of CPU to create at import, paid on every node start (docs/performance.md)."""

    def __init__(
        self,
        kit_dir: Path,
        source: TrustSource,
        rollback: RollbackPolicy | None = None,
        *,
        statement: lite.Statement | None = None,
        documents: Mapping[str, bytes] | None = None,
        roots: Mapping[int, bytes] | None = None,
        memo: SignatureMemo | None = None,
    ) -> None:
        self.kit_dir, self.source, self.rollback = kit_dir, source, rollback
        self.memo = memo  # checks this node passed before (k3kit.signing.memo)
        self.trust: Trust | None = None
        self.decision: rollback_state.Decision | None = None
        self.kit_sha256: str | None = None
        self.statement = statement
        # MANIFEST.json parsed once, from the bytes whose checksum matched, and those bytes
        # (what MANIFEST.json.sig signs)
        self.manifest: lite.Manifest | None = None
        self.manifest_data: bytes | None = None
        self.lock: lite.WeightsLock | None = None
        self.info: lite.KitInfo | None = None  # kit.json, read from the bytes the manifest lists
        self.lock_data: bytes | None = None  # its bytes: --weights reads them into the model
        self.lock_sha256: str | None = None
        # sha256 of each unlisted file the checks read from the folder (the receipt, MANIFEST.json,
        # MANIFEST.json.sig): the manifest cannot list them, so launch's second look at the kit
        # (verify_weights_of) compares them with these instead of verifying them again
        self.unlisted: dict[str, str] = {}
        # An archive's receipt, manifest and roots kept from its tar index: the first checks
        # then run on these bytes, before anything is extracted (:func:`signed_manifest_check`).
        self.documents = documents
        self.roots = roots  # the archive's root/ chain, by version (every version it holds)


def _step_trust(st: _State, check: Check) -> None:
    if isinstance(st.source, RootAnchor):  # walks the kit's root/ chain, persists new roots
        if st.roots is None:
            st.trust, new = st.source.resolve(st.kit_dir)
        else:  # an archive's chain, read from its index by the folder's rule (indexed_roots)
            st.trust, new = st.source.resolve(None, offered=st.roots)
        check.detail = st.trust.description
        if new:
            check.detail += f"; accepted root version(s) {', '.join(map(str, new))} from the kit"
        return
    if st.documents is None:  # an archive's member names were admitted from its index
        kit_roots(st.kit_dir)  # unused without --root, but root/ may hold only root files
    st.trust = st.source if isinstance(st.source, Trust) else Trust.from_keys(st.source)
    if not st.trust.keys:
        raise UsageProblem("no trusted public key was given", code="TRUST_EMPTY")
    ids = sorted(k.keyid for k in st.trust.keys)
    if len(set(ids)) != len(ids):
        raise InputError("the same key was given twice", code="TRUST_DUPLICATE_KEY")
    check.detail = st.trust.description or f"{len(ids)} trusted key(s)"


def _step_signature(st: _State, check: Check) -> None:
    assert st.trust is not None
    keys = st.trust.verification_keys()
    if st.documents is None:
        # read_signed_statement's own read, kept to note the bytes' digest (st.unlisted)
        data = read_envelope(st.kit_dir / RECEIPT_NAME)
        receipt = parse_signed_statement(data, keys, source=RECEIPT_NAME, memo=st.memo)
        st.unlisted[RECEIPT_NAME] = sha256_hex(data)
    else:
        receipt = parse_signed_statement(
            _kept(st.documents, RECEIPT_NAME, "RECEIPT_MISSING"),
            keys,
            source=RECEIPT_NAME,
            memo=st.memo,
        )
    pred = receipt.statement.predicate
    signers = st.trust.accept(receipt.signer_keyids, pred.issued_at)
    st.statement = receipt.statement
    check.detail = (
        f"signed by {signers}; {pred.kit.name} "
        f"{pred.kit.version} (sequence {pred.kit.sequence}), issued {pred.issued_at}"
    )
    check.detail += _recalled_note(len(receipt.recalled_keyids), len(receipt.signer_keyids))


def _recalled_note(now: int, signatures: int) -> str:
    """Said, not hidden: how many of a step's ``signatures`` (signers) this run recalled from
    the signature memo rather than computed; a signer with any check computed here is not one."""
    if now <= 0:
        return ""
    if now < signatures:
        which = f"{now} of {signatures} signatures"
    else:
        which = "signature" if signatures == 1 else "signatures"
    return f"; {which} as checked before on this node (verification cache)"


def _step_rollback(st: _State, check: Check) -> None:
    assert st.statement is not None and st.trust is not None and st.kit_sha256 is not None
    kit = st.statement.predicate.kit
    if st.rollback is None:  # a root promises rollback protection: no state folder fails closed
        raise VerificationError(
            "no state folder to check the sequence against", code="ROLLBACK_STATE_NOT_GIVEN"
        )
    st.decision = rollback_state.check(
        st.rollback.state_dir,
        package=kit.name,
        channel=kit.channel,
        sequence=kit.sequence,
        kit_sha256=st.kit_sha256,
        floor=st.trust.floor(kit.name, kit.channel),
        allow_rollback=st.rollback.allow_rollback,
        version=kit.version,
    )
    check.detail = st.decision.detail


def _signed_digest(statement: lite.Statement, subject: str, in_predicate: str, *, code: str) -> str:
    """The sha256 the receipt signs for ``subject``; the Statement's subject and the predicate's
    copy must agree, or the receipt contradicts itself."""
    expected = subject_digest(statement, subject)
    if in_predicate != expected:
        raise VerificationError(
            f"the receipt's subject {subject.split(':', 1)[1]} ({expected[:16]}…) and its "
            f"predicate ({in_predicate[:16]}…) name different bytes",
            code=code,
        )
    return expected


def _read_signed(
    st: _State,
    subject: str,
    in_predicate: str,
    name: str,
    model: type[M],
    *,
    code: str,
    mismatch_code: str,
    detail: str,
) -> Document[M]:
    """A kit document the receipt signs by digest: hashed and compared with the signed digest
    *before* it is parsed (an unsigned document costs one bounded read, whatever it holds)."""
    assert st.statement is not None
    expected = _signed_digest(st.statement, subject, in_predicate, code=mismatch_code)
    if st.documents is not None:
        return check_document(
            _kept(st.documents, name, code),
            model,
            label=name,
            max_bytes=MAX_DOC_BYTES,
            expected_sha256=expected,
            code=code,
            mismatch_code=mismatch_code,
            mismatch_detail=detail,
        )
    return read_document(
        st.kit_dir / name,
        model,
        max_bytes=MAX_DOC_BYTES,
        expected_sha256=expected,
        code=code,
        mismatch_code=mismatch_code,
        mismatch_detail=detail,
    )


def _kept(documents: Mapping[str, bytes], name: str, code: str) -> bytes:
    data = documents.get(name)
    if data is None:
        raise VerificationError(
            f"the archive holds no {name} small enough to be a kit's (read before extraction)",
            code=code,
        )
    return data


def _step_kit_checksum(st: _State, check: Check) -> None:
    assert st.statement is not None
    doc = _read_signed(
        st,
        KIT_SUBJECT,
        st.statement.predicate.kit.kit_sha256,
        MANIFEST_NAME,
        lite.Manifest,
        code="MANIFEST_MALFORMED",
        mismatch_code="RECEIPT_KIT_MISMATCH",
        detail="the receipt belongs to another kit",
    )
    st.manifest, st.manifest_data = doc.model, doc.data
    st.kit_sha256 = st.unlisted[MANIFEST_NAME] = doc.sha256
    check.detail = f"sha256:{doc.sha256}"


def _step_sshsig(st: _State, check: Check) -> None:
    """``MANIFEST.json.sig`` (``k3kit sshsig``) is unlisted, so the manifest does not cover it;
    left unchecked it would ride into an installed kit as if it were part of what verified, and
    a buyer running ``ssh-keygen -Y verify`` later would trust whatever it says. So, when
    present, it must be an SSH signature over the verified ``MANIFEST.json`` bytes by a release
    key this trust source accepts at the receipt's date (``SSHSIG_INVALID`` otherwise)."""
    assert st.statement is not None and st.trust is not None and st.manifest_data is not None
    from k3kit.signing.trust import sshsig  # only a kit that carries the file needs the reader

    data = read_bounded(
        st.kit_dir / SSHSIG_NAME, MAX_SSHSIG_BYTES, what=SSHSIG_NAME, code="SSHSIG_INVALID"
    )
    st.unlisted[SSHSIG_NAME] = sha256_hex(data)
    armored = data.decode("ascii", "replace")
    issued_at = st.statement.predicate.issued_at
    recalled = st.memo.recalled if st.memo is not None else 0
    for trusted in st.trust.keys:
        if not trusted.valid_at(issued_at):
            continue
        try:
            sshsig.verify(armored, st.manifest_data, trusted.key, memo=st.memo)
        except VerificationError:
            continue
        check.detail = f"SSH signature over MANIFEST.json by {trusted.keyid[:16]}"
        now = st.memo.recalled - recalled if st.memo is not None else 0
        check.detail += _recalled_note(min(now, 1), 1)
        return
    raise VerificationError(
        f"{SSHSIG_NAME} is not an SSH signature over this MANIFEST.json by a trusted release key",
        code="SSHSIG_INVALID",
        hint=f"remove {SSHSIG_NAME} or have the publisher sign it again with `k3kit sshsig`",
    )


def _expected_evidence(statement: lite.Statement) -> list[ExpectedEvidence]:
    return [
        ExpectedEvidence(run.evidence, run.evidence_bytes or 0, run.evidence_sha256 or "")
        for run in statement.predicate.runs
        if run.evidence is not None
    ]


def _step_kit_files(st: _State, check: Check) -> None:
    assert st.manifest is not None and st.statement is not None
    manifest = st.manifest
    tree = diff_tree(st.kit_dir, manifest)
    expected = _expected_evidence(st.statement)
    evidence = diff_evidence(
        st.kit_dir,
        tree.evidence,
        expected,
        skip=frozenset(d.path for d in tree.differences),
    )
    problems = [*tree.differences, *evidence]
    if problems:
        check.problems = problems
        counts: dict[str, int] = {}
        for p in problems:
            counts[p.code] = counts.get(p.code, 0) + 1
        raise VerificationError(
            "kit differs from MANIFEST.json: " + ", ".join(f"{n} {c}" for c, n in counts.items()),
            code=problems[0].code if len(counts) == 1 else "KIT_FILES_DIFFER",
        )
    check.detail = f"{len(manifest.files)} files match MANIFEST.json"
    if expected:
        check.detail += f"; {len(expected)} evidence files match the receipt"


def _kit_json_digest(st: _State) -> str | None:
    """kit.json's sha256 as the verified manifest lists it (None when the manifest did not
    verify: kit.json is then still read under every bound, but the kit fails anyway)."""
    if st.manifest is None:
        return None
    entry = next((e for e in st.manifest.files if e.path == KIT_INFO_NAME), None)
    if entry is None:
        raise VerificationError("MANIFEST.json does not list kit.json", code="KIT_INFO_MALFORMED")
    return entry.sha256


def _step_weights_lock(st: _State, check: Check) -> None:
    assert st.statement is not None
    lock_doc = _read_signed(
        st,
        WEIGHTS_SUBJECT,
        st.statement.predicate.weights.lock_sha256,
        LOCK_NAME,
        lite.WeightsLock,
        code="LOCK_MALFORMED",
        mismatch_code="RECEIPT_WEIGHTS_MISMATCH",
        detail="the receipt belongs to another weight pin",
    )
    lock, actual = lock_doc.model, lock_doc.sha256
    info = read_document(
        st.kit_dir / KIT_INFO_NAME,
        lite.KitInfo,
        max_bytes=MAX_DOC_BYTES,
        expected_sha256=_kit_json_digest(st),
        code="KIT_INFO_MALFORMED",
        mismatch_code="KIT_FILE_CHANGED",
        mismatch_detail="kit.json is not the one MANIFEST.json lists",
    ).model
    if info.weights.lock_sha256 != actual or info.weights.commit != lock.commit:
        raise VerificationError("kit.json names another weight lock", code="KIT_LOCK_MISMATCH")
    _same_weights(info, lock)
    _same_release(st, info)
    st.lock, st.lock_data, st.lock_sha256, st.info = lock, lock_doc.data, actual, info
    check.detail = (
        f"{lock.repo}@{lock.commit[:12]}: {lock.file_count} files, "
        f"{lock.total_bytes} bytes (sha256:{actual[:16]}…)"
    )


def _same_weights(info: lite.KitInfo, lock: lite.WeightsLock) -> None:
    """kit.json's summary of the weights is the lock's own: build copies it, and preflight
    sizes a node's memory by ``total_bytes`` (the card and release notes show all four). A kit
    signed by hand said ``total_bytes: 1`` over a lock of 787 kB and verified, so every GPU
    "fitted" the weights; each figure that is not the lock's is refused here, once, for every
    verb that reads kit.json after verify."""
    said = info.weights
    stated = (said.repo, said.file_count, said.total_bytes)
    locked = (lock.repo, lock.file_count, lock.total_bytes)
    if stated != locked:
        raise VerificationError(
            f"kit.json says the weights are {said.repo}, {said.file_count} files, "
            f"{said.total_bytes} bytes; the lock it names says {lock.repo}, {lock.file_count} "
            f"files, {lock.total_bytes} bytes",
            code="KIT_LOCK_MISMATCH",
            hint="ask the publisher for a kit built by `k3kit build`, which copies them from "
            "the lock",
        )


def _same_release(st: _State, info: lite.KitInfo) -> None:
    """The receipt names the release that kit.json describes: the rollback and equivocation
    memory keys on the receipt's package, version, sequence and channel, so a receipt that says
    one release over a kit.json that says another would let one kit pass for two."""
    assert st.statement is not None  # the receipt step ran
    said = st.statement.predicate.kit
    pkg = info.package
    signed = (said.name, said.version, said.sequence, said.channel)
    listed = (pkg.name, pkg.version, pkg.sequence, pkg.channel)
    if signed != listed:
        raise VerificationError(
            f"the receipt signs {said.name} {said.version} (sequence {said.sequence}, "
            f"{said.channel}) but kit.json is {pkg.name} {pkg.version} (sequence {pkg.sequence}, "
            f"{pkg.channel})",
            code="KIT_RELEASE_MISMATCH",
        )


_Step = tuple[str, str, Callable[[_State, Check], None], tuple[str, ...]]
_KIT_FILES_STEP: _Step = (
    "kit_files",
    "every kit file matches MANIFEST.json",
    _step_kit_files,
    ("kit_checksum",),
)
STEPS: list[_Step] = [
    ("trust", "trusted keys loaded", _step_trust, ()),
    ("receipt_signature", "receipt signature and statement", _step_signature, ("trust",)),
    (
        "kit_checksum",
        "kit checksum matches the receipt",
        _step_kit_checksum,
        ("receipt_signature",),
    ),
    _KIT_FILES_STEP,
    (
        "weights_lock",
        "weight checksum matches the receipt",
        _step_weights_lock,
        ("receipt_signature",),
    ),
    ("rollback", "not older than what this node accepted", _step_rollback, ("kit_checksum",)),
    (
        "sshsig",
        "MANIFEST.json.sig is a trusted key's SSH signature",
        _step_sshsig,
        ("receipt_signature", "kit_checksum"),
    ),
]


def verify_dir(
    kit_dir: Path,
    trusted: TrustSource,
    *,
    label: str | None = None,
    weights: Path | None = None,
    weights_options: WeightsOptions | None = None,
    rollback: RollbackPolicy | None = None,
    memo: SignatureMemo | None = None,
) -> Report:
    """Run every check on a kit directory; never raises for a verification failure.

    ``trusted`` is a list of keys (``--trust``), a :class:`Trust`, or a :class:`RootAnchor`
    (``--root``). With ``rollback``, a kit that verified completely has its sequence recorded.
    ``memo``: the node's record of signature checks passed before (:mod:`k3kit.signing.memo`).
    """
    return _verify_dir(
        kit_dir,
        trusted,
        label=label,
        weights=weights,
        options=weights_options,
        rollback=rollback,
        memo=memo,
    )[0]


def _verify_dir(
    kit_dir: Path,
    trusted: TrustSource,
    *,
    label: str | None,
    weights: Path | None,
    options: WeightsOptions | None,
    rollback: RollbackPolicy | None,
    memo: SignatureMemo | None = None,
) -> tuple[Report, _State]:
    """:func:`verify_dir`, and what its steps read (the verified records, for
    :func:`open_verified`)."""
    st = _State(kit_dir, trusted, rollback, memo=memo)
    report = Report(label or str(kit_dir))
    tracked = rollback is not None or isinstance(trusted, RootAnchor)
    steps = [
        step
        for step in STEPS
        # plain --trust keeps no state (docs/trust.md says what that leaves open); sshsig is
        # optional: checked whenever it is there, never reported when it is not
        if not (step[0] == "rollback" and not tracked)
        and not (step[0] == "sshsig" and not os.path.lexists(kit_dir / SSHSIG_NAME))
    ]
    _run_steps(st, report, steps)
    report.checks.append(_weights_check(st, report, weights, options))
    _add_facts(st, report)
    return report, st


def _run_steps(st: _State, report: Report, steps: list[_Step]) -> None:
    """Run ``steps`` in order; a step whose prerequisite did not pass is reported not checked."""
    for step_id, title, func, needs in steps:
        check = Check(step_id, title)
        report.checks.append(check)
        blocked = [c.id for c in report.checks if c.id in needs and c.status != PASSED]
        if blocked:
            check.detail = f"not checked: depends on {', '.join(blocked)}"
            continue
        try:
            func(st, check)
            check.status = PASSED
        except VerificationError as exc:
            check.status, check.code, check.detail = FAILED, exc.code, exc.message
        except OSError as exc:  # a kit file that cannot be read is a kit that does not verify
            check.status, check.code = FAILED, "KIT_UNREADABLE"
            check.detail = f"cannot read the kit: {exc}"


def _add_facts(st: _State, report: Report) -> None:
    if st.kit_sha256 is not None:  # lets `launch` and `install` tie the bytes they use to it
        report.facts["kit_sha256"] = st.kit_sha256
    if report.ok and st.decision is not None and st.rollback is not None:
        rollback_state.record(st.rollback.state_dir, st.decision, now=st.rollback.now)
        report.facts["rollback"] = {
            "key": st.decision.key,
            "sequence": st.decision.sequence,
            "previous": st.decision.previous,
            "override": st.decision.override,
        }
    if st.lock_sha256 is not None:  # lets `pull --trust` tie the lock it uses to this verdict
        report.facts["weights_lock_sha256"] = st.lock_sha256
    if st.statement is not None:
        pred = st.statement.predicate
        report.facts["receipt"] = {
            "kit": pred.kit.name,
            "version": pred.kit.version,
            "sequence": pred.kit.sequence,
            "issued_at": pred.issued_at,
        }


_BEFORE_EXTRACTION = ("trust", "receipt_signature", "kit_checksum")


def signed_manifest_check(
    trusted: TrustSource, *, label: str, memo: SignatureMemo | None = None
) -> Authenticate:
    """What ``install`` (and ``verify`` of an archive) use to check an archive from its tar index,
    before a byte is extracted: the first three steps of :func:`verify_dir` (trusted keys, the
    receipt's signature, ``MANIFEST.json`` = the signed kit checksum), by the same functions, on
    the receipt, manifest and root files kept in memory. Only then are the members admitted
    against a manifest that is known to be the publisher's, so the caps are no longer the
    attacker's to fill: a genuine receipt of another kit beside a forged manifest is refused
    (``KitNotVerified``, its report naming ``RECEIPT_KIT_MISMATCH``) with nothing written."""
    documents = {RECEIPT_NAME: MAX_ENVELOPE_BYTES, MANIFEST_NAME: MAX_DOC_BYTES}
    if isinstance(trusted, RootAnchor):
        for v in trusted.reachable_versions():
            documents[f"{ROOT_DIR}/{v}.root.json"] = MAX_ROOT_BYTES

    def check(index: ArchiveIndex) -> None:
        members = ((m.name, m.kind, m.size) for m in index.members)
        roots = indexed_roots(members, index.documents)
        # no step reads the path
        st = _State(Path(label), trusted, documents=index.documents, roots=roots, memo=memo)
        report = Report(label)
        _run_steps(st, report, [s for s in STEPS if s[0] in _BEFORE_EXTRACTION])
        _add_facts(st, report)
        if not report.ok:
            raise KitNotVerified(report)

    return Authenticate(documents, check)


def check_unsigned_statement(kit_dir: Path, statement: lite.Statement) -> Report:
    """The kit checks that need no key, against a Statement whose signature was NOT checked.

    Why: ``pack`` without ``--trust`` must still refuse a kit that does not match its own
    manifest, or whose receipt names another kit or another weight lock. This is never a
    verdict on its own: the signature step is absent, so only a caller that says so may use it.
    """
    st = _State(kit_dir, [], statement=statement)
    report = Report(str(kit_dir))
    keyless = ("kit_checksum", "kit_files", "weights_lock")  # no trust, no rollback state
    for step_id, title, func, needs in (s for s in STEPS if s[0] in keyless):
        check = Check(step_id, title)
        report.checks.append(check)
        blocked = [c.id for c in report.checks if c.id in needs and c.status != PASSED]
        if blocked:
            check.detail = f"not checked: depends on {', '.join(blocked)}"
            continue
        try:
            func(st, check)
            check.status = PASSED
        except VerificationError as exc:
            check.status, check.code, check.detail = FAILED, exc.code, exc.message
        except OSError as exc:
            check.status, check.code = FAILED, "KIT_UNREADABLE"
            check.detail = f"cannot read the kit: {exc}"
    return report


def _weights_check(
    st: _State, report: Report, weights: Path | None, options: WeightsOptions | None
) -> Check:
    check = Check("weights", "weights match weights.lock.json")
    if weights is None:
        check.code = "WEIGHTS_NOT_GIVEN"
        check.detail = "not checked: no --weights folder given"
        return check
    failed = [c.id for c in report.checks if c.status != PASSED]
    if failed or st.lock is None:
        # Hashing a terabyte for a kit that already failed would only delay the verdict.
        check.detail = f"not checked: depends on {', '.join(failed)}"
        return check
    from k3kit.weights import WeightsOptions, check_weights  # hashing: only with --weights

    options = options or WeightsOptions()
    try:
        result = check_weights(
            weights,
            st.lock,  # the verified record: the hashing engine needs no pydantic model
            algorithm=options.algorithm,
            workers=options.workers,
            all_errors=options.all_errors,
            state_dir=options.state_dir,
            full=options.full,
            on_progress=options.on_progress,
        )
    except VerificationError as exc:
        check.status, check.code, check.detail = FAILED, exc.code, exc.message
        return check
    report.facts["weights"] = {
        "root": str(result.layout.root),
        "layout": result.layout.kind,
        "algorithm": result.algorithm,
        "files_hashed": result.files_hashed,
        "bytes_hashed": result.bytes_hashed,
        "files_from_cache": result.files_from_cache,
        "bytes_from_cache": result.bytes_from_cache,
        "cache": {
            "status": result.cache_status,
            "saved": result.cache_saved,
            **({"note": result.cache_note} if result.cache_note else {}),
        },
        "workers": result.workers,
        "blake3_threads_per_file": result.blake3_threads,
    }
    if result.problems:
        check.status = FAILED
        check.problems = list(result.problems)
        codes = sorted({p.code for p in result.problems})
        check.code = codes[0] if len(codes) == 1 else "WEIGHTS_DIFFER"
        check.detail = f"{len(result.problems)} problem(s): " + ", ".join(codes)
    else:
        check.status = PASSED
        check.detail = (
            f"{st.lock.file_count} files, {st.lock.total_bytes} bytes, "
            f"{result.algorithm}, {result.layout.kind} layout; "
            f"{result.files_hashed} hashed ({result.bytes_hashed} bytes read), "
            f"{result.files_from_cache} unchanged since verified (verification cache)"
        )
    return check


def verify_path(
    kit: Path,
    trusted: TrustSource,
    *,
    weights: Path | None = None,
    weights_options: WeightsOptions | None = None,
    rollback: RollbackPolicy | None = None,
    memo: SignatureMemo | None = None,
) -> Report:
    """Verify a kit directory or a ``.kit.tar.gz`` (extracted under policy into a temp dir).

    What ``kit`` is comes from :func:`k3kit.formats.kitpath.classify` (a lock or a receipt is
    refused, ``KIT_NOT_RECOGNISED``); an archive the strict reader refuses is a failed ``archive``
    check.
    """
    if require(kit, KIT_KINDS, verb="verify") == "directory":
        return verify_dir(
            kit,
            trusted,
            weights=weights,
            weights_options=weights_options,
            rollback=rollback,
            memo=memo,
        )
    archive_check = Check("archive", "archive members pass the extraction policy")
    report = Report(str(kit))
    with ExitStack() as stack:
        try:
            authenticate = signed_manifest_check(trusted, label=str(kit), memo=memo)
            opened = stack.enter_context(open_kit(kit, authenticate=authenticate))
        except KitNotVerified as exc:  # refused from its index: its receipt does not sign it
            archive_check.status = PASSED
            archive_check.detail = "members admitted from the index; not extracted"
            exc.report.checks.insert(0, archive_check)
            return exc.report
        except VerificationError as exc:
            archive_check.status, archive_check.code = FAILED, exc.code
            archive_check.detail = exc.message
            report.checks.append(archive_check)
            return report
        archive_check.status = PASSED
        archive_check.detail = f"sha256:{opened.archive_sha256}"
        report = verify_dir(
            opened.path,
            trusted,
            label=opened.label,
            weights=weights,
            weights_options=weights_options,
            rollback=rollback,
            memo=memo,
        )
        report.checks.insert(0, archive_check)
        report.facts["archive_sha256"] = opened.archive_sha256
    return report


class KitNotVerified(VerificationError):
    """A kit (and its weights, where given) did not verify; ``report`` says which check failed.

    Raised by the verbs that act on a verdict (``install``, ``launch``) so that a caller cannot
    forget to look at ``Report.ok``: the failure is an exception, with the whole report attached.
    """

    def __init__(self, report: Report) -> None:
        failed = [c for c in report.checks if c.status == FAILED]
        first = failed[0] if failed else None
        message = (
            f"{report.kit} does not verify: {first.title}: {first.detail}"
            if first
            else f"{report.kit} does not verify: a check could not run"
        )
        super().__init__(message, code=(first.code if first and first.code else "NOT_VERIFIED"))
        self.report = report


# A NamedTuple, not a frozen dataclass: this module is on every node start (docs/performance.md).
class VerifiedKit(NamedTuple):
    """A kit folder that verified against its receipt, with the documents its checks read:
    the receipt's statement, the manifest, ``kit.json`` and the weight lock, each parsed from the
    very bytes whose digests the receipt signs (and only once).

    The one way for a verb to use a kit's files after a verdict: :meth:`read` reads a listed
    file once and compares it in memory with the verified manifest, so what a verb renders,
    judges or shows is what was verified, even if the folder changes after :func:`open_verified`.
    """

    path: Path
    report: Report
    manifest: lite.Manifest
    info: lite.KitInfo
    statement: lite.Statement
    lock: lite.WeightsLock
    # the sha256 of each unlisted file (receipt, MANIFEST.json, MANIFEST.json.sig, root/*) as
    # verified, by path in the kit
    unlisted: Mapping[str, str]

    @property
    def kit_sha256(self) -> str:
        return self.report.kit_sha256

    def read(self, rel: str, *, max_bytes: int = MAX_DOC_BYTES) -> bytes:
        """The bytes of ``rel`` as the verified manifest lists them (``KIT_FILE_CHANGED`` if
        they are not)."""
        return read_listed(self.path, self.manifest, rel, max_bytes=max_bytes)


def open_verified(
    kit_dir: Path,
    trusted: TrustSource,
    *,
    rollback: RollbackPolicy | None = None,
    label: str | None = None,
    memo: SignatureMemo | None = None,
) -> VerifiedKit:
    """Verify ``kit_dir`` (receipt signature, kit checksum, every file, weight lock) and keep the
    documents the checks read, as records (preflight, which every launch runs first,
    render-site and the registry read fields and the models' shared methods only).

    Raises :class:`KitNotVerified` (exit 1, with the report) when a check fails. Weights are not
    checked: ``launch`` checks them with :func:`verify_weights_of`, ``accept`` passes them to
    :func:`verify_dir`.
    """
    report, st = _verify_dir(
        kit_dir, trusted, label=label, weights=None, options=None, rollback=rollback, memo=memo
    )
    if not report.ok:
        raise KitNotVerified(report)
    # a report that passed ran every step, and each step keeps what it read
    assert st.manifest and st.info and st.statement and st.lock
    unlisted = {**st.unlisted, **_root_digests(kit_dir)}
    return VerifiedKit(kit_dir, report, st.manifest, st.info, st.statement, st.lock, unlisted)


def _root_digests(kit_dir: Path) -> dict[str, str]:
    """sha256 of each file of the kit's ``root/`` (by the one rule for what it may hold), by
    path in the kit: :func:`_step_kit_files_again` compares them, as the full second
    verification this replaced walked (``--trust``) or read (``--root``) the chain again. Read
    after the checks, so a change within the first run itself is not seen here; the checks'
    own reads judged those bytes. No root/ (most kits): one ``lstat``."""
    return {
        f"{ROOT_DIR}/{version}.root.json": sha256_hex(data)
        for version, data in kit_roots(kit_dir).items()
    }


def _step_kit_files_again(st: _State, check: Check) -> None:
    """``kit_files`` for a kit verified moments ago, and the unlisted files its first run read
    (receipt, MANIFEST.json, MANIFEST.json.sig, root/; :func:`diff_tree` skips them) still the
    bytes it verified: the full second verification this replaced refused a kit whose receipt
    or manifest was rewritten, or whose SSH signature or root/ file appeared, meanwhile
    (tests/test_redteam.py,
    ``test_launch_unlisted_kit_file_rewritten_while_engine_version_is_checked``). Three small
    reads: about 0.05 ms of CPU on a launch (3.13, the demo kit)."""
    if _root_digests(st.kit_dir) != {
        rel: digest for rel, digest in st.unlisted.items() if rel.startswith(ROOT_DIR + "/")
    }:
        raise VerificationError(
            f"{ROOT_DIR}/ is not the chain of roots verified moments ago", code="KIT_FILE_CHANGED"
        )
    for name in sorted(UNLISTED):
        path = st.kit_dir / name
        expected = st.unlisted.get(name)
        if expected is None:
            if os.path.lexists(path):
                raise VerificationError(
                    f"{name} appeared in the kit since it was verified", code="KIT_FILE_CHANGED"
                )
            continue
        cap = {RECEIPT_NAME: MAX_ENVELOPE_BYTES, SSHSIG_NAME: MAX_SSHSIG_BYTES}.get(name)
        data = read_bounded(path, cap or MAX_DOC_BYTES, what=name, code="KIT_FILE_CHANGED")
        if sha256_hex(data) != expected:
            raise VerificationError(
                f"{name} is not the one verified moments ago", code="KIT_FILE_CHANGED"
            )
    _step_kit_files(st, check)


_KIT_FILES_AGAIN_STEP: _Step = (
    _KIT_FILES_STEP[0],
    _KIT_FILES_STEP[1],
    _step_kit_files_again,
    _KIT_FILES_STEP[3],
)


def verify_weights_of(
    kit: VerifiedKit, weights: Path, options: WeightsOptions | None = None
) -> Report:
    """The verdict of :func:`verify_dir` with ``weights`` for a kit that :func:`open_verified`
    verified moments ago with keys given as they are (``--trust``), without checking its
    signature and documents a second time.

    ``launch`` verifies the kit, asks the engine its version, then hashes the weights. Between
    the two it verified the whole kit again; with fixed keys nothing but the folder can change
    that verdict, so now the folder is held to what was verified: every kit file hashed again
    against the verified manifest (``kit_files``, as in the first run: a file changed, added or
    removed meanwhile fails it with the same codes, and the weights are then not hashed), and
    the files the manifest cannot list (receipt, MANIFEST.json, MANIFEST.json.sig, root/) still
    the bytes the checks read. The weights are checked against the lock the first run read and
    checked, kept in memory, so no later read of the folder can hand the hasher another lock.
    The other checks and facts are the first run's. About 10 ms of CPU less on every launch
    (docs/performance.md, "Sixth pass"). A launch under a root of trust, or with rollback state,
    verifies the kit again in full instead (:func:`k3kit.node.launch.plan_launch`): the node's
    accepted roots and sequences can change meanwhile, and each check judges them.
    """
    st = _State(kit.path, [], statement=kit.statement)
    st.manifest, st.lock, st.unlisted = kit.manifest, kit.lock, dict(kit.unlisted)
    st.kit_sha256 = kit.kit_sha256
    report = Report(kit.report.kit, facts=kit.report.facts.copy())
    for check in kit.report.checks:
        if check.id == "kit_files":
            _run_steps(st, report, [_KIT_FILES_AGAIN_STEP])
        elif check.id != "weights":
            report.checks.append(check)
    report.checks.append(_weights_check(st, report, weights, options))
    return report
