"""``package.toml``: what the publisher says the kit is.

The package definition is the input of ``k3kit build``. Engine settings per profile are kept as the
engine's own flag names (the keys of ``vllm serve --config`` YAML) so that ``engines`` can check
them against the flag snapshot of the pinned engine version instead of inventing a vocabulary.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field, field_validator, model_validator

from k3kit.models._base import Frozen, Measured, Name, NonNegInt, RepoId

Topology = Literal["single-node-8gpu"]
ScalarSetting = bool | int | str | Decimal
EngineSetting = ScalarSetting | dict[str, ScalarSetting] | list[str]


class PackageInfo(Frozen):
    name: Name
    version: str = Field(pattern=r"^\d+\.\d+\.\d+([.-][0-9A-Za-z.-]+)?$")
    sequence: int = Field(
        ge=1, le=2**31, description="Monotonic release number; ordering is by this"
    )
    channel: Name = "stable"
    title: str = Field(min_length=1, max_length=200)


class ModelInfo(Frozen):
    repo: RepoId
    family: str = Field(min_length=1, max_length=100)
    total_parameters: str = Field(
        min_length=1, max_length=20, description="as published, e.g. 2.78T"
    )
    active_parameters: str = Field(min_length=1, max_length=20)
    experts: int = Field(ge=1)
    experts_per_token: int = Field(ge=1)
    layers: int = Field(ge=1)
    layer_mix: str = Field(min_length=1, max_length=200)
    quantization: str = Field(min_length=1, max_length=40)
    approx_weight_bytes: NonNegInt
    shards: int = Field(ge=1)
    max_context_tokens: int = Field(ge=1)


class HardwareTarget(Frozen):
    gpu: str = Field(min_length=1, max_length=100)
    gpu_memory_gb: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1, le=64)
    nodes: int = Field(ge=1, le=1024)
    min_compute_capability: str = Field(pattern=r"^\d+\.\d+$")


class EnginePin(Frozen):
    name: Literal["vllm"]
    version: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    image: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9./_-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$",
        description="container image pinned by digest; omit rather than pin by tag",
    )


class Profile(Frozen):
    description: str = Field(min_length=1, max_length=500)
    topology: Topology = "single-node-8gpu"
    served_model_name: str = Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")
    serve: dict[str, EngineSetting] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if not key.replace("_", "A").isalnum() or not key.isupper():
                raise ValueError(f"environment variable name {key!r} must be UPPER_SNAKE_CASE")
        return env


class Price(Frozen):
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    amount: Measured
    maintenance_per_month: Measured
    gpu_hour_usd: Measured | None = Field(
        default=None, gt=0, description="reference GPU-hour price for the card's cost per token"
    )


class PackageDef(Frozen):
    schema_: Literal["k3kit.package/v1"] = Field(alias="schema")
    package: PackageInfo
    model: ModelInfo
    hardware: HardwareTarget
    engine: EnginePin
    profiles: dict[Name, Profile] = Field(min_length=1)
    price: Price
    limitations: list[str] = Field(
        min_length=1, description="what was NOT measured, stated plainly"
    )

    @model_validator(mode="after")
    def _limitations_nonblank(self) -> PackageDef:
        if any(not item.strip() for item in self.limitations):
            raise ValueError("limitations must not contain blank entries")
        return self
