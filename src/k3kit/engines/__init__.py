"""Engines: one adapter interface (how an engine is named, started and wired across nodes) and
per-version snapshots as data (its server flags, environment variables and registries).

Each public module here is one adapter and registers itself with ``@engine`` (the registry
:data:`ADAPTERS`, :mod:`k3kit._registry`) when this package imports it, so a new engine is one
module plus its snapshot data; vLLM and SGLang are the two today. The versions are whatever
``k3kit/data/`` ships (:func:`shipped_versions`). Validation is stricter than the engines' own
parsers on purpose: see :mod:`k3kit.engines._validate`. Used by ``publish`` (a kit's flags and
deploy files), ``node`` (launch), ``preflight`` (the memory budget), the CLI and the API.
"""

from __future__ import annotations

from k3kit._registry import import_members
from k3kit.engines._adapter import ENGINES, EngineAdapter, Parallel, Runtime, engine
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

import_members(__name__, __path__)
ADAPTERS = ENGINES  # the name callers and tests already use


def adapter(name: str) -> EngineAdapter:
    """The registered adapter for ``name``, or ``ENGINE_UNKNOWN`` listing the known ones."""
    return ENGINES.get_or_fail(name)


__all__ = [
    "ADAPTERS",
    "ENGINES",
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
    "engine",
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
