"""``pack`` as a pipeline: only a kit that verifies against its own manifest and receipt is packed.

Why: an archive is what a buyer downloads and installs; packing a tampered kit, a kit whose
receipt belongs to other bytes, or a folder that is not a kit at all (a weights folder) would
hand the buyer something that can only fail later, or worse, look like a release. The checks
are the verifier's own (``verify_dir`` with ``--trust``, else ``check_unsigned_statement``), not
a second implementation. A kit without a receipt is packed only with ``unsigned=True`` and gets
a name that says so (``NAME-VERSION.unsigned.kit.tar.gz``), so it cannot pass for a release.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from k3kit._canonical import strict_loads
from k3kit.archive import pack
from k3kit.errors import InputError, VerificationError
from k3kit.formats.documents import read_bounded, read_document
from k3kit.formats.manifest import MANIFEST_NAME, RECEIPT_NAME, diff_tree
from k3kit.models import PAYLOAD_TYPE, DsseEnvelope, KitInfo, Manifest, lite, load
from k3kit.models._lite import read as read_record
from k3kit.node.verify import (
    KIT_INFO_NAME,
    MAX_DOC_BYTES,
    Report,
    check_unsigned_statement,
    verify_dir,
)
from k3kit.signing.sign import MAX_ENVELOPE_BYTES
from k3kit.signing.trust import RollbackPolicy
from k3kit.signing.trust.source import TrustSource, has_trust

ARCHIVE_SUFFIX = ".kit.tar.gz"
UNSIGNED_SUFFIX = ".unsigned.kit.tar.gz"
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Packed:
    path: Path
    sha256: str
    size: int
    signed: bool
    checked: str  # what was checked before packing, in words


def _doc(kit_dir: Path, name: str, model: type[M], code: str) -> M:
    """A kit document through the one reader (capped, no link or FIFO, strict, canonical)."""
    return read_document(kit_dir / name, model, max_bytes=MAX_DOC_BYTES, code=code).model


def _kit_info(kit_dir: Path) -> KitInfo:
    if not (kit_dir / KIT_INFO_NAME).is_file() or not (kit_dir / MANIFEST_NAME).is_file():
        raise InputError(
            f"{kit_dir} is not a k3kit kit (no {KIT_INFO_NAME} and {MANIFEST_NAME})",
            code="PACK_NOT_A_KIT",
            hint="pack the folder `k3kit build` wrote, not a weights folder",
        )
    return _doc(kit_dir, KIT_INFO_NAME, KitInfo, "KIT_INFO_MALFORMED")


def _unverified_statement(path: Path) -> lite.Statement:
    """The receipt's Statement read WITHOUT checking its signature (no key was given)."""
    data = read_bounded(
        path, MAX_ENVELOPE_BYTES, what="receipt", error=VerificationError, code="RECEIPT_MISSING"
    )
    obj = strict_loads(
        data, source=RECEIPT_NAME, max_bytes=MAX_ENVELOPE_BYTES, code="RECEIPT_MALFORMED"
    )
    env = load(
        DsseEnvelope, obj, source=RECEIPT_NAME, error=VerificationError, code="RECEIPT_MALFORMED"
    )
    if env.payload_type != PAYLOAD_TYPE:
        raise VerificationError(f"payloadType {env.payload_type!r}", code="RECEIPT_WRONG_TYPE")
    try:
        payload = base64.b64decode(env.payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise VerificationError("receipt payload is not base64", code="RECEIPT_MALFORMED") from exc
    parsed = strict_loads(
        payload, source="receipt payload", max_bytes=len(payload), code="RECEIPT_MALFORMED"
    )
    return read_record(  # the verifier's own record of it (check_unsigned_statement)
        lite.Statement,
        parsed,
        source="receipt payload",
        error=VerificationError,
        code="RECEIPT_MALFORMED",
    )


def _refuse_failed(report: Report) -> None:
    failed = [c for c in report.checks if c.status == "failed"]
    if failed or not report.checks:
        detail = "; ".join(f"{c.id}: {c.detail}" for c in failed)
        raise VerificationError(
            f"refusing to pack a kit that does not verify: {detail}",
            code=failed[0].code or "VERIFICATION_FAILED",
        )
    not_checked = [c for c in report.checks if c.status != "passed" and c.id != "weights"]
    if not_checked:
        raise VerificationError(
            "refusing to pack: not checked: " + ", ".join(c.id for c in not_checked),
            code="VERIFICATION_FAILED",
        )


def _check_unsigned(kit_dir: Path) -> str:
    if (kit_dir / RECEIPT_NAME).exists():
        raise InputError(
            f"{kit_dir} has a receipt; --unsigned is for kits without one",
            code="PACK_UNSIGNED_HAS_RECEIPT",
        )
    manifest = _doc(kit_dir, MANIFEST_NAME, Manifest, "MANIFEST_MALFORMED")
    drift = diff_tree(kit_dir, manifest).differences
    if drift:
        listing = ", ".join(f"{d.code} {d.path!r}" for d in drift)
        codes = {d.code for d in drift}
        raise VerificationError(
            f"refusing to pack: kit differs from MANIFEST.json: {listing}",
            code=drift[0].code if len(codes) == 1 else "KIT_FILES_DIFFER",
        )
    return "tree matches MANIFEST.json; UNSIGNED: no receipt"


def _output(kit_dir: Path, info: KitInfo, output: Path | None, unsigned: bool) -> Path:
    name = f"{info.package.name}-{info.package.version}"
    default = name + (UNSIGNED_SUFFIX if unsigned else ARCHIVE_SUFFIX)
    if output is None:
        return kit_dir.resolve().parent / default
    if output.is_dir():
        return output / default
    if unsigned and not output.name.endswith(UNSIGNED_SUFFIX):
        raise InputError(
            f"{output}: an unsigned kit's archive name must end with {UNSIGNED_SUFFIX}",
            code="PACK_UNSIGNED_NAME",
        )
    if not unsigned and output.name.endswith(UNSIGNED_SUFFIX):
        raise InputError(f"{output}: a signed kit is not named .unsigned", code="PACK_SIGNED_NAME")
    return output


def pack_kit(
    kit_dir: Path,
    output: Path | None = None,
    *,
    trusted: TrustSource | None = None,
    unsigned: bool = False,
    force: bool = False,
    rollback: RollbackPolicy | None = None,
) -> Packed:
    """Check ``kit_dir`` as the verifier would, then write its deterministic archive.

    ``trusted``: any trust source (keys, a ``Trust``, a root anchor); without one the signature
    is not checked, and :attr:`Packed.checked` says so. A root of trust needs ``rollback``,
    as in ``verify``."""
    info = _kit_info(kit_dir)
    if unsigned:
        if has_trust(trusted):
            raise InputError("--unsigned and --trust exclude each other", code="PACK_OPTIONS")
        checked = _check_unsigned(kit_dir)
    elif not (kit_dir / RECEIPT_NAME).is_file():
        raise VerificationError(
            f"{kit_dir} has no {RECEIPT_NAME}: refusing to pack an unsigned kit",
            code="RECEIPT_MISSING",
            hint="run `k3kit sign` first, or pass --unsigned for a test archive named as such",
        )
    elif has_trust(trusted):
        _refuse_failed(verify_dir(kit_dir, trusted, rollback=rollback))
        checked = "receipt signature (trusted key), kit checksum, kit files, weight checksum"
    else:
        _refuse_failed(
            check_unsigned_statement(kit_dir, _unverified_statement(kit_dir / RECEIPT_NAME))
        )
        checked = "kit checksum, kit files, weight checksum (signature not checked: no --trust)"
    out = _output(kit_dir, info, output, unsigned)
    digest, size = pack(kit_dir, out, force=force)
    return Packed(out, digest, size, not unsigned, checked)
