"""Engines: one adapter interface (how an engine is named, started and wired across nodes) and
per-version snapshots as data (its server flags, environment variables and registries).

vLLM and SGLang are the two adapters; the versions are whatever ``k3kit/data/`` ships
(:func:`shipped_versions`). Validation is stricter than the engines' own parsers on purpose:
see :mod:`k3kit.engines._validate`.
"""

from __future__ import annotations

from k3kit.engines._adapter import EngineAdapter, Parallel, Runtime
from k3kit.engines._probe import VERSION_TIMEOUT_S, how_it_ended, probe_version
from k3kit.engines._snapfile import (
    KIT_SNAPSHOT_NAME,
    MAX_SNAPSHOT_BYTES,
    SnapshotFile,
    parse_snapshot_file,
    snapshot_file_bytes,
    snapshot_sha256,
    to_engine_snapshot,
)
from k3kit.engines._snapshot import EngineSnapshot, Option, closest, shipped_versions, snapshot
from k3kit.engines._validate import Review, review_profile, validate_env, validate_settings
from k3kit.engines.sglang import Sglang
from k3kit.engines.vllm import Vllm
from k3kit.errors import InputError

ADAPTERS: dict[str, EngineAdapter] = {"vllm": Vllm(), "sglang": Sglang()}


def adapter(name: str) -> EngineAdapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise InputError(
            f"no engine adapter for {name!r}",
            code="ENGINE_UNKNOWN",
            hint=f"known engines: {', '.join(sorted(ADAPTERS))}",
        ) from None


__all__ = [
    "ADAPTERS",
    "KIT_SNAPSHOT_NAME",
    "MAX_SNAPSHOT_BYTES",
    "VERSION_TIMEOUT_S",
    "EngineAdapter",
    "EngineSnapshot",
    "Option",
    "Parallel",
    "Review",
    "Runtime",
    "SnapshotFile",
    "adapter",
    "closest",
    "how_it_ended",
    "parse_snapshot_file",
    "probe_version",
    "review_profile",
    "shipped_versions",
    "snapshot",
    "snapshot_file_bytes",
    "snapshot_sha256",
    "to_engine_snapshot",
    "validate_env",
    "validate_settings",
]
