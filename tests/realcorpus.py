"""The real corpus (tests/data/real): each file, and claims that describe it honestly.

Claims are published from the tool's own numbers, rounded to two decimals as a publisher would,
and the workload is described as the file's own setup says (dataset, lengths, open or closed
loop). Audits run in memory through the same statement building and rules as ``k3kit audit``.
"""

from __future__ import annotations

import json
import lzma
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

from k3kit._canonical import strict_loads
from k3kit.audit import AuditReport, run_rules
from k3kit.audit.context import build_context
from k3kit.evidence import parse_evidence
from k3kit.formats.receipt import build_statement
from k3kit.models import Claims, KitInfo, Statement, load
from tests.conftest import FIXED_TIME

REAL = Path(__file__).parent / "data" / "real"
LIMITS = [
    "Accuracy was not measured.",
    "Results are text-only.",
    "Percentiles from small samples are descriptive only.",
    "One hardware configuration (one node of 8 GPUs) was measured; single runs, no repeats.",
]


def read(name: str) -> bytes:
    data = (REAL / name).read_bytes()
    return lzma.decompress(data) if name.endswith(".xz") else data


def q2(x: float) -> Decimal:
    return Decimal(repr(x)).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)


def _metrics(stats: dict[str, dict[str, float]], values: dict[str, Any]) -> dict[str, Any]:
    m: dict[str, Any] = {}
    for metric, s in stats.items():
        row = {k: q2(v) for k, v in s.items() if k in ("mean", "p90", "p99")}
        if "median" in s:
            row["p50"] = q2(s["median"])
        elif "p50" in s:
            row["p50"] = q2(s["p50"])
        if row:
            m[f"{metric}_ms"] = row
    if values.get("output_throughput") is not None:
        m["output_tok_s"] = q2(float(values["output_throughput"]))
    if values.get("request_throughput") is not None:
        m["request_rate"] = q2(float(values["request_throughput"]))
    return m


def case(
    name: str, record: int | None = None, data: bytes | None = None
) -> tuple[dict[str, Any], dict[str, Any], bytes]:
    """(workload, run) claims for one file (one record of it), and the file's bytes."""
    data = read(name) if data is None else data
    run = parse_evidence(data, source=name, record=record)
    v = run.values
    line = data.splitlines()[record or 0].replace(b"Infinity", b"1e999")
    obj = json.loads(line) if name.endswith(".jsonl") else json.loads(data)
    rid = name.split(".")[0].lower().replace("_", "-")[:50]
    rid += "" if record is None else f"-{record}"
    row: dict[str, Any] = {
        "id": rid,
        "profile": "interactive",
        "workload": rid,
        "requests": v.get("num_prompts") or v.get("completed"),
        "completed": v.get("completed"),
        "metrics": _metrics(run.stats, v),
        "evidence": f"results/{rid}.json",
    }
    if record is not None:
        row["evidence_record"] = record
    if run.tool == "llmperf":
        fixed = obj["stddev_input_tokens"] == 0 and obj["stddev_output_tokens"] == 0
        wl = {
            "description": name,
            "dataset": "llmperf sonnet",
            "load": "closed-loop",
            "lengths": "fixed" if fixed else "variable",
            "input_tokens": obj["mean_input_tokens"],
            "output_tokens": obj["mean_output_tokens"],
        }
        row["concurrency"] = v["max_concurrency"]
    elif run.tool == "sglang bench_serving":
        ratio = obj["random_range_ratio"]
        wl = {
            "description": name,
            "dataset": obj["dataset_name"],
            "load": "open-loop",
            "lengths": "fixed" if ratio == 1.0 else "variable",
        }
        if ratio == 1.0:
            wl.update(
                input_tokens=obj["random_input_len"],
                output_tokens=obj["random_output_len"],
                ignore_eos=True,
            )
        if v["request_rate"] != "inf":
            row["offered_rate"] = Decimal(str(v["request_rate"]))
    else:
        wl = {
            "description": name,
            "dataset": "sharegpt",
            "load": "open-loop",
            "lengths": "variable",
            "ignore_eos": False,
        }
        row["offered_rate"] = Decimal(str(v["request_rate"]))
        row["burstiness"] = Decimal(str(v["burstiness"]))
    return wl, row, data


def claims_for(cases: list[tuple[dict[str, Any], dict[str, Any], bytes]]) -> Claims:
    body = {
        "schema": "k3kit.claims/v1",
        "limitations": LIMITS,
        "definitions": {"percentile_method": "numpy-linear", "per_gpu_throughput": "output"},
        "environment": {
            "gpu": "NVIDIA B300",
            "gpu_count": 8,
            "nodes": 1,
            "engine": "vllm",
            "engine_version": "0.33.0",
        },
        "workloads": {row["workload"]: {**wl, "temperature": Decimal("0")} for wl, row, _ in cases},
        "runs": [row for _, row, _ in cases],
    }
    return load(Claims, body, source="claims")


def audit_cases(
    cases: list[tuple[dict[str, Any], dict[str, Any], bytes]],
    info: KitInfo,
    evidence: dict[str, bytes] | None = None,
) -> AuditReport:
    claims = claims_for(cases)
    files = evidence or {row["id"]: data for _, row, data in cases}
    payload = build_statement(
        claims,
        info,
        kit_sha256="0" * 64,
        lock_sha256="1" * 64,
        issued_at=FIXED_TIME,
        evidence=files,
    )
    statement = load(
        Statement, strict_loads(payload, source="p", max_bytes=len(payload)), source="p"
    )
    results = {
        run.id: parse_evidence(
            files[run.id], source=run.id, tool=run.evidence_tool, record=run.evidence_record
        )
        for run in statement.predicate.runs
    }
    ctx = build_context(
        statement.predicate, signer_keyid="test", kit=None, results=results, subjects={}
    )
    return AuditReport("memory", run_rules(ctx))


ALL = [
    ("vllm-llama70b-tp8-sharegpt-qps4.json.xz", None),
    ("sglang-deepseek-dp-mla.jsonl", None),
    *[("sglang-llama70b-offline.jsonl", i) for i in range(7)],
    *[("sglang-llama70b-online.jsonl", i) for i in range(5)],
    *[("sglang-llama405b-online.jsonl", i) for i in range(4)],
    *[
        (f"llmperf-{n}_70b.json", None)
        for n in ("groq", "anyscale", "fireworks", "together", "lepton", "replicate", "perplexity")
    ],
]
