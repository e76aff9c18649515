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

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from k3kit._canonical import require_canonical, strict_loads
from k3kit._digest import sha256_hex  # not hashlib: see k3kit._digest.SMALL_BYTES
from k3kit._fs import read_capped
from k3kit._immutable import NamedTuple
from k3kit._text import shown
from k3kit.errors import K3kitError, VerificationError
from k3kit.formats.names import KIT_INFO_NAME, MANIFEST_NAME
from k3kit.models import lite
from k3kit.models._lite import Record
from k3kit.models._lite import read as read_record

if TYPE_CHECKING:  # pydantic is imported by the callers that ask for a pydantic model
    from pydantic import BaseModel

    from k3kit.models import KitInfo, Manifest

# The one cap on a document k3kit reads whole into memory: a kit's manifest, kit.json, lock and
# deploy files, a publisher's inputs, a hub's small (non-LFS) file and an engine's JSON answer.
# Every reader names this constant rather than its own copy of the number, so the verifier, the
# launcher and the builder can never disagree on it.
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024

# A pydantic model, or a record of k3kit.models.lite (the same document without pydantic).
M = TypeVar("M", bound="BaseModel | Record")
# A pattern's text, compiled on first use (re's cache): verify reads no serve arguments, and
# compiling it at import cost every node start ~0.1 ms of CPU.
_SERVE_KEY = r"^[a-z0-9][a-z0-9_-]*$"


# Value records on verify's start-up path are NamedTuples, not frozen dataclasses: a frozen
# dataclass costs ~0.7 ms of CPU to create at import (it execs six methods), a NamedTuple ~0.1 ms
# (docs/performance.md, "Start-up").
class Document(NamedTuple, Generic[M]):
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
    ``model`` is a pydantic model or its pydantic-free record (:mod:`k3kit.models.lite`, what the
    verifier reads): the same checks either way, and pydantic is imported only for the former.
    """
    obj = strict_loads(data, source=what, max_bytes=max_bytes, error=error, code=code)
    try:
        require_canonical(data, obj, source=what)
    except VerificationError as exc:
        raise error(exc.message, code=canonical_code or exc.code) from exc
    if issubclass(model, Record):
        return read_record(model, obj, source=what, error=error, code=code)
    from k3kit.models import load

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
    return check_document(
        data,
        model,
        label=label,
        max_bytes=max_bytes,
        expected_sha256=expected_sha256,
        code=code,
        mismatch_code=mismatch_code,
        mismatch_detail=mismatch_detail,
        error=error,
    )


def check_document(
    data: bytes,
    model: type[M],
    *,
    label: str,
    max_bytes: int,
    expected_sha256: str | None = None,
    code: str,
    mismatch_code: str | None = None,
    mismatch_detail: str = "",
    error: type[K3kitError] = VerificationError,
) -> Document[M]:
    """:func:`read_document` for bytes already read (an archive member kept from its index):
    hashed and compared with ``expected_sha256`` before it is parsed."""
    actual = sha256_hex(data)
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


def read_kit_documents(
    kit_dir: Path,
    *,
    max_bytes: int,
    kit_sha256: str | None = None,
    mismatch_code: str = "RECEIPT_KIT_MISMATCH",
) -> tuple[Manifest, KitInfo]:
    """``MANIFEST.json`` and the ``kit.json`` it lists, each read once by the one reader.

    With ``kit_sha256`` (the signed kit checksum) the manifest must hash to it (else
    ``mismatch_code``); without it the manifest is only parsed strictly, which is what the
    node-local commands (preflight, render-site) that take an unverified kit can do. Either way
    ``kit.json`` is hashed against the manifest's entry before it is parsed.
    """
    from k3kit.models import KitInfo, Manifest

    manifest = read_document(
        kit_dir / MANIFEST_NAME,
        Manifest,
        max_bytes=max_bytes,
        expected_sha256=kit_sha256,
        code="MANIFEST_MALFORMED",
        mismatch_code=mismatch_code,
    ).model
    entry = next((e for e in manifest.files if e.path == KIT_INFO_NAME), None)
    if entry is None:
        raise VerificationError("MANIFEST.json does not list kit.json", code="KIT_INFO_MALFORMED")
    info = read_document(
        kit_dir / KIT_INFO_NAME,
        KitInfo,
        max_bytes=max_bytes,
        expected_sha256=entry.sha256,
        code="KIT_INFO_MALFORMED",
        mismatch_code="KIT_FILE_CHANGED",
    ).model
    return manifest, info


def read_kit_info(kit_dir: Path, kit_sha256: str, *, max_bytes: int) -> KitInfo:
    """``kit.json``, only if it is the one a manifest with the signed ``kit_sha256`` lists.

    ``audit`` reads the engine image digest from kit.json; trusting an unverified kit.json would
    let an edited digest turn a warning into a pass.
    """
    return read_kit_documents(kit_dir, max_bytes=max_bytes, kit_sha256=kit_sha256)[1]


def read_listed(
    kit_dir: Path, manifest: Manifest | lite.Manifest, rel: str, *, max_bytes: int
) -> bytes:
    """The bytes of a file ``manifest`` lists, read once and compared in memory with its entry.

    Why one home: launch, preflight, render-site, accept and the card each use a kit file's bytes
    after a verdict; reading them again by path and comparing size and sha256 is what makes the
    bytes used the bytes verified (``KIT_FILE_MISSING`` / ``KIT_FILE_CHANGED``, exit 1).
    """
    entry = next((e for e in manifest.files if e.path == rel), None)
    if entry is None:
        raise VerificationError(f"{rel} is not listed in MANIFEST.json", code="KIT_FILE_MISSING")
    data = read_bounded(kit_dir / rel, max_bytes, what=rel, code="KIT_FILE_CHANGED")
    if len(data) != entry.size or sha256_hex(data) != entry.sha256:
        raise VerificationError(
            f"{rel} is not the file MANIFEST.json lists", code="KIT_FILE_CHANGED"
        )
    return data


def utf8_text(
    data: bytes, *, source: str, code: str, error: type[K3kitError] = VerificationError
) -> str:
    """Bytes someone else wrote, as the text its reader parses: strict UTF-8, else
    ``error(code)`` naming the source and the first bad byte.

    Why one helper: a kit's text files (``serve.yaml``, ``engine.env``, the deploy templates
    ``render-site`` fills) are bytes their signer chose, and a hand-made kit may sign any bytes;
    the operator's site file is read by ``launch`` and by ``render-site``. Each reader decoding
    on its own let one forget the refusal (render-site ended in an internal error, exit 70) and
    others decode with ``"replace"``, reading a line other than the one written (so the two
    verbs could read one site file two ways). Here every one of them refuses the same way."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{shown(source)}: not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})",
            code=code,
            hint="k3kit writes and reads these files as UTF-8: save it as UTF-8, or ask whoever "
            "signed it for a kit built by `k3kit build`",
        ) from None


