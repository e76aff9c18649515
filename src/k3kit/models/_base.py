"""Shared pieces of every k3kit document model.

All models are frozen and forbid unknown keys: a typo in ``package.toml`` or a field smuggled into a
lock must be an error, not silently ignored. :func:`load` is the single place where pydantic's
``ValidationError`` becomes a :class:`~k3kit.errors.K3kitError` that names the file, the field and
what was expected, so the CLI never shows a traceback for bad input.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
)

from k3kit._values import TIMESTAMP_PATTERN, canonical_timestamp
from k3kit.errors import InputError, K3kitError
from k3kit.models import _rules as rules

SHA256_HEX = r"^[0-9a-f]{64}$"
COMMIT_HEX = r"^[0-9a-f]{40}$"

Sha256Hex = Annotated[str, Field(pattern=SHA256_HEX)]
CommitSha = Annotated[str, Field(pattern=COMMIT_HEX)]
Blake3Hex = Annotated[str, Field(pattern=SHA256_HEX)]
# Every timestamp in every document: canonical RFC 3339 UTC (ASCII digits, a real date), checked by
# the one parser in k3kit._values, so string order is time order and nothing sorts after 9999.
Timestamp = Annotated[str, Field(pattern=TIMESTAMP_PATTERN), AfterValidator(canonical_timestamp)]


# A relative path from an untrusted document: refused at load time if it could escape or collide.
RelPath = Annotated[str, AfterValidator(rules.safe_relpath)]
Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")]
#: A kit's release version, one spelling only (ASCII digits, no space, no "v", no leading zero in
#: a number): the rollback memory keys on it, so "1.0.0 " or "01.0.0" must not pass for another
#: version beside "1.0.0".
KitVersion = Annotated[
    str, Field(pattern=r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([.-][0-9A-Za-z.-]+)?$")
]
# A hub repo id, ORG/NAME: the one pattern (the lock's field, and pin's check before any request).
REPO_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$"
RepoId = Annotated[str, Field(pattern=REPO_ID_PATTERN)]
# Signed documents must not carry floats (RFC 8785 and JSON parsers disagree on them), and a
# measured figure must keep the precision it was published with ("272.70" has two decimals), so
# measurements are decimals that travel as strings ("7.4E+3" keeps two significant digits),
# written with ASCII digits and bounded (k3kit.models._rules: decimal_text, bounded_decimal).


Measured = Annotated[
    Decimal,
    BeforeValidator(rules.decimal_text),
    AfterValidator(rules.bounded_decimal),
    PlainSerializer(str, return_type=str),
]
NonNegInt = Annotated[int, Field(ge=0, le=2**53 - 1)]


class Frozen(BaseModel):
    """Base of every model: immutable, strict about unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, defer_build=True)


M = TypeVar("M", bound=BaseModel)

_LOC_INDEX = re.compile(r"^[0-9]+$")


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        text = str(part)
        out += f"[{text}]" if _LOC_INDEX.fullmatch(text) else (f".{text}" if out else text)
    return out or "(top level)"


def describe_validation_error(source: str, exc: ValidationError) -> str:
    """Render every problem as ``source: field: message (got …)``, one per line."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = _format_loc(tuple(err["loc"]))
        got = err.get("input")
        shown = "" if isinstance(got, dict | list) else f" (got {got!r})"
        if err["type"] == "missing":
            shown = ""
        lines.append(f"{source}: {loc}: {err['msg']}{shown}")
    return "\n".join(lines)


def load(
    model: type[M],
    data: Any,
    *,
    source: str,
    error: type[K3kitError] = InputError,
    code: str = "BAD_INPUT",
) -> M:
    """Validate ``data`` into ``model`` or raise ``error`` naming the source and every bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(describe_validation_error(source, exc), code=code) from exc
