"""One strict parser per kind of value that arrives as text: timestamps, integers, patterns.

Why one module: the same weakness lived in many places. ``\\d`` in a Python or pydantic pattern
matches every Unicode decimal digit, and ``int()`` converts them, so ``"٢٠٢٠-01-01T00:00:00Z"``
passed as a timestamp and, compared as a string, sorted after every ASCII year: a root written to
expire in 2020 never expired. ``int("²")`` raises after ``"²".isdigit()`` said yes. A date at the
end of year 9999 overflowed ``datetime`` arithmetic, and a user's regular expression could fail to
compile or backtrack for ever. Each parser here refuses such text with a ``ValueError`` whose
message names the rule; callers turn it into their own registered error code. This module sits at
the bottom layer (no k3kit imports), so documents' models use it too.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeGuard

# The one form k3kit writes and signs: RFC 3339, UTC, whole seconds. Fixed width and ASCII, so
# two such strings sort as their instants do (the ledger's SQL relies on that).
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# The same instant for a file or folder name: no ``:`` (refused on some filesystems), still
# fixed width, so names sort as their instants do.
FILE_STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
TIMESTAMP_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))",
    re.ASCII,
)
_ASCII_INT = re.compile(r"-?[0-9]{1,19}", re.ASCII)
_ASCII_DECIMAL = re.compile(r"[0-9]{1,15}(\.[0-9]{1,9})?", re.ASCII)
MAX_PATTERN_CHARS = 256
MAX_PATTERN_SUBJECT = 256
MAX_PATTERN_REPEATS = 3
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


def parse_timestamp(text: object) -> datetime:
    """An RFC 3339 date-time (ASCII digits, ``Z`` or a ``±HH:MM`` offset) as an aware UTC
    datetime. Refused: anything else, a date that does not exist, a leap second (``:60``, which
    ``datetime`` cannot hold), an offset of 24 hours or more."""
    match = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp like 2026-01-31T12:00:00Z")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    frac = match.group(7)
    try:
        value = datetime(
            year, month, day, hour, minute, second,
            int((frac[1:] + "000000")[:6]) if frac else 0,
            tzinfo=UTC,
        )  # fmt: skip
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a real date and time: {exc}") from None
    if match.group(8):
        return value
    oh, om = int(match.group(10)), int(match.group(11))
    if oh > 23 or om > 59:
        raise ValueError(f"{text!r} has an impossible UTC offset")
    offset = timedelta(hours=oh, minutes=om) * (1 if match.group(9) == "+" else -1)
    try:
        return value - offset
    except OverflowError:
        raise ValueError(f"{text!r} is outside years 1-9999 in UTC") from None


def format_timestamp(value: datetime) -> str:
    """The canonical k3kit form of an aware datetime (UTC, whole seconds).

    Written field by field, not with ``strftime``: glibc's ``%Y`` does not pad a year before
    1000 (``999-01-01T00:00:00Z``), a form the parser then refused, so a valid
    ``--valid-from 0999-...`` failed naming a timestamp the user never typed and, written
    anywhere, would have broken the fixed width the ledger's string order relies on.
    """
    v = value.astimezone(UTC)
    return f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}Z"


def utc_timestamp(seconds: float | None = None) -> str:
    """The canonical k3kit form of ``seconds`` since the epoch (the clock now when None): the one
    place a timestamp is written, so every document and state file spells an instant one way."""
    return time.strftime(TIMESTAMP_FORMAT, time.gmtime(seconds))


def utc_file_stamp(seconds: float | None = None) -> str:
    """The instant ``seconds`` (now when None) as a name part, e.g. ``20260101T000000Z``: the one
    place a timestamp is written into a file or folder name."""
    return time.strftime(FILE_STAMP_FORMAT, time.gmtime(seconds))


def canonical_timestamp(text: object) -> str:
    """``text`` if it is already the canonical form (what a signed document must carry: one
    instant, one spelling); otherwise ``ValueError``."""
    value = parse_timestamp(text)
    if format_timestamp(value) != text:
        raise ValueError(f"{text!r} is not in the form YYYY-MM-DDTHH:MM:SSZ (UTC)")
    return text


def normalise_timestamp(text: object) -> str:
    """Any RFC 3339 timestamp a person typed, rewritten to the canonical form."""
    value = parse_timestamp(text)
    if value.microsecond:
        raise ValueError(f"{text!r}: k3kit timestamps are whole seconds")
    return format_timestamp(value)


def add_days(text: str, days: int) -> str:
    """The canonical timestamp ``days`` after ``text``; refused past the end of year 9999."""
    try:
        return format_timestamp(parse_timestamp(text) + timedelta(days=days))
    except OverflowError:
        raise ValueError(f"{days} days after {text} is past the year 9999") from None


def is_lower_hex(text: object, digits: int) -> TypeGuard[str]:
    """``text`` is exactly ``digits`` lower-case hex digits: a commit (40), a sha256 or a key (64),
    a signature (128). The one test for every such field from outside (hub answers, locks, roots,
    the verification cache), so each has one spelling: no upper case, no whitespace, no final
    newline (a pattern's ``$`` passed one with ``match``)."""
    return isinstance(text, str) and len(text) == digits and not text.strip("0123456789abcdef")


def ascii_int(text: object, *, lo: int, hi: int) -> int:
    """A base-10 integer of ASCII digits (no ``+``, spaces, ``_`` or other scripts' digits)
    within ``[lo, hi]``."""
    if not isinstance(text, str) or not _ASCII_INT.fullmatch(text):
        raise ValueError(f"{text!r} is not a whole number written with the digits 0-9")
    value = int(text)
    if not lo <= value <= hi:
        raise ValueError(f"{value} is outside the range {lo}..{hi}")
    return value


def _walk(items: Iterable[object]) -> Iterable[tuple[str, object]]:
    """(opcode name, argument) of every node of a parsed pattern, depth first."""
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            continue
        op, arg = str(item[0]), item[1]
        yield op, arg
        for part in arg if isinstance(arg, (tuple, list)) else ():
            if isinstance(part, (tuple, list)):
                yield from _walk(part if isinstance(part, list) else [part])
            elif hasattr(part, "data"):  # a nested SubPattern
                yield from _walk(part.data)


def _shape_problem(pattern: str) -> str | None:
    """Why a pattern could backtrack for ever, or None. Python's engine backtracks, so the
    shapes that explode are refused up front: a repetition inside a repetition (``(a+)+``), an
    alternation under one (``(a|a)*``), back-references, and more than a few repetitions in all
    (``.*.*.*.*`` is polynomial of that degree)."""
    parser: Any = importlib.import_module("re._parser")  # CPython's own pattern parser
    nodes = list(_walk(parser.parse(pattern).data))
    if any(op in ("GROUPREF", "GROUPREF_EXISTS") for op, _ in nodes):
        return "back-references are not allowed"
    repeats = [arg for op, arg in nodes if op in _REPEATS]
    if len(repeats) > MAX_PATTERN_REPEATS:
        return f"more than {MAX_PATTERN_REPEATS} repetitions"
    for arg in repeats:
        body = arg[2] if isinstance(arg, tuple) and len(arg) == 3 else None
        inner = list(_walk(getattr(body, "data", [])))
        if any(op in _REPEATS or op == "BRANCH" for op, _ in inner):
            return "a repetition of a repetition or of an alternation can backtrack for ever"
    return None


def ascii_decimal(text: object, *, lo: float, hi: float) -> float:
    """A non-negative decimal such as ``2.5`` written with ASCII digits, within ``[lo, hi]``.
    ``float()`` also takes ``nan`` (which every range check lets through, since each comparison
    with it is false), ``1_0``, ``１.５`` and exponents; none of them is a figure a person types."""
    if not isinstance(text, str) or not _ASCII_DECIMAL.fullmatch(text):
        raise ValueError(f"{text!r} is not a decimal number written with the digits 0-9")
    value = float(text)
    if not lo <= value <= hi:
        raise ValueError(f"{text} is outside the range {lo:g}..{hi:g}")
    return value


def compile_pattern(pattern: object, *, max_chars: int = MAX_PATTERN_CHARS) -> re.Pattern[str]:
    """A regular expression from a document, bounded: at most ``max_chars`` characters, no
    shape that backtracks exponentially, and compiled here, so a bad one is an input error
    instead of a crash or a hang. Apply it with :func:`pattern_matches`, which caps the subject
    too, so the cost of a match is bounded by both sizes."""
    if not isinstance(pattern, str) or not pattern or len(pattern) > max_chars:
        raise ValueError(f"a pattern must be 1-{max_chars} characters")
    try:
        compiled = re.compile(pattern)
        problem = _shape_problem(pattern)
    except (re.error, RecursionError, OverflowError, ValueError) as exc:
        raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}") from None
    if problem:
        raise ValueError(f"pattern {pattern!r} refused: {problem}")
    return compiled


def pattern_matches(compiled: re.Pattern[str], subject: str, *, whole: bool = False) -> bool:
    """Whether the pattern matches the subject cut to ``MAX_PATTERN_SUBJECT`` characters: the
    whole subject when ``whole`` (anchored both ends), else anywhere in it (a GPU's name "must
    contain" the kit's pattern, as docs/preflight.md has always said)."""
    capped = subject[:MAX_PATTERN_SUBJECT]
    found = compiled.fullmatch(capped) if whole else compiled.search(capped)
    return found is not None
