"""Check a folder of weights against ``weights.lock.json``; the weights folder's other modules.

This package holds the check itself (this module) and what it stands on: ``layouts`` (what a
weights folder is), ``hashpool`` (parallel hashing), ``vcache`` (the verification cache) with
``_lease`` (its read lease), ``pin`` (write a lock from a folder or a Hub repo) and ``modelconfig``
(a model's config.json, read for the kit). Used by ``node`` (verify, launch), ``pull``, ``accept``,
``publish`` and the CLI; it imports nothing above ``formats``.

Accepts the layouts of :mod:`k3kit.weights.layouts` (a plain folder, a Hugging Face cache snapshot,
its repo folder or a cache root holding the repo; an ambiguous folder is refused). The file set must
equal the lock's; sizes are compared before any byte is hashed, so a truncated or missing shard
fails in milliseconds; then digests are computed in parallel threads
(:mod:`k3kit.weights.hashpool`), skipping files the verification cache proves unchanged
(:mod:`k3kit.weights.vcache`, docs/verification-cache.md).

A folder that cannot be walked (a tree deeper than PATH_MAX, a folder without permission) or a
name that is not UTF-8 is a named problem in the report (exit 1), never an environment error with
no report: the attacker who planted it must not be able to turn a refusal into a crash. Names are
shown escaped (:func:`display_name`), so no control character from a file name reaches a terminal.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from k3kit._canonical import sha256_of_model
from k3kit._digest import FileStamp, hash_file
from k3kit._fs import display_name, walk
from k3kit._immutable import Immutable
from k3kit.errors import InputError, K3kitError, VerificationError
from k3kit.formats.vocab import Problem
from k3kit.weights.layouts import (
    Layout,
    LinkPolicyViolation,
    is_hf_local_metadata,
    local_layout,
    locate,
    repo_folder_name,
    resolve_file,
)
from k3kit.weights.vcache import VerifyCache

if TYPE_CHECKING:
    from k3kit.models import LockedFile, lite
    from k3kit.models import WeightsLock as _Model
    from k3kit.weights.hashpool import HashJob, JobResult

    # The lock as the pydantic model (pin, the API) or as the record verify and launch read
    # without pydantic (k3kit.models.lite; docs/performance.md, "Fifth pass"): this package uses
    # fields and the shared methods (k3kit.models._methods) only, so it takes either.
    WeightsLock = _Model | lite.WeightsLock

# the one problem record (k3kit.formats.vocab); the old name stays importable
WeightsProblem = Problem


class WeightsOptions(Immutable):
    """How a weights folder is checked: one typed value for verify, launch, the CLI and the demo.

    Why a typed record and not a ``dict``: a misspelt option used to surface as a ``TypeError``
    deep inside the verifier; now it is a mypy error at the call site, and a value out of range
    is refused here (``InputError`` ``WEIGHTS_OPTION_INVALID``, exit 3). A
    :class:`k3kit._immutable.Immutable` record, not a dataclass: it is on launch's start-up path.

    ``workers``: hashing threads (None: one per CPU this process may use); ``algorithm``:
    ``"sha256"`` or ``"blake3"`` (None: blake3 where the lock has it); ``all_errors``: keep
    hashing after the first bad file; ``full``: re-hash files the verification cache vouches
    for; ``state_dir``: the node's state folder holding that cache (None: no cache);
    ``on_progress(bytes_done, bytes_to_hash)``: called a few times a second.
    """

    __slots__ = ("algorithm", "all_errors", "full", "on_progress", "state_dir", "workers")
    workers: int | None
    algorithm: str | None
    all_errors: bool
    full: bool
    state_dir: Path | None
    on_progress: Callable[[int, int], None] | None

    def __init__(
        self,
        workers: int | None = None,
        algorithm: str | None = None,
        all_errors: bool = False,
        full: bool = False,
        state_dir: Path | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        if workers is not None and workers < 1:
            raise InputError(
                f"workers must be 1 or more, not {workers}", code="WEIGHTS_OPTION_INVALID"
            )
        if algorithm not in (None, "sha256", "blake3"):
            raise InputError(
                f"algorithm must be sha256 or blake3, not {algorithm!r}",
                code="WEIGHTS_OPTION_INVALID",
            )
        super().__init__(
            workers=workers,
            algorithm=algorithm,
            all_errors=all_errors,
            full=full,
            state_dir=state_dir,
            on_progress=on_progress,
        )


class WeightsReport:
    """What checking a weights folder found: its problems, and how much was hashed or trusted
    from the verification cache (a plain slotted class, filled in as the check goes)."""

    __slots__ = (
        "algorithm",
        "blake3_threads",
        "bytes_from_cache",
        "bytes_hashed",
        "cache_note",
        "cache_saved",
        "cache_status",
        "files_from_cache",
        "files_hashed",
        "layout",
        "problems",
        "workers",
    )

    def __init__(self, layout: Layout, algorithm: str) -> None:
        self.layout = layout
        self.algorithm = algorithm
        self.problems: list[WeightsProblem] = []
        self.files_hashed = 0
        self.bytes_hashed = 0  # bytes actually read, including a file stopped part-way
        self.files_from_cache = 0
        self.bytes_from_cache = 0
        # off | empty | loaded | ignored (why) | bypassed (--full) | not used
        self.cache_status = "off"
        self.cache_saved = False
        self.cache_note: str | None = None
        self.workers = 0
        self.blake3_threads = 1

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"WeightsReport({inner})"

    @property
    def ok(self) -> bool:
        return not self.problems


def _walk_problem(rel: str, exc: OSError) -> WeightsProblem:
    where = display_name(rel) if rel else "."
    return WeightsProblem(
        "WEIGHTS_WALK_FAILED", where, f"cannot read this folder entry: {exc.strerror or exc}"
    )


def _under(rel: str, prefixes: list[str]) -> bool:
    return any(p == "" or rel == p or rel.startswith(p + "/") for p in prefixes)


def _file_set_problems(
    layout: Layout, lock: WeightsLock
) -> tuple[list[WeightsProblem], dict[str, tuple[Path, os.stat_result]]]:
    listed = {f.path: f for f in lock.files}
    problems: list[WeightsProblem] = []
    present: dict[str, tuple[Path, os.stat_result]] = {}
    unreadable: list[str] = []

    def on_error(rel: str, exc: OSError) -> None:
        unreadable.append(rel)
        problems.append(_walk_problem(rel, exc))

    for entry in walk(layout.root, on_error=on_error):
        if entry.rel != display_name(entry.rel):
            problems.append(
                WeightsProblem(
                    "WEIGHTS_BAD_NAME",
                    display_name(entry.rel),
                    "name is not printable UTF-8, so no lock can list it",
                )
            )
            continue
        if entry.kind == "dir":
            continue
        if layout.kind == "plain" and is_hf_local_metadata(entry.rel, entry.kind, entry.size):
            continue
        if entry.rel not in listed:
            problems.append(
                WeightsProblem("WEIGHTS_FILE_EXTRA", entry.rel, "file is not in the lock")
            )
            continue
        if entry.kind == "special" or (entry.kind == "symlink" and layout.kind == "plain"):
            problems.append(
                WeightsProblem(
                    "WEIGHTS_NOT_REGULAR",
                    entry.rel,
                    f"{entry.kind} where a regular file is expected",
                )
            )
            continue
        try:
            real = resolve_file(layout, entry.rel)
            st = os.stat(real, follow_symlinks=False)
        except LinkPolicyViolation as exc:
            problems.append(WeightsProblem(exc.code, entry.rel, exc.detail))
            continue
        except OSError as exc:
            problems.append(
                WeightsProblem("WEIGHTS_FILE_MISSING", entry.rel, f"cannot stat: {exc.strerror}")
            )
            continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(
                WeightsProblem(
                    "WEIGHTS_NOT_REGULAR",
                    entry.rel,
                    "resolves to something that is not a regular file",
                )
            )
            continue
        want = listed[entry.rel]
        if st.st_size != want.size:
            code = "WEIGHTS_TRUNCATED" if st.st_size < want.size else "WEIGHTS_SIZE_MISMATCH"
            problems.append(
                WeightsProblem(code, entry.rel, f"size {st.st_size} != locked {want.size}")
            )
            continue
        present[entry.rel] = (real, st)
    for rel in sorted(set(listed) - set(present) - {p.path for p in problems}):
        if _under(rel, unreadable):
            problems.append(
                WeightsProblem("WEIGHTS_WALK_FAILED", rel, "not checked: its folder is unreadable")
            )
        else:
            problems.append(WeightsProblem("WEIGHTS_FILE_MISSING", rel, "locked file is absent"))
    return problems, present


def choose_algorithm(lock: WeightsLock, forced: str | None) -> str:
    if forced:
        if forced == "blake3" and not lock.has_blake3:
            raise VerificationError(
                "the lock has no blake3 digests; use --algorithm sha256", code="WEIGHTS_NO_BLAKE3"
            )
        return forced
    return "blake3" if lock.has_blake3 else "sha256"


def _expected(want: LockedFile | lite.LockedFile, algorithm: str) -> str:
    digest = want.blake3 if algorithm == "blake3" else want.sha256
    assert digest is not None  # choose_algorithm only picks blake3 when every file has it
    return digest


def check_weights(
    path: Path,
    lock: WeightsLock,
    *,
    algorithm: str | None = None,
    workers: int | None = None,
    all_errors: bool = False,
    state_dir: Path | None = None,
    full: bool = False,
    on_file_done: Callable[[str, int], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> WeightsReport:
    """Check file set and sizes, then digests in parallel; stop at the first mismatch by default.

    With ``state_dir``, files whose verification-cache record still matches are not read (see
    :mod:`k3kit.weights.vcache`); ``full`` re-hashes them anyway and refreshes the records.
    ``on_progress(bytes_done, bytes_to_hash)`` is called from this thread a few times a second.
    """
    layout = locate(path, lock)
    algo = choose_algorithm(lock, algorithm)
    report = WeightsReport(layout, algo)
    problems, present = _file_set_problems(layout, lock)
    report.problems.extend(problems)
    if problems and not all_errors:
        report.cache_status = "not used (the file set or sizes differ)"
        return report
    cache = VerifyCache(state_dir, sha256_of_model(lock)) if state_dir is not None else None
    report.cache_status = "off" if cache is None else "bypassed (--full)" if full else cache.status
    jobs = _hash_jobs(report, lock, present, None if full else cache)

    def done(result: JobResult) -> None:
        if on_file_done is not None:
            on_file_done(result.job.name, result.job.size)

    results: list[JobResult] = []
    if jobs:
        # The hashing engine (thread pool, concurrent.futures, logging, queue) is imported only
        # when a file must really be read: a launch whose weights the verification cache vouches
        # for hashes nothing, and this import was ~5 ms of CPU on every node start
        # (docs/performance.md). With no jobs the report keeps its defaults, which are what an
        # empty run reported (0 threads, 1 blake3 thread, 0 bytes, no results).
        from k3kit.weights.hashpool import run_jobs

        pool = run_jobs(
            jobs,
            algo,
            workers=workers,
            stop_on_first=not all_errors,
            lease=cache is not None,
            on_progress=on_progress,
            on_done=done,
        )
        report.workers, report.blake3_threads = pool.threads, pool.blake3_threads
        report.bytes_hashed = pool.bytes_read
        results = pool.results
    unleased = _judge_results(report, results, cache)
    if unleased:
        report.cache_note = "cache not used for " + "; ".join(
            f"{n} file(s): {why}" for why, n in sorted(unleased.items())
        )
    if cache is not None:
        _save_cache(report, cache)
    report.problems.sort(key=lambda p: p.path)
    return report


def _hash_jobs(
    report: WeightsReport,
    lock: WeightsLock,
    present: dict[str, tuple[Path, os.stat_result]],
    cache: VerifyCache | None,
) -> list[HashJob]:
    """The files to read: every present one but those ``cache`` (None: none) still vouches for,
    which are counted in ``report`` instead."""
    by_path = {f.path: f for f in lock.files}
    jobs: list[HashJob] = []
    for rel, (real, st) in sorted(present.items()):
        want = by_path[rel]
        expected = _expected(want, report.algorithm)
        key = os.path.realpath(real)
        if cache is not None and cache.lookup(key, FileStamp.of(st), report.algorithm, expected):
            report.files_from_cache += 1
            report.bytes_from_cache += want.size
            continue
        from k3kit.weights.hashpool import HashJob  # only a file to read needs the hasher

        jobs.append(HashJob(rel, Path(key), want.size, expected))
    return jobs


def _judge_results(
    report: WeightsReport, results: list[JobResult], cache: VerifyCache | None
) -> dict[str, int]:
    """Record each hashed file's verdict, and remember (or forget) it in the cache; returns how
    many verified files the cache could not keep, by reason (their lease note)."""
    unleased: dict[str, int] = {}
    for result in results:
        report.files_hashed += 1
        if result.problem is not None:
            code, detail = result.problem
            report.problems.append(WeightsProblem(f"WEIGHTS_{code}", result.job.name, detail))
        if cache is None:
            continue
        key = str(result.job.path)
        if result.ok and result.digest is not None and result.lease_note is None:
            expected = result.job.expected
            cache.remember(key, result.digest, report.algorithm, expected, result.started_ns)
        else:
            cache.forget(key)
            if result.ok and result.lease_note is not None:
                unleased[result.lease_note] = unleased.get(result.lease_note, 0) + 1
    return unleased


def _save_cache(report: WeightsReport, cache: VerifyCache) -> None:
    """A cache that cannot be saved costs the next run time, never this verdict: noted only."""
    try:
        cache.save()
        report.cache_saved = True
    except K3kitError as exc:
        note = f"verification cache not saved: {exc.message}"
        report.cache_note = f"{report.cache_note}; {note}" if report.cache_note else note


def hash_tree(
    layout: Layout,
    *,
    workers: int | None = None,
    on_file_done: Callable[[str, int], None] | None = None,
    keep: Callable[[str], bool] | None = None,
) -> list[LockedFile]:
    """sha256 and blake3 of every file under a layout, in parallel, for pinning a local copy.

    ``keep`` (the pin's selection: patterns, ``.git/``, names it cannot lock) sees every
    non-directory path during the walk, before any byte is hashed; it may raise to refuse one.
    """
    rels: list[str] = []

    def on_error(rel: str, exc: OSError) -> None:
        raise VerificationError(
            f"{display_name(rel) or '.'}: cannot read under {layout.root}: {exc.strerror or exc}",
            code="WEIGHTS_WALK_FAILED",
        )

    for entry in walk(layout.root, on_error=on_error):
        if entry.kind == "dir" or (
            layout.kind == "plain" and is_hf_local_metadata(entry.rel, entry.kind, entry.size)
        ):
            continue
        # The caller's selection sees the name first, so a pin can refuse it as bad input.
        if keep is not None and not keep(entry.rel):
            continue
        if entry.rel != display_name(entry.rel):
            raise VerificationError(
                f"{display_name(entry.rel)}: name is not printable UTF-8",
                code="WEIGHTS_BAD_NAME",
            )
        if entry.kind == "special" or (entry.kind == "symlink" and layout.kind == "plain"):
            raise VerificationError(
                f"{layout.root / entry.rel}: {entry.kind} in a weights folder",
                code="WEIGHTS_NOT_REGULAR",
            )
        rels.append(entry.rel)
    if not rels:
        raise VerificationError(f"no files under {layout.root}", code="WEIGHTS_EMPTY")

    from k3kit.models import LockedFile  # the pin builds models: pydantic only here

    def one(rel: str) -> LockedFile:
        try:
            real = resolve_file(layout, rel)
        except LinkPolicyViolation as exc:
            raise VerificationError(f"{rel}: {exc.detail}", code=exc.code) from exc
        digests, size = hash_file(real, ("sha256", "blake3"), follow_symlinks=False)
        if on_file_done:
            on_file_done(rel, size)
        return LockedFile(path=rel, size=size, sha256=digests["sha256"], blake3=digests["blake3"])

    from concurrent.futures import ThreadPoolExecutor  # the pin hashes: its threads only here

    from k3kit.weights.hashpool import default_workers

    n_workers = workers or default_workers()
    pool = ThreadPoolExecutor(max_workers=max(1, n_workers))
    try:
        files = list(pool.map(one, rels))
    finally:  # on Ctrl-C, drop the queued files instead of hashing them all first
        pool.shutdown(wait=False, cancel_futures=True)
    return sorted(files, key=lambda f: f.path)


def check_file_set(
    path: Path, lock: WeightsLock
) -> tuple[Layout, list[WeightsProblem], dict[str, Path]]:
    """The verifier's first half without hashing: layout, file set, symlink policy and sizes.

    ``pull`` hashes every file as it lands, then calls this for the rest of the verdict, so a
    pull and a later ``verify --weights`` apply exactly the same rules. Returns the layout, the
    problems and, for each file that passed, the real path that was checked.
    """
    layout = locate(path, lock)
    problems, present = _file_set_problems(layout, lock)
    return layout, problems, {rel: real for rel, (real, _) in present.items()}


__all__ = [
    "Layout",
    "WeightsProblem",
    "WeightsReport",
    "check_file_set",
    "check_weights",
    "choose_algorithm",
    "display_name",
    "hash_tree",
    "local_layout",
    "locate",
    "repo_folder_name",
]
