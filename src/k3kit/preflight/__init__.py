"""``k3kit preflight``: is this node able to run this profile, before hours of loading?

Reads the node (NVML, else ``nvidia-smi -q -x``, or a recorded XML file) and the OS, then judges
against what the kit says the profile needs: GPU count, model, memory, MIG, CUDA driver API,
compute capability, NVLink, ``/dev/shm``, memlock, disk, and the memory budget. What the profile
needs is read from the kit only after the kit verified against its signed receipt
(:func:`k3kit.node.verify.open_verified`): a kit.json edited to ask for one small GPU, or a regex
that matches anything, would otherwise turn an unverified file into a PASS. A CPU target is
judged on cores, memory and instruction-set features instead (``_cpu``). Used by the CLI
(``k3kit preflight``, and ``launch`` before it starts an engine) and the API. Each check's
status is one :class:`k3kit.formats.vocab.PreflightStatus`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from k3kit._immutable import NamedTuple
from k3kit.engines import adapter
from k3kit.errors import InputError, VerificationError
from k3kit.formats.documents import MAX_DOCUMENT_BYTES
from k3kit.formats.vocab import PreflightStatus as Status
from k3kit.models import lite
from k3kit.models._methods import pools_unchosen
from k3kit.node.launch import kit_engine_snapshot, serve_settings
from k3kit.node.verify import TrustSource, VerifiedKit, open_verified
from k3kit.preflight._budget import budget_checks
from k3kit.preflight._checks import Check, Requirements, gpu_checks, os_checks
from k3kit.preflight._cpu import CpuFacts, CpuNeeds, cpu_checks, cpu_facts
from k3kit.preflight._facts import (
    NodeFacts,
    OsFacts,
    from_live_node,
    from_nvidia_smi_xml,
    os_facts,
    os_facts_from_json,
)
from k3kit.signing.trust import RollbackPolicy

if TYPE_CHECKING:  # kit.json is read as a record (node.verify.open_verified): no pydantic here
    from k3kit.models import KitInfo, KitProfile

MAX_DOC_BYTES = MAX_DOCUMENT_BYTES
GB = 1_000_000_000


class PreflightReport(NamedTuple):
    profile: str
    topology: str
    source: str
    checks: list[Check]

    @property
    def ok(self) -> bool:
        """Every required check ran and passed: "could not look" is not a pass. Advisory
        checks (NVLink, memlock, disk) are shown but do not decide."""
        return all(c.status == Status.PASS for c in self.checks if c.required)

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "profile": self.profile,
            "topology": self.topology,
            "source": self.source,
            "checks": [c.as_json() for c in self.checks],
        }


def _profile(
    info: KitInfo | lite.KitInfo, profile: str, topology: str | None
) -> KitProfile | lite.KitProfile:
    matches = [p for p in info.profiles if p.name == profile]
    unchosen = pools_unchosen(matches, topology)
    if unchosen:
        raise InputError(unchosen, code="TOPOLOGY_UNKNOWN")
    if topology is not None:
        matches = [p for p in matches if p.topology == topology]
    elif len(matches) > 1:
        matches = [p for p in matches if p.nodes == 1] or matches
    if len(matches) != 1:
        have = ", ".join(sorted(f"{p.name}/{p.topology}" for p in info.profiles))
        raise InputError(
            f"no single profile {profile!r} topology {topology!r} (kit has {have})",
            code="PROFILE_UNKNOWN",
        )
    return matches[0]


def requirements(
    info: KitInfo | lite.KitInfo, chosen: KitProfile | lite.KitProfile, serve: dict[str, Any]
) -> Requirements:
    eng = adapter(info.engine.name)
    facts = info.model_config_facts
    hw = info.hardware
    par = chosen.parallel
    concurrency = serve.get(eng.concurrency_key)
    # A pool of a disaggregated kit may run on another GPU model than [hardware] names.
    gpu = chosen.gpu or hw.gpu
    pattern = hw.gpu_name_pattern if gpu == hw.gpu else None
    return Requirements(
        gpus_per_node=chosen.gpus_per_node or hw.gpus_per_node,
        gpu_name_pattern=pattern or (re.escape(gpu) if gpu else ""),
        gpu_memory_bytes=(chosen.gpu_memory_gb or hw.gpu_memory_gb or 0) * GB,
        min_compute_capability=hw.min_compute_capability or "0.0",
        min_cuda_driver_api=hw.min_cuda_driver_api,
        min_shm_bytes=hw.min_shm_gib * 1024**3,
        weight_bytes=info.weights.total_bytes,
        tp=par.get("tp", 1),
        pp=par.get("pp", 1),
        memory_fraction=eng.memory_fraction(serve),
        context_length=serve.get(eng.context_key) or (facts.context_length if facts else None),
        concurrency=concurrency if isinstance(concurrency, int) else None,
        kv_dtype=serve.get(eng.kv_dtype_key),
        layers=facts.layers if facts else None,
        kv_heads=facts.kv_heads if facts else None,
        head_dim=facts.head_dim if facts else None,
        model_dtype=serve.get("dtype") or (facts.torch_dtype if facts else None),
    )


def run_preflight(
    kit_dir: Path,
    profile: str,
    *,
    trusted: TrustSource,
    rollback: RollbackPolicy | None = None,
    topology: str | None = None,
    node: NodeFacts | None = None,
    osf: OsFacts | None = None,
    weights: Path | None = None,
    cpu: CpuFacts | None = None,
) -> PreflightReport:
    """Verify the kit against ``trusted``, then judge ``node`` (default: the live node) against
    one profile of it; a CPU target (``[hardware] accelerator = "cpu"``) is judged on ``cpu``
    (default: this node's CPUs). A kit that does not verify raises
    :class:`k3kit.node.verify.KitNotVerified`."""
    kit = open_verified(kit_dir, trusted, rollback=rollback)
    chosen = _profile(kit.info, profile, topology)
    return judge_node(kit, chosen, node=node, osf=osf, weights=weights, cpu=cpu)


def judge_node(
    kit: VerifiedKit,
    chosen: KitProfile | lite.KitProfile,
    *,
    node: NodeFacts | None = None,
    osf: OsFacts | None = None,
    weights: Path | None = None,
    cpu: CpuFacts | None = None,
) -> PreflightReport:
    """Judge ``node`` (default: the live node; ``cpu`` for a CPU target) against ``chosen``, a
    profile of the kit that verified as ``kit``: its requirements come from ``kit``'s records
    and from files compared in memory with its verified manifest, never from a path read
    again."""
    info = kit.info
    rel = f"{chosen.folder}/serve.yaml"
    data = kit.read(rel, max_bytes=MAX_DOC_BYTES)
    # judged only once held to the rules launch holds it to: arithmetic on a value build would
    # refuse is no verdict (node.launch.serve_settings)
    snap = kit_engine_snapshot(kit.path, kit.manifest, info)
    req = requirements(
        info, chosen, serve_settings(info, data, chosen.folder, snap, profile=chosen)
    )
    osf = osf or os_facts(weights)
    hw = info.hardware
    if hw.is_cpu:
        # No GPU to read: the CPU target's own facts, then the same OS checks (/dev/shm...).
        cpu = cpu or cpu_facts()
        needs = CpuNeeds(hw.cpu_cores or 1, hw.memory_gib or 1, tuple(hw.cpu_features or ()))
        checks = cpu_checks(needs, cpu) + os_checks(req, osf)
        return PreflightReport(chosen.name, chosen.topology, cpu.source, checks)
    node = node or from_live_node()
    checks = gpu_checks(req, node) + budget_checks(req, node) + os_checks(req, osf)
    return PreflightReport(chosen.name, chosen.topology, node.source, checks)


__all__ = [
    "Check",
    "CpuFacts",
    "NodeFacts",
    "OsFacts",
    "PreflightReport",
    "cpu_facts",
    "from_nvidia_smi_xml",
    "os_facts_from_json",
    "run_preflight",
]


class NodeNotReady(VerificationError):
    """Preflight refused the node for the profile about to launch (exit 1); ``report`` holds
    every check, so a front door can show them."""

    def __init__(self, report: PreflightReport) -> None:
        failed = [c.name for c in report.checks if c.required and c.status != Status.PASS]
        super().__init__(
            f"this node cannot be shown to run profile {report.profile} ({report.topology}): "
            f"{', '.join(failed)}",
            code="NODE_NOT_READY",
            hint="run `k3kit preflight` for the details, or launch with --no-preflight",
        )
        self.report = report


def launch_node_check(
    *, weights: Path | None = None
) -> Callable[[VerifiedKit, KitProfile | lite.KitProfile], None]:
    """The node check ``launch`` runs once the kit verified and its profile is chosen: preflight
    of that profile of THAT kit (:func:`judge_node`). Raises :class:`NodeNotReady` before any
    weight is hashed.

    Why the verified kit and not its path: the check used to verify and read the kit at the
    launch's path a second time, so a path repointed in between (a ``current`` link, a folder
    renamed over) had the node judged against another signed kit while launch went on with the
    first one (tests/test_startup_attacks.py). Why here: the CLI and
    :func:`k3kit.api.plan_launch` both pass this to :func:`k3kit.node.launch.plan_launch`, so
    the node is refused by the same rule whichever door the launch came through."""

    def check(kit: VerifiedKit, chosen: KitProfile | lite.KitProfile) -> None:
        report = judge_node(kit, chosen, weights=weights)
        if not report.ok:
            raise NodeNotReady(report)

    return check
