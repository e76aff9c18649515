"""ray-project/llmperf ``*_summary.json`` (``token_benchmark_ray.py --results-dir``).

Flat keys in **seconds**: ``results_<metric>_{mean,stddev,min,max,quantiles_pNN}``. llmperf's
``inter_token_latency_s`` is its own per-request average (neither vLLM's TPOT nor its pooled
per-chunk ITL), so it is reported as unmapped rather than filed under a name it does not mean.
The per-request records live in a separate ``*_individual_responses.json`` and are not read here:
a summary file is summary evidence.

What the summary implies, from llmperf's ``token_benchmark_ray.py``: every token count is
``len(LlamaTokenizerFast("hf-internal-testing/llama-tokenizer").encode(text))``, whatever model
served (``get_token_length``), while ``max_tokens`` is sampled in the model's own tokens; the
throughput is ``sum(number_output_tokens) / (end_time - start_time)`` and the completion rate
``completed / (end_time - start_time) * 60``, both over the completed requests, of which
``number_output_tokens_mean`` is the mean. So the run's duration and token totals follow exactly
and are reported, which lets the audit recompute the throughput the file states.
"""

from __future__ import annotations

import re
from typing import Any

from k3kit.evidence._base import Document, Reader, RunData, adapter

_METRICS = {"ttft": "ttft_s", "e2el": "end_to_end_latency_s"}
#: Who counted the tokens (token_benchmark_ray.py: get_token_length).
COUNTER = "llmperf's fixed Llama tokenizer (hf-internal-testing/llama-tokenizer)"
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
        match = _KEY.fullmatch(key)
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
    values.update(_implied(r, values, per_min))
    for key in ("version", "name", "framework"):
        r.get(key)
    if "results_inter_token_latency_s_mean" in obj:
        notes.append("inter_token_latency_s is llmperf's per-request average: not mapped")
    notes.append(f"token counts made with {COUNTER}, not the served model's tokenizer")
    return RunData(
        doc.source, "llmperf", values, stats, None, None, notes, r.unmapped(), index, COUNTER
    )


def _implied(r: Reader, values: dict[str, Any], per_min: float | None) -> dict[str, Any]:
    """Duration and token totals as llmperf computed them (the module docstring says how)."""
    completed = values["completed"]
    if not completed or not per_min or per_min <= 0:
        return {}
    implied: dict[str, Any] = {"duration": completed * 60 / per_min}
    for key, total in (("output", "total_output_tokens"), ("input", "total_input_tokens")):
        name = f"results_number_{key}_tokens_mean"
        mean = r.opt_number(name)
        if mean is None:
            continue
        if not 0 <= mean * completed < 2**53:
            raise r.fail(name, f"{mean} tokens per request is not a token count")
        implied[total] = round(mean * completed)
    return implied
