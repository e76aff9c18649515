"""Hash many files at once and compare each with the digest it must have.

The scheduling choices, each measured on the 2-core machine (docs/performance.md):

* one thread per file, as many threads as workers (hashlib and blake3 release the GIL), biggest
  files first so the last file to finish is a small one;
* one read buffer per thread, reused for every file it hashes, sized from a fixed budget, so
  memory does not grow with file size or file count;
* when there are fewer files than workers, or in the last partial round of equal-sized shards, and
  the digest is blake3, the spare workers go *inside* the files (``blake3(max_threads=k)`` fed by a
  reader thread, see :class:`Plan`); sha256 is sequential by construction and cannot use them;
* a blake3 file of 1 GiB or more that gets spare workers inside it is hashed through a memory
  mapping in a child process (:mod:`k3kit.weights._mapped`): on a page cache of large folios that
  runs at 0.91-1.01x of blake3's own ``update_mmap`` where the pipelined copying reader runs at
  0.54-0.83x, and a page that cannot be read kills only the child, whose file is then read here
  the ordinary way for the named error. A file hashed by one thread gains nothing from the
  mapping (four 1 GiB files on two workers: 0.585 s mapped against 0.556 s copied), so it is read;
* stop early: a worker that finds a mismatch sets a shared event before it returns, so no later
  file starts and the files being read stop within one buffer. Ctrl-C does the same.

With ``lease=True`` each file is read under a Linux read lease (:class:`ReadLease`), so the caller
learns whether any process had it open for writing, or opened it so, while it was read: the
verification cache records only files read under an unbroken lease (docs/verification-cache.md).

Progress is reported from the calling thread (``on_progress(bytes_done, bytes_total)``) a few times
a second, from per-job counters each written by one thread only, so no lock is taken per read.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from k3kit._digest import (
    CHUNK,
    PIPELINE_CHUNK,
    PIPELINE_DEPTH,
    Cancelled,
    FileDigest,
    NotRegularFile,
    digest_file,
    read_size,
)
from k3kit.weights._lease import ReadLease

PROGRESS_INTERVAL_S = 0.2
# The smallest blake3 file hashed through a mapping in a child process (k3kit.weights._mapped),
# when it gets spare workers: the child's start (10-60 ms) is lost in the hashing from here on.
MAPPED_MIN_BYTES = 1 << 30


@dataclass(frozen=True)
class HashJob:
    """One file to hash: ``name`` is the caller's label (the lock path), ``path`` the real file."""

    name: str
    path: Path
    size: int
    expected: str


@dataclass(frozen=True)
class JobResult:
    """What hashing one file found; ``problem`` is (code, detail) or None when it matched."""

    job: HashJob
    problem: tuple[str, str] | None
    digest: FileDigest | None
    started_ns: int
    # None when the whole read ran under a read lease that no writer broke; else why not.
    lease_note: str | None = "no lease asked for"

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass
class PoolResult:
    results: list[JobResult] = field(default_factory=list)
    bytes_read: int = 0
    cancelled: int = 0
    blake3_threads: int = 1
    threads: int = 0


_local = threading.local()


def _leased_note(lease: ReadLease | None, digest: FileDigest | None) -> str | None:
    """Release the lease; None when it vouches for ``digest`` (held throughout, same file)."""
    if lease is None:
        return "no lease asked for"
    intact = lease.intact()
    lease.release()
    if not intact:
        return lease.note
    if digest is None or lease.identity != (digest.before.device, digest.before.inode):
        return "the leased file is not the file that was read"
    return None


def default_workers() -> int:
    """The cores this process may run on (affinity/cpuset), not the machine's core count."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _buffer(size: int) -> bytearray:
    """This thread's reusable read buffer."""
    buf: bytearray | None = getattr(_local, "buffer", None)
    if buf is None or len(buf) != size:
        buf = bytearray(size)
        _local.buffer = buf
    return buf


@dataclass(frozen=True)
class Plan:
    """How a run uses its workers.

    ``threads`` files are hashed at once. With equal-sized shards they run in rounds; the jobs of
    a last, partial round (or all jobs, when there are fewer files than workers) would leave
    cores idle, so for blake3 each of them gets ``tail_inner`` threads inside its file.
    """

    threads: int
    full_rounds_jobs: int
    tail_inner: int
    chunk: int
    pipelined_chunk: int

    def inner(self, index: int) -> int:
        return 1 if index < self.full_rounds_jobs else self.tail_inner


