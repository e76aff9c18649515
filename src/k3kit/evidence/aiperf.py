"""AIPerf ``profile_export_aiperf.json`` and GenAI-Perf ``profile_export_genai_perf.json``.

Nested per-metric objects ``{unit, avg, p50, p90, p99, min, max, std}`` instead of flat keys.
``inter_token_latency`` there is ``(request_latency - ttft) / (output_tokens - 1)``, which is
vLLM's TPOT, so it is filed as TPOT; ``inter_chunk_latency`` is the gap between consecutive
streamed responses, pooled over requests (its ``count`` is the number of gaps, not of requests):
vLLM's ITL. ``request_latency`` is vLLM's E2E. Units are read from each metric's ``unit`` (ns,
us, ms, s), never assumed. System metrics with only ``avg`` become scalars. The concurrency the
tool was given is read from the run's own configuration (``input_config.loadgen.concurrency``
up to AIPerf 0.8, the ``profiling`` phase of ``input_config.phases`` from 0.10).
"""

from __future__ import annotations

import re
from typing import Any

from k3kit.evidence._base import Document, Reader, RunData, adapter

_LATENCY = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "tpot",
    "inter_chunk_latency": "itl",
    "request_latency": "e2el",
}
_SCALARS = {
    "request_throughput": "request_throughput",
    "output_token_throughput": "output_throughput",
    "total_token_throughput": "total_token_throughput",
}
# Totals and the duration: ``{unit, avg}`` blocks whose unit must be the one named here.
_TOTALS = {
    "total_output_tokens": ("total_output_tokens", ("tokens",)),
    "total_osl": ("total_output_tokens", ("tokens",)),
    "total_isl": ("total_input_tokens", ("tokens",)),
    "error_request_count": ("failed", ("requests",)),
}
_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1000.0, "sec": 1000.0}
# Throughputs are filed per second; a block in another unit is refused rather than misread.
_PER_S = ("", "requests/sec", "tokens/sec", "requests/s", "tokens/s", "req/s", "tok/s")
_PCT = re.compile(r"^p([0-9]{1,2}(?:\.[0-9]{1,4})?)$")


def _metrics(obj: dict[str, Any]) -> dict[str, Any]:
    inner = obj.get("records")
    return inner if isinstance(inner, dict) else obj


def _detect(obj: dict[str, Any]) -> bool:
    m = _metrics(obj)
    return any(isinstance(m.get(k), dict) and "unit" in m[k] for k in _LATENCY)


Values = dict[str, float | int | str | None]


@adapter("aiperf", _detect, priority=30)
def parse(doc: Document, record: int | None) -> RunData:
    obj, index = doc.one(record)
    metrics = _metrics(obj)
    outer = Reader(obj, doc.source, doc.error, doc.code)
    outer.get("records")
    notes = [
        "AIPerf/GenAI-Perf export: inter_token_latency filed as TPOT (same formula), "
        "inter_chunk_latency as ITL (gaps between streamed chunks, pooled)"
    ]
    used: set[str] = set()
    stats = _latencies(metrics, doc, used)
    values: Values = {}
    _throughputs(metrics, doc, values, used)
    _totals(metrics, doc, values, used)
    _duration(metrics, doc, values, used)
    _load_values(obj, doc, values, notes)
    _request_count(metrics, doc, values, used)
    if not stats and not values:
        raise doc.fail("no metric k3kit reads (not checked)")
    unmapped = [k for k in metrics if k not in used]
    if metrics is not obj:
        unmapped += [k for k in obj if k != "records"]
    return RunData(doc.source, "aiperf", values, stats, None, None, notes, unmapped[:64], index)


def _time_unit(r: Reader, raw: Any) -> float:
    """The factor to milliseconds of a block's own ``unit``; an unknown unit is refused rather
    than a latency misread by a factor of a thousand."""
    unit = r.text("unit", raw)
    if unit not in _TO_MS:
        raise r.fail("unit", f"unknown unit {unit!r}")
    return _TO_MS[unit]


