"""One home for reading a k3kit JSON document from attacker-controlled storage.

The order is the point. A verifier that parses a document before comparing its digest with the
signed one does the attacker's work: an unsigned 16 MiB ``MANIFEST.json`` of empty objects cost
850 MB and 16 s to parse and canonicalise, only to be refused afterwards. So
:func:`read_document` does the cheap, certain things first and the expensive ones last:

1. open without following links and without blocking (a FIFO planted where a document belongs
   must not hang the verifier), ``fstat`` that same descriptor: only a regular file, and its size
   is compared with the cap *before* a byte is read;
2. read at most the cap, hash, and compare with the signed digest when there is one: a document
   the signer did not sign is refused here, in milliseconds, whatever it contains;
3. only then parse strictly (:func:`k3kit._canonical.strict_loads`: bounded numbers, strings,
   depth and containers), require the canonical (RFC 8785) encoding, and validate the model.

Every failure is the caller's ``error``/``code``, so a bad document is the artifact's fault
(verification, exit 1) and never an internal error.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel

from k3kit._canonical import require_canonical, strict_loads
from k3kit._fs import read_capped
from k3kit._text import shown
from k3kit.errors import K3kitError, VerificationError
from k3kit.models import KitInfo, Manifest, load

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Document(Generic[M]):
    """A document that passed every step: its exact bytes, their sha256 and the model."""

    data: bytes
    sha256: str
    model: M


def read_bounded(
    path: Path,
    max_bytes: int,
    *,
    what: str,
    error: type[K3kitError] = VerificationError,
    code: str,
    too_large_code: str | None = None,
) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (:func:`k3kit._fs.read_capped`, the
    one bounded reader), with the artifact's fault (exit 1) as the default."""
    return read_capped(
        path, max_bytes, what=what, error=error, code=code, too_large_code=too_large_code
    )


def parse_document(
    data: bytes,
    model: type[M],
    *,
    what: str,
    max_bytes: int,
    error: type[K3kitError] = VerificationError,
    code: str,
    canonical_code: str | None = None,
) -> M:
    """Strict parse, canonical-bytes check and model validation of bytes already trusted.

    ``canonical_code`` names bytes that parse but are not RFC 8785 (default ``JSON_NOT_CANONICAL``).
    """
    obj = strict_loads(data, source=what, max_bytes=max_bytes, error=error, code=code)
    try:
        require_canonical(data, obj, source=what)
    except VerificationError as exc:
        raise error(exc.message, code=canonical_code or exc.code) from exc
    return load(model, obj, source=what, error=error, code=code)


def read_document(
    path: Path,
    model: type[M],
    *,
    max_bytes: int,
    expected_sha256: str | None = None,
    code: str,
    mismatch_code: str | None = None,
    mismatch_detail: str = "",
    error: type[K3kitError] = VerificationError,
    what: str | None = None,
) -> Document[M]:
    """Read, hash (and compare with ``expected_sha256``), then parse a document; see the module.

    ``mismatch_code`` names a digest that differs (default ``code``); ``mismatch_detail`` says
    what that means for the caller ("the receipt belongs to another kit").
    """
    label = what or path.name
    data = read_bounded(path, max_bytes, what=label, error=error, code=code)
    actual = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and actual != expected_sha256:
        raise error(
            f"{shown(label)}: sha256 {actual[:16]}… is not the signed {expected_sha256[:16]}…"
            + (f": {mismatch_detail}" if mismatch_detail else ""),
            code=mismatch_code or code,
        )
    parsed = parse_document(
        data, model, what=shown(label), max_bytes=max_bytes, error=error, code=code
    )
    return Document(data, actual, parsed)


def read_kit_info(kit_dir: Path, kit_sha256: str, *, max_bytes: int) -> KitInfo:
    """``kit.json``, only if it is the one a manifest with the signed ``kit_sha256`` lists.

    ``audit`` reads the engine image digest from kit.json; trusting an unverified kit.json would
    let an edited digest turn a warning into a pass. So: MANIFEST.json hashed against the signed
    kit checksum, then kit.json hashed against the manifest's entry, then parsed.
    """
    manifest = read_document(
        kit_dir / "MANIFEST.json",  # k3kit.manifest.MANIFEST_NAME (a level above this one)
        Manifest,
        max_bytes=max_bytes,
        expected_sha256=kit_sha256,
        code="MANIFEST_MALFORMED",
        mismatch_code="RECEIPT_KIT_MISMATCH",
    ).model
    entry = next((e for e in manifest.files if e.path == "kit.json"), None)
    if entry is None:
        raise VerificationError("MANIFEST.json does not list kit.json", code="KIT_INFO_MALFORMED")
    return read_document(
        kit_dir / "kit.json",
        KitInfo,
        max_bytes=max_bytes,
        expected_sha256=entry.sha256,
        code="KIT_INFO_MALFORMED",
        mismatch_code="KIT_FILE_CHANGED",
    ).model
