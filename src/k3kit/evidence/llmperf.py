"""ray-project/llmperf ``*_summary.json`` (``token_benchmark_ray.py --results-dir``).

Flat keys in **seconds**: ``results_<metric>_{mean,stddev,min,max,quantiles_pNN}``. llmperf's
``inter_token_latency_s`` is its own per-request average (neither vLLM's TPOT nor its pooled
per-chunk ITL), so it is reported as unmapped rather than filed under a name it does not mean.
The per-request records live in a separate ``*_individual_responses.json`` and are not read here:
a summary file is summary evidence.
"""

from __future__ import annotations

import re
from typing import Any

from k3kit.evidence._base import Document, Reader, RunData, adapter

_METRICS = {"ttft": "ttft_s", "e2el": "end_to_end_latency_s"}
_KEY = re.compile(r"^results_(ttft_s|end_to_end_latency_s)_(mean|stddev|quantiles_p([0-9]{1,2}))$")


def _detect(obj: dict[str, Any]) -> bool:
    return "results_num_completed_requests" in obj or "results_ttft_s_mean" in obj


@adapter("llmperf", _detect, priority=20)
def parse(doc: Document, record: int | None) -> RunData:
    obj, index = doc.one(record)
    r = Reader(obj, doc.source, doc.error, doc.code)
    notes = ["llmperf summary: statistics in seconds (converted to ms); no per-request data"]
    stats: dict[str, dict[str, float]] = {}
    by_name = {v: k for k, v in _METRICS.items()}
    for key in list(obj):
        match = _KEY.match(key)
        if match is None:
            continue
        metric = by_name[match.group(1)]
        kind = {"mean": "mean", "stddev": "std"}.get(match.group(2), f"p{match.group(3)}")
        stats.setdefault(metric, {})[kind] = float(r.number(key, r.get(key))) * 1000
    per_min = r.opt_number("results_num_completed_requests_per_min")
    values: dict[str, float | int | str | None] = {
        "completed": r.opt_count("results_num_completed_requests"),
        "num_prompts": r.opt_count("results_num_requests_started"),
        "failed": r.opt_count("results_number_errors"),
        "max_concurrency": r.opt_count("num_concurrent_requests"),
        "output_throughput": r.opt_number("results_mean_output_throughput_token_per_s"),
        "request_throughput": None if per_min is None else per_min / 60,
        "model_id": r.text("model", r.get("model"))[:500] or None,
        "date": None if obj.get("timestamp") is None else str(r.get("timestamp"))[:64],
    }
    for key in ("version", "name", "framework"):
        r.get(key)
    if "results_inter_token_latency_s_mean" in obj:
        notes.append("inter_token_latency_s is llmperf's per-request average: not mapped")
    return RunData(doc.source, "llmperf", values, stats, None, None, notes, r.unmapped(), index)
