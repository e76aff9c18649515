"""The independent corpus (tests/data/unseen): real files the audit rules were not written against.

Each file is described as its own source says it was made (the command line or log next to it in
its repository; see tests/data/unseen/SOURCES.md) and wrapped in claims through the same helpers
as the first corpus (tests/realcorpus.py), so the audit runs exactly as ``k3kit audit`` would on a
receipt signed with that file.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from k3kit.evidence import parse_evidence
from tests.realcorpus import _metrics, case

UNSEEN = Path(__file__).parent / "data" / "unseen"

Case = tuple[dict[str, Any], dict[str, Any], bytes]

# vllm bench serve --dataset-name random --random-range-ratio 0.0 (each result's .log next to it
# prints the Namespace): the three shapes of tsho/vllm-benchmark-scripts' sweep.
_TSHO_LENGTHS = {"short": (1024, 256), "medium": (4096, 512), "long": (8000, 1000)}

#: Every unseen file, and the record of it a receipt cites (None: the whole file is one run).
FILES: list[tuple[str, int | None]] = [
    ("vllm-gemma4-31b-gpu-short-rate4.json", None),
    ("vllm-gemma4-31b-gpu-medium-rate4.json", None),
    ("vllm-gemma4-31b-gpu-long-rate1.json", None),
    ("vllm-gemma4-31b-gpu-medium-rateinf.json", None),
    ("vllm-gemma4-31b-tpu-short-rate2.json", None),
    ("sglang-qwen25-3b-agg-n50-in128-out64-c8.jsonl", 0),
    ("sglang-qwen25-3b-agg-n100-in512-out128-c32.jsonl", 0),
    ("sglang-qwen25-3b-agg-n100-in128-out128-c8.jsonl", 0),
    ("sglang-qwen25-3b-pd-1p2d-n100-in512-out128-c64.jsonl", 0),
    ("sglang-qwen25-3b-pd-inter-n100-in128-out64-c8.jsonl", 0),
    ("vllm-gemma4-31b-tpu-long-rateinf.json", None),
    ("vllm-gemma4-31b-gpu-short-rateinf.json", None),
    ("vllm-gemma4-31b-gpu-long-rate32.json", None),
    ("sglang-qwen25-3b-pd-1p8d-n100-in2048-out512-c128.jsonl", 0),
    ("sglang-qwen25-3b-pd-intra-n50-in512-out64-c32.jsonl", 0),
    ("sglang-qwen25-3b-agg-local.jsonl", 0),
    ("sglang-qwen25-3b-pd-inter-node-gh200-a100.jsonl", 0),
    ("llmperf-gpt41nano-150-5500-c10.json", None),
    ("llmperf-gpt41nano-5500-350-c50.json", None),
    ("llmperf-gpt41nano-550-150-c1.json", None),
    ("llmperf-gpt41nano-550-150-c10.json", None),
    ("llmperf-gpt41nano-5500-350-c20.json", None),
    ("aiperf-qwen3-4b-g7-c16.json", None),
    ("aiperf-qwen3-4b-g7-c128.json", None),
]


#: The engine version that served each file, by name prefix, where its source says it (the
#: evidence is in SOURCES.md); other files keep the shipped pin as a placeholder, as there.
ENGINE_VERSIONS = {
    # akamaslabs/vllm-benchmark study 26: k8s/01-statefulset_template.yaml pins the image
    # vllm/vllm-openai:v0.29.0 (the only version of that file in its history).
    "aiperf-qwen3-4b-g7-": "0.29.0",
}


def engine_version(name: str) -> str | None:
    return next((v for p, v in ENGINE_VERSIONS.items() if name.startswith(p)), None)


def read(name: str) -> bytes:
    return (UNSEEN / name).read_bytes()


def _vllm_random(name: str, data: bytes) -> Case:
    """A tsho/vllm-benchmark-scripts result: random prompts of fixed lengths, Poisson arrivals."""
    run = parse_evidence(data, source=name)
    v = run.values
    shape = next(s for s in _TSHO_LENGTHS if f"-{s}-" in name)
    inp, out = _TSHO_LENGTHS[shape]
    rid = name.split(".")[0].lower()[:50]
    wl = {
        "description": name,
        "dataset": "random",
        "load": "open-loop",
        "lengths": "fixed",
        "input_tokens": inp,
        "output_tokens": out,
    }
    row: dict[str, Any] = {
        "id": rid,
        "profile": "interactive",
        "workload": rid,
        "requests": v["num_prompts"],
        "completed": v["completed"],
        "metrics": _metrics(run.stats, v),
        "evidence": f"results/{rid}.json",
    }
    if v["request_rate"] != "inf":
        row["offered_rate"] = Decimal(str(v["request_rate"]))
        row["burstiness"] = Decimal(str(v["burstiness"]))
    return wl, row, data


def unseen_case(name: str, record: int | None = None, data: bytes | None = None) -> Case:
    """(workload, run) claims for one unseen file, and its bytes (``data``: an edited copy)."""
    data = read(name) if data is None else data
    if name.startswith("vllm-"):
        return _vllm_random(name, data)
    return case(name, record, data)


def edited(name: str, record: int | None, path: tuple[str, ...], factor: float) -> bytes:
    """The file with one figure scaled, written back the way its tool writes JSON."""
    data = read(name)
    if name.endswith(".jsonl"):
        lines = data.splitlines()
        obj = json.loads(lines[record or 0].replace(b"Infinity", b"1e999"))
        _scale(obj, path, factor)
        lines[record or 0] = json.dumps(obj).replace("1e999", "Infinity").encode()
        return b"\n".join(lines) + b"\n"
    obj = json.loads(data)
    _scale(obj, path, factor)
    return json.dumps(obj, indent=2).encode()


def _scale(obj: dict[str, Any], path: tuple[str, ...], factor: float) -> None:
    node: Any = obj
    for key in path[:-1]:
        node = node[key]
    before = node[path[-1]]
    node[path[-1]] = before * factor
    assert node[path[-1]] != before, f"scaling {path} by {factor} changed nothing"
