"""Benchmark evidence: the JSON that ``vllm bench serve --save-result`` writes, read tolerantly.

Tolerant of *versions* (the older ``benchmark_serving.py`` spelt ``"request_goodput:"`` and lacked
``failed``, ``latencies`` and ``start_times``; statistics exist only for the metrics and percentiles
that were selected), strict about *bytes*: one JSON document, no duplicate keys, no NaN, every
number where a number belongs, per-request arrays of one length. What is missing is recorded in
``notes`` so the auditor can say "not checkable" instead of guessing.

Units are the tool's: per-request arrays in seconds, statistics in milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from k3kit._canonical import measurement_loads
from k3kit.errors import InputError, K3kitError
from k3kit.models import EvidenceLevel, EvidenceSummary, LatencyStats, load

MAX_EVIDENCE_BYTES = 256 * 1024 * 1024
METRICS = ("ttft", "tpot", "itl", "e2el")
_STAT_KEY = re.compile(r"^(mean|median|std|p(\d{1,2}(?:\.\d{1,4})?|100))_(ttft|tpot|itl|e2el)_ms$")
# Present in current vLLM; absent from older benchmark_serving.py results.
_MODERN_KEYS = ("failed", "latencies", "max_output_tokens_per_s", "max_concurrent_requests")
# Written only with --save-detailed; without them the file is summary evidence.
_RAW_KEYS = ("output_lens", "ttfts", "itls")
_FLOAT_FIELDS = (
    "duration",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "spec_decode_acceptance_length",
    "burstiness",
)
_INT_FIELDS = (
    "num_prompts",
    "max_concurrency",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "max_concurrent_requests",
)


@dataclass(frozen=True)
class Request:
    """One timed request; ``error`` is ``None`` when the file does not say (older versions)."""

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


@dataclass(frozen=True)
class VllmResult:
    source: str
    values: dict[str, float | int | str | None]
    stats: dict[str, dict[str, float]]
    requests: list[Request] | None
    latencies: list[float] | None
    notes: list[str] = field(default_factory=list)

    @property
    def level(self) -> EvidenceLevel:
        return "raw" if self.requests is not None else "summary"


# No benchmark figure (seconds, tokens, counts, perf_counter stamps) comes near this; bigger values
# would only overflow the auditor's sums.
MAX_MAGNITUDE = 1e15


class _Reader:
    def __init__(self, obj: dict[str, Any], source: str, error: type[K3kitError], code: str):
        self.obj, self.source, self.error, self.code = obj, source, error, code

    def fail(self, key: str, what: str) -> K3kitError:
        return self.error(f"{self.source}: {key}: {what}", code=self.code)

    def number(self, key: str, value: Any) -> float | int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"expected a number, got {type(value).__name__}")
        if not abs(value) <= MAX_MAGNITUDE:  # also refuses NaN, whatever let it through
            raise self.fail(key, f"{value!r} is outside +/-{MAX_MAGNITUDE:g}")
        return value

    def count(self, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(key, f"expected a non-negative integer, got {value!r}")
        return value

    def array(self, key: str, kind: str) -> list[Any] | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.fail(key, "expected an array")
        if kind == "count":
            return [self.count(key, v) for v in value]
        if kind == "number":
            return [float(self.number(key, v)) for v in value]
        if kind == "numbers":
            out = []
            for item in value:
                if not isinstance(item, list):
                    raise self.fail(key, "expected an array of arrays")
                out.append(tuple(float(self.number(key, v)) for v in item))
            return out
        return [self.text(key, v) for v in value]

    def text(self, key: str, value: Any) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {type(value).__name__}")
        return value


def _values(r: _Reader, notes: list[str]) -> dict[str, float | int | str | None]:
    obj = r.obj
    out: dict[str, float | int | str | None] = {}
    for key in _FLOAT_FIELDS:
        value = obj.get(key)
        out[key] = None if value is None else r.number(key, value)
    for key in _INT_FIELDS:
        value = obj.get(key)
        out[key] = None if value is None else r.count(key, value)
    goodput = obj.get("request_goodput")
    if "request_goodput:" in obj:
        notes.append('legacy key "request_goodput:" (older benchmark_serving.py)')
        goodput = obj["request_goodput:"] if goodput is None else goodput
    out["request_goodput"] = None if goodput is None else r.number("request_goodput", goodput)
    rate = obj.get("request_rate")
    if rate is not None and rate != "inf":
        rate = repr(float(r.number("request_rate", rate)))
    out["request_rate"] = rate
    for key in ("date", "model_id", "backend"):
        value = obj.get(key)
        out[key] = None if value is None else r.text(key, value)[:500]
    for key in _MODERN_KEYS:
        if key not in obj:
            notes.append(f'no "{key}" field (older vLLM benchmark version)')
    return out


def _stats(r: _Reader) -> dict[str, dict[str, float]]:
    stats: dict[str, dict[str, float]] = {m: {} for m in METRICS}
    for key, value in r.obj.items():
        match = _STAT_KEY.match(key)
        if match is None or value is None:
            continue
        kind, pct, metric = match.group(1), match.group(2), match.group(3)
        stats[metric][kind if pct is None else f"p{pct}"] = float(r.number(key, value))
    return {m: s for m, s in stats.items() if s}


def _requests(r: _Reader, notes: list[str]) -> list[Request] | None:
    if not all(key in r.obj for key in _RAW_KEYS):
        notes.append("no per-request data (run without --save-detailed)")
        return None
    outs = r.array("output_lens", "count") or []
    ttfts = r.array("ttfts", "number") or []
    itls = r.array("itls", "numbers") or []
    optional = {
        "input_lens": r.array("input_lens", "count"),
        "latencies": r.array("latencies", "number"),
        "start_times": r.array("start_times", "number"),
        "errors": r.array("errors", "text"),
    }
    for key, value in optional.items():
        if value is None:
            notes.append(f'per-request "{key}" missing')
    lengths = {len(outs), len(ttfts), len(itls)} | {len(v) for v in optional.values() if v}
    if len(lengths) != 1:
        raise r.fail("per-request arrays", f"lengths differ: {sorted(lengths)}")

    def pick(key: str, i: int) -> Any:
        values = optional[key]
        return None if values is None else values[i]

    return [
        Request(
            output_len=outs[i],
            ttft_s=ttfts[i],
            itl_s=itls[i],
            input_len=pick("input_lens", i),
            latency_s=pick("latencies", i),
            start_s=pick("start_times", i),
            error=pick("errors", i),
        )
        for i in range(len(outs))
    ]


def parse_vllm_result(
    data: bytes,
    *,
    source: str,
    error: type[K3kitError] = InputError,
    code: str = "EVIDENCE_MALFORMED",
) -> VllmResult:
    """Read one ``--save-result`` file; bad bytes or a number where none belongs is an error."""
    obj = measurement_loads(
        data, source=source, max_bytes=MAX_EVIDENCE_BYTES, error=error, code=code
    )
    if not isinstance(obj, dict):
        raise error(f"{source}: not a JSON object (one run per file)", code=code)
    reader = _Reader(obj, source, error, code)
    notes: list[str] = []
    values = _values(reader, notes)
    requests = _requests(reader, notes)
    latencies = reader.array("latencies", "number")
    if values["duration"] is None or values["completed"] is None:
        raise error(f"{source}: no duration or completed: not a vllm bench serve result", code=code)
    return VllmResult(source, values, _stats(reader), requests, latencies, notes)


def _dec(value: float | int | str | None) -> Decimal | None:
    """The shortest decimal that round-trips to the same float (``repr``), never a rounding."""
    if value is None:
        return None
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def summarize(result: VllmResult) -> EvidenceSummary:
    """The tool's own numbers in the receipt's vocabulary (nothing recomputed)."""
    v = result.values
    stats = {
        f"{metric}_ms": LatencyStats(
            mean=_dec(s.get("mean")),
            median=_dec(s.get("median")),
            std=_dec(s.get("std")),
            percentiles={k[1:]: Decimal(repr(x)) for k, x in s.items() if k.startswith("p")},
        )
        for metric, s in result.stats.items()
    }
    data = {
        "notes": result.notes,
        "date": v["date"],
        "model_id": v["model_id"],
        "backend": v["backend"],
        "num_prompts": v["num_prompts"],
        "request_rate": v["request_rate"],
        "burstiness": _dec(v["burstiness"]),
        "max_concurrency": v["max_concurrency"],
        "duration_s": _dec(v["duration"]),
        "completed": v["completed"],
        "failed": v["failed"],
        "total_input_tokens": v["total_input_tokens"],
        "total_output_tokens": v["total_output_tokens"],
        "request_throughput": _dec(v["request_throughput"]),
        "request_goodput": _dec(v["request_goodput"]),
        "output_throughput": _dec(v["output_throughput"]),
        "total_token_throughput": _dec(v["total_token_throughput"]),
        "max_output_tokens_per_s": _dec(v["max_output_tokens_per_s"]),
        "max_concurrent_requests": v["max_concurrent_requests"],
        "spec_decode_acceptance_length": _dec(v["spec_decode_acceptance_length"]),
        "records": None if result.requests is None else len(result.requests),
        **stats,
    }
    return load(EvidenceSummary, data, source=result.source, code="EVIDENCE_MALFORMED")
