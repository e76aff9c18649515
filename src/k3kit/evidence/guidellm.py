"""GuideLLM ``benchmarks.json`` (``GenerativeBenchmarksReport``): one report, several benchmarks.

Each benchmark's metrics are status distributions (``successful``/``errored``/``incomplete``/
``total``), each ``{mean, median, std_dev, count, percentiles{p50, p90, p99, ...}}``; only the
``successful`` distribution is mapped, as vLLM's statistics are over successes. GuideLLM's
``inter_token_latency_ms`` is vLLM's TPOT; its ``time_to_first_token_ms`` is TTFT;
``request_latency`` is E2E in **seconds**. Its percentiles are nearest-rank (no interpolation), so
the receipt's definitions should say ``percentile_method = "nearest-rank"``. A run cites one
benchmark with ``evidence_record``.

What real reports (GuideLLM 0.5, ``tests/data/real``) showed, and how it is mapped:

* the statistics cover the requests of the measurement window (warmup and cooldown excluded):
  ``metrics.request_totals`` counts them (``scheduler_metrics.requests_made`` counts every request
  sent, and is only the fallback); ``duration`` is that window. Requests straddle its edges
  (19 requests of 39.6 s counted in a 720 s window at concurrency 1), so completed / duration
  is no Little's-law rate for GuideLLM and no rule uses it as one;
* ``requests_per_second`` and ``output_tokens_per_second`` are means of a rate *time series*
  (19 requests in 720 s reported as 0.025 req/s), not completed / duration as vLLM's are: they
  are left unmapped (listed) instead of being filed under vLLM's names; the token totals
  (``total_sum`` of the token counts) and the duration are mapped, so rules recompute vLLM's
  throughputs themselves;
* ``inter_token_latency_ms`` is per request (latency - TTFT) / (tokens - 1), but its
  distribution is weighted by tokens (``count`` = sum of tokens - 1). Only when every output has
  the same length (``output_token_count`` std 0) is that vLLM's per-request TPOT distribution;
  otherwise it is left unmapped;
* the concurrency of a ``synchronous`` or ``concurrent`` strategy is
  ``config.strategy.max_concurrency``.
"""

from __future__ import annotations

from typing import Any

from k3kit.evidence._base import Document, Reader, RunData, adapter

_LATENCY = {
    "time_to_first_token_ms": ("ttft", 1.0),
    "inter_token_latency_ms": ("tpot", 1.0),
    "request_latency": ("e2el", 1000.0),
}
# GuideLLM's ``Percentiles`` fields, by name: a pattern read "p100" as p10 (three digits were
# taken as tenths), so a forged key could overwrite a real percentile.
_PCTS = {
    "p001": "p0.1",
    "p01": "p1",
    "p05": "p5",
    "p10": "p10",
    "p25": "p25",
    "p50": "p50",
    "p75": "p75",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
    "p999": "p99.9",
}


def _detect(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("benchmarks"), list) and "metadata" in obj


def _success(block: Any) -> dict[str, Any] | None:
    inner = block.get("successful") if isinstance(block, dict) else None
    return {str(k): v for k, v in inner.items()} if isinstance(inner, dict) else None


@adapter("guidellm", _detect, priority=10)
def parse(doc: Document, record: int | None) -> RunData:
    bench, index, metrics = _benchmark(doc, record)
    used: set[str] = set()
    stats = _latencies(metrics, doc, used)
    values: dict[str, float | int | str | None] = {}
    notes = ["GuideLLM: percentiles are nearest-rank; rates are time-series means (unmapped)"]
    if "tpot" in stats and not _fixed_outputs(metrics, doc):
        del stats["tpot"]
        used.discard("inter_token_latency_ms")
        notes.append("inter_token_latency_ms is token-weighted over unequal outputs: not TPOT")
    _counts(bench, metrics, doc, values, used)
    _concurrency(bench, doc, values)
    if not stats and not values:
        raise doc.fail(f"benchmarks[{index or 0}]: no metric k3kit reads (not checked)")
    unmapped = [k for k in metrics if k not in used]
    return RunData(doc.source, "guidellm", values, stats, None, None, notes, unmapped[:64], index)


def _benchmark(
    doc: Document, record: int | None
) -> tuple[dict[str, Any], int | None, dict[str, Any]]:
    """The cited benchmark of the report, its index and its metrics object; a report whose
    shape is not GuideLLM's is refused here, before any number is read."""
    report, _ = doc.one(None, "report")
    benches = report.get("benchmarks")  # absent when the tool was named, not detected
    if not isinstance(benches, list) or not all(isinstance(b, dict) for b in benches):
        raise doc.fail("benchmarks: expected an array of objects")
    bench, index = Document(doc.source, benches, False, doc.error, doc.code).one(
        record, "benchmark"
    )
    metrics = bench.get("metrics")
    if not isinstance(metrics, dict):
        raise doc.fail(f"benchmarks[{index or 0}].metrics: expected an object")
    return bench, index, metrics


