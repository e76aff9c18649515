"""A node that serves on its CPUs: what it is (read from the OS) and whether it fits the kit.

A CPU target (``[hardware] accelerator = "cpu"``) states usable cores, memory and the
instruction-set features its engine build needs. They are read where the kernel publishes them:
the CPUs this process may run on (``sched_getaffinity``: a container or ``taskset`` limit counts,
``os.cpu_count`` would not see it), ``MemTotal`` in ``/proc/meminfo`` and the ``flags`` line of
``/proc/cpuinfo`` (``Features`` on ARM). A fact that cannot be read is NOT-CHECKED with the
reason, which fails the verdict like every required check that could not look.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from k3kit._immutable import EMPTY_MAPPING, NamedTuple
from k3kit.formats.vocab import PreflightStatus as Status
from k3kit.preflight._checks import GIB, Check

MAX_PROC_BYTES = 4 * 1024 * 1024


class CpuFacts(NamedTuple):
    """The node's CPUs as the OS reported them; ``None`` = unreadable (reason in ``unreadable``)."""

    source: str
    cores: int | None
    memory_bytes: int | None
    features: frozenset[str] | None
    model: str | None = None
    # read-only empty default: a NamedTuple's default is shared by every instance
    unreadable: Mapping[str, str] = EMPTY_MAPPING


class CpuNeeds(NamedTuple):
    cores: int
    memory_gib: int
    features: tuple[str, ...]


def _read(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.read(MAX_PROC_BYTES).decode("utf-8", "replace")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: every CPU the OS counts
        return os.cpu_count() or 0


def _memtotal(text: str) -> int | None:
    match = re.search(r"^MemTotal:\s+(\d+)\s+kB\s*$", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def _features(text: str) -> tuple[frozenset[str] | None, str | None]:
    """The first processor's flags (every core of a node reports the same ISA) and model name."""
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", text, re.MULTILINE)
    model = re.search(r"^model name\s*:\s*(.*)$", text, re.MULTILINE)
    found = frozenset(flags.group(1).split()) if flags else None
    return found, (model.group(1).strip()[:100] if model else None)


def cpu_facts(proc: Path = Path("/proc")) -> CpuFacts:
    """This node's CPUs, memory and instruction-set features (``proc`` for recorded files)."""
    unreadable: dict[str, str] = {}
    memory = features = model = None
    try:
        memory = _memtotal(_read(proc / "meminfo"))
        if memory is None:
            unreadable["cpu.memory"] = f"{proc / 'meminfo'} has no MemTotal line"
    except OSError as exc:
        unreadable["cpu.memory"] = f"cannot read {proc / 'meminfo'}: {exc.strerror}"
    try:
        features, model = _features(_read(proc / "cpuinfo"))
        if features is None:
            unreadable["cpu.features"] = f"{proc / 'cpuinfo'} has no flags line"
    except OSError as exc:
        unreadable["cpu.features"] = f"cannot read {proc / 'cpuinfo'}: {exc.strerror}"
    cores = _cores() or None
    if cores is None:
        unreadable["cpu.cores"] = "the OS reports no CPU this process may run on"
    return CpuFacts(str(proc), cores, memory, features, model, unreadable)


def cpu_checks(need: CpuNeeds, facts: CpuFacts) -> list[Check]:
    """Cores, memory and ISA features against the kit's CPU target; all required."""
    return [_cores_check(need, facts), _memory_check(need, facts), _features_check(need, facts)]


def _missing(name: str, facts: CpuFacts) -> Check:
    return Check(name, Status.NOT_CHECKED, True, why=facts.unreadable.get(name, "not read"))


def _cores_check(need: CpuNeeds, facts: CpuFacts) -> Check:
    if facts.cores is None:
        return _missing("cpu.cores", facts)
    ok = facts.cores >= need.cores
    return Check(
        "cpu.cores",
        Status.of(ok),
        True,
        f">= {need.cores} CPUs this process may run on",
        f"{facts.cores}",
        "" if ok else "fewer CPUs than the kit was measured with (affinity or container limit?)",
    )


def _memory_check(need: CpuNeeds, facts: CpuFacts) -> Check:
    if facts.memory_bytes is None:
        return _missing("cpu.memory", facts)
    ok = facts.memory_bytes >= need.memory_gib * GIB
    return Check(
        "cpu.memory",
        Status.of(ok),
        True,
        f">= {need.memory_gib} GiB",
        f"{facts.memory_bytes / GIB:.1f} GiB",
        "" if ok else "less memory than the kit's target (weights and KV cache live in RAM)",
    )


def _features_check(need: CpuNeeds, facts: CpuFacts) -> Check:
    if facts.features is None:
        return _missing("cpu.features", facts)
    lacking = [name for name in need.features if name not in facts.features]
    return Check(
        "cpu.features",
        Status.of(not lacking),
        True,
        ", ".join(need.features) or "(none stated)",
        f"missing {', '.join(lacking)}" if lacking else f"all present ({facts.model or 'CPU'})",
        "the engine build uses instructions this CPU lacks: it would die by SIGILL"
        if lacking
        else "",
    )
