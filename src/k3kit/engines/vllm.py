"""vLLM: ``vllm serve MODEL --config serve.yaml``; multi-node as native data parallelism
(leader plus ``--headless`` workers, each with its DP start rank) when the DP size fills the
nodes, else as one model spread over nodes (``--nnodes``/``--node-rank``/``--master-addr``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from k3kit.engines._adapter import (
    EngineAdapter,
    Parallel,
    Setting,
    engine,
    json_setting,
)

if TYPE_CHECKING:
    from k3kit.engines._runtime import Runtime


@engine
class Vllm(EngineAdapter):
    name = "vllm"
    executable = "vllm"
    display = "vLLM"
    tp_key = "tensor-parallel-size"
    pp_key = "pipeline-parallel-size"
    dp_key = "data-parallel-size"
    context_key = "max-model-len"
    concurrency_key = "max-num-seqs"
    memory_key = "gpu-memory-utilization"
    memory_default = 0.92  # vLLM 0.33.0's default (notes/deploy.md §3)
    env_prefixes = ("VLLM_",)
    default_port = 8000
    rendezvous_port = 13345
    reserved: ClassVar[frozenset[str]] = frozenset(
        {
            "model",
            "config",
            "host",
            "port",
            "download-dir",
            "revision",
            "load-format",
            "help",
            "headless",
            "node-rank",
            "data-parallel-start-rank",
            "data-parallel-rank",
            "data-parallel-address",
            "data-parallel-rpc-port",
            "master-addr",
            "master-port",
        }
    )
    registry_for: ClassVar[dict[str, str]] = {
        "tool-call-parser": "tool_call_parsers",
        "reasoning-parser": "reasoning_parsers",
        "kv-cache-dtype": "kv_cache_dtype",
        "distributed-executor-backend": "distributed_executor_backend",
        "data-parallel-backend": "data_parallel_backend",
    }

    def serve_argv(self, path: str, weights: Path, config: Path, host: str, port: int) -> list[str]:
        return [
            path,
            "serve",
            str(weights),
            "--config",
            str(config),
            "--host",
            host,
            "--port",
            str(port),
        ]

    #: ``KVTransferConfig.kv_role`` (vllm/config/kv_transfer.py: KVProducer = kv_producer |
    #: kv_both, KVConsumer = kv_consumer | kv_both) as a pool role.
    KV_ROLES: ClassVar[dict[str, str]] = {
        "kv_producer": "prefill",
        "kv_consumer": "decode",
        "kv_both": "both",
    }

    pd_flag = "kv-transfer-config.kv_role"
    pd_values: ClassVar[dict[str, str]] = {
        "prefill": "kv_producer or kv_both",
        "decode": "kv_consumer or kv_both",
    }

    def pd_role(self, settings: Mapping[str, Setting]) -> str | None:
        config = json_setting(settings.get("kv-transfer-config"))
        if config is None or config.get("kv_role") is None:
            return None
        return self.KV_ROLES.get(str(config.get("kv_role")), f"unknown ({config.get('kv_role')})")

    def pd_transport(self, settings: Mapping[str, Setting]) -> str | None:
        config = json_setting(settings.get("kv-transfer-config"))
        connector = None if config is None else config.get("kv_connector")
        return None if connector is None else str(connector)

    def _dp_form(self, par: Parallel) -> bool:
        return par.nodes > 1 and par.dp >= par.nodes and par.dp % par.nodes == 0

    def topology_settings(self, par: Parallel) -> dict[str, Setting]:
        if par.nodes == 1:
            return {}
        if self._dp_form(par):
            return {"data-parallel-size-local": par.dp_local}
        return {"nnodes": par.nodes}

    def runtime_argv(self, par: Parallel, runtime: Runtime) -> list[str]:
        if par.nodes == 1:
            return []
        port = str(runtime.port or self.rendezvous_port)
        if self._dp_form(par):
            start = str(runtime.node_rank * par.dp_local)
            argv = [
                "--data-parallel-address",
                runtime.leader,
                "--data-parallel-rpc-port",
                port,
                "--data-parallel-start-rank",
                start,
            ]
        else:
            argv = [
                "--node-rank",
                str(runtime.node_rank),
                "--master-addr",
                runtime.leader,
                "--master-port",
                port,
            ]
        return [*argv, "--headless"] if runtime.node_rank > 0 else argv
