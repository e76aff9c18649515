"""The normalized run model every evidence adapter maps into, and the registry of adapters.

Rules never read a tool's file: they read a :class:`RunData`, whose units are fixed (per-request
arrays in seconds, latency statistics in milliseconds, throughputs per second, counts as
integers), so that a seconds-keyed statistic of one tool and a millisecond key of another mean the
same thing by the time a rule sees them. What an adapter could not map is listed in
``RunData.unmapped`` and travels into the receipt: a field that was dropped silently would be a
claim nobody can check.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from k3kit._registry import Registry
from k3kit.errors import K3kitError
from k3kit.models import EvidenceLevel

METRICS = ("ttft", "tpot", "itl", "e2el")
# No benchmark figure (seconds, tokens, counts, perf_counter stamps) comes near this; bigger values
# would only overflow the auditor's sums.
MAX_MAGNITUDE = 1e15
MAX_UNMAPPED = 64


@dataclass(frozen=True)
class Request:
    """One timed request; ``error`` is ``None`` when the file does not say (older versions).

    ``latency_s`` is the tool's own end-to-end latency when the file has one; rules that need it
    for a file without ``latencies`` use :attr:`e2e_s`, which rebuilds it from TTFT and the
    per-chunk gaps (vLLM's E2E is the last chunk's arrival, so TTFT + sum(ITL) is the same number).
    """

    output_len: int
    ttft_s: float
    itl_s: tuple[float, ...]
    input_len: int | None = None
    latency_s: float | None = None
    start_s: float | None = None
    error: str | None = None

    @property
    def success(self) -> bool:
        """vLLM writes an empty error for a success; without errors, no tokens means failure."""
        return self.error == "" if self.error is not None else self.output_len > 0

    @property
    def e2e_s(self) -> float:
        return self.latency_s if self.latency_s is not None else self.ttft_s + sum(self.itl_s)


@dataclass
class RunData:
    """One benchmark run, whatever tool measured it.

    ``values``: scalar facts under vLLM's names (``duration`` s, ``completed``, ``failed``,
    ``total_output_tokens``, ``request_throughput`` req/s, ``output_throughput`` tok/s, ...).
    ``stats``: ``{metric: {"mean"|"median"|"std"|"pNN": milliseconds}}`` for ttft/tpot/itl/e2el.
    ``token_counter``: None when token counts are the model's own (server usage, or the served
    model's tokenizer); else the fixed client tokenizer the tool counted with, whose counts a
    length declared in the model's tokens cannot be held to exactly (llmperf: a Llama tokenizer
    whatever the model).
    """

    source: str
    tool: str
    values: dict[str, float | int | str | None]
    stats: dict[str, dict[str, float]]
    requests: list[Request] | None
    latencies: list[float] | None
    notes: list[str] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    record: int | None = None
    token_counter: str | None = None

    @property
    def level(self) -> EvidenceLevel:
        return "raw" if self.requests is not None else "summary"


_FLOAT_ONLY = frozenset({float})


class Reader:
    """Typed access to one record of a tool's output; every complaint names the file and key."""

    def __init__(self, obj: dict[str, Any], source: str, error: type[K3kitError], code: str):
        self.obj, self.source, self.error, self.code = obj, source, error, code
        self.used: set[str] = set()

    def fail(self, key: str, what: str) -> K3kitError:
        return self.error(f"{self.source}: {key}: {what}", code=self.code)

    def number(self, key: str, value: Any) -> float | int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"expected a number, got {type(value).__name__}")
        if not abs(value) <= MAX_MAGNITUDE:  # also refuses NaN, whatever let it through
            raise self.fail(key, f"{value!r} is outside +/-{MAX_MAGNITUDE:g}")
        return value

    def _bounded(self, key: str, floats: list[float]) -> None:
        """:meth:`number`'s bound for a float-only array, in C: the largest magnitude, and no NaN
        (which ``max`` would pass over)."""
        if floats and (not max(map(abs, floats)) <= MAX_MAGNITUDE or any(map(math.isnan, floats))):
            raise self.fail(key, f"a value is outside +/-{MAX_MAGNITUDE:g}")

    def count(self, key: str, value: Any) -> int:
        if isinstance(value, float) and value.is_integer() and value >= 0:
            return int(value)  # llmperf writes some counts as 150.0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(key, f"expected a non-negative integer, got {value!r}")
        return value

    def get(self, key: str) -> Any:
        self.used.add(key)
        return self.obj.get(key)

    def opt_number(self, key: str) -> float | int | None:
        value = self.get(key)
        return None if value is None else self.number(key, value)

    def opt_count(self, key: str) -> int | None:
        value = self.get(key)
        return None if value is None else self.count(key, value)

    def text(self, key: str, value: Any) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {type(value).__name__}")
        return value

    def array(self, key: str, kind: str) -> list[Any] | None:
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.fail(key, "expected an array")
        if kind == "count":
            return [self.count(key, v) for v in value]
        if kind == "number":
            if set(map(type, value)) <= _FLOAT_ONLY:  # the common case, checked in bulk
                self._bounded(key, value)
                return list(value)
            return [float(self.number(key, v)) for v in value]
        if kind == "numbers":
            out = []
            for item in value:
                if not isinstance(item, list):
                    raise self.fail(key, "expected an array of arrays")
                # The common case, checked in bulk: one C pass over the item's types (a Python
                # test per value cost a second on 10,000 requests' 1.3 million chunk gaps).
                if set(map(type, item)) <= _FLOAT_ONLY:
                    self._bounded(key, item)
                    out.append(tuple(item))
                else:
                    out.append(tuple(float(self.number(key, v)) for v in item))
            return out
        return [self.text(key, v) for v in value]

    def unmapped(self) -> list[str]:
        """Keys of this record that no part of the adapter read, in file order."""
        left = [k for k in self.obj if k not in self.used]
        if len(left) > MAX_UNMAPPED:
            return [*left[:MAX_UNMAPPED], f"... and {len(left) - MAX_UNMAPPED} more"]
        return left


