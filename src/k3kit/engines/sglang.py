"""SGLang: ``sglang serve --model-path MODEL --config serve.yaml``; multi-node with
``--nnodes`` (locked), ``--node-rank`` and ``--dist-init-addr leader:port`` (runtime)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from k3kit.engines._adapter import EngineAdapter, Parallel, Setting, _int, engine

if TYPE_CHECKING:
    from k3kit.engines._runtime import Runtime


@engine
class Sglang(EngineAdapter):
    name = "sglang"
    executable = "sglang"
    display = "SGLang"
    tp_key = "tp-size"
    pp_key = "pp-size"
    dp_key = "dp-size"
    context_key = "context-length"
    concurrency_key = "max-running-requests"
    memory_key = "mem-fraction-static"
    memory_default = None  # SGLang sizes it from the GPU at start: not knowable beforehand
    env_prefixes = ("SGLANG_", "SGL_")
    default_port = 30000
    rendezvous_port = 20102  # SGLang's LWS example
    reserved: ClassVar[frozenset[str]] = frozenset(
        {
            "model-path",
            "config",
            "host",
            "port",
            "download-dir",
            "revision",
            "load-format",
            "help",
            "node-rank",
            "dist-init-addr",
        }
    )
    registry_for: ClassVar[dict[str, str]] = {
        "tool-call-parser": "tool_call_parsers",
        "reasoning-parser": "reasoning_parsers",
        "speculative-algorithm": "speculative_algorithms",
    }

    def version_argv(self, path: str) -> list[str]:
        return [path, "version"]

    def parse_version(self, stdout: str) -> str:
        """``sglang version`` prints ``sglang version: X`` then a git revision line."""
        for line in stdout.splitlines():
            if line.startswith("sglang version:"):
                return line.partition(":")[2].strip()
        return ""

    def serve_argv(self, path: str, weights: Path, config: Path, host: str, port: int) -> list[str]:
        return [
            path,
            "serve",
            "--model-path",
            str(weights),
            "--config",
            str(config),
            "--host",
            host,
            "--port",
            str(port),
        ]

    def parallel(self, settings: Mapping[str, Setting], nodes: int, gpus: int) -> Parallel:
        tp, pp, dp = (_int(settings, k) for k in (self.tp_key, self.pp_key, self.dp_key))
        # With DP attention the DP ranks live inside the TP group; otherwise they are replicas.
        inside = settings.get("enable-dp-attention") is True or "attn-dp-size" in settings
        return Parallel(tp, pp, dp, tp * pp * (1 if inside else dp), nodes, gpus)

    pd_flag = "disaggregation-mode"
    pd_values: ClassVar[dict[str, str]] = {"prefill": "prefill", "decode": "decode"}

    def pd_role(self, settings: Mapping[str, Setting]) -> str | None:
        """``--disaggregation-mode`` (server_args.py: null | prefill | decode)."""
        mode = settings.get("disaggregation-mode")
        return None if mode in (None, "null") else str(mode)

    def pd_transport(self, settings: Mapping[str, Setting]) -> str | None:
        """``--disaggregation-transfer-backend``; SGLang's default is mooncake."""
        if self.pd_role(settings) is None:
            return None
        return str(settings.get("disaggregation-transfer-backend", "mooncake"))

    def topology_settings(self, par: Parallel) -> dict[str, Setting]:
        return {"nnodes": par.nodes} if par.nodes > 1 else {}

    def runtime_argv(self, par: Parallel, runtime: Runtime) -> list[str]:
        if par.nodes == 1:
            return []
        port = runtime.port or self.rendezvous_port
        return [
            "--node-rank",
            str(runtime.node_rank),
            "--dist-init-addr",
            f"{runtime.leader}:{port}",
        ]
