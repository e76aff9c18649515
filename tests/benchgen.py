"""Synthetic ``vllm bench serve --save-result [--save-detailed]`` results, consistent by
construction.

A seeded server model (prefill speed, per-token decode time that grows with concurrency, chunk
sizes for speculative decoding, jitter) is run as vLLM's client runs it: a closed loop of
``concurrency`` slots, each request sent when a slot frees. Every summary number is computed from
the per-request data the way vLLM's ``calculate_metrics`` does, but with the standard library's
``statistics`` module (``quantiles(method="inclusive")`` is numpy's default linear percentile),
independently of the auditor's own code. Claims are then published from those numbers, rounded
to two decimals, so an audit of an unmutated receipt must find no error.

Mutations each break one published fact, in the way a real publisher gets it wrong.
"""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

GPUS = 8
DETAIL_KEYS = (
    "input_lens",
    "output_lens",
    "start_times",
    "ttfts",
    "itls",
    "generated_texts",
    "errors",
)


class Result(dict[str, Any]):
    """A result JSON object that also remembers how many ITL samples it had (for publishing)."""

    itl_samples: int = 0


@dataclass(frozen=True)
class ServerModel:
    prefill_tok_per_s: float = 40_000.0
    decode_s_per_token: float = 0.010
    batch_slowdown: float = 0.03  # per extra concurrent request
    chunk_tokens: tuple[int, int] = (1, 1)  # (min, max) tokens per streamed chunk after the first
    jitter: float = 0.04


@dataclass
class GenRun:
    id: str
    profile: str
    concurrency: int
    num_prompts: int
    result: Result
    percentiles: tuple[float, ...] = (50.0, 90.0, 99.0)
    extra: dict[str, Any] = field(default_factory=dict)


