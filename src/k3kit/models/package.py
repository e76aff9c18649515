"""``package.toml``: what the publisher says the kit is.

The package definition is the input of ``k3kit build``. Engine settings per profile are kept as the
engine's own flag names (the keys of ``vllm serve --config`` / ``sglang serve --config`` YAML) so
that ``engines`` can check them against the flag snapshot of the pinned engine version instead of
inventing a vocabulary. Any model (dense or mixture-of-experts), any GPU count and any node count:
the facts that only the weights can prove (shards, bytes, context length) are cross-checked against
the lock by ``kit.build``, not trusted from this file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from k3kit.models import _rules as rules
from k3kit.models._base import Frozen, KitVersion, Measured, Name, NonNegInt, RepoId
from k3kit.models._methods import EnginePinMethods, HardwareTargetMethods
from k3kit.models.engine_version import MAX_VERSION_CHARS, VersionMatch

ScalarSetting = bool | int | str | Decimal
EngineSetting = ScalarSetting | dict[str, ScalarSetting] | list[str]
EngineName = Literal["vllm", "sglang"]
#: Variables every rendered engine.env sets (templates/profile/engine.env.j2): the weights are
#: local, so the engine never reaches the hub.
RENDERED_ENV = {"HF_HUB_OFFLINE": "1"}


class PackageInfo(Frozen):
    name: Name
    version: KitVersion
    sequence: int = Field(
        ge=1, le=2**31, description="Monotonic release number; ordering is by this"
    )
    channel: Name = "stable"
    title: str = Field(min_length=1, max_length=200)


class ModelInfo(Frozen):
    """Published model facts. Expert fields are for mixture-of-experts models only; ``shards``
    and ``approx_weight_bytes`` are optional and, when given, must agree with the lock."""

    repo: RepoId
    family: str = Field(min_length=1, max_length=100)
    total_parameters: str = Field(
        min_length=1, max_length=20, description="as published, e.g. 2.78T"
    )
    active_parameters: str | None = Field(default=None, min_length=1, max_length=20)
    experts: int | None = Field(default=None, ge=2)
    experts_per_token: int | None = Field(default=None, ge=1)
    layers: int = Field(ge=1)
    layer_mix: str | None = Field(default=None, min_length=1, max_length=200)
    quantization: str = Field(min_length=1, max_length=40)
    approx_weight_bytes: NonNegInt | None = None
    shards: int | None = Field(default=None, ge=1)
    max_context_tokens: int = Field(ge=1)

    _experts_together = model_validator(mode="after")(rules.model_info_experts_together)


class HardwareTarget(HardwareTargetMethods, Frozen):
    """The node the kit was measured on (and what preflight expects of a node).

    A GPU node (the default) states the GPU model, memory and compute capability. A node that
    serves on its CPUs (``accelerator = "cpu"``: vLLM's CPU backend, small models at the edge)
    states what preflight can check on such a node instead: usable cores, memory in GiB and the
    instruction-set features the engine build needs (``/proc/cpuinfo`` flag names such as
    ``avx2`` or ``avx512f``; a build for an instruction the CPU lacks dies by SIGILL). A CPU node
    runs one engine process: ``gpus_per_node`` is 1 and per-GPU figures are per node."""

    accelerator: Literal["gpu", "cpu"] | None = Field(
        default=None, description="gpu (the default) or cpu: the node serves on its CPUs"
    )
    gpu: str | None = Field(default=None, min_length=1, max_length=100)
    gpu_memory_gb: int | None = Field(default=None, ge=1)
    gpus_per_node: int = Field(ge=1, le=64)
    nodes: int = Field(ge=1, le=1024)
    min_compute_capability: str | None = Field(default=None, pattern=r"^[0-9]+\.[0-9]+$")
    gpu_name_pattern: Annotated[str, AfterValidator(rules.bounded_gpu_pattern)] | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="regex a GPU's reported name must contain (default: the gpu field, as text)",
    )
    min_cuda_driver_api: int | None = Field(
        default=None, ge=1000, description="e.g. 13000 for an engine built against CUDA 13"
    )
    min_shm_gib: int = Field(default=16, ge=0, le=4096)
    cpu_cores: int | None = Field(
        default=None, ge=1, le=65536, description="cpu: CPUs this process may run on, at least"
    )
    memory_gib: int | None = Field(
        default=None, ge=1, le=1048576, description="cpu: the node's memory (MemTotal), at least"
    )
    cpu_features: Annotated[list[str], AfterValidator(rules.cpu_flag_names)] | None = Field(
        default=None,
        max_length=64,
        description="cpu: /proc/cpuinfo flags the engine build needs, e.g. avx2, avx512f",
    )

    # is_cpu, device: k3kit.models._methods, shared with the lite record

    # each kind of node states its own facts and none of the other's (k3kit.models._rules)
    _one_kind_of_node = model_validator(mode="after")(rules.hardware_one_kind_of_node)


class EnginePin(EnginePinMethods, Frozen):
    """The engine the kit was measured with, as the engine itself reports its version."""

    name: EngineName
    version: Annotated[str, AfterValidator(rules.pep440_engine_version)] = Field(
        max_length=MAX_VERSION_CHARS,
        description="PEP 440, as the engine prints it: 0.32.0, 0.32.0+cpu, 0.5.2.post1",
    )
    version_match: VersionMatch | None = Field(
        default=None,
        description="how the engine found at launch must match: exact (the default; local label "
        "included) or same-release (the same version before '+', any local label)",
    )
    image: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9./_-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$",
        description="container image pinned by digest; omit rather than pin by tag",
    )
    loads: Annotated[dict[str, str], AfterValidator(rules.engine_loads_reasons)] | None = Field(
        default=None,
        description="serve flags (or keys inside one, `speculative-config.model`) and engine.env "
        "variables that make the engine load code or files from outside the kit and the weights, "
        "each with the publisher's reason; shown to the buyer before launch. Undeclared ones are "
        "refused at build and at launch",
    )

    # match_rule, release, accepts: k3kit.models._methods, shared with the lite record


class TopologyDef(Frozen):
    """One shape the profiles are rendered for. Its name is derived, never chosen, so a folder
    called ``single-node-8gpu`` always holds files for one node of 8 GPUs."""

    kind: Literal["single-node", "multi-node"]
    nodes: int = Field(default=1, ge=1, le=1024)
    gpus_per_node: int = Field(ge=1, le=64)
    serve: dict[str, EngineSetting] = Field(
        default_factory=dict, description="settings that differ in this topology (parallelism)"
    )

    @model_validator(mode="after")
    def _kind_matches_nodes(self) -> TopologyDef:
        if (self.kind == "single-node") != (self.nodes == 1):
            raise ValueError("single-node means nodes = 1; multi-node means nodes >= 2")
        return self

    @property
    def name(self) -> str:
        if self.kind == "single-node":
            return f"single-node-{self.gpus_per_node}gpu"
        return f"multi-node-{self.nodes}x{self.gpus_per_node}gpu"


PoolRole = Literal["prefill", "decode"]
#: The pool roles in the order they are rendered and listed.
POOL_ROLES: tuple[PoolRole, ...] = ("prefill", "decode")


class PoolDef(Frozen):
    """One pool of a prefill/decode-disaggregated deployment: its own GPU model, GPUs per node
    and node count, and the settings only it takes (its parallel sizes and the engine's own PD
    flags: vLLM ``kv-transfer-config`` with its ``kv_role``, SGLang ``disaggregation-mode``).
    Prefill is compute-bound and decode memory-bound, so the two are often sized, and even
    equipped, differently; a package that could state only one shape could not describe them."""

    gpu: str = Field(min_length=1, max_length=100)
    gpu_memory_gb: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1, le=64)
    nodes: int = Field(default=1, ge=1, le=1024)
    serve: dict[str, EngineSetting] = Field(
        default_factory=dict,
        description="settings of this pool only: parallel sizes and the engine's PD flags",
    )

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes


class Disaggregation(Frozen):
    """``[disaggregation]``: prefill and decode run as separate engine groups, each with its own
    hardware, and the KV cache moves from one to the other (the engines' own connectors). The
    layout is the package's only shape: its name is derived from the two pools, never chosen."""

    prefill: PoolDef
    decode: PoolDef

    def pools(self) -> list[tuple[PoolRole, PoolDef]]:
        return [("prefill", self.prefill), ("decode", self.decode)]

    @property
    def name(self) -> str:
        p, d = self.prefill, self.decode
        return f"pd-{p.nodes}x{p.gpus_per_node}gpu-{d.nodes}x{d.gpus_per_node}gpu"

    @property
    def gpus(self) -> int:
        """Every GPU of both pools: a disaggregated run's per-GPU divisor."""
        return self.prefill.gpus + self.decode.gpus

    @property
    def nodes(self) -> int:
        return self.prefill.nodes + self.decode.nodes


@dataclass(frozen=True)
class PoolShape:
    """One pool as a shape the profiles are rendered for (``<layout>/<role>``): what a
    :class:`TopologyDef` is to an aggregated package, so rendering and launch treat a pool
    like any topology (its own folder, serve.yaml, units and node wiring)."""

    layout: str
    role: PoolRole
    pool: PoolDef

    @property
    def name(self) -> str:
        return f"{self.layout}/{self.role}"

    @property
    def nodes(self) -> int:
        return self.pool.nodes

    @property
    def gpus_per_node(self) -> int:
        return self.pool.gpus_per_node

    @property
    def serve(self) -> dict[str, EngineSetting]:
        return self.pool.serve


Shape = TopologyDef | PoolShape


# UPPER_SNAKE_CASE in ASCII with at least one letter, not starting with a digit: launch's rule for
# engine.env names ([A-Za-z_][A-Za-z0-9_]*) less lower case, so every name a build accepts a node
# accepts, and every ASCII name the old isalnum/isupper test accepted (`_1A`) still passes
_ENV_NAME = re.compile(r"(?=[A-Z0-9_]*[A-Z])[A-Z_][A-Z0-9_]*")


class Profile(Frozen):
    description: str = Field(min_length=1, max_length=500)
    served_model_name: str = Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")
    serve: dict[str, EngineSetting] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    topologies: list[str] | None = Field(
        default=None, description="names of the package's topologies to render; default all"
    )

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            # ASCII only, not starting with a digit: str.isalnum and isupper took VLLM_É and 1ABC,
            # which launch's name rule then refused on every node (a kit no one could start)
            if not _ENV_NAME.fullmatch(key):
                raise ValueError(f"environment variable name {key!r} must be UPPER_SNAKE_CASE")
            if key in RENDERED_ENV:
                # Rendered a second time it made an engine.env launch refuses (a key set twice).
                raise ValueError(
                    f"{key} is always set by k3kit ({key}={RENDERED_ENV[key]}); omit it"
                )
        return env


class Price(Frozen):
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    amount: Measured
    maintenance_per_month: Measured
    gpu_hour_usd: Measured | None = Field(
        default=None, gt=0, description="reference GPU-hour price for the card's cost per token"
    )


class DeployDef(Frozen):
    """Which deploy targets ``k3kit build`` renders for every profile × topology. The names are
    checked against the registry of targets (:mod:`k3kit.publish.deploy`) at build time, so a
    new target needs no edit here; absent, a kit gets every default target."""

    targets: list[Name] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="deploy targets to render (e.g. shell, compose, systemd, k8s, slurm)",
    )

    @field_validator("targets")
    @classmethod
    def _once_each(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError(f"targets repeat a name: {', '.join(value)}")
        return value


class PackageDef(Frozen):
    schema_: Literal["k3kit.package/v1"] = Field(alias="schema")
    package: PackageInfo
    model: ModelInfo
    hardware: HardwareTarget
    engine: EnginePin
    topologies: list[TopologyDef] = Field(default_factory=list, max_length=16)
    profiles: dict[Name, Profile] = Field(min_length=1)
    price: Price | None = None
    deploy: DeployDef = Field(default_factory=DeployDef)
    disaggregation: Disaggregation | None = Field(
        default=None, description="prefill and decode pools (PD disaggregation); else aggregated"
    )
    limitations: list[str] = Field(
        min_length=1, description="what was NOT measured, stated plainly"
    )

    @model_validator(mode="after")
    def _consistent(self) -> PackageDef:
        if any(not item.strip() for item in self.limitations):
            raise ValueError("limitations must not contain blank entries")
        if self.disaggregation is not None:
            self._disaggregated_ok(self.disaggregation)
        names = [t.name for t in self.shapes]
        if len(set(names)) != len(names):
            raise ValueError(f"topologies repeat a shape: {', '.join(names)}")
        for pname, profile in self.profiles.items():
            for wanted in profile.topologies or []:
                if wanted not in names:
                    raise ValueError(
                        f"profiles.{pname}.topologies: no topology {wanted!r} "
                        f"(the package has {', '.join(names)})"
                    )
        return self

    def _disaggregated_ok(self, pd: Disaggregation) -> None:
        """A disaggregated package has one layout, its pools, on GPU nodes that [hardware]
        counts in full: the receipt's environment is checked against that total."""
        if self.topologies:
            raise ValueError(
                "a disaggregated package's only shape is its [disaggregation] pools; "
                "remove [[topologies]]"
            )
        if self.hardware.is_cpu:
            raise ValueError("disaggregation needs GPU pools: hardware.accelerator is cpu")
        chosen = [name for name, prof in self.profiles.items() if prof.topologies is not None]
        if chosen:
            # One pool alone serves nothing: each profile is rendered for both or not at all.
            raise ValueError(
                f"profiles.{chosen[0]}.topologies: a disaggregated package renders every profile "
                "for both pools; remove it"
            )
        if self.hardware.nodes != pd.nodes:
            raise ValueError(
                f"hardware.nodes is {self.hardware.nodes}, but the prefill and decode pools "
                f"have {pd.prefill.nodes} + {pd.decode.nodes} = {pd.nodes} node(s); "
                f"set hardware.nodes = {pd.nodes}"
            )
        gpus = {pd.prefill.gpu, pd.decode.gpu}
        if self.hardware.gpu not in gpus:
            raise ValueError(
                f"hardware.gpu is {self.hardware.gpu!r}, but the pools run on "
                f"{' and '.join(sorted(gpus))}; name one of them"
            )

    @property
    def shapes(self) -> list[Shape]:
        """The declared topologies, the two pools of a disaggregated package, or one node of the
        measured hardware when neither is declared."""
        if self.disaggregation is not None:
            pd = self.disaggregation
            return [PoolShape(pd.name, role, pool) for role, pool in pd.pools()]
        if self.topologies:
            return list(self.topologies)
        kind: Literal["single-node", "multi-node"] = (
            "single-node" if self.hardware.nodes == 1 else "multi-node"
        )
        return [
            TopologyDef(
                kind=kind, nodes=self.hardware.nodes, gpus_per_node=self.hardware.gpus_per_node
            )
        ]

    @property
    def total_gpus(self) -> int:
        """Every GPU the measured layout serves on: both pools, or the hardware target's."""
        if self.disaggregation is not None:
            return self.disaggregation.gpus
        return self.hardware.nodes * self.hardware.gpus_per_node

    def measured(self, topo: Shape) -> bool:
        """A topology is measured only when it is the hardware target the receipt's claims
        describe (``audit`` checks the claims' environment against that target); a pool is
        part of the one layout a disaggregated package declares, which is the measured one."""
        if isinstance(topo, PoolShape):
            return True
        hw = self.hardware
        return (topo.nodes, topo.gpus_per_node) == (hw.nodes, hw.gpus_per_node)
