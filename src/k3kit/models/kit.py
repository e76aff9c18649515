"""``kit.json`` and ``MANIFEST.json``: what a built kit is and which bytes it consists of."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from k3kit.models._base import CommitSha, Frozen, Name, NonNegInt, RelPath, RepoId, Sha256Hex
from k3kit.models.package import EnginePin, HardwareTarget, ModelInfo, PackageInfo, Price


class KitProfile(Frozen):
    name: Name
    topology: str
    description: str
    served_model_name: str
    files: list[RelPath]


class KitWeights(Frozen):
    repo: RepoId
    commit: CommitSha
    lock_sha256: Sha256Hex
    file_count: NonNegInt
    total_bytes: NonNegInt


class KitInfo(Frozen):
    schema_: Literal["k3kit.kit/v1"] = Field(alias="schema", default="k3kit.kit/v1")
    package: PackageInfo
    model: ModelInfo
    hardware: HardwareTarget
    engine: EnginePin
    weights: KitWeights
    profiles: list[KitProfile]
    price: Price
    limitations: list[str]
    built_with: str


class ManifestEntry(Frozen):
    path: RelPath
    size: NonNegInt
    sha256: Sha256Hex


class Manifest(Frozen):
    schema_: Literal["k3kit.manifest/v1"] = Field(alias="schema", default="k3kit.manifest/v1")
    files: list[ManifestEntry] = Field(min_length=1, max_length=10_000)

    @model_validator(mode="after")
    def _sorted_unique(self) -> Manifest:
        paths = [e.path for e in self.files]
        if paths != sorted(paths) or len(set(paths)) != len(paths):
            raise ValueError("manifest files must be sorted by path and unique")
        return self