def listed_text(
    kit_dir: Path, manifest: Manifest | lite.Manifest, rel: str, *, max_bytes: int, code: str
) -> str:
    """:func:`read_listed` then :func:`utf8_text`: a listed kit file's verified bytes as text."""
    data = read_listed(kit_dir, manifest, rel, max_bytes=max_bytes)
    return utf8_text(data, source=rel, code=code)


def parse_serve_config(data: bytes, *, source: str) -> dict[str, Any]:
    """A profile's ``serve.yaml`` as ``build`` renders it: ``flag-name: <JSON value>`` lines,
    ``#`` comments and blank lines; anything else is refused (``SERVE_CONFIG_MALFORMED``).

    ``render.yaml_scalar`` writes every value as JSON (which is YAML), so this strict reader
    needs no YAML library and reads exactly what the engine reads (a flag set twice: the last
    line, as YAML loaders read it). Python's ``json`` also takes ``NaN``, ``Infinity``, ``1e999``
    (read as infinity) and a key twice inside a value (the last wins); build writes none of them
    (it refuses a non-finite setting), and preflight judged a node's memory by them
    (``gpu-memory-utilization: Infinity`` fitted any weights on any GPU), so :func:`_serve_value`
    refuses them. Integers stay unbounded: build writes any integer TOML gives it.
    """
    out: dict[str, Any] = {}
    text = utf8_text(data, source=source, code="SERVE_CONFIG_MALFORMED")
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, value = line.partition(": ")
        try:
            if not sep or not re.fullmatch(_SERVE_KEY, key):
                raise ValueError(key)
            out[key] = _serve_value(value)
        except ValueError as exc:
            why = f" ({exc})" if isinstance(exc, _NotRendered) else ""
            raise VerificationError(
                f"{source}:{number}: not a line k3kit renders{why}", code="SERVE_CONFIG_MALFORMED"
            ) from None
    return out


class _NotRendered(ValueError):
    """A JSON value build never renders (see :func:`parse_serve_config`)."""


def _serve_value(text: str) -> Any:
    return json.loads(
        text,
        parse_constant=_no_constant,
        parse_float=_finite_float,
        object_pairs_hook=_unique_keys,
    )


def _no_constant(name: str) -> Any:
    raise _NotRendered(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotRendered(f"{text[:40]} does not fit a 64-bit float")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _NotRendered("a key appears twice")
    return out
