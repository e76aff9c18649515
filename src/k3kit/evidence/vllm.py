"""``vllm bench serve --save-result`` (and ``benchmarks/benchmark_serving.py``, vLLM 0.6 on).

Tolerant of versions: the older spelling ``"request_goodput:"``; no ``failed``, ``latencies`` or
``start_times`` before late 2024; statistics only for the selected metrics and percentiles;
per-request arrays only with ``--save-detailed`` (or by default in old builds); statistics keyed
in *seconds* without ``_ms`` (``median_ttft``, ``p99_tpot``) in InferenceX-style derived files;
summaries without ``duration`` or ``completed`` (vllm-ascend nightly). Strict about bytes: numbers
where numbers belong, per-request arrays of one length. Missing pieces are notes, so a rule can
say "not checkable" instead of guessing.
"""

from __future__ import annotations

import re
from typing import Any

from k3kit.evidence._base import Document, Reader, Request, RunData, adapter

_STAT = r"(mean|median|std|p([0-9]{1,2}(?:\.[0-9]{1,4})?|100))_(ttft|tpot|itl|e2el)"
_STAT_MS = re.compile(rf"^{_STAT}_ms$")
_STAT_S = re.compile(rf"^{_STAT}$")
_MODERN_KEYS = ("failed", "latencies", "max_output_tokens_per_s", "max_concurrent_requests")
_RAW_KEYS = ("output_lens", "ttfts", "itls")
FLOAT_FIELDS = (
    "duration",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "burstiness",
    "spec_decode_acceptance_length",
    "spec_decode_acceptance_rate",
)
INT_FIELDS = (
    "num_prompts",
    "max_concurrency",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "max_concurrent_requests",
    "spec_decode_num_drafts",
    "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
)
_SIGNS = ("completed", "num_prompts", "request_throughput", "output_throughput", "ttfts")
# Read and deliberately not mapped: free text, or per-request data no rule uses.
_IGNORED = (
    "generated_texts",
    "tokenizer_id",
    "label",
    "endpoint_type",
    "queue_times",
    "rtfx",
    "spec_decode_per_position_acceptance_rates",
)


def _detect(obj: dict[str, Any]) -> bool:
    if any(k in obj for k in _SIGNS):
        return True
    return any(_STAT_MS.fullmatch(k) or _STAT_S.fullmatch(k) for k in obj)


def scalar_values(r: Reader, notes: list[str]) -> dict[str, float | int | str | None]:
    out: dict[str, float | int | str | None] = {}
    for key in FLOAT_FIELDS:
        out[key] = r.opt_number(key)
    for key in INT_FIELDS:
        out[key] = r.opt_count(key)
    goodput = r.get("request_goodput")
    if "request_goodput:" in r.obj:
        notes.append('legacy key "request_goodput:" (older benchmark_serving.py)')
        legacy = r.get("request_goodput:")
        goodput = legacy if goodput is None else goodput
    out["request_goodput"] = None if goodput is None else r.number("request_goodput", goodput)
    rate = r.get("request_rate")
    if isinstance(rate, float) and rate == float("inf"):
        rate = "inf"
    if rate is not None and rate != "inf":
        rate = repr(float(r.number("request_rate", rate)))
    out["request_rate"] = rate
    for key in ("date", "model_id", "backend"):
        value = r.get(key)
        out[key] = None if value is None else r.text(key, value)[:500]
    return out


def stats_by_key(r: Reader, notes: list[str]) -> dict[str, dict[str, float]]:
    """Statistics in ms; seconds-keyed ones (no ``_ms``) are converted and noted."""
    stats: dict[str, dict[str, float]] = {}
    seconds = []
    for key in list(r.obj):
        for pattern, scale in ((_STAT_MS, 1.0), (_STAT_S, 1000.0)):
            match = pattern.fullmatch(key)  # not match: $ passes a final newline
            if match is None:
                continue
            value = r.get(key)
            if value is None:
                continue
            kind, pct, metric = match.group(1), match.group(2), match.group(3)
            name = kind if pct is None else f"p{pct}"
            if scale != 1.0:
                seconds.append(key)
                if name in stats.get(metric, {}):
                    continue  # the _ms spelling wins when both exist
            stats.setdefault(metric, {})[name] = float(r.number(key, value)) * scale
    if seconds:
        notes.append(f"statistics keyed in seconds converted to ms: {', '.join(seconds[:8])}")
    return stats


def _requests(r: Reader, notes: list[str]) -> list[Request] | None:
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


@adapter("vllm bench serve", _detect, priority=90)
def parse(doc: Document, record: int | None) -> RunData:
    if doc.infinity:
        raise doc.fail('Infinity is not valid JSON, and vLLM writes request_rate as "inf"')
    obj, index = doc.one(record)
    r = Reader(obj, doc.source, doc.error, doc.code)
    notes: list[str] = []
    values = scalar_values(r, notes)
    for key in _MODERN_KEYS:
        if key not in obj:
            notes.append(f'no "{key}" field (older vLLM benchmark version)')
    for key in ("duration", "completed"):
        if values[key] is None:
            notes.append(f'no "{key}": throughput and counts cannot be checked')
    requests = _requests(r, notes)
    latencies = r.array("latencies", "number")
    stats = stats_by_key(r, notes)
    r.used.update(_IGNORED)
    return RunData(
        doc.source,
        "vllm bench serve",
        values,
        stats,
        requests,
        latencies,
        notes,
        r.unmapped(),
        index,
    )
