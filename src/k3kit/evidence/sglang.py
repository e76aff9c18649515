"""``python -m sglang.bench_serving --output-file X.jsonl``: one JSON object per line, appended.

Not strict JSON: ``--request-rate inf`` is written as the bare constant ``Infinity`` (read here as
the rate "inf"). Names differ from vLLM's: ``total_throughput`` is vLLM's
``total_token_throughput``, ``*_e2e_latency_ms`` its ``*_e2el_ms``, ``accept_length`` the
speculative acceptance length; ``concurrency`` is the *mean* number of requests in flight (observed
fractional values), not a cap, so it is kept as ``mean_concurrency``. With ``--output-details`` the
per-request arrays have vLLM's names and units (seconds).
"""

from __future__ import annotations

import re
from typing import Any

from k3kit.evidence._base import Document, Reader, RunData, adapter
from k3kit.evidence.vllm import _requests, scalar_values, stats_by_key

_SIGNS = ("total_output_tokens_retokenized", "mean_e2e_latency_ms", "server_info", "accept_length")
_E2E = re.compile(r"^(mean|median|std|p[0-9]{1,2}(?:\.[0-9]{1,4})?)_e2e_latency_ms$")
_IGNORED = ("generated_texts", "server_info", "tokenizer_id", "input_throughput")


def _detect(obj: dict[str, Any]) -> bool:
    return any(k in obj for k in _SIGNS)


def _random_lengths(r: Reader) -> dict[str, float | int | str | None]:
    """The dataset and the lengths it was asked for, with its range ratio read by SGLang's own
    convention ([L r, L]; :data:`k3kit.evidence.lengths.LENGTH_SPREAD`), so the audit can hold
    the receipt's workload to what the tool drew."""
    dataset = r.text("dataset_name", r.get("dataset_name"))
    return {
        "dataset_name": dataset or None,
        "random_input_len": r.opt_count("random_input_len"),
        "random_output_len": r.opt_count("random_output_len"),
        "random_range_ratio": r.opt_number("random_range_ratio"),
        "sharegpt_output_len": r.opt_count("sharegpt_output_len"),
        "range_convention": "sglang",
    }


@adapter("sglang bench_serving", _detect, priority=10)
def parse(doc: Document, record: int | None) -> RunData:
    obj, index = doc.one(record, "line")
    r = Reader(obj, doc.source, doc.error, doc.code)
    notes = ["JSON Lines with Infinity (sglang.bench_serving)"] if doc.infinity else []
    values = scalar_values(r, notes)
    values["total_token_throughput"] = r.opt_number("total_throughput")
    if values["spec_decode_acceptance_length"] is None:
        values["spec_decode_acceptance_length"] = r.opt_number("accept_length")
    values["total_output_tokens_retokenized"] = r.opt_count("total_output_tokens_retokenized")
    values["mean_concurrency"] = r.opt_number("concurrency")
    stats = stats_by_key(r, notes)
    for key in list(obj):
        match = _E2E.fullmatch(key)
        if match and obj[key] is not None:
            name = "median" if match.group(1) == "median" else match.group(1)
            stats.setdefault("e2el", {})[name] = float(r.number(key, r.get(key)))
    values.update(_random_lengths(r))
    requests = _requests(r, notes) if "output_lens" in obj else None
    if requests is None:
        notes.append("no per-request data (run without --output-details)")
    r.used.update(_IGNORED)
    return RunData(
        doc.source,
        "sglang bench_serving",
        values,
        stats,
        requests,
        None,
        notes,
        r.unmapped(),
        index,
    )
