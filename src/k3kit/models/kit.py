"""``kit.json`` and ``MANIFEST.json``: what a built kit is and which bytes it consists of."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from k3kit.models import _rules as rules
from k3kit.models._base import CommitSha, Frozen, Name, NonNegInt, RelPath, RepoId, Sha256Hex
from k3kit.models._methods import KitProfileMethods
from k3kit.models._methods import pools_unchosen as pools_unchosen  # its home; re-exported
from k3kit.models.package import (
    Disaggregation,
    EnginePin,
    HardwareTarget,
    ModelInfo,
    PackageInfo,
    PoolRole,
    Price,
)


class KitProfile(KitProfileMethods, Frozen):
    """One profile rendered for one topology; ``measured`` says whether the receipt's numbers
    come from this shape or are an extrapolation from another one."""

    name: Name
    topology: str
    description: str
    served_model_name: str
    files: list[RelPath]
    nodes: int = Field(default=1, ge=1, le=1024)
    gpus_per_node: int | None = Field(default=None, ge=1, le=64)
    measured: bool | None = None
    parallel: dict[str, int] = Field(
        default_factory=dict, description="tp, pp, dp, dp_local as the engine config sets them"
    )
    role: PoolRole | None = Field(
        default=None, description="the pool of a disaggregated package this shape is"
    )
    gpu: str | None = Field(
        default=None, max_length=100, description="a pool's GPU model (default: hardware.gpu)"
    )
    gpu_memory_gb: int | None = Field(
        default=None, ge=1, description="a pool's GPU memory (default: hardware's)"
    )

    # folder: k3kit.models._methods, shared with the lite record


class ModelConfigFacts(Frozen):
    """Facts read at build time from the weights' ``config.json``, whose bytes matched the
    sha256 the lock lists for it; preflight's memory budget uses them."""

    sha256: Sha256Hex
    context_length: int | None = Field(default=None, ge=1)
    layers: int | None = Field(default=None, ge=1)
    kv_heads: int | None = Field(default=None, ge=1)
    head_dim: int | None = Field(default=None, ge=1)
    torch_dtype: str | None = Field(default=None, max_length=40)


class KitWeights(Frozen):
    repo: RepoId
    commit: CommitSha
    lock_sha256: Sha256Hex
    file_count: NonNegInt
    total_bytes: NonNegInt


class KitEngineSnapshot(Frozen):
    """The publisher-supplied engine snapshot the kit's settings were validated against (for an
    engine version k3kit ships no flag data for): the kit file and its digest, and the wheel it
    was read from. Absent when k3kit's own snapshot of the pinned version was used."""

    path: Literal["engine-snapshot.json"] = "engine-snapshot.json"
    sha256: Sha256Hex
    wheel: str = Field(pattern=r"^[A-Za-z0-9_.+-]{1,200}\.whl$")
    wheel_sha256: Sha256Hex
    generated_on: str = Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


class KitInfo(Frozen):
    schema_: Literal["k3kit.kit/v1"] = Field(alias="schema", default="k3kit.kit/v1")
    package: PackageInfo
    model: ModelInfo
    hardware: HardwareTarget
    engine: EnginePin
    engine_snapshot: KitEngineSnapshot | None = None
    weights: KitWeights
    profiles: list[KitProfile]
    disaggregation: Disaggregation | None = None
    model_config_facts: ModelConfigFacts | None = None
    price: Price | None = None
    limitations: list[str]
    built_with: str


class ManifestEntry(Frozen):
    path: RelPath
    size: NonNegInt
    sha256: Sha256Hex


class Manifest(Frozen):
    schema_: Literal["k3kit.manifest/v1"] = Field(alias="schema", default="k3kit.manifest/v1")
    files: list[ManifestEntry] = Field(min_length=1, max_length=10_000)

    # one entry per path, in path order (k3kit.models._rules)
    _sorted_unique = model_validator(mode="after")(rules.manifest_sorted_unique)
