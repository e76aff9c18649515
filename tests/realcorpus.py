"""The real corpus (tests/data/real): each file, and claims that describe it honestly.

Claims are published from the tool's own numbers, rounded to two decimals as a publisher would,
and the workload is described as the file's own setup says (dataset, lengths, open or closed
loop). Audits run in memory through the same statement building and rules as ``k3kit audit``.
"""

from __future__ import annotations

import json
import lzma
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

from k3kit._canonical import strict_loads
from k3kit.audit import AuditReport, run_rules
from k3kit.audit.context import EvidenceFacts, build_context
from k3kit.evidence import parse_evidence
from k3kit.formats.receipt import build_statement
from k3kit.models import Claims, KitInfo, Statement, load
from k3kit.publish.kit import build
from tests.conftest import EXAMPLE, FIXED_TIME, GoldenKit, run_k3kit
from tests.enginewheel import fake_vllm_wheel

REAL = Path(__file__).parent / "data" / "real"
LIMITS = [
    "Accuracy was not measured.",
    "Results are text-only.",
    "Percentiles from small samples are descriptive only.",
    "One hardware configuration (one node of 8 GPUs) was measured; single runs, no repeats.",
]


#: The vLLM version k3kit ships data for, and the one the golden kit pins.
SHIPPED = "0.33.0"

#: The vLLM version that served each file, by file-name prefix, as its source says (the evidence
#: for each is in SOURCES.md, "Which engine ran"). ``None``: the source does not say, so the
#: receipt cannot state it truthfully and keeps the golden kit's pin (a placeholder, reported as
#: such in SOURCES.md), or the server was not vLLM at all (SGLang, hosted APIs, a GGUF server).
ENGINE_VERSIONS: dict[str, str | None] = {
    "vllm0251-": "0.25.1",  # the repository's fixture folder is named for it: vllm_sweep_v0.25.1
    "aiperf-qwen36-": "0.24.0",  # RESULTS_nvfp4.md: image v0.24.0-x86_64-cu129 on the RTX 5090
    "vllm-llama70b-": "0.8.3",  # the same day's server log in the same folder: "version 0.8.3"
    # The server logs next to the reports: "vLLM API server version 0.1.dev12986+gfa99ccebd",
    # a source build of commit fa99ccebd for Intel XPU, not a release.
    "guidellm-": "0.1.dev12986+gfa99ccebd",
    "sglang-": None,
    "llmperf-": None,
    "aiperf-llama32-": None,
}


def engine_version(name: str) -> str | None:
    """The vLLM version that wrote ``name``'s results; None when its source does not say, or
    when ``name`` is not a corpus file (a file a test writes itself)."""
    return next((v for prefix, v in ENGINE_VERSIONS.items() if name.startswith(prefix)), None)


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
        random = obj["dataset_name"] == "random"
        wl = {
            "description": name,
            "dataset": obj["dataset_name"],
            "load": "open-loop",
            "lengths": "variable" if not random else "fixed" if ratio == 1.0 else "ranged",
        }
        if random:
            wl.update(input_tokens=obj["random_input_len"], output_tokens=obj["random_output_len"])
        if random and ratio == 1.0:
            wl.update(ignore_eos=True)
        elif random:
            # SGLang's ratio: each length uniform in [L r, L] (not vLLM's [L(1 - r), L(1 + r)]).
            wl.update(range_ratio=Decimal(repr(ratio)), range_convention="sglang")
        if v["request_rate"] != "inf":
            row["offered_rate"] = Decimal(str(v["request_rate"]))
        if v.get("max_concurrency") is not None:
            # --max-concurrency caps requests in flight: a closed loop when nothing paces them.
            row["concurrency"] = v["max_concurrency"]
            wl["load"] = "closed-loop" if v["request_rate"] == "inf" else wl["load"]
    elif run.tool == "guidellm":
        bench = obj["benchmarks"][record or 0]
        counts = bench["metrics"]["output_token_count"]["successful"]
        prompts = bench["metrics"]["prompt_token_count"]["successful"]
        wl = {
            "description": name,
            "dataset": "aime_2024 (jsonl)",
            "load": "closed-loop",
            "lengths": "variable",
            "input_tokens": round(prompts["mean"]),
            "output_tokens": round(counts["mean"]),
        }
        row["concurrency"] = v["max_concurrency"]
        row["requests"] = v["num_prompts"]
    elif run.tool == "aiperf":
        phases = obj["input_config"].get("phases") or [obj["input_config"].get("loadgen", {})]
        dataset = (obj["input_config"].get("datasets") or [{}])[0].get("dataset", "custom")
        wl = {
            "description": name,
            "dataset": dataset,
            "load": "closed-loop",
            "lengths": "variable",
            "output_tokens": round(obj["output_sequence_length"]["avg"]),
        }
        if "input_sequence_length" in obj:  # absent where AIPerf did not count prompt tokens
            wl["input_tokens"] = round(obj["input_sequence_length"]["avg"])
        profiling = [p for p in phases if p.get("name", "profiling") == "profiling"]
        if profiling and profiling[0].get("rate") is not None:
            # --request-rate with --arrival-pattern poisson: an open loop, no concurrency cap
            wl["load"] = "open-loop"
            row["offered_rate"] = Decimal(repr(profiling[0]["rate"]))
            row["burstiness"] = Decimal("1.0")
        else:
            row["concurrency"] = v["max_concurrency"]
        row["requests"] = int(v["completed"] or 0) + int(v.get("failed") or 0)
        warmup = [p for p in phases if p.get("name") == "warmup"]
        if warmup:
            wl["warmups_per_point"] = warmup[0]["requests"]
    elif name.startswith("vllm0251"):
        # The repository's CI sweep: `vllm bench serve --dataset-name random --num-prompts 8
        # --random-input-len 32 --random-output-len 16 --max-concurrency 2` (.github/workflows).
        wl = {
            "description": name,
            "dataset": "random",
            "load": "closed-loop",
            "lengths": "fixed",
            "input_tokens": 32,
            "output_tokens": 16,
        }
        row["concurrency"] = v["max_concurrency"]
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


