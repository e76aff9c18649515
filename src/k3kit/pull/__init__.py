"""Pull the weights a lock pins from the hub, hashing each file as soon as it has landed.

Downloads run in one thread pool (huggingface_hub does the HTTP), hashing in another: the moment
a file is complete its hash job starts while the other files are still downloading, so a pull
reads every byte once and ends with the verifier's verdict, not with a second pass over 1.56 TB.

Rules that make the end state safe to launch from:

* Exactly the lock's files at the lock's commit, into a Hugging Face cache (``DIR`` is the cache
  root; files land in ``models--org--name/snapshots/<commit>/``) or a plain folder.
* A file whose bytes do not match the lock is moved to the quarantine folder
  ``<DIR>.k3kit-quarantine/`` (beside ``DIR``, never inside it, so neither a launcher nor
  ``verify --weights`` ever sees it), its snapshot link is removed, and it is fetched once more;
  wrong again means exit 1.
* A rerun resumes: files already in place with the right size are hashed, not downloaded; only
  missing or bad ones are fetched.
* The verdict comes from the verifier's own file-set rules (``weights.check_file_set``) plus the
  digests computed here, each tied to the file's identity (device, inode, size, mtime) when it
  was hashed: a file that changed after hashing is not counted as verified.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from k3kit._digest import NotRegularFile, hash_fd
from k3kit.errors import K3kitError, VerificationError
from k3kit.hub import FATAL_CODES
from k3kit.models import LockedFile, WeightsLock
from k3kit.pull._kit import KitLock, read_kit_lock
from k3kit.pull._quarantine import Quarantine, QuarantineRecord, quarantine_dir
from k3kit.pull._report import LayoutName, PullError, PullReport
from k3kit.weights import WeightsProblem, check_file_set, repo_folder_name

__all__ = [
    "Downloader",
    "KitLock",
    "PullError",
    "PullReport",
    "QuarantineRecord",
    "pull",
    "quarantine_dir",
    "read_kit_lock",
]

Signature = tuple[int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns


class Downloader(Protocol):
    """What a pull needs from a hub; ``k3kit.hub.HfHub`` implements it."""

    def download(
        self, repo: str, commit: str, path: str, *, cache_dir: Path | None, local_dir: Path | None
    ) -> Path: ...


@dataclass
class _Group:
    """Lock entries with the same content: in a cache they share one blob, so they move together."""

    files: list[LockedFile]
    downloads: int = 0
    error: PullError | None = None


def _signature(st: os.stat_result) -> Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _hash_with_identity(
    path: Path, blake3: bool
) -> tuple[dict[str, str], int, Signature | None]:
    """Digests of the file open at ``path`` and its identity, or None for the identity when the
    file changed while it was being read (then the digests prove nothing about what is there)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise NotRegularFile(f"not a regular file: {path}")
        digests, size = hash_fd(fd, ("sha256", "blake3") if blake3 else ("sha256",))
        after = os.fstat(fd)
    finally:
        os.close(fd)
    same = _signature(before) == _signature(after)
    return digests, size, _signature(after) if same else None


def _stopped(g: _Group, after: str | None) -> PullError:
    reason = f"not fetched: the pull stopped after {after}"
    return PullError(g.files[0].path, "PULL_STOPPED", reason)


