"""The strict reader behind :mod:`k3kit.models.lite`: the hot documents without pydantic.

Why: ``k3kit verify`` runs on every GPU node start (``ExecStartPre``, init containers,
``launch``), and importing pydantic and building the receipt's models was about 60 % of its
CPU, for almost no validation work (docs/performance.md, "Start-up"). This module validates the
JSON that :func:`k3kit._canonical.strict_loads` produced against a table generated from the
pydantic models (``scripts/gen_lite_models.py`` writes :mod:`k3kit.models.lite`), calling the
same rule functions (:mod:`k3kit.models._rules`), and returns frozen records with the same
field names and values as the models.

What it accepts is what the models accept, with one deliberate difference: pydantic's lax mode
turns ``true`` or ``"5"`` into an integer and ``1`` or ``"yes"`` into a boolean; this reader
refuses them (a signed document's integer is an integer). Such a refusal is marked ``lax`` so
the differential test (tests/test_lite_models.py) can tell it from a disagreement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar, TypeVar

from k3kit.errors import InputError, K3kitError

# A type node of the generated table, a tuple whose first item is its kind:
#   ("str", constraints) ("int", constraints) ("bool",) ("decimal", constraints) ("lit", values)
#   ("opt", node) ("list", node, constraints) ("dict", key, value, constraints)
#   ("model", record class) ("union", nodes) ("after", node, rule) ("before", node, rule)
# constraints: a dict of min_length, max_length, pattern (compiled), ge, le, gt, lt.
Node = tuple[Any, ...]
REQUIRED = ("required",)
R = TypeVar("R", bound="Record")


class LiteError(ValueError):
    """Why a document is refused: where (``loc``), what, and whether pydantic's lax mode would
    have coerced the value instead (``lax``)."""

    def __init__(self, loc: tuple[str | int, ...], message: str, *, lax: bool = False) -> None:
        super().__init__(message)
        self.loc, self.message, self.lax = loc, message, lax


class Record:
    """A validated document or part of one: frozen, its fields as attributes (the models'
    names), nested records, lists, dicts, ``Decimal`` figures."""

    __slots__ = ()
    # Filled by :func:`bind` from the generated table: (attribute, key, node, default).
    _fields: ClassVar[tuple[tuple[str, str, Node, Any], ...]] = ()
    _extra: ClassVar[str] = "forbid"
    _rules: ClassVar[tuple[Callable[[Any], Any], ...]] = ()

    def __init__(self, values: Mapping[str, Any]) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f[0]) == getattr(other, f[0]) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{f[0]}={getattr(self, f[0])!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"


def bind(
    table: Mapping[type[Record], tuple[str, tuple[tuple[str, str, Node, Any], ...], Any]],
) -> None:
    """Attach each record class's fields, extra-key policy and rules from the generated table."""
    for cls, (extra, fields, rules) in table.items():
        cls._fields, cls._extra, cls._rules = fields, extra, tuple(rules)