def plan(n_files: int, workers: int, algorithm: str) -> Plan:
    """The schedule for ``n_files`` files (in hashing order) on ``workers`` workers."""
    threads = max(1, min(workers, n_files))
    full = n_files - n_files % threads if n_files >= workers else 0
    tail = n_files - full
    tail_inner = max(1, workers // tail) if algorithm == "blake3" and tail else 1
    return Plan(
        threads,
        full,
        tail_inner,
        read_size(threads, CHUNK),
        read_size(threads * PIPELINE_DEPTH, PIPELINE_CHUNK),
    )


def _compare(job: HashJob, digest: FileDigest, algorithm: str) -> tuple[str, str] | None:
    if digest.size != job.size:
        return "TRUNCATED", f"read {digest.size} bytes, locked {job.size}"
    actual = digest.digests[algorithm]
    if actual != job.expected:
        return (
            "DIGEST_MISMATCH",
            f"{algorithm} {actual[:16]}… != locked {job.expected[:16]}…",
        )
    return None


def run_jobs(
    jobs: Iterable[HashJob],
    algorithm: str,
    *,
    workers: int | None = None,
    stop_on_first: bool = True,
    lease: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    on_done: Callable[[JobResult], None] | None = None,
    mapped_min: int = MAPPED_MIN_BYTES,
) -> PoolResult:
    """Hash every job in parallel; see the module docstring for the policy.

    A blake3 file of ``mapped_min`` bytes or more that gets spare workers inside it is hashed
    through a mapping in a child process (:mod:`k3kit.weights._mapped`); one the child gives no
    answer for is read again here.
    """
    ordered = sorted(jobs, key=lambda j: (-j.size, j.name))
    out = PoolResult()
    if not ordered:
        return out
    schedule = plan(len(ordered), workers or default_workers(), algorithm)
    out.threads, out.blake3_threads = schedule.threads, schedule.tail_inner
    total = sum(j.size for j in ordered)
    read = [0] * len(ordered)
    cancel = threading.Event()

    def one(index: int, job: HashJob) -> JobResult | None:
        if cancel.is_set():
            return None

        held = ReadLease(job.path) if lease else None

        def count(n: int) -> None:
            read[index] += n
            if held is not None and held.fd is not None:
                held.intact()  # one fcntl per buffer (2 MiB or more)

        inner = schedule.inner(index)
        chunk = schedule.pipelined_chunk if inner > 1 else schedule.chunk
        started = time.time_ns()
        digest: FileDigest | None = None
        try:
            if algorithm == "blake3" and inner > 1 and job.size >= mapped_min:
                # imported here: it loads subprocess, which hashing a kit's small weights
                # (the demo's, a test's) never needs
                from k3kit.weights._mapped import digest_mapped

                digest = digest_mapped(
                    job.path, blake3_threads=inner, cancel=cancel, on_bytes=count
                )
                if digest is None:
                    read[index] = 0  # the file is read again below, and counted again
            if digest is None:
                digest = digest_file(
                    job.path,
                    (algorithm,),
                    blake3_threads=inner,
                    buffer=_buffer(chunk),
                    cancel=cancel,
                    on_bytes=count,
                )
            problem = _compare(job, digest, algorithm)
        except Cancelled:
            return None
        except NotRegularFile:
            problem = ("NOT_REGULAR", "not a regular file")
        except OSError as exc:
            problem = ("UNREADABLE", f"cannot read: {exc.strerror or exc}")
        finally:
            note = _leased_note(held, digest) if held is not None else "no lease asked for"
        if problem is not None and stop_on_first:
            cancel.set()  # before returning, so this thread's next job does not start
        return JobResult(job, problem, digest, started, note)

    collected: set[Future[JobResult | None]] = set()

    def collect(fut: Future[JobResult | None]) -> None:
        collected.add(fut)
        result = fut.result()
        if result is None:
            out.cancelled += 1
            return
        out.results.append(result)
        if on_done is not None:
            on_done(result)

    pool = ThreadPoolExecutor(max_workers=schedule.threads, thread_name_prefix="k3kit-hash")
    try:
        futures = [pool.submit(one, i, job) for i, job in enumerate(ordered)]
        pending: set[Future[JobResult | None]] = set(futures)
        shown = time.monotonic()
        while pending and not cancel.is_set():
            done, pending = wait(pending, timeout=PROGRESS_INTERVAL_S, return_when=FIRST_COMPLETED)
            for fut in done:
                collect(fut)
            if on_progress is not None and time.monotonic() - shown >= PROGRESS_INTERVAL_S:
                shown = time.monotonic()
                on_progress(sum(read), total)
    finally:
        # Normal end: nothing is pending. Early stop, a bug or Ctrl-C: stop the readers, drop
        # queued jobs, and wait only for the reads in flight (at most one buffer each).
        cancel.set()
        pool.shutdown(wait=True, cancel_futures=True)
    for fut in futures:
        if fut in collected:
            continue
        if fut.cancelled():
            out.cancelled += 1
        else:
            collect(fut)
    out.bytes_read = sum(read)
    if on_progress is not None:
        on_progress(out.bytes_read, total)
    return out