class _Puller:
    def __init__(
        self,
        lock: WeightsLock,
        dest: Path,
        layout: LayoutName,
        downloader: Downloader,
        on_file_done: Callable[[str, int], None] | None,
        on_event: Callable[[str], None] | None,
    ) -> None:
        self.lock, self.dest, self.layout, self.downloader = lock, dest, layout, downloader
        self.on_file_done, self.on_event = on_file_done, on_event
        repo_dir = dest / repo_folder_name(lock.repo)
        self.root = repo_dir / "snapshots" / lock.commit if layout == "cache" else dest
        self.link_roots = (
            Path(os.path.realpath(repo_dir / "blobs")),
            Path(os.path.realpath(dest / "blobs")),
        )
        self.report = PullReport(lock, layout, self.root)
        self.quarantine = Quarantine(dest, lock.commit)
        self.verified: dict[Path, Signature] = {}
        self._count = threading.Lock()  # pool threads update the report's counters

    def _say(self, text: str) -> None:
        if self.on_event:
            self.on_event(text)

    # -- on-disk state --------------------------------------------------------------------------

    def _real(self, rel: str) -> Path | None:
        """The file behind ``rel`` if it is one we may trust the location of, else None.

        Anything else at that name (a symlink leaving the blobs, a dangling link, a link in a
        plain folder) is removed -- only the entry, never what it points to.
        """
        path = self.root / rel
        if not os.path.lexists(path):
            return None
        if path.is_symlink():
            real = Path(os.path.realpath(path))
            inside = any(real == r or r in real.parents for r in self.link_roots)
            if self.layout == "plain" or not inside or not real.is_file():
                self._say(f"removing {rel}: a link that is not a blob of this cache")
                path.unlink()
                return None
            return real
        return path

    def inspect(self, group: _Group) -> str:
        """``hash`` when every file is in place with the right size, ``fetch`` when one is not,
        ``blocked`` when something that is not a file sits at a file's name (never removed)."""
        todo = "hash"
        for f in group.files:
            real = self._real(f.path)
            if real is None:
                todo = "fetch"
                continue
            if not real.is_file():
                self.report.problems.append(
                    WeightsProblem("PULL_PATH_BLOCKED", f.path, f"{real} is not a file")
                )
                return "blocked"
            size = real.stat().st_size
            if size != f.size:
                self._keep(
                    self.quarantine.move(real, f, f"size {size}", "found on disk", self._links(f))
                )
                todo = "fetch"
        return todo

    def _links(self, f: LockedFile) -> list[Path]:
        """Snapshot entries that point at this file's blob (all paths with the same content)."""
        if self.layout != "cache":
            return []
        return [self.root / g.path for g in self.lock.files if g.sha256 == f.sha256]

    def _keep(self, record: QuarantineRecord) -> None:
        self.report.quarantined.append(record)
        where = record.moved_to or "deleted (could not move it out of the weights folder)"
        self._say(f"quarantined {record.path} ({record.actual}, expected {record.expected}) -> "
                  f"{where}")
        if record.problem:
            self.report.problems.append(
                WeightsProblem("PULL_QUARANTINE_FAILED", record.path, record.problem)
            )

    # -- jobs (run in pool threads) ----------------------------------------------------------

    def download(self, group: _Group) -> None:
        cache = self.dest if self.layout == "cache" else None
        local = self.dest if self.layout == "plain" else None
        for f in group.files:
            if os.path.lexists(self.root / f.path):
                continue
            self.downloader.download(
                self.lock.repo, self.lock.commit, f.path, cache_dir=cache, local_dir=local
            )
            with self._count:
                self.report.files_downloaded += 1
                self.report.bytes_downloaded += f.size

    def hash(self, group: _Group) -> list[tuple[LockedFile, Path | None, str | None]]:
        """Hash each distinct file of the group; returns (entry, real path, wrong digest)."""
        results: list[tuple[LockedFile, Path | None, str | None]] = []
        seen: dict[Path, str | None] = {}
        for f in group.files:
            real = self._real(f.path)
            if real is None:
                results.append((f, None, None))
                continue
            if real not in seen:
                try:
                    digests, size, identity = _hash_with_identity(real, bool(f.blake3))
                except OSError as exc:
                    seen[real] = f"unreadable: {exc.strerror or exc}"
                    results.append((f, real, seen[real]))
                    continue
                with self._count:
                    self.report.bytes_hashed += size
                wrong = None
                if size != f.size or digests["sha256"] != f.sha256:
                    wrong = f"sha256 {digests['sha256'][:16]}…, {size} bytes"
                elif f.blake3 and digests["blake3"] != f.blake3:
                    wrong = f"blake3 {digests['blake3'][:16]}…"
                elif identity is not None:
                    self.verified[real] = identity
                seen[real] = wrong
            results.append((f, real, seen[real]))
        return results

    # -- coordination (main thread only) -----------------------------------------------------

    def run(self, workers: int, hash_workers: int) -> PullReport:
        groups: dict[str, _Group] = {}
        for f in self.lock.files:
            groups.setdefault(f.sha256, _Group([])).files.append(f)
        pending: dict[Future[object], tuple[str, _Group]] = {}
        with (
            ThreadPoolExecutor(max(1, workers), "k3kit-pull") as dl_pool,
            ThreadPoolExecutor(max(1, hash_workers), "k3kit-hash") as hash_pool,
        ):

            def fetch(g: _Group) -> None:
                g.downloads += 1
                pending[dl_pool.submit(self.download, g)] = ("download", g)

            def check(g: _Group) -> None:
                pending[hash_pool.submit(self.hash, g)] = ("hash", g)

            for g in groups.values():
                todo = self.inspect(g)
                if todo != "blocked":
                    (check if todo == "hash" else fetch)(g)
            try:
                self._drive(pending, fetch, check)
            except BaseException:  # Ctrl-C or a bug: only the transfers in flight finish
                for fut in pending:
                    fut.cancel()
                raise
        self.quarantine.write_record(self.report.quarantined)
        return self._verdict(groups)

    def _drive(
        self,
        pending: dict[Future[object], tuple[str, _Group]],
        fetch: Callable[[_Group], None],
        check: Callable[[_Group], None],
    ) -> None:
        """React to each finished job until none is left (main thread only)."""
        stopped: str | None = None
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                kind, g = pending.pop(fut)
                if kind == "hash":
                    exc = fut.exception()
                    if exc is not None:
                        raise exc  # hash() turns I/O errors into results: this is a bug
                    if self._judge(g, fut.result()) and g.error is None:
                        if stopped is not None or g.downloads >= 2:
                            if stopped is not None:
                                g.error = _stopped(g, stopped)
                            continue
                        self._say(f"fetching {g.files[0].path}"
                                  + (" once more" if g.downloads else ""))
                        fetch(g)
                    continue
                # A finished download, failed or cancelled: hash whatever is in place
                # now, so nothing that landed stays unverified.
                if fut.cancelled():
                    g.error = _stopped(g, stopped)
                elif isinstance(exc := fut.exception(), K3kitError):
                    g.error = PullError(g.files[0].path, exc.code, exc.message, exc.hint)
                    if exc.code in FATAL_CODES and stopped is None:
                        stopped = exc.code
                        for other, (other_kind, _) in pending.items():
                            if other_kind == "download":
                                other.cancel()
                elif exc is not None:
                    raise exc
                check(g)

    def _judge(self, g: _Group, results: object) -> bool:
        """Quarantine what is wrong; True when the group needs (another) download."""
        refetch = False
        assert isinstance(results, list)
        origin = "downloaded" if g.downloads else "found on disk"
        for f, real, wrong in results:
            if real is None:
                refetch = True  # vanished (e.g. removed as a bad link) -- fetch it
            elif wrong is not None:
                if real.exists():  # a shared blob is moved once, for its first path
                    self._keep(self.quarantine.move(real, f, wrong, origin, self._links(f)))
                refetch = True
            elif self.on_file_done:
                self.on_file_done(f.path, f.size)
        if refetch and g.downloads >= 2:
            for f, _, wrong in results:
                if wrong is not None:
                    self.report.problems.append(WeightsProblem(
                        "WEIGHTS_DIGEST_MISMATCH", f.path,
                        f"wrong bytes again after one re-fetch ({wrong}); quarantined"))
        if not refetch and g.downloads == 0:
            self.report.files_in_place += len(g.files)
        return refetch

    def _verdict(self, groups: dict[str, _Group]) -> PullReport:
        report = self.report
        failed = {f.path for g in groups.values() if g.error for f in g.files}
        report.errors = [g.error for g in groups.values() if g.error is not None]
        try:
            _, problems, present = check_file_set(self.dest, self.lock)
        except VerificationError as exc:  # nothing landed at all (e.g. the first call failed)
            if not report.errors:
                report.problems.append(WeightsProblem(exc.code, "", exc.message))
            return report
        already = {p.path for p in report.problems}
        for p in problems:
            if p.path in already or (p.code == "WEIGHTS_FILE_MISSING" and p.path in failed):
                continue
            report.problems.append(p)
        for rel, real in sorted(present.items()):
            if self.verified.get(real) != _signature(os.stat(real)):
                report.problems.append(WeightsProblem(
                    "PULL_NOT_VERIFIED", rel, "not hashed by this pull, or changed after hashing"))
        report.problems.sort(key=lambda p: p.path)
        return report


def pull(
    lock: WeightsLock,
    dest: Path,
    *,
    downloader: Downloader,
    layout: LayoutName = "cache",
    workers: int = 8,
    hash_workers: int | None = None,
    on_file_done: Callable[[str, int], None] | None = None,
    on_event: Callable[[str], None] | None = None,
) -> PullReport:
    """Fetch and verify every file of ``lock`` into ``dest``; never raises for wrong bytes."""
    dest = Path(os.path.abspath(dest))
    dest.mkdir(parents=True, exist_ok=True)
    puller = _Puller(lock, dest, layout, downloader, on_file_done, on_event)
    return puller.run(workers, hash_workers or len(os.sched_getaffinity(0)))
