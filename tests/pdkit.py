"""Prefill/decode-disaggregated packages for tests: the built-in example's model with its
topologies replaced by ``[disaggregation]`` pools, for vLLM (NIXL) or SGLang."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.benchgen import Claims, GenRun, make_claims, published_metrics
from tests.conftest import EXAMPLE

LAYOUT = "pd-1x8gpu-2x8gpu"
VLLM_PREFILL: dict[str, Any] = {
    "tensor-parallel-size": 8,
    "kv-transfer-config": {"kv_connector": "NixlConnector", "kv_role": "kv_producer"},
}
VLLM_DECODE: dict[str, Any] = {
    "tensor-parallel-size": 8,
    "data-parallel-size": 2,
    "kv-transfer-config": {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
}
SGLANG_PREFILL: dict[str, Any] = {
    "tp-size": 8,
    "disaggregation-mode": "prefill",
    "disaggregation-transfer-backend": "nixl",
}
SGLANG_DECODE: dict[str, Any] = {
    "tp-size": 16,
    "disaggregation-mode": "decode",
    "disaggregation-transfer-backend": "nixl",
}
SGLANG_PROFILE = """
[profiles.chat]
description = "Chat: prefill on B300, decode on H200."
served_model_name = "kimi-k3"

[profiles.chat.serve]
context-length = 131072
max-running-requests = 64
"""


def _toml(value: Any) -> str:
    """A TOML inline value (JSON is TOML for strings, numbers and booleans)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def pool(gpu: str, memory: int, nodes: int, serve: dict[str, Any]) -> str:
    return (
        f'gpu = "{gpu}"\ngpu_memory_gb = {memory}\ngpus_per_node = 8\nnodes = {nodes}\n'
        f"serve = {_toml(serve)}\n"
    )


def pd_package(
    folder: Path,
    *,
    engine: str = "vllm",
    prefill: dict[str, Any] | None = None,
    decode: dict[str, Any] | None = None,
    hardware_nodes: int = 3,
    decode_gpu: tuple[str, int] = ("NVIDIA B300", 288),
    targets: list[str] | None = None,
) -> Path:
    """Write ``package.toml`` for a 1-node prefill pool (B300) and a 2-node decode pool."""
    text = (EXAMPLE / "package.toml").read_text()
    text = re.sub(r"# Rendered shapes.*?(?=\[engine\])", "", text, flags=re.S)
    text = text.replace("nodes = 1\nmin_compute", f"nodes = {hardware_nodes}\nmin_compute")
    if engine == "sglang":
        text = text.replace(
            'name = "vllm"\nversion = "0.33.0"', 'name = "sglang"\nversion = "0.5.23"'
        )
        text = text[: text.index("[profiles.interactive]")] + SGLANG_PROFILE
    if targets is not None:
        text += f"\n[deploy]\ntargets = {json.dumps(targets)}\n"
    default_p = VLLM_PREFILL if engine == "vllm" else SGLANG_PREFILL
    default_d = VLLM_DECODE if engine == "vllm" else SGLANG_DECODE
    text += "\n[disaggregation.prefill]\n" + pool("NVIDIA B300", 288, 1, prefill or default_p)
    text += "\n[disaggregation.decode]\n" + pool(*decode_gpu, 2, decode or default_d)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "package.toml"
    path.write_text(text)
    return path


AGGREGATED_ENV = "gpu_count = 8\nnodes = 1\n"
PD_GPUS = 24
POOLS = (
    "[environment.pools.prefill]\n"
    'gpu = "NVIDIA B300"\ngpus_per_node = 8\nnodes = 1\n'
    "[environment.pools.decode]\n"
    'gpu = "{decode_gpu}"\ngpus_per_node = 8\nnodes = {decode_nodes}\n'
)


@dataclass
class PdClaims(Claims):
    """Claims whose [environment] states the pools (after the aggregated lines it replaces)."""

    gpu_count: int = PD_GPUS
    nodes: int = 3
    decode_nodes: int = 2
    pools: bool = True
    decode_gpu: str = "NVIDIA B300"

    def render(self) -> str:
        text = super().render()
        env = f"gpu_count = {self.gpu_count}\nnodes = {self.nodes}\n"
        text = text.replace(AGGREGATED_ENV, env, 1)
        if self.pools:
            pools = POOLS.format(decode_nodes=self.decode_nodes, decode_gpu=self.decode_gpu)
            text = text.replace("[workloads.synthetic]", pools + "[workloads.synthetic]", 1)
        return text


def pd_claims(
    runs: list[GenRun],
    divisor: int = PD_GPUS,
    *,
    gpu_count: int = PD_GPUS,
    nodes: int = 3,
    decode_nodes: int = 2,
    pools: bool = True,
    decode_gpu: str = "NVIDIA B300",
) -> PdClaims:
    """Honest claims of a 1x8 prefill + 2x8 decode measurement: per-GPU over all 24 GPUs;
    the keywords are what a fabrication changes."""
    base = make_claims(runs, input_len=2048, output_len=128)
    claims = PdClaims(
        base.runs,
        base.workload,
        base.comparisons,
        base.controls,
        gpu_count=gpu_count,
        nodes=nodes,
        decode_nodes=decode_nodes,
        pools=pools,
        decode_gpu=decode_gpu,
    )
    by_id = {run.id: run for run in runs}
    for row in claims.runs:
        row["metrics"] = published_metrics(by_id[row["id"]].result, divisor)
    return claims
