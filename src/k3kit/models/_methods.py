"""What the documents' classes DO, shared by the pydantic models and the records of
:mod:`k3kit.models.lite`, without pydantic.

Why a module of its own: ``launch`` picks a profile, asks the engine pin whether a version is
its own and hands the verified lock to the hashing engine. With those methods on the pydantic
models only, a node's ``launch`` had to import pydantic and build the kit's models just to call
them (about 4x the CPU of ``k3kit --version``; docs/performance.md, "Start-up", "Fifth pass").
Each mixin here is a base of the model (``class EnginePin(EnginePinMethods, Frozen)``) AND of
its generated record (``scripts/gen_lite_models.py`` copies the bases it finds in this module),
so the two classes cannot have different methods.

A mixin reads fields by name only, has no slots of its own and declares the fields it reads for
mypy only (``TYPE_CHECKING``): an annotation at run time would become a pydantic field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from k3kit.models.engine_version import VersionMatch, release_of, version_matches

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Protocol


class EnginePinMethods:
    """``kit.json``'s and ``package.toml``'s engine pin: the version rule launch applies."""

    __slots__ = ()
    if TYPE_CHECKING:
        version: str
        version_match: VersionMatch | None

    @property
    def match_rule(self) -> VersionMatch:
        return self.version_match or "exact"

    @property
    def release(self) -> str:
        """The version without its local label: the key of the engine's flag snapshot."""
        return release_of(self.version)

    def accepts(self, found: str) -> bool:
        """Whether an engine (or evidence) reporting ``found`` is this pin, by its rule."""
        return version_matches(self.version, found, self.match_rule)


class HardwareTargetMethods:
    """The node a kit was measured on: what preflight and the card ask of it."""

    __slots__ = ()
    if TYPE_CHECKING:
        accelerator: str | None
        gpu: str | None
        gpu_memory_gb: int | None
        cpu_cores: int | None
        memory_gib: int | None
        cpu_features: list[str] | None

    @property
    def is_cpu(self) -> bool:
        return self.accelerator == "cpu"

    @property
    def device(self) -> str:
        """The target in a few words, for cards and release notes."""
        if self.is_cpu:
            features = ", ".join(self.cpu_features or []) or "no ISA feature stated"
            return f"CPU ({self.cpu_cores}+ cores, {self.memory_gib}+ GiB, {features})"
        return f"{self.gpu} ({self.gpu_memory_gb} GB)"


class KitProfileMethods:
    """One profile of ``kit.json`` rendered for one shape."""

    __slots__ = ()
    if TYPE_CHECKING:
        name: str
        topology: str

    @property
    def folder(self) -> str:
        """The kit folder of this profile × shape. A pool's topology has two segments
        (``pd-1x8gpu-2x8gpu/decode``), so nothing may count path segments to find it."""
        return f"profiles/{self.name}/{self.topology}"


if TYPE_CHECKING:  # annotations only: a Protocol class costs ~0.05 ms of every node start

    class _LockedDigests(Protocol):
        @property
        def blake3(self) -> str | None: ...


class WeightsLockMethods:
    """``weights.lock.json``: what the hashing engine asks of the lock."""

    __slots__ = ()
    if TYPE_CHECKING:

        @property
        def files(self) -> Iterable[_LockedDigests]: ...

    @property
    def has_blake3(self) -> bool:
        """True when every file carries blake3, so verifiers may use the faster digest."""
        return all(f.blake3 is not None for f in self.files)


if TYPE_CHECKING:  # annotations only, as _LockedDigests

    class _PoolProfile(Protocol):
        @property
        def name(self) -> str: ...
        @property
        def topology(self) -> str: ...
        @property
        def role(self) -> str | None: ...


def pools_unchosen(matches: Sequence[_PoolProfile], topology: str | None) -> str | None:
    """Why a profile cannot be picked without ``--topology``: it runs as prefill and decode
    pools, and starting "the" profile would start one pool of it; None when it can."""
    pools = sorted(p.topology for p in matches if p.role is not None)
    if topology is not None or not pools:
        return None
    return f"profile {matches[0].name!r} runs as two pools; pass --topology {' or '.join(pools)}"
