"""The cross-field and custom rules of the documents, as plain functions without pydantic.

Why a module of its own: each rule here has two callers that must never disagree. The pydantic
models (the single definition for the publisher, the JSON schemas and the docs) attach them as
validators, and the strict reader of :mod:`k3kit.models.lite` (what ``verify`` uses, so that a
GPU node's start-up does not import or build pydantic; docs/performance.md, "Start-up") calls
the very same functions on its records. A rule therefore reads fields by name only (a pydantic
model and a lite record both have them) and raises ``ValueError`` for a refusal;
``scripts/gen_lite_models.py`` refuses a validator that lives anywhere else.

Model rules take the whole object and return it; value rules take the value and return it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, TypeVar

from k3kit._policy import path_problem
from k3kit._values import compile_pattern
from k3kit.models.engine_version import check_engine_version

T = TypeVar("T")

# In a receipt an evidence file is always ``evidence/<run id>.json`` inside the kit.
EVIDENCE_IN_KIT = r"^evidence/[a-z0-9][a-z0-9._-]{0,63}\.json$"

# ----------------------------------------------------------------------------------- values


def safe_relpath(value: str) -> str:
    """A relative path from an untrusted document: refused if it could escape or collide."""
    problem = path_problem(value)
    if problem:
        raise ValueError(f"unsafe relative path: {problem}")
    return value


def bounded_decimal(value: Decimal) -> Decimal:
    """A measured figure a reader can do arithmetic on: finite, sane magnitude and precision.

    ``1e999999999`` is a valid TOML float and a valid Decimal, but no benchmark produced it, and
    every consumer (the auditor first) would overflow or spin on it, so it is refused at load.
    """
    if not value.is_finite():
        raise ValueError("must be a finite number")
    if value != 0 and not -18 <= value.adjusted() <= 18:
        raise ValueError("magnitude outside 1e-18 .. 1e18")
    if len(value.as_tuple().digits) > 30:
        raise ValueError("more than 30 significant digits")
    return value


_DECIMAL_TEXT = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", re.ASCII)


def decimal_text(value: T) -> T:
    """A figure written as text must use ASCII digits: ``Decimal()`` also reads ``２３００``,
    ``2_300`` and surrounding spaces, each a second spelling of one signed number."""
    if isinstance(value, str) and not _DECIMAL_TEXT.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a decimal number written with the digits 0-9")
    return value


def cpu_flag_names(features: list[str]) -> list[str]:
    """``/proc/cpuinfo`` flag names only: preflight compares them with the node's flags."""
    for name in features:
        if not re.fullmatch(r"[a-z0-9_]{1,32}", name):
            raise ValueError(f"{name!r} is not a /proc/cpuinfo flag name (e.g. avx2)")
    return features


def bounded_gpu_pattern(value: str) -> str:
    """Compiled once here by the one pattern helper: a pattern that does not compile or could
    backtrack for ever is refused when the document is read, not in preflight."""
    compile_pattern(value)
    return value


def pep440_engine_version(version: str) -> str:
    """The engine version as the engine prints it (canonical PEP 440)."""
    check_engine_version(version)
    return version


def engine_loads_reasons(loads: dict[str, str]) -> dict[str, str]:
    """Each declared loader is a flag or variable name with a one-line printable reason."""
    for name, reason in loads.items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", name):
            raise ValueError(f"engine.loads: {name!r} is not a flag or variable name")
        if not reason.strip() or len(reason) > 300 or not reason.isprintable():
            raise ValueError(
                f"engine.loads.{name}: give the reason in one printable line of 1-300 characters"
            )
    return loads


# ----------------------------------------------------------------------------------- models


def model_info_experts_together(info: T) -> T:
    """Expert counts come as a pair (mixture of experts) or not at all (dense)."""
    m: Any = info
    if (m.experts is None) != (m.experts_per_token is None):
        raise ValueError("experts and experts_per_token go together (omit both for dense)")
    if m.experts and m.experts_per_token and m.experts_per_token > m.experts:
        raise ValueError("experts_per_token exceeds experts")
    return info


