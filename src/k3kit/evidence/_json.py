"""Reading a tool's bytes: one strict JSON document, or JSON Lines with SGLang's ``Infinity``.

Strict first (duplicate keys, NaN, overflowing numbers, deep nesting and oversize input refused,
as for every measurement file). Only when that fails is the file read as JSON Lines, one object
per line, the format ``sglang.bench_serving`` appends to; there the bare constant ``Infinity``
(Python's ``json.dumps`` of ``float("inf")``, written for ``--request-rate inf``) is accepted and
reported, while ``NaN`` and ``-Infinity`` stay refused: no tool means anything by them.
"""

from __future__ import annotations

import json
import math
from typing import Any

from k3kit.errors import K3kitError
from k3kit.evidence._base import Document

MAX_EVIDENCE_BYTES = 256 * 1024 * 1024
# Real reports nest deeper than k3kit's own documents: GuideLLM's ``benchmarks.json`` reaches 10
# levels (report > benchmarks > [i] > requests > successful > [j] > info > timings ...), AIPerf's
# export 5. 32 keeps a bound (the walk below is iterative, and json's own recursion is caught) with
# room for the next tool version.
MAX_DEPTH = 32


class _Bad(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Bad(f"duplicate key {key!r}")
        out[key] = value
    return out


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Bad(f"number {text} does not fit a 64-bit float")
    return value


_CONTAINERS = frozenset({dict, list})


def _depth(obj: Any, finite: bool = True) -> None:
    """Depth cap, and every float finite (1e999 parses to inf without a per-float callback).

    Each container's values are typed in one C pass (``set(map(type, ...))``): a 10,000-request
    vLLM file holds ~1.3 million chunk gaps in 10,000 float-only arrays, and a Python test per
    value made this walk cost more than the parse itself."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _Bad(f"nesting deeper than {MAX_DEPTH}")
        if type(node) not in _CONTAINERS:
            continue
        values = list(node.values()) if type(node) is dict else node
        kinds = set(map(type, values))
        if finite and float in kinds:
            floats = values if len(kinds) == 1 else [v for v in values if type(v) is float]
            if not math.isfinite(max(map(abs, floats))):
                raise _Bad("a number does not fit a 64-bit float")
        if kinds & _CONTAINERS:
            stack.extend([(v, depth + 1) for v in values if type(v) in _CONTAINERS])


def _strict(text: str) -> Any:
    """One document, as strict as ``measurement_loads`` but without a Python call per float."""
    obj = json.loads(text, object_pairs_hook=_pairs, parse_constant=_refuse)
    _depth(obj)
    return obj


def _refuse(name: str) -> float:
    raise _Bad(f"{name} is not a number")


def _lines(text: str) -> tuple[list[dict[str, Any]], bool]:
    seen = {"inf": False}

    def constant(name: str) -> float:
        if name != "Infinity":
            raise _Bad(f"{name} is not a number")
        seen["inf"] = True
        return math.inf

    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(
                line, object_pairs_hook=_pairs, parse_constant=constant, parse_float=_finite
            )
            _depth(obj, finite=False)  # _finite saw every number; only Infinity got through
        except (json.JSONDecodeError, _Bad, RecursionError) as exc:
            raise _Bad(f"line {number}: {exc}") from exc
        if not isinstance(obj, dict):
            raise _Bad(f"line {number}: not a JSON object")
        records.append(obj)
    return records, seen["inf"]


def load_document(data: bytes, *, source: str, error: type[K3kitError], code: str) -> Document:
    """Parse an evidence file into its records (see the module docstring for what is refused)."""
    if len(data) > MAX_EVIDENCE_BYTES:
        raise error(
            f"{source}: {len(data)} bytes exceeds the {MAX_EVIDENCE_BYTES}-byte limit", code=code
        )
    try:
        try:
            obj = _strict(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, _Bad, RecursionError) as exc:
            raise error(f"{source}: not strict JSON: {exc}", code=code) from exc
    except K3kitError as strict:
        if len(data) > MAX_EVIDENCE_BYTES:
            raise
        try:
            records, infinity = _lines(data.decode("utf-8"))
        except (UnicodeDecodeError, _Bad):
            raise strict from None
        if len(records) < 2 and not infinity:
            raise
        return Document(source, records, infinity, error, code)
    if isinstance(obj, list) and obj and all(isinstance(x, dict) for x in obj):
        return Document(source, obj, False, error, code)  # llmperf's per-request file
    if not isinstance(obj, dict):
        raise error(f"{source}: not a JSON object (one run per file)", code=code)
    return Document(source, [obj], False, error, code)