@dataclass(frozen=True)
class Document:
    """A parsed evidence file: one record (JSON) or several (JSON Lines, GuideLLM benchmarks)."""

    source: str
    records: list[dict[str, Any]]
    infinity: bool  # the non-standard constant Infinity occurred (SGLang writes it)
    error: type[K3kitError]
    code: str

    def fail(self, what: str) -> K3kitError:
        return self.error(f"{self.source}: {what}", code=self.code)

    def one(self, record: int | None, what: str = "record") -> tuple[dict[str, Any], int | None]:
        """The record a run cites: the only one, or the one ``evidence_record`` names."""
        if record is None:
            if len(self.records) != 1:
                raise self.fail(
                    f"{len(self.records)} {what}s in one file: name one with evidence_record "
                    f"(0..{len(self.records) - 1})"
                )
            return self.records[0], None
        if not 0 <= record < len(self.records):
            raise self.fail(f"evidence_record {record} is not one of 0..{len(self.records) - 1}")
        return self.records[record], record


ParseFn = Callable[[Document, int | None], RunData]


@dataclass(frozen=True)
class Adapter:
    """One benchmark tool: how to recognise its output and how to map it."""

    tool: str
    detect: Callable[[dict[str, Any]], bool]
    parse: ParseFn
    priority: int = 50  # lower is tried first: specific formats before vLLM's generic keys


#: Every benchmark tool whose output k3kit reads, by the tool's name (a claims file's
#: ``evidence_tool``). ``k3kit.models.evidence.EvidenceTool`` is tested against it.
ADAPTERS: Registry[Adapter] = Registry("evidence adapter", code="EVIDENCE_MALFORMED")


def adapter(
    tool: str, detect: Callable[[dict[str, Any]], bool], priority: int = 50
) -> Callable[[ParseFn], ParseFn]:
    """Register a parse function as the adapter for ``tool`` (keyed by the tool's name)."""
    return ADAPTERS.decorator(tool, lambda func: Adapter(tool, detect, func, priority))
