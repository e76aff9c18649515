"""Read the weight lock a pull works from: out of a kit directory, a ``.kit.tar.gz``, or a lock.

Pulling is not deploying, so a trusted key is optional here: without one the lock is read and
strictly parsed but nothing vouches for it, and the pull says so ("kit not verified"); the
buyer's ``k3kit verify --trust KEY --weights DIR`` before launch is where trust is enforced.
With ``--trust`` the whole kit is verified first (signature, kit files, weight checksum) and the
lock actually used must be the very bytes the receipt signs (compared by sha256, so a kit that
changes between the check and the read is caught).
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from k3kit._canonical import require_canonical, strict_loads
from k3kit._fs import read_capped
from k3kit.archive import extract_safely
from k3kit.errors import InputError, VerificationError
from k3kit.models import WeightsLock, load
from k3kit.verify import LOCK_NAME, MAX_DOC_BYTES, verify_path


@dataclass(frozen=True)
class KitLock:
    lock: WeightsLock
    lock_sha256: str
    verified: bool
    detail: str


def _lock_bytes(kit: Path) -> bytes:
    if kit.is_dir():
        return read_capped(
            kit / LOCK_NAME,
            MAX_DOC_BYTES,
            what="weights lock",
            error=InputError,
            code="KIT_INCOMPLETE",
        )
    if not kit.is_file():
        raise InputError(f"{kit} is neither a kit directory nor a file", code="KIT_NOT_RECOGNISED")
    if kit.name.endswith(".json"):
        return read_capped(
            kit, MAX_DOC_BYTES, what="weights lock", error=InputError, code="LOCK_MISSING"
        )
    try:
        staging, _ = extract_safely(kit)
    except VerificationError as exc:
        if exc.code != "ARCHIVE_FORMAT":
            raise
        raise InputError(
            f"{kit} is not a kit: give a kit directory, a .kit.tar.gz or a "
            f"weights.lock.json ({exc.message})",
            code="KIT_NOT_RECOGNISED",
        ) from exc
    try:
        return read_capped(
            staging / LOCK_NAME,
            MAX_DOC_BYTES,
            what="weights lock",
            error=InputError,
            code="KIT_INCOMPLETE",
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def read_kit_lock(kit: Path, trusted: list[Ed25519PublicKey]) -> KitLock:
    """The lock of ``kit``; with ``trusted`` keys, only after the kit verifies against them."""
    if not kit.exists():
        raise InputError(f"kit not found: {kit}", code="KIT_NOT_FOUND")
    data = _lock_bytes(kit)
    source = f"{kit}: {LOCK_NAME}" if not kit.name.endswith(".json") else str(kit)
    obj = strict_loads(
        data, source=source, max_bytes=MAX_DOC_BYTES, error=InputError, code="LOCK_MALFORMED"
    )
    lock = load(WeightsLock, obj, source=source, error=InputError, code="LOCK_MALFORMED")
    try:  # k3kit writes locks as RFC 8785 bytes; other bytes were not written by `k3kit pin`
        require_canonical(data, obj, source=source)
    except VerificationError as exc:
        raise InputError(exc.message, code="LOCK_NOT_CANONICAL") from exc
    digest = hashlib.sha256(data).hexdigest()
    if not trusted:
        return KitLock(lock, digest, False, "not verified: no --trust key given")
    if kit.is_file() and kit.name.endswith(".json"):
        raise InputError(
            "--trust needs a kit (directory or .kit.tar.gz); a bare lock has no signature",
            code="TRUST_NEEDS_KIT",
        )
    report = verify_path(kit, trusted)
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
    signer = next(c.detail for c in report.checks if c.id == "receipt_signature")
    return KitLock(lock, digest, True, f"verified: {signer}")
