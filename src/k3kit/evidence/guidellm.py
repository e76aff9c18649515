"""GuideLLM ``benchmarks.json`` (``GenerativeBenchmarksReport``): one report, several benchmarks.

Each benchmark's metrics are status distributions (``successful``/``errored``/``incomplete``/
``total``), each ``{mean, median, std_dev, count, percentiles{p50, p90, p99, ...}}``; only the
``successful`` distribution is mapped, as vLLM's statistics are over successes. GuideLLM's
``inter_token_latency_ms`` is vLLM's TPOT; its ``time_to_first_token_ms`` is TTFT;
``request_latency`` is E2E in **seconds**. Its percentiles are nearest-rank (no interpolation), so
the receipt's definitions should say ``percentile_method = "nearest-rank"``. A run cites one
benchmark with ``evidence_record``.
"""

from __future__ import annotations

import re
from typing import Any

from k3kit.evidence._base import Document, Reader, RunData, adapter

_LATENCY = {
    "time_to_first_token_ms": ("ttft", 1.0),
    "inter_token_latency_ms": ("tpot", 1.0),
    "request_latency": ("e2el", 1000.0),
}
_PCT = re.compile(r"^p(\d{1,3})$")


def _detect(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("benchmarks"), list) and "metadata" in obj


def _pct_name(key: str) -> str | None:
    match = _PCT.match(key)
    if match is None:
        return None
    digits = match.group(1)  # p001 = 0.1, p01 = 1, p999 = 99.9
    if len(digits) == 3:
        return f"p{int(digits) / 10:g}"
    return f"p{int(digits)}"


def _success(block: Any) -> dict[str, Any] | None:
    inner = block.get("successful") if isinstance(block, dict) else None
    return {str(k): v for k, v in inner.items()} if isinstance(inner, dict) else None


@adapter("guidellm", _detect, priority=10)
def parse(doc: Document, record: int | None) -> RunData:
    report, _ = doc.one(None, "report")
    benches = report["benchmarks"]
    if not all(isinstance(b, dict) for b in benches):
        raise doc.fail("benchmarks: expected objects")
    bench, index = Document(doc.source, benches, False, doc.error, doc.code).one(
        record, "benchmark"
    )
    metrics = bench.get("metrics") if isinstance(bench.get("metrics"), dict) else {}
    assert isinstance(metrics, dict)
    stats: dict[str, dict[str, float]] = {}
    used: set[str] = set()
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
        pcts = dist.get("percentiles")
        for key, value in (pcts.items() if isinstance(pcts, dict) else []):
            pct_kind = _pct_name(key)
            if pct_kind is not None and value is not None:
                stats.setdefault(metric, {})[pct_kind] = float(r.number(key, value)) * scale
    values: dict[str, float | int | str | None] = {}
    for name, key in (("requests_per_second", "request_throughput"),
                      ("output_tokens_per_second", "output_throughput")):
        dist = _success(metrics.get(name))
        if dist is not None and dist.get("mean") is not None:
            used.add(name)
            values[key] = Reader(dist, doc.source, doc.error, doc.code).number(name, dist["mean"])
    sched = bench.get("scheduler_metrics")
    made = sched.get("requests_made") if isinstance(sched, dict) else None
    if isinstance(made, dict):
        r = Reader(made, f"{doc.source}: requests_made", doc.error, doc.code)
        values["completed"] = r.opt_count("successful")
        values["failed"] = r.opt_count("errored")
        values["num_prompts"] = r.opt_count("total")
        start, end = sched.get("measure_start_time"), sched.get("measure_end_time")  # type: ignore[union-attr]
        if isinstance(start, int | float) and isinstance(end, int | float) and end > start:
            values["duration"] = float(end - start)
    notes = ["GuideLLM: percentiles are nearest-rank; inter_token_latency_ms filed as TPOT"]
    unmapped = [k for k in metrics if k not in used]
    return RunData(doc.source, "guidellm", values, stats, None, None, notes, unmapped[:64], index)
