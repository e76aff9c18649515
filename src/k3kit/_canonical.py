"""Canonical JSON bytes (RFC 8785) and a strict JSON parser for attacker-controlled bytes.

Why both: signatures and checksums are over exact bytes, so k3kit writes every hashed or signed
document as JCS; and the stdlib parser silently keeps the last of duplicate keys, accepts NaN and
recurses without bound, which is how parser-differential attacks slip past a verifier. The strict
parser refuses all of these before any model sees the data.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from k3kit._sha256 import sha256_hex
from k3kit.errors import K3kitError, VerificationError
from k3kit.models._lite import Record
from k3kit.models._lite import dump as dump_record

if TYPE_CHECKING:  # models are only written by callers that built them (not verify's start-up)
    from pydantic import BaseModel

MAX_SAFE_INT = 2**53 - 1
# Bounds applied to every document attacker bytes reach, before any value is built from them.
# Python's int() is quadratic and refuses more than 4,300 digits with a bare ValueError, so the
# digit count is checked on the text first; 2**53 has 16 digits, 40 leaves room for a sign and
# leading zeros without letting a number cost anything.
MAX_NUMBER_CHARS = 40
MAX_STRING_CHARS = 1024 * 1024  # a base64 DSSE payload of the 1 MiB envelope fits
MAX_CONTAINER_ITEMS = 1_000_000


# The stdlib encoder's settings under which it writes exactly RFC 8785's bytes for a plain
# tree (see dumps): no spaces, keys sorted, non-ASCII text written as itself.
_PLAIN = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def dumps(obj: Any) -> bytes:
    """RFC 8785 bytes of a JSON-compatible object.

    Why two writers: rfc8785 serialises in Python, a call per value, and launch checks its
    documents with it (about 3 ms of its start-up, with the import). For a *plain* tree (exact
    dicts with ASCII keys, lists, str, bool, None and integers inside +-(2**53-1)) the stdlib's C
    encoder writes the same bytes: its string escapes are the ones RFC 8785 prescribes (rfc8785
    took its escape table from the stdlib's), integers in that range are written as their
    digits by both, and code-point order of ASCII keys is their UTF-16 order. Anything else (a
    float, a non-ASCII key, a subclass, a tuple, a lone surrogate) goes to rfc8785, which
    writes or refuses it as before. tests/test_canonical_fast.py holds the two to the same bytes
    or the same refusal.
    """
    if _plain(obj):
        try:
            return _PLAIN.encode(obj).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: rfc8785 refuses it with its own error
    import rfc8785  # only for what is not plain (about 1 ms to import)

    return bytes(rfc8785.dumps(obj))


#: Deeper than this a tree goes to rfc8785. No document is (strict_loads allows 32 levels), and
#: around a thousand levels the two writers part: the C encoder still writes what rfc8785's
#: recursion refuses.
_PLAIN_MAX_DEPTH = 64


def _plain(obj: Any) -> bool:
    """True when ``obj`` holds only the exact types :func:`dumps` may hand to the C encoder.

    A container met twice (shared, or a cycle that would walk for ever) is not plain, nor is a
    tree deeper than :data:`_PLAIN_MAX_DEPTH`.
    """
    stack: list[tuple[Any, int]] = [(obj, 0)]
    seen: set[int] = set()
    while stack:
        node, depth = stack.pop()
        kind = type(node)
        if kind is dict or kind is list:
            if id(node) in seen or depth >= _PLAIN_MAX_DEPTH:
                return False
            seen.add(id(node))
        if kind is dict:
            for key in node:
                if type(key) is not str or not key.isascii():
                    return False
            stack.extend((value, depth + 1) for value in node.values())
        elif kind is list:
            stack.extend((item, depth + 1) for item in node)
        elif kind is int:
            if not -MAX_SAFE_INT <= node <= MAX_SAFE_INT:
                return False
        elif kind is not str and kind is not bool and node is not None:
            return False
    return True


def model_bytes(model: BaseModel | Record) -> bytes:
    """JCS bytes of a k3kit model (aliases as field names, unset optionals left out), or of its
    record of :mod:`k3kit.models.lite` (the same bytes, without pydantic)."""
    if isinstance(model, Record):
        return dumps(dump_record(model))
    return dumps(model.model_dump(mode="json", by_alias=True, exclude_none=True))


class _StrictDecodeError(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _StrictDecodeError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise _StrictDecodeError(f"{name} is not allowed")


def _no_floats(text: str) -> Any:
    raise _StrictDecodeError(f"non-integer number {text} is not allowed (use a string)")


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _StrictDecodeError(f"integer of {len(text)} digits is out of the interoperable range")
    value = int(text)
    if abs(value) > MAX_SAFE_INT:
        raise _StrictDecodeError(f"integer {text} is outside the interoperable range")
    return value


def _check_string(text: str) -> None:
    if len(text) > MAX_STRING_CHARS:
        raise _StrictDecodeError(f"a string of {len(text)} characters exceeds {MAX_STRING_CHARS}")
    try:
        text.encode("utf-8")  # a lone surrogate ("\\ud800") decodes but is not Unicode text
    except UnicodeEncodeError as exc:
        raise _StrictDecodeError("a string holds a lone surrogate (invalid Unicode)") from exc


def _bounds(obj: Any, limit: int) -> None:
    """Depth, container sizes and every string (keys too), walked without recursion.

    Only containers go on the stack; a container's scalars are checked where it is visited
    (accept parses every streamed event with this, so a stack entry per scalar was its largest
    cost). Depth is as before: a value inside a container at depth ``limit`` is too deep.
    """
    if limit < 1:
        raise _StrictDecodeError(f"nesting deeper than {limit}")
    if isinstance(obj, str):
        _check_string(obj)
    if not isinstance(obj, (dict, list)):
        return
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if len(node) > MAX_CONTAINER_ITEMS:
            kind = "an object of more than" if isinstance(node, dict) else "an array of more than"
            what = "members" if isinstance(node, dict) else "items"
            raise _StrictDecodeError(f"{kind} {MAX_CONTAINER_ITEMS} {what}")
        if node and depth >= limit:
            raise _StrictDecodeError(f"nesting deeper than {limit}")
        if isinstance(node, dict):
            for key in node:
                _check_string(key)
            values: Any = node.values()
        else:
            values = node
        for value in values:
            if isinstance(value, str):
                _check_string(value)
            elif isinstance(value, (dict, list)):
                stack.append((value, depth + 1))


def _finite_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _StrictDecodeError(f"a number of {len(text)} characters is not a 64-bit float")
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise _StrictDecodeError(f"number {text} does not fit a 64-bit float")
    return value


def _parse(
    data: bytes,
    *,
    source: str,
    max_bytes: int,
    max_depth: int,
    error: type[K3kitError],
    code: str,
    parse_float: Any,
) -> Any:
    if len(data) > max_bytes:
        raise error(f"{source}: {len(data)} bytes exceeds the {max_bytes}-byte limit", code=code)
    try:
        text = data.decode("utf-8")
        obj = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constants,
            parse_float=parse_float,
            parse_int=_int,
        )
        _bounds(obj, max_depth)
    except (
        UnicodeDecodeError,
        json.JSONDecodeError,
        _StrictDecodeError,
        RecursionError,
        ValueError,  # belt and braces: int()/float() limits of this Python
    ) as exc:
        raise error(f"{source}: not strict JSON: {exc}", code=code) from exc
    return obj


def strict_loads(
    data: bytes,
    *,
    source: str,
    max_bytes: int,
    max_depth: int = 32,
    error: type[K3kitError] = VerificationError,
    code: str = "JSON_MALFORMED",
) -> Any:
    """Parse JSON strictly: size cap, then no duplicates, NaN, floats, huge ints or deep trees.

    Numbers are bounded by their text (:data:`MAX_NUMBER_CHARS`) before Python converts them, so
    a 5,000-digit integer is a refusal with the caller's code, not a ValueError; strings (keys
    too) are bounded and must be valid Unicode, so a lone surrogate cannot reach an encoder (DSSE
    PAE, a terminal) later. Depth is bounded before recursion can bite because the size cap limits
    the nesting the C scanner can see, and the explicit walk enforces the smaller, documented
    limit.
    """
    return _parse(
        data,
        source=source,
        max_bytes=max_bytes,
        max_depth=max_depth,
        error=error,
        code=code,
        parse_float=_no_floats,
    )


def measurement_loads(
    data: bytes,
    *,
    source: str,
    max_bytes: int,
    max_depth: int = 8,
    error: type[K3kitError] = VerificationError,
    code: str = "JSON_MALFORMED",
) -> Any:
    """Parse a benchmark tool's JSON: as strict as :func:`strict_loads`, except that floats pass.

    Measurement files (``vllm bench serve --save-result``) are full of floats and are never
    signed as JSON themselves (their bytes are hashed), so floats are fine here; duplicate keys,
    ``NaN``/``Infinity``, overflowing numbers, deep nesting and oversize input are still refused,
    because two parsers reading the same evidence differently is exactly what an auditor must
    rule out.
    """
    return _parse(
        data,
        source=source,
        max_bytes=max_bytes,
        max_depth=max_depth,
        error=error,
        code=code,
        parse_float=_finite_float,
    )


def require_canonical(data: bytes, obj: Any, *, source: str) -> None:
    """Refuse bytes that are not the JCS form of what they parse to (one document, one encoding)."""
    try:
        canonical = dumps(obj)
    except Exception as exc:  # rfc8785 raises its own error types (out-of-range integers)
        raise VerificationError(
            f"{source}: cannot be canonicalised: {exc}", code="JSON_NOT_CANONICAL"
        ) from exc
    if canonical != data:
        raise VerificationError(
            f"{source}: bytes are not RFC 8785 canonical JSON", code="JSON_NOT_CANONICAL"
        )


def sha256_of_model(model: BaseModel | Record) -> str:
    """sha256 hex of a model's canonical bytes (the checksum k3kit signs; without hashlib, see
    :mod:`k3kit._sha256`: launch keys the verification cache by the lock's checksum)."""
    return sha256_hex(model_bytes(model))