def _latencies(
    metrics: dict[str, Any], doc: Document, used: set[str]
) -> dict[str, dict[str, float]]:
    """Each latency block's mean, std and percentiles in ms, filed under vLLM's metric names."""
    stats: dict[str, dict[str, float]] = {}
    for name, metric in _LATENCY.items():
        block = metrics.get(name)
        if not isinstance(block, dict):
            continue
        used.add(name)
        r = Reader(block, f"{doc.source}: {name}", doc.error, doc.code)
        to_ms = _time_unit(r, r.get("unit"))
        for key, value in block.items():
            kind = {"avg": "mean", "std": "std"}.get(key)
            if kind is None and _PCT.fullmatch(key):
                kind = key
            if kind is not None and value is not None:
                stats.setdefault(metric, {})[kind] = float(r.number(key, value)) * to_ms
    return stats


def _throughputs(metrics: dict[str, Any], doc: Document, values: Values, used: set[str]) -> None:
    """The per-second throughputs (``avg`` of a block in a per-second unit)."""
    for name, key in _SCALARS.items():
        block = metrics.get(name)
        if isinstance(block, dict) and block.get("avg") is not None:
            used.add(name)
            r = Reader(block, f"{doc.source}: {name}", doc.error, doc.code)
            unit = r.text("unit", block.get("unit"))
            if unit not in _PER_S:
                raise r.fail("unit", f"expected a per-second unit, got {unit!r}")
            values[key] = r.number("avg", block["avg"])


def _duration(metrics: dict[str, Any], doc: Document, values: Values, used: set[str]) -> None:
    """The benchmark's duration in seconds, from a block in any time unit."""
    duration = metrics.get("benchmark_duration")
    if isinstance(duration, dict) and duration.get("avg") is not None:
        used.add("benchmark_duration")
        r = Reader(duration, f"{doc.source}: benchmark_duration", doc.error, doc.code)
        to_ms = _time_unit(r, duration.get("unit"))
        values["duration"] = float(r.number("avg", duration["avg"])) * to_ms / 1000


def _load_values(obj: dict[str, Any], doc: Document, values: Values, notes: list[str]) -> None:
    """The concurrency and request rate the run was configured with (:func:`_load`), noted as
    read from the configuration rather than measured."""
    concurrency, rate = _load(obj.get("input_config"), doc)
    if concurrency is not None:
        values["max_concurrency"] = concurrency
        notes.append("concurrency read from the run's input_config")
    if rate is not None:
        values["request_rate"] = repr(rate)  # as the vLLM adapter files it (a string, "inf" too)
        notes.append("request rate read from the run's profiling phase")


def _request_count(metrics: dict[str, Any], doc: Document, values: Values, used: set[str]) -> None:
    """The completed requests, a whole number in an ``avg`` block."""
    count = metrics.get("request_count")
    if isinstance(count, dict) and count.get("avg") is not None:
        used.add("request_count")
        values["completed"] = Reader(count, doc.source, doc.error, doc.code).count(
            "request_count", count["avg"]
        )


def _totals(
    metrics: dict[str, Any],
    doc: Document,
    values: Values,
    used: set[str],
) -> None:
    """Token totals and the failure count, each a ``{unit, avg}`` block with a whole number."""
    for name, (key, units) in _TOTALS.items():
        block = metrics.get(name)
        if not isinstance(block, dict) or block.get("avg") is None:
            continue
        used.add(name)
        r = Reader(block, f"{doc.source}: {name}", doc.error, doc.code)
        unit = r.text("unit", block.get("unit"))
        if unit not in units:
            raise r.fail("unit", f"expected {units[0]!r}, got {unit!r}")
        values[key] = r.count("avg", block["avg"])


def _load(config: Any, doc: Document) -> tuple[int | None, float | None]:
    """The concurrency and the request rate the profiling run was given (None: not said).

    AIPerf up to 0.8 writes ``input_config.loadgen.concurrency``; 0.10 writes ``phases``, whose
    ``profiling`` phase has ``concurrency`` (type ``concurrency``) or ``rate`` (type
    ``poisson``/``constant``: the offered requests per second).
    """
    if not isinstance(config, dict):
        return None, None
    r = Reader(config, f"{doc.source}: input_config", doc.error, doc.code)
    loadgen = config.get("loadgen")
    if isinstance(loadgen, dict) and loadgen.get("concurrency") is not None:
        return r.count("loadgen.concurrency", loadgen["concurrency"]), None
    phases = config.get("phases")
    for phase in phases if isinstance(phases, list) else []:
        if isinstance(phase, dict) and phase.get("name") == "profiling":
            value, rate = phase.get("concurrency"), phase.get("rate")
            return (
                None if value is None else r.count("phases.concurrency", value),
                None if rate is None else float(r.number("phases.rate", rate)),
            )
    return None, None
