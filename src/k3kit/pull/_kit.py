"""Read the weight lock a pull works from: out of a kit directory, a ``.kit.tar.gz``, or a lock.

Pulling is not deploying, so a trusted key is optional here: without one the lock is read and
strictly parsed but nothing vouches for it, and the pull says so ("kit not verified"); the
buyer's ``k3kit verify --trust KEY --weights DIR`` before launch is where trust is enforced.
With ``--trust`` the whole kit is verified first (signature, kit files, weight checksum) and the
lock actually used must be the very bytes the receipt signs (compared by sha256, so a kit that
changes between the check and the read is caught).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from k3kit._digest import sha256_hex
from k3kit.errors import InputError, VerificationError
from k3kit.formats.documents import parse_document, read_bounded
from k3kit.formats.kitpath import classify, open_kit
from k3kit.models import WeightsLock
from k3kit.node.verify import (
    LOCK_NAME,
    MAX_DOC_BYTES,
    KitNotVerified,
    Report,
    signed_manifest_check,
    verify_dir,
)
from k3kit.signing.trust import RollbackPolicy
from k3kit.signing.trust.source import TrustSource, has_trust


@dataclass(frozen=True)
class KitLock:
    lock: WeightsLock
    lock_sha256: str
    verified: bool
    detail: str


def _read_lock(path: Path, *, label: str, missing_code: str) -> tuple[WeightsLock, str]:
    """The lock at ``path`` through the one document reader; k3kit writes locks as RFC 8785
    bytes, so other bytes were not written by ``k3kit pin`` (``LOCK_NOT_CANONICAL``)."""
    data = read_bounded(
        path, MAX_DOC_BYTES, what="weights lock", error=InputError, code=missing_code
    )
    lock = parse_document(
        data,
        WeightsLock,
        what=label,
        max_bytes=MAX_DOC_BYTES,
        error=InputError,
        code="LOCK_MALFORMED",
        canonical_code="LOCK_NOT_CANONICAL",
    )
    return lock, sha256_hex(data)


def _check_verified(kit: Path, report: Report, digest: str) -> str:
    if not report.ok:
        failed = [f"{c.id}: {c.code}" for c in report.checks if c.status == "failed"]
        raise VerificationError(
            f"{kit} does not verify ({', '.join(failed) or 'incomplete'}); refusing to pull",
            code="KIT_NOT_VERIFIED",
            hint="run `k3kit verify` on the kit for the full report",
        )
    if report.facts.get("weights_lock_sha256") != digest:
        raise VerificationError(
            f"{kit}: the lock read for pulling is not the one that verified (the kit changed)",
            code="KIT_CHANGED",
        )
    return next(c.detail for c in report.checks if c.id == "receipt_signature")


def read_kit_lock(
    kit: Path, trusted: TrustSource | None, *, rollback: RollbackPolicy | None = None
) -> KitLock:
    """The lock of ``kit``; with trust given (keys, a ``Trust`` or a root anchor: any
    ``TrustSource``), only after the kit verifies against it; a root of trust needs
    ``rollback`` (its promise of rollback protection fails closed without a state folder).

    What ``kit`` is comes from :func:`k3kit.formats.kitpath.classify`: a kit directory or archive,
    or a bare lock (``*.json``); a receipt is refused. An archive is extracted once, and the lock
    is read from the very staging copy that is verified.
    """
    kind = classify(kit)
    if kind == "receipt":
        raise InputError(
            f"{kit} is a receipt; give a kit directory, a .kit.tar.gz or a weights.lock.json",
            code="KIT_NOT_RECOGNISED",
        )
    if kind == "lock":
        lock, digest = _read_lock(kit, label=str(kit), missing_code="LOCK_MISSING")
        if has_trust(trusted):
            raise InputError(
                "--trust needs a kit (directory or .kit.tar.gz); a bare lock has no signature",
                code="TRUST_NEEDS_KIT",
            )
        return KitLock(lock, digest, False, "not verified: no --trust key given")
    try:
        # With --trust the archive's receipt and manifest are checked from its index, before a
        # forged manifest can budget any disk (the rule install and verify use).
        check = signed_manifest_check(trusted, label=str(kit)) if has_trust(trusted) else None
        with open_kit(kit, authenticate=check) as opened:
            lock, digest = _read_lock(
                opened.path / LOCK_NAME, label=f"{kit}: {LOCK_NAME}", missing_code="KIT_INCOMPLETE"
            )
            if has_trust(trusted):
                report = verify_dir(opened.path, trusted, label=str(kit), rollback=rollback)
                signer = _check_verified(kit, report, digest)
                return KitLock(lock, digest, True, f"verified: {signer}")
            return KitLock(lock, digest, False, "not verified: no --trust key given")
    except KitNotVerified as exc:  # refused from its index: said as a failed verify always is
        _check_verified(kit, exc.report, "")
        raise
    except VerificationError as exc:
        if exc.code != "ARCHIVE_FORMAT":
            raise
        raise InputError(
            f"{kit} is not a kit: give a kit directory, a .kit.tar.gz or a "
            f"weights.lock.json ({exc.message})",
            code="KIT_NOT_RECOGNISED",
        ) from exc
