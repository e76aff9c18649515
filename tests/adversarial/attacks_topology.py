"""Attacks through a prefill/decode-disaggregated package (issue 22): code smuggled into one pool's
KV connector, and a deploy target that would run the two pools as if they were one server."""

from __future__ import annotations

import json
from typing import Any

from tests.adversarial.corpus import Argv, Workbench, attack
from tests.pdkit import VLLM_DECODE, pd_package


def _build(
    w: Workbench,
    *,
    prefill: dict[str, Any] | None = None,
    decode: dict[str, Any] | None = None,
    targets: list[str] | None = None,
) -> Argv:
    path = pd_package(w.root / "package", prefill=prefill, decode=decode, targets=targets)
    return ["build", path, "--lock", w.golden.lock, "-o", w.root / "out"]


@attack("ENGINE_SETTING_INVALID", exit_code=3)
def build_pd_decode_pool_importing_its_own_kv_connector(w: Workbench) -> Argv:
    config = {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_consumer",
        "kv_connector_module_path": "evil_connector.mod",
    }
    return _build(w, decode={**VLLM_DECODE, "kv-transfer-config": json.dumps(config)})


@attack("ENGINE_SETTING_INVALID", exit_code=3)
def build_pd_prefill_pool_posing_as_decode(w: Workbench) -> Argv:
    return _build(w, prefill={**VLLM_DECODE, "data-parallel-size": 1})


@attack("DEPLOY_TARGET_NO_PD", exit_code=3)
def build_pd_package_for_slurm(w: Workbench) -> Argv:
    return _build(w, targets=["slurm"])
