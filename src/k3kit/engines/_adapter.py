"""The one interface every engine implements: how its settings are named, how it is started,
how a multi-node group is wired. Everything version-specific stays in the snapshot data."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar

from k3kit._immutable import NamedTuple
from k3kit._registry import Registry

if TYPE_CHECKING:
    from k3kit.engines._runtime import Runtime

Setting = object


# NamedTuples, not frozen dataclasses: immutable records all the same, read by attribute, and every
# launch imports this module (a frozen dataclass is ~0.5 ms of CPU to create at import, a
# NamedTuple ~0.1 ms; docs/performance.md).
class Parallel(NamedTuple):
    """Parallel sizes as one engine config sets them, and the node shape they must fill."""

    tp: int
    pp: int
    dp: int
    world: int
    nodes: int
    gpus_per_node: int

    @property
    def dp_local(self) -> int:
        return max(self.dp // self.nodes, 1) if self.dp % self.nodes == 0 else 0

    def as_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "dp_local": self.dp_local}


def json_setting(value: Setting) -> Mapping[str, Setting] | None:
    """A JSON-valued flag as the engine reads it: a mapping, or a string holding one (vLLM and
    SGLang parse ``'{"kv_role": "kv_producer"}'`` like the table form); None for anything else."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, Mapping) else None


def _int(settings: Mapping[str, Setting], key: str, default: int = 1) -> int:
    value = settings.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class EngineAdapter:
    """Base engine adapter; subclasses name their flags. Stateless and side-effect free."""

    name: ClassVar[str]
    executable: ClassVar[str]
    display: ClassVar[str]
    tp_key: ClassVar[str]
    pp_key: ClassVar[str]
    dp_key: ClassVar[str]
    context_key: ClassVar[str]
    concurrency_key: ClassVar[str]
    memory_key: ClassVar[str]
    memory_default: ClassVar[float | None]
    kv_dtype_key: ClassVar[str] = "kv-cache-dtype"
    env_prefixes: ClassVar[tuple[str, ...]]
    #: flags the launcher sets itself (paths, binding, runtime wiring): never in a profile.
    reserved: ClassVar[frozenset[str]]
    #: flag -> snapshot registry holding its valid values.
    registry_for: ClassVar[dict[str, str]]
    default_port: ClassVar[int]
    rendezvous_port: ClassVar[int]

    def version_argv(self, path: str) -> list[str]:
        return [path, "--version"]

    def parse_version(self, stdout: str) -> str:
        lines = [line.strip() for line in stdout.splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def serve_argv(self, path: str, weights: Path, config: Path, host: str, port: int) -> list[str]:
        raise NotImplementedError

    def parallel(self, settings: Mapping[str, Setting], nodes: int, gpus: int) -> Parallel:
        tp, pp, dp = (_int(settings, k) for k in (self.tp_key, self.pp_key, self.dp_key))
        return Parallel(tp, pp, dp, tp * pp * dp, nodes, gpus)

    def topology_settings(self, par: Parallel) -> dict[str, Setting]:
        """Locked settings a topology adds to the profile's (e.g. per-node DP size)."""
        return {}

    def runtime_argv(self, par: Parallel, runtime: Runtime) -> list[str]:
        """Flags appended at start on each node of a multi-node group."""
        return []

    #: The engine's own flag that makes a server a prefill or decode instance, and what to set
    #: it to for each pool (empty: the engine cannot run disaggregated, pools are refused).
    pd_flag: ClassVar[str] = ""
    pd_values: ClassVar[dict[str, str]] = {}

    def pd_role(self, settings: Mapping[str, Setting]) -> str | None:
        """The prefill/decode role the engine's own PD flags give this config: ``prefill``,
        ``decode``, ``both`` (an instance that sends and receives KV) or None (no PD flag)."""
        return None

    def pd_transport(self, settings: Mapping[str, Setting]) -> str | None:
        """How KV moves between the pools (connector or transfer backend), as the flags say."""
        return None

    def memory_fraction(self, settings: Mapping[str, Setting]) -> float | None:
        value = settings.get(self.memory_key)
        if isinstance(value, Decimal | int | float) and not isinstance(value, bool):
            return float(value)
        return self.memory_default


#: Every engine k3kit can build, check and launch for, by the name a package's ``[engine] name``
#: uses. ``k3kit.models.package.EngineName`` (the package schema's list) is tested against it.
ENGINES: Registry[EngineAdapter] = Registry("engine adapter", code="ENGINE_UNKNOWN")

A = TypeVar("A", bound=type[EngineAdapter])


def engine(cls: A) -> A:
    """Register an adapter class under its ``name`` (one stateless instance serves every kit)."""
    ENGINES.add(cls.name, cls())
    return cls