def _latencies(
    metrics: dict[str, Any], doc: Document, used: set[str]
) -> dict[str, dict[str, float]]:
    """The successful distribution of each latency metric, in ms under vLLM's names."""
    stats: dict[str, dict[str, float]] = {}
    for name, (metric, scale) in _LATENCY.items():
        dist = _success(metrics.get(name))
        if dist is None:
            continue
        used.add(name)
        r = Reader(dist, f"{doc.source}: {name}", doc.error, doc.code)
        for key, kind in (("mean", "mean"), ("median", "median"), ("std_dev", "std")):
            value = r.opt_number(key)
            if value is not None:
                stats.setdefault(metric, {})[kind] = float(value) * scale
        for pct_kind, value in _percentiles(r, dist):
            stats.setdefault(metric, {})[pct_kind] = value * scale
    return stats


def _percentiles(r: Reader, dist: dict[str, Any]) -> list[tuple[str, float]]:
    """GuideLLM's named percentile fields (:data:`_PCTS`), in the file's order; any other key
    is ignored, so a forged key cannot overwrite a real percentile."""
    pcts = dist.get("percentiles")
    if pcts is not None and not isinstance(pcts, dict):
        raise r.fail("percentiles", "expected an object")
    found = []
    for key, value in (pcts or {}).items():
        pct_kind = _PCTS.get(key)
        if pct_kind is not None and value is not None:
            found.append((pct_kind, float(r.number(key, value))))
    return found


def _concurrency(
    bench: dict[str, Any], doc: Document, values: dict[str, float | int | str | None]
) -> None:
    """The concurrency of a ``synchronous`` or ``concurrent`` strategy (the others have none)."""
    strategy = (
        bench.get("config", {}).get("strategy") if isinstance(bench.get("config"), dict) else None
    )
    if isinstance(strategy, dict) and strategy.get("type_") in ("synchronous", "concurrent"):
        r = Reader(strategy, f"{doc.source}: config.strategy", doc.error, doc.code)
        values["max_concurrency"] = r.opt_count("max_concurrency")


def _fixed_outputs(metrics: dict[str, Any], doc: Document) -> bool:
    """Every successful request generated as many tokens (so token weights are all equal)."""
    dist = _success(metrics.get("output_token_count"))
    if dist is None:
        return True  # the schema-only reports carry no token counts: as before, TPOT
    std = Reader(dist, f"{doc.source}: output_token_count", doc.error, doc.code).opt_number(
        "std_dev"
    )
    return std == 0


def _counts(
    bench: dict[str, Any],
    metrics: dict[str, Any],
    doc: Document,
    values: dict[str, float | int | str | None],
    used: set[str],
) -> None:
    """Requests, token totals and the duration of the measurement window."""
    totals = metrics.get("request_totals")
    if isinstance(totals, dict):
        used.add("request_totals")
        r = Reader(totals, f"{doc.source}: request_totals", doc.error, doc.code)
        values["completed"] = r.opt_count("successful")
        values["failed"] = r.opt_count("errored")
        values["num_prompts"] = r.opt_count("total")
    for name, key in (
        ("output_token_count", "total_output_tokens"),
        ("prompt_token_count", "total_input_tokens"),
    ):
        dist = _success(metrics.get(name))
        if dist is not None and dist.get("total_sum") is not None:
            used.add(name)
            r = Reader(dist, f"{doc.source}: {name}", doc.error, doc.code)
            total = r.number("total_sum", dist["total_sum"])
            # GuideLLM sums token counts as floats (1748.9999999999998 for 1749 tokens).
            whole = round(total)
            if abs(total - whole) > 1e-6 * max(1.0, abs(total)):
                raise r.fail("total_sum", f"expected a whole number of tokens, got {total!r}")
            values[key] = r.count("total_sum", whole)
    b = Reader(bench, f"{doc.source}: benchmark", doc.error, doc.code)
    duration = b.opt_number("duration")
    sched = bench.get("scheduler_metrics")
    made = sched.get("requests_made") if isinstance(sched, dict) else None
    if isinstance(sched, dict) and isinstance(made, dict) and "completed" not in values:
        r = Reader(made, f"{doc.source}: requests_made", doc.error, doc.code)
        values["completed"] = r.opt_count("successful")
        values["failed"] = r.opt_count("errored")
        values["num_prompts"] = r.opt_count("total")
    if isinstance(sched, dict) and duration is None:
        # Checked like every number: an Infinity end time made an infinite duration.
        times = Reader(sched, f"{doc.source}: scheduler_metrics", doc.error, doc.code)
        start, end = times.opt_number("measure_start_time"), times.opt_number("measure_end_time")
        if start is not None and end is not None and end > start:
            duration = end - start
    if duration is not None and duration > 0:
        values["duration"] = float(duration)