def _version_of(cases: list[tuple[dict[str, Any], dict[str, Any], bytes]]) -> str:
    """The one engine version the cases' files were measured with (a receipt states one)."""
    found = {engine_version(wl["description"]) or SHIPPED for wl, _, _ in cases}
    assert len(found) == 1, f"one receipt, one engine version: {sorted(found)}"
    return found.pop()


def claims_for(
    cases: list[tuple[dict[str, Any], dict[str, Any], bytes]], version: str | None = None
) -> Claims:
    """Claims for the cases; ``version``: the engine version that ran, when the caller knows it
    (another corpus); else this corpus's ENGINE_VERSIONS, or the shipped pin as a placeholder."""
    # GuideLLM reports nearest-rank percentiles; its publisher says so (every other tool here
    # interpolates linearly, as numpy does).
    method = (
        "nearest-rank"
        if any("guidellm" in wl["description"] for wl, _, _ in cases)
        else ("numpy-linear")
    )
    body = {
        "schema": "k3kit.claims/v1",
        "limitations": LIMITS,
        "definitions": {"percentile_method": method, "per_gpu_throughput": "output"},
        "environment": {
            "gpu": "NVIDIA B300",
            "gpu_count": 8,
            "nodes": 1,
            "engine": "vllm",
            "engine_version": version or _version_of(cases),
        },
        "workloads": {row["workload"]: {**wl, "temperature": Decimal("0")} for wl, row, _ in cases},
        "runs": [row for _, row, _ in cases],
    }
    return load(Claims, body, source="claims")


@dataclass
class RealKits:
    """Kits pinned to each engine version the corpus was measured with, built once per session.

    The golden kit pins vLLM 0.33.0, which k3kit ships data for. Any other version gets what a
    publisher would do: a snapshot from that version's wheel (`k3kit engine snapshot`, on the
    offline stand-in wheel of tests/enginewheel.py) and `build --engine-snapshot`, so each honest
    receipt states the version that ran and is bound to a kit built for exactly that version.
    """

    golden: GoldenKit
    root: Path
    _infos: dict[str, KitInfo] = field(default_factory=dict)

    def info(self, version: str) -> KitInfo:
        if version not in self._infos:
            kit = self.golden.kit if version == SHIPPED else self._build(version)
            self._infos[version] = load(
                KitInfo, json.loads((kit / "kit.json").read_text()), source="kit.json"
            )
        return self._infos[version]

    def _build(self, version: str) -> Path:
        folder = self.root / version
        folder.mkdir(parents=True)
        wheel = fake_vllm_wheel(folder, version)
        snap = folder / "engine.snapshot.json"
        made = run_k3kit(
            "engine", "snapshot", "--engine", "vllm", "--wheel", wheel, "--version", version,
            "-o", snap,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        text = (EXAMPLE / "package.toml").read_text()
        assert f'version = "{SHIPPED}"\n' in text
        package = folder / "package.toml"
        package.write_text(text.replace(f'version = "{SHIPPED}"\n', f'version = "{version}"\n', 1))
        build(package, self.golden.lock, folder / "kit", engine_snapshot=snap)
        return folder / "kit"


def audit_cases(
    cases: list[tuple[dict[str, Any], dict[str, Any], bytes]],
    kits: RealKits,
    evidence: dict[str, bytes] | None = None,
    version: str | None = None,
) -> AuditReport:
    claims = claims_for(cases, version)
    info = kits.info(claims.environment.engine_version)
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
        statement.predicate,
        signer_keyid="test",
        kit=None,
        evidence=EvidenceFacts({rid: "ok" for rid in results}),
        results=results,
        subjects={},
    )
    return AuditReport("memory", run_rules(ctx))


GUIDELLM = [
    "guidellm-qwen3-30b-a3b-tp4-sync.json.xz",
    "guidellm-qwen3-4b-tp2-sync.json.xz",
    "guidellm-qwen3-4b-tp4-sync.json.xz",
    "guidellm-gpt-oss-20b-tp4-sync.json.xz",
    "guidellm-qwen3-4b-tp4-c4.json.xz",
]
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
    *[(name, 0) for name in GUIDELLM],
    ("aiperf-qwen36-nvfp4-chatbot-c8.json.xz", None),
    ("aiperf-qwen36-nvfp4-chatbot-c2.json.xz", None),
    ("aiperf-llama32-3b-gguf-c1.json", None),
    ("aiperf-qwen36-nvfp4-chatbot-r1.0.json.xz", None),
    ("aiperf-qwen36-nvfp4-chatbot-c4.json.xz", None),
    ("aiperf-qwen36-nvfp4-chatbot-c16.json.xz", None),
    ("aiperf-qwen36-nvfp4-chatbot-c32.json.xz", None),
    ("aiperf-qwen36-nvfp4-chatbot-r0.8.json.xz", None),
    *[
        (f"vllm0251-opt125m-{n}.json", None)
        for n in ("seqs4-c2-run0", "seqs4-c2-run1", "seqs8-c2-run0", "seqs8-c2-run1", "c2")
    ],
]