def hardware_one_kind_of_node(target: T) -> T:
    """Each kind of node states its own facts and none of the other's, so a CPU kit never
    carries a GPU requirement preflight would judge (or skip) by mistake."""
    h: Any = target
    is_cpu = h.accelerator == "cpu"
    gpu_only: tuple[str, ...] = ("gpu", "gpu_memory_gb", "min_compute_capability")
    gpu_only += ("gpu_name_pattern", "min_cuda_driver_api")
    cpu_only = ("cpu_cores", "memory_gib", "cpu_features")
    needed = ("cpu_cores", "memory_gib") if is_cpu else gpu_only[:3]
    foreign = gpu_only if is_cpu else cpu_only
    kind = h.accelerator or "gpu"
    missing = [name for name in needed if getattr(h, name) is None]
    if missing:
        raise ValueError(f"a {kind} target needs {', '.join(missing)}")
    wrong = [name for name in foreign if getattr(h, name) is not None]
    if wrong:
        raise ValueError(f"{', '.join(wrong)}: not a fact of a {kind} target")
    if is_cpu and h.gpus_per_node != 1:
        raise ValueError("a cpu target runs one engine per node: gpus_per_node = 1")
    return target


def environment_device_stated(environment: T) -> T:
    """A GPU environment names its GPU; a CPU one has none and counts one engine per node."""
    env: Any = environment
    if env.accelerator == "cpu":
        if env.gpu is not None or env.gpu_memory_gb is not None:
            raise ValueError("a cpu environment has no gpu or gpu_memory_gb")
        if env.gpu_count != 1:
            raise ValueError("a cpu environment counts one engine per node: gpu_count = 1")
    elif env.gpu is None:
        raise ValueError("gpu is required (or accelerator = 'cpu')")
    if env.pools is not None and set(env.pools) != {"prefill", "decode"}:
        raise ValueError("pools: state both the prefill and the decode pool")
    return environment


def length_kind(workload: Any, what: str) -> str:
    """How the prompt (``input``) or output lengths were drawn; each defaults to ``lengths``."""
    own: str | None = getattr(workload, f"{what}_lengths")
    return own or str(workload.lengths)


def length_ratio(workload: Any, what: str) -> Decimal | None:
    """The range ratio of ``what``: its own, else the workload's."""
    own: Decimal | None = getattr(workload, f"{what}_range_ratio")
    return own if own is not None else workload.range_ratio


def workload_lengths_stated(workload: T) -> T:
    """Fixed and ranged lengths state their length; a ratio is given only where it is used."""
    w: Any = workload
    for what in ("input", "output"):
        kind = length_kind(w, what)
        if kind != "variable" and getattr(w, f"{what}_tokens") is None:
            raise ValueError(f"{kind} {what} lengths need {what}_tokens")
        own = getattr(w, f"{what}_range_ratio")
        if kind == "ranged" and length_ratio(w, what) is None:
            raise ValueError(f"ranged {what} lengths need {what}_range_ratio or range_ratio")
        if own is not None and kind != "ranged":
            raise ValueError(f"{what}_range_ratio is given only for ranged {what} lengths")
    if w.range_ratio is not None and "ranged" not in (
        length_kind(w, "input"),
        length_kind(w, "output"),
    ):
        raise ValueError("range_ratio is given only when some lengths are ranged")
    return workload


def claims_references_resolve(body: T) -> T:
    """Every id a run or comparison names exists, and each run fits its workload's load."""
    b: Any = body
    known = _runs_resolve(b.runs, b.workloads)
    _comparisons_resolve(b.comparisons, known, {c.id for c in b.controls})
    return body


def _runs_resolve(runs: list[Any], workloads: dict[str, Any]) -> set[str]:
    """Run ids are unique (comparisons name runs by id, so a shared id would be ambiguous) and
    every run fits the workload it names; returns the ids. The first problem found is raised,
    runs in file order, so the message a publisher sees does not depend on this split."""
    ids = [r.id for r in runs]
    if len(set(ids)) != len(ids):
        raise ValueError("run ids must be unique")
    for run in runs:
        _run_fits(run, workloads)
    return set(ids)