class Pattern:
    """A model's pattern, compiled on its first search: the generated table holds 45 (12
    distinct) and a demo kit's documents use 8, so start-up no longer compiles the rest
    (docs/performance.md). ``tests/test_lite_models.py`` compiles every one of them."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, text: str) -> None:
        self.pattern = text
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern)
        return self._compiled

    def search(self, value: str) -> re.Match[str] | None:
        return self.compiled().search(value)


def pattern(text: str) -> Pattern:
    """A model's ``pattern`` as pydantic applies it (Rust regex, searched): there ``$`` is the
    end of the text, so a final ``$`` becomes ``\\Z`` (Python's ``$`` also matches before a
    final newline, which would let ``"abc\\n"`` pass for ``"abc"``)."""
    if text.endswith("$") and not text.endswith("\\$"):
        text = text[:-1] + r"\Z"
    return Pattern(text)


def read(
    cls: type[R],
    obj: object,
    *,
    source: str,
    error: type[K3kitError] = InputError,
    code: str = "BAD_INPUT",
) -> R:
    """``obj`` (parsed JSON) as a ``cls`` record, or ``error`` naming the source and field."""
    try:
        return validate(cls, obj)
    except LiteError as exc:
        raise error(f"{source}: {_format_loc(exc.loc)}: {exc.message}", code=code) from None


def validate(cls: type[R], obj: object) -> R:
    """``obj`` as a ``cls`` record, or :class:`LiteError` (what the differential test compares)."""
    return _record(cls, obj, ())


def dump(record: Record) -> dict[str, Any]:
    """``record`` as pydantic's ``model_dump(mode="json", by_alias=True, exclude_none=True)``
    writes the model (the input of :func:`k3kit._canonical.model_bytes`), so a record hashes to
    the model's checksum: the hashing engine keys its verification cache by the lock's
    (docs/performance.md, "Fifth pass"). A ``Decimal`` has no JSON form here (a model may
    serialise it its own way): ``TypeError``, never a guess. tests/test_lite_models.py holds it
    to ``model_dump`` on every golden document."""
    out: dict[str, Any] = {}
    for name, key, _node, _default in record._fields:
        value = getattr(record, name)
        if value is not None:
            out[key] = _dumped(value)
    return out


def _dumped(value: Any) -> Any:
    if isinstance(value, Record):
        return dump(value)
    if isinstance(value, list):
        return [_dumped(v) for v in value]
    if isinstance(value, dict):
        return {k: _dumped(v) for k, v in value.items()}
    if value is None or type(value) in (str, int, bool):
        return value
    raise TypeError(f"no JSON form for a {type(value).__name__} in a record: use the model")


def _format_loc(loc: tuple[str | int, ...]) -> str:
    """``a.b[0].c``; a key longer than 64 characters (an attacker's, up to the parser's 1 MiB)
    is cut, so a refusal's message stays one readable line."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        name = part if len(part) <= 64 else part[:64] + "…"
        out += f".{name}" if out else name
    return out or "(top level)"


def _record(cls: type[R], obj: object, loc: tuple[str | int, ...]) -> R:
    if type(obj) is not dict:
        raise LiteError(loc, f"Input should be a valid dictionary or instance of {cls.__name__}")
    values: dict[str, Any] = {}
    used: set[str] = set()
    for name, key, node, default in cls._fields:
        # pydantic with populate_by_name: the alias first, else the field's own name
        found = key if key in obj else name if name in obj else None
        if found is not None:
            used.add(found)
            values[name] = _value(node, obj[found], (*loc, found))
        elif default is REQUIRED:
            raise LiteError((*loc, key), "Field required")
        else:
            values[name] = _default(default)
    if cls._extra == "forbid":
        extra = sorted(k for k in obj if k not in used)
        if extra:
            raise LiteError((*loc, extra[0]), "Extra inputs are not permitted")
    record = cls(values)
    for rule in cls._rules:
        record = _apply(rule, record, loc)
    return record


def _default(default: tuple[str, Any]) -> Any:
    """A field's default: a fresh list or dict, an empty record, or an immutable value."""
    kind, value = default
    if kind == "factory":
        return value()
    if kind == "record":
        return _record(value, {}, ())
    return value


def _apply(rule: Callable[[Any], Any], value: Any, loc: tuple[str | int, ...]) -> Any:
    """A rule of :mod:`k3kit.models._rules`; its ``ValueError`` is the document's refusal."""
    try:
        return rule(value)
    except (ValueError, AssertionError) as exc:
        raise LiteError(loc, f"Value error, {exc}") from None


def _value(node: Node, value: Any, loc: tuple[str | int, ...]) -> Any:
    return _KINDS[node[0]](node, value, loc)


def _str(node: Node, value: Any, loc: tuple[str | int, ...]) -> str:
    if type(value) is not str:
        raise LiteError(loc, "Input should be a valid string")
    _constrain(node[1], value, len(value), loc)
    return value


def _int(node: Node, value: Any, loc: tuple[str | int, ...]) -> int:
    if type(value) is not int:
        lax = type(value) in (bool, str)  # pydantic would coerce some of these
        raise LiteError(loc, "Input should be a valid integer", lax=lax)
    _constrain(node[1], value, None, loc)
    return value


def _bool(node: Node, value: Any, loc: tuple[str | int, ...]) -> bool:
    if type(value) is not bool:
        raise LiteError(loc, "Input should be a valid boolean", lax=type(value) in (int, str))
    return value


