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

import importlib
from typing import TYPE_CHECKING, Any

from k3kit._registry import import_members
from k3kit.engines._adapter import ENGINES, EngineAdapter, Parallel, engine
from k3kit.engines._probe import VERSION_TIMEOUT_S, how_it_ended, probe_version
from k3kit.engines._snapshot import (
    KIT_SNAPSHOT_NAME,
    MAX_SNAPSHOT_BYTES,
    EngineSnapshot,
    Option,
    closest,
    shipped_versions,
    snapshot,
)
from k3kit.engines._validate import Review, review_profile, validate_env, validate_settings

if TYPE_CHECKING:
    from k3kit.engines._runtime import Runtime
    from k3kit.engines._snapfile import (
        SnapshotFile,
        parse_snapshot_file,
        snapshot_file_bytes,
        snapshot_sha256,
        to_engine_snapshot,
    )

import_members(__name__, __path__)
ADAPTERS = ENGINES  # the name callers and tests already use

# A publisher-supplied snapshot file is a pydantic model (k3kit.engines._snapfile); the shipped
# snapshots are plain data. Its names are imported on first use (PEP 562), so a launch of a kit
# that uses a shipped snapshot never imports pydantic (docs/performance.md, "Fifth pass").
_SNAPFILE_NAMES = frozenset(
    (
        "SnapshotFile",
        "parse_snapshot_file",
        "snapshot_file_bytes",
        "snapshot_sha256",
        "to_engine_snapshot",
    )
)


def __getattr__(name: str) -> Any:
    if name in _SNAPFILE_NAMES:
        return getattr(importlib.import_module("k3kit.engines._snapfile"), name)
    if name == "Runtime":  # only a multi-node launch builds one (k3kit.engines._runtime)
        return importlib.import_module("k3kit.engines._runtime").Runtime
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