def _pct_key(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def _percentile(values: list[float], p: float) -> float:
    if len(values) == 1:
        return values[0]
    cuts = statistics.quantiles(values, n=1000, method="inclusive")
    k = round(p * 10)
    return min(values) if k == 0 else cuts[k - 1] if k < 1000 else max(values)


def _stats(name: str, values: list[float], pcts: tuple[float, ...]) -> dict[str, float]:
    values = values or [0.0]
    out = {
        f"mean_{name}_ms": statistics.fmean(values) * 1000,
        f"median_{name}_ms": statistics.median(values) * 1000,
        f"std_{name}_ms": statistics.pstdev(values) * 1000,
    }
    for p in pcts:
        out[f"p{_pct_key(p)}_{name}_ms"] = _percentile(values, p) * 1000
    return out


def simulate(
    seed: int,
    *,
    concurrency: int,
    num_prompts: int,
    input_len: int = 2048,
    output_len: int = 128,
    model: ServerModel | None = None,
    percentiles: tuple[float, ...] = (50.0, 90.0, 99.0),
    fail: frozenset[int] = frozenset(),
    count_warmup: bool = False,
    save_detailed: bool = True,
    legacy: bool = False,
) -> Result:
    """One run in vLLM's result format (keys, units and per-request semantics as vLLM 0.x)."""
    model = model or ServerModel()
    rng = random.Random(seed)
    total = num_prompts + (1 if count_warmup else 0)
    per_token = model.decode_s_per_token * (1 + model.batch_slowdown * (concurrency - 1))
    origin = 1000.0 + rng.random()  # perf_counter origin is arbitrary
    slots = [0.0] * concurrency
    records: list[tuple[int, int, float, list[float], float, float, str]] = []
    for i in range(total):
        slot = min(range(concurrency), key=lambda s: slots[s])
        start = slots[slot] + rng.uniform(0.0005, 0.002)
        if i in fail:
            latency = rng.uniform(0.01, 0.05)
            records.append((input_len, 0, 0.0, [], 0.0, start, "ClientResponseError: 500"))
            slots[slot] = start + latency
            continue
        ttft = input_len / model.prefill_tok_per_s * (1 + model.jitter * rng.random())
        itls: list[float] = []
        produced = 1
        while produced < output_len:
            k = min(rng.randint(*model.chunk_tokens), output_len - produced)
            itls.append(k * per_token * (1 + model.jitter * (rng.random() - 0.5)))
            produced += k
        latency = ttft + sum(itls)
        records.append((input_len, output_len, ttft, itls, latency, start, ""))
        slots[slot] = start + latency
    duration = max(slots) + rng.uniform(0.001, 0.01)
    ok = [r for r in records if r[6] == ""]
    out_lens = [r[1] for r in records]
    completed = len(ok)
    result = Result(
        {
            "date": "20261101-120000",
            "endpoint_type": "openai",
            "backend": "openai",
            "label": None,
            "model_id": "moonshotai/Kimi-K3",
            "tokenizer_id": "moonshotai/Kimi-K3",
            "num_prompts": total,
            "request_rate": "inf",
            "burstiness": 1.0,
            "max_concurrency": concurrency,
            "duration": duration,
            "completed": completed,
            "failed": len(records) - completed,
            "total_input_tokens": sum(r[0] for r in ok),
            "total_output_tokens": sum(out_lens),
            "request_throughput": completed / duration,
            "request_goodput": None,
            "output_throughput": sum(out_lens) / duration,
            "total_token_throughput": (sum(r[0] for r in ok) + sum(out_lens)) / duration,
            "input_lens": [r[0] for r in records],
            "output_lens": out_lens,
            "ttfts": [r[2] for r in records],
            "itls": [r[3] for r in records],
            "latencies": [r[4] for r in records],
            "start_times": [origin + r[5] for r in records],
            "queue_times": [0.0 for _ in records],
            "generated_texts": ["" for _ in records],
            "errors": [r[6] for r in records],
            "max_output_tokens_per_s": float(max(1, concurrency) * round(1 / per_token)),
            "max_concurrent_requests": min(concurrency, completed),
            "rtfx": 0.0,
        }
    )
    result.itl_samples = sum(len(r[3]) for r in ok)
    if model.chunk_tokens != (1, 1):
        chunks = sum(len(r[3]) for r in ok)
        result["spec_decode_acceptance_length"] = sum(r[1] - 1 for r in ok) / chunks
    tpots = [(r[4] - r[2]) / (r[1] - 1) for r in ok if r[1] > 1]
    result.update(_stats("ttft", [r[2] for r in ok], percentiles))
    result.update(_stats("tpot", tpots, percentiles))
    result.update(_stats("itl", [x for r in ok for x in r[3]], percentiles))
    result.update(_stats("e2el", [r[4] for r in ok], percentiles))
    if not save_detailed:
        for key in DETAIL_KEYS:
            del result[key]
    if legacy:
        result["request_goodput:"] = result.pop("request_goodput")
        for key in (
            "failed",
            "latencies",
            "start_times",
            "queue_times",
            "max_output_tokens_per_s",
            "max_concurrent_requests",
            "rtfx",
        ):
            result.pop(key, None)
    return result


def q2(x: float, places: str = "0.01") -> Decimal:
    """Round a tool float to a published figure (banker's rounding, as most tools print)."""
    return Decimal(repr(x)).quantize(Decimal(places), rounding=ROUND_HALF_EVEN)


def _published_stats(result: dict[str, Any], metric: str, n: int) -> dict[str, Decimal]:
    out = {"mean": q2(result[f"mean_{metric}_ms"]), "p50": q2(result[f"median_{metric}_ms"])}
    if n >= 64 and f"p90_{metric}_ms" in result:
        out["p90"] = q2(result[f"p90_{metric}_ms"])
    return out


def published_metrics(result: Result, gpus: int = GPUS) -> dict[str, Any]:
    """What a careful publisher prints from one result: 2 decimals, supported percentiles."""
    n = result["completed"]
    return {
        "output_tok_s_per_gpu": q2(result["output_throughput"] / gpus),
        "output_tok_s": q2(result["output_throughput"]),
        "request_rate": q2(result["request_throughput"], "0.0001"),
        "duration_s": q2(result["duration"]),
        "ttft_ms": _published_stats(result, "ttft", n),
        "tpot_ms": _published_stats(result, "tpot", n),
        "itl_ms": _published_stats(result, "itl", result.itl_samples),
        "e2el_ms": _published_stats(result, "e2el", n),
    }


LIMITATIONS = [
    "Accuracy was not measured during the timed runs.",
    "Results are text-only; image input was not measured.",
    "Percentiles from small samples are descriptive only.",
    "Each point is a single run; run-to-run variation was not measured.",
    "All results are from one 8x B300 node.",
    "Contexts longer than the measured prompt plus output were not measured.",
]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f'"{k}" = {_toml_value(v)}' for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


@dataclass
class Claims:
    """A claims.toml under construction; ``render`` writes it as TOML."""

    runs: list[dict[str, Any]]
    workload: dict[str, Any]
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    controls: list[dict[str, Any]] = field(default_factory=list)
    limitations: list[str] = field(default_factory=lambda: list(LIMITATIONS))
    definitions: dict[str, Any] | None = field(
        default_factory=lambda: {
            "percentile_method": "numpy-linear",
            "per_gpu_throughput": "output",
        }
    )

    def render(self) -> str:
        lines = ['schema = "k3kit.claims/v1"', f"limitations = {_toml_value(self.limitations)}"]
        if self.definitions is not None:
            lines.append("[definitions]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in self.definitions.items()]
        lines += [
            "[environment]",
            'gpu = "NVIDIA B300"',
            f"gpu_count = {GPUS}",
            "nodes = 1",
            'engine = "vllm"',
            'engine_version = "0.33.0"',
        ]
        lines.append("[workloads.synthetic]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in self.workload.items()]
        for table, rows in (
            ("runs", self.runs),
            ("comparisons", self.comparisons),
            ("controls", self.controls),
        ):
            for row in rows:
                lines.append(f"[[{table}]]")
                lines += [f"{k} = {_toml_value(v)}" for k, v in row.items()]
        return "\n".join(lines) + "\n"


def make_claims(
    runs: list[GenRun],
    *,
    input_len: int,
    output_len: int,
    warmups: int = 0,
    evidence_dir: str = "results",
) -> Claims:
    """Claims published carefully from generated runs; evidence paths relative to the claims."""
    rows = []
    for run in runs:
        r = run.result
        rows.append(
            {
                "id": run.id,
                "profile": run.profile,
                "workload": "synthetic",
                "concurrency": run.concurrency,
                "requests": run.num_prompts,
                "completed": r["completed"],
                "evidence": f"{evidence_dir}/{run.id}.json",
                "metrics": published_metrics(r),
                **run.extra,
            }
        )
    workload = {
        "description": "synthetic serving curve",
        "input_tokens": input_len,
        "output_tokens": output_len,
        "temperature": Decimal("0.0"),
        "streaming": True,
        "fixed_seed": True,
        "warmups_per_point": warmups,
        "ignore_eos": True,
        "prefix_cache_policy": "reset-before-each-point",
        "benchmark_tool": "vllm bench serve",
    }
    comparisons = []
    by_c: dict[int, dict[str, GenRun]] = {}
    for run in runs:
        by_c.setdefault(run.concurrency, {})[run.profile] = run
    points = []
    for c, pair in sorted(by_c.items()):
        if {"interactive", "batch"} <= set(pair):
            s = pair["interactive"].result["output_throughput"] / GPUS
            b = pair["batch"].result["output_throughput"] / GPUS
            points.append(
                {
                    "concurrency": c,
                    "stated_percent": q2((s - b) / b * 100),
                    "subject_run": pair["interactive"].id,
                    "baseline_run": pair["batch"].id,
                }
            )
    if points:
        comparisons.append(
            {
                "id": "interactive-vs-batch",
                "description": "profiles, per GPU",
                "metric": "output_tok_s_per_gpu",
                "subject_profile": "interactive",
                "baseline_profile": "batch",
                "points": points,
                "repeats": 3,
            }
        )
    controls = [
        {
            "id": "aa",
            "kind": "negative",
            "description": "same instance twice",
            "metric": "top1",
            "agree": 999,
            "total": 1000,
            "agreement_percent": Decimal("99.90"),
            "threshold_percent": Decimal("99.0"),
            "passed": True,
        },
        {
            "id": "known-diff",
            "kind": "positive",
            "description": "fp8 vs bf16 KV cache",
            "metric": "top1",
            "agree": 930,
            "total": 1000,
            "agreement_percent": Decimal("93.00"),
            "threshold_percent": Decimal("99.0"),
            "passed": True,
        },
    ]
    return Claims(rows, workload, comparisons, controls)


def write_bundle(
    root: Path, claims: Claims, runs: list[GenRun], evidence_dir: str = "results"
) -> Path:
    """claims.toml plus one result JSON per run, as a publisher's folder would hold them."""
    root.mkdir(parents=True, exist_ok=True)
    for run in runs:
        path = root / evidence_dir / f"{run.id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run.result))
    claims_path = root / "claims.toml"
    claims_path.write_text(claims.render())
    return claims_path


def standard_runs(
    seed: int = 7, *, save_detailed: bool = True, output_len: int = 128, input_len: int = 2048
) -> list[GenRun]:
    """Interactive (speculative decoding, 1-3 tokens per chunk) and batch runs at c=8 and c=32."""
    spec = ServerModel(decode_s_per_token=0.006, chunk_tokens=(1, 3))
    batch = ServerModel(decode_s_per_token=0.008, batch_slowdown=0.01)
    runs = []
    for i, (profile, c, n, model) in enumerate(
        [
            ("interactive", 8, 64, spec),
            ("batch", 8, 64, batch),
            ("interactive", 32, 96, spec),
            ("batch", 32, 96, batch),
        ]
    ):
        result = simulate(
            seed + i,
            concurrency=c,
            num_prompts=n,
            model=model,
            output_len=output_len,
            input_len=input_len,
            save_detailed=save_detailed,
        )
        runs.append(GenRun(f"{profile}-c{c}", profile, c, n, result))
    return runs