def _decimal(node: Node, value: Any, loc: tuple[str | int, ...]) -> Decimal:
    if type(value) not in (int, str):
        raise LiteError(loc, "Decimal input should be an integer, float, string or Decimal object")
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise LiteError(loc, "Input should be a valid decimal") from None
    if not number.is_finite():
        raise LiteError(loc, "Input should be a finite number")
    _constrain(node[1], number, None, loc)
    return number


def _literal(node: Node, value: Any, loc: tuple[str | int, ...]) -> Any:
    if not any(type(value) is type(v) and value == v for v in node[1]):
        raise LiteError(loc, f"Input should be {' or '.join(repr(v) for v in node[1])}")
    return value


def _optional(node: Node, value: Any, loc: tuple[str | int, ...]) -> Any:
    return None if value is None else _value(node[1], value, loc)


def _list(node: Node, value: Any, loc: tuple[str | int, ...]) -> list[Any]:
    if type(value) is not list:
        raise LiteError(loc, "Input should be a valid list")
    _constrain(node[2], value, len(value), loc)
    return [_value(node[1], item, (*loc, i)) for i, item in enumerate(value)]


def _dict(node: Node, value: Any, loc: tuple[str | int, ...]) -> dict[Any, Any]:
    if type(value) is not dict:
        raise LiteError(loc, "Input should be a valid dictionary")
    _constrain(node[3], value, len(value), loc)
    return {_value(node[1], k, (*loc, k)): _value(node[2], v, (*loc, k)) for k, v in value.items()}


def _model(node: Node, value: Any, loc: tuple[str | int, ...]) -> Record:
    record: Record = _record(node[1], value, loc)
    return record


# The JSON type each kind of union member takes exactly (pydantic's smart union on parsed JSON:
# the one member whose type matches exactly wins; no JSON value matches a Decimal exactly).
_EXACT = {"str": str, "int": int, "bool": bool, "list": list, "dict": dict}


def _union(node: Node, value: Any, loc: tuple[str | int, ...]) -> Any:
    for member in node[1]:
        base = member
        while base[0] in ("after", "before"):
            base = base[1]
        if _EXACT.get(base[0]) is type(value):
            return _value(member, value, loc)
    raise LiteError(loc, "Input should be one of the union's types")


def _after(node: Node, value: Any, loc: tuple[str | int, ...]) -> Any:
    return _apply(node[2], _value(node[1], value, loc), loc)


def _before(node: Node, value: Any, loc: tuple[str | int, ...]) -> Any:
    return _value(node[1], _apply(node[2], value, loc), loc)


def _constrain(
    cons: Mapping[str, Any], value: Any, size: int | None, loc: tuple[str | int, ...]
) -> None:
    """The field's bounds, in pydantic's words."""
    if size is not None:
        if "min_length" in cons and size < cons["min_length"]:
            raise LiteError(loc, f"should have at least {cons['min_length']} item(s)")
        if "max_length" in cons and size > cons["max_length"]:
            raise LiteError(loc, f"should have at most {cons['max_length']} item(s)")
    if "pattern" in cons and not cons["pattern"].search(value):
        raise LiteError(loc, f"String should match pattern '{cons['pattern'].pattern}'")
    if "ge" in cons and value < cons["ge"]:
        raise LiteError(loc, f"Input should be greater than or equal to {cons['ge']}")
    if "le" in cons and value > cons["le"]:
        raise LiteError(loc, f"Input should be less than or equal to {cons['le']}")
    if "gt" in cons and value <= cons["gt"]:
        raise LiteError(loc, f"Input should be greater than {cons['gt']}")
    if "lt" in cons and value >= cons["lt"]:
        raise LiteError(loc, f"Input should be less than {cons['lt']}")


_KINDS: dict[str, Callable[[Node, Any, tuple[str | int, ...]], Any]] = {
    "str": _str,
    "int": _int,
    "bool": _bool,
    "decimal": _decimal,
    "lit": _literal,
    "opt": _optional,
    "list": _list,
    "dict": _dict,
    "model": _model,
    "union": _union,
    "after": _after,
    "before": _before,
}