def _run_fits(run: Any, workloads: dict[str, Any]) -> None:
    """A run names a declared workload, states what its load needs, and does not complete more
    requests than it sent: a figure the auditor cannot place is refused before it is signed."""
    if run.workload not in workloads:
        raise ValueError(f"run {run.id!r} names unknown workload {run.workload!r}")
    if workloads[run.workload].load == "closed-loop":
        _closed_loop_run(run)
    if run.completed is not None and run.requests is not None and run.completed > run.requests:
        raise ValueError(f"run {run.id!r}: completed {run.completed} > requests")


def _closed_loop_run(run: Any) -> None:
    """A closed loop is a fixed number of clients, so its run states that number; an offered
    rate belongs to an open loop, where it would say how arrivals were generated."""
    if run.concurrency is None:
        raise ValueError(f"run {run.id!r}: a closed-loop run needs its concurrency")
    if run.offered_rate is not None:
        raise ValueError(f"run {run.id!r}: offered_rate is for open-loop workloads")


def _comparisons_resolve(comparisons: list[Any], known: set[str], controls: set[str]) -> None:
    """Each comparison's points name known runs and its A/A control a known control: a
    percentage against a run that is not in the file could not be recomputed by the audit."""
    for comp in comparisons:
        for point in comp.points:
            for ref in (point.subject_run, point.baseline_run):
                if ref is not None and ref not in known:
                    raise ValueError(f"comparison {comp.id!r} names unknown run {ref!r}")
        if comp.aa_control is not None and comp.aa_control not in controls:
            raise ValueError(f"comparison {comp.id!r} names unknown control {comp.aa_control!r}")


def receipt_evidence_complete(predicate: T) -> T:
    """Every run of a receipt states its evidence level; a run with an evidence file names its
    copy in the kit (``evidence/<run id>.json``), its sha256, size and the tool's summary."""
    for run in predicate.runs:  # type: ignore[attr-defined]
        if run.evidence_level is None:
            raise ValueError(f"run {run.id!r}: evidence_level is required in a receipt")
        if run.evidence is None:
            if run.evidence_level == "raw" or run.evidence_sha256 or run.evidence_summary:
                raise ValueError(f"run {run.id!r}: evidence details without an evidence file")
            continue
        if not re.fullmatch(EVIDENCE_IN_KIT, run.evidence) or run.evidence != (
            f"evidence/{run.id}.json"
        ):
            raise ValueError(f"run {run.id!r}: evidence must be evidence/{run.id}.json")
        if None in (run.evidence_sha256, run.evidence_bytes, run.evidence_summary):
            raise ValueError(f"run {run.id!r}: evidence needs sha256, bytes and summary")
    return predicate


def manifest_sorted_unique(manifest: T) -> T:
    """One entry per path, in path order: one manifest, one byte sequence."""
    paths = [e.path for e in manifest.files]  # type: ignore[attr-defined]
    if paths != sorted(paths) or len(set(paths)) != len(paths):
        raise ValueError("manifest files must be sorted by path and unique")
    return manifest


def pin_source_consistent(source: T) -> T:
    """A hub pin names its endpoint and the hub's sha256 values; a local pin has neither."""
    s: Any = source
    if s.kind == "hub" and (s.endpoint is None or s.sha256_source == "local-hash"):
        raise ValueError("a hub pin names its endpoint and has hub-lfs sha256 values")
    if s.kind == "local" and (
        s.endpoint is not None or s.include or s.exclude or s.sha256_source != "local-hash"
    ):
        raise ValueError("a local pin has no endpoint, patterns or hub sha256 values")
    return source


def weights_lock_consistent(lock: T) -> T:
    """Files sorted and unique, and the counts the lock states are the counts it lists."""
    w: Any = lock
    paths = [f.path for f in w.files]
    if paths != sorted(paths):
        raise ValueError("files must be sorted by path")
    if len(set(paths)) != len(paths):
        raise ValueError("files must not repeat a path")
    if w.file_count != len(w.files):
        raise ValueError(f"file_count {w.file_count} != {len(w.files)} files listed")
    total = sum(f.size for f in w.files)
    if w.total_bytes != total:
        raise ValueError(f"total_bytes {w.total_bytes} != sum of file sizes {total}")
    return lock
