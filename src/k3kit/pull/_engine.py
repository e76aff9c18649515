"""The pull engine: download pool, hash pool, quarantine and the verdict (see ``k3kit.pull``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from k3kit._digest import FileStamp, hash_fd
from k3kit._fs import need_free_space
from k3kit.errors import K3kitError, VerificationError
from k3kit.hub import FATAL_CODES
from k3kit.models import LockedFile, WeightsLock
from k3kit.pull._parts import DaemonPool, Downloader, Group, stopped_error
from k3kit.pull._quarantine import Quarantine, QuarantineRecord
from k3kit.pull._report import LayoutName, PullError, PullReport
from k3kit.pull._safedir import PathBlocked, SafeDir
from k3kit.pull._store import Store
from k3kit.weights import WeightsProblem, check_file_set

Result = tuple[LockedFile, str | None, str | None]  # entry, where its bytes are, what is wrong


class Puller:
    def __init__(
        self,
        lock: WeightsLock,
        dest: Path,
        layout: LayoutName,
        downloader: Downloader,
        on_file_done: Callable[[str, int], None] | None,
        on_event: Callable[[str], None] | None,
    ) -> None:
        self.lock, self.dest, self.downloader = lock, dest, downloader
        self.on_file_done, self.on_event = on_file_done, on_event
        self.safe = SafeDir(dest)
        self.store = Store(self.safe, lock, layout == "cache")
        self.root = dest / self.store.snapshot if layout == "cache" else dest
        self.report = PullReport(lock, layout, self.root)
        self.quarantine = Quarantine(dest, lock.commit)
        self.verified: dict[str, tuple[str, FileStamp]] = {}  # lock path -> (data, stamp)
        self.cancel = threading.Event()
        self._count = threading.Lock()  # pool threads update the report's counters

    def _say(self, text: str) -> None:
        if self.on_event:
            self.on_event(text)

    def _problem(self, code: str, path: str, detail: str) -> None:
        with self._count:
            self.report.problems.append(WeightsProblem(code, path, detail))

    # -- on-disk state ------------------------------------------------------------------------

    def inspect(self, group: Group) -> str:
        """``hash`` when every file is in place with the right size, ``fetch`` when one is not,
        ``blocked`` when a link or something that is not a file is in the way (never followed)."""
        todo = "hash"
        for f in group.files:
            found = self.store.find(f)
            if found.state == "blocked":
                self._problem(found.code, f.path, found.detail)
                return "blocked"
            if found.state == "absent":
                if found.detail:
                    self._say(f"removing {f.path}: {found.detail}")
                todo = "fetch"
                continue
            assert found.data is not None
            st = self.safe.lstat(found.data)
            if st is not None and st.st_size != f.size:
                self._move(group, found.data, f, f"size {st.st_size}", "found on disk")
                todo = "fetch"
        return todo

    def _move(self, group: Group, data: str, f: LockedFile, actual: str, origin: str) -> None:
        """Quarantine ``data`` and drop the snapshot entries of the group that named it."""
        record = self.quarantine.move(self.safe, data, f, actual, origin)
        for g in group.files:
            if self.store.cache:
                st = self.safe.lstat(self.store.entry(g))
                if st is not None:
                    self.safe.unlink(self.store.entry(g))
        self._keep(record)

    def _keep(self, record: QuarantineRecord) -> None:
        with self._count:  # download threads quarantine what they refuse
            self.report.quarantined.append(record)
        where = record.moved_to or "deleted (could not move it out of the weights folder)"
        self._say(
            f"quarantined {record.path} ({record.actual}, expected {record.expected}) -> {where}"
        )
        if record.problem:
            self._problem("PULL_QUARANTINE_FAILED", record.path, record.problem)

    # -- jobs (run in pool threads) -----------------------------------------------------------

    def download(self, group: Group) -> list[Result]:
        """Fetch the group's file, hashed as it arrives; place it only if the whole hash matched.

        The verdict is the same as :meth:`hash` gives, without reading the file back: a wrong
        file goes from its hidden part name to the quarantine (data ``""``: already moved).
        """
        f = group.files[0]
        part = self.store.part(f)
        try:
            self.downloader.fetch(
                self.lock.repo,
                self.lock.commit,
                f.path,
                size=f.size,
                sink=part,
                cancel=self.cancel,
            )
            wrong = self._wrong(f, part.hash.hexdigests(), part.hash.size)
            if wrong is None:
                self._trust(self.store.data(f), part.commit())
            else:
                quarantined = part.hand_over(
                    lambda rel: self.quarantine.move(self.safe, rel, f, wrong, "downloaded")
                )
                self._keep(quarantined)
            # Counted once the bytes are in place or quarantined: a part discarded after a
            # failed write (ENOSPC, a cut connection) never landed, and a report must not claim it.
            with self._count:
                self.report.bytes_downloaded += part.received
                self.report.bytes_hashed += part.hash.size
        finally:
            part.discard()  # nothing if it was committed or quarantined
        if wrong is None:
            for g in group.files:
                self.store.link(g)
        with self._count:
            self.report.files_downloaded += len(group.files)
        data = self.store.data(f) if wrong is None else ""
        return [(g, data, wrong) for g in group.files]

    def hash(self, group: Group) -> list[Result]:
        """Hash the group's file once; returns (entry, data, wrong digest) for each entry."""
        results: list[Result] = []
        seen: dict[str, str | None] = {}
        for f in group.files:
            found = self.store.find(f)
            if found.state != "present" or found.data is None:
                results.append((f, None, None))
                continue
            data = found.data
            if data not in seen:
                seen[data] = self._hash_one(f, data)
            results.append((f, data, seen[data]))
        return results

    def _hash_one(self, f: LockedFile, data: str) -> str | None:
        try:
            fd = self.safe.open_regular(data)
        except (OSError, PathBlocked) as exc:
            return f"unreadable: {exc}"
        try:
            before = os.fstat(fd)
            digests, size = hash_fd(
                fd, ("sha256", "blake3") if f.blake3 else ("sha256",), cancel=self.cancel
            )
            after = os.fstat(fd)
        except OSError as exc:
            return f"unreadable: {exc.strerror or exc}"
        finally:
            os.close(fd)
        with self._count:
            self.report.bytes_hashed += size
        wrong = self._wrong(f, digests, size)
        if wrong is None and FileStamp.of(before) == FileStamp.of(after):  # else it changed
            self._trust(data, FileStamp.of(after))
        return wrong

    @staticmethod
    def _wrong(f: LockedFile, digests: dict[str, str], size: int) -> str | None:
        """What differs from the lock (size, sha256, blake3), or None when all of it matches."""
        if size != f.size or digests["sha256"] != f.sha256:
            return f"sha256 {digests['sha256'][:16]}…, {size} bytes"
        if f.blake3 and digests["blake3"] != f.blake3:
            return f"blake3 {digests['blake3'][:16]}…"
        return None

    def _trust(self, data: str, stamp: FileStamp) -> None:
        """Every entry stored at ``data`` is verified, as long as the file keeps ``stamp``."""
        for g in (x for x in self.lock.files if self.store.data(x) == data):
            self.verified[g.path] = (data, stamp)

    # -- coordination (main thread only) ------------------------------------------------------

    def run(self, workers: int, hash_workers: int) -> PullReport:
        self.quarantine.check()  # a planted quarantine link is refused before any byte moves
        for rel, detail in self.store.structure():
            self._problem("PULL_LINK_PLANTED", rel, detail)
        if self.report.problems:
            return self.report  # nothing is fetched through a planted folder link
        groups: dict[str, Group] = {}
        for f in self.lock.files:
            groups.setdefault(self.store.data(f), Group([])).files.append(f)
        todo = {key: self.inspect(g) for key, g in groups.items()}
        pending: dict[Future[object], tuple[str, Group]] = {}
        dl_pool = DaemonPool(workers, "k3kit-pull")
        try:
            # Compared before any download: a too-small disk is refused now, not at ENOSPC
            # hours in (the files in place with the right size are not counted: they stay).
            missing = sum(g.files[0].size for key, g in groups.items() if todo[key] == "fetch")
            need_free_space(self.dest, missing, what=f"pulling {self.lock.repo}")
            with ThreadPoolExecutor(max(1, hash_workers), "k3kit-hash") as hash_pool:

                def fetch(g: Group) -> None:
                    g.downloads += 1
                    pending[dl_pool.submit(lambda: self.download(g))] = ("download", g)

                def check(g: Group) -> None:
                    pending[hash_pool.submit(self.hash, g)] = ("hash", g)

                try:
                    for key, g in groups.items():
                        if todo[key] != "blocked":
                            (check if todo[key] == "hash" else fetch)(g)
                    self._drive(pending, fetch, check)
                except BaseException:  # Ctrl-C or a bug: stop now, leave no part file behind
                    self.cancel.set()
                    self.store.cancel()
                    for fut in pending:
                        fut.cancel()
                    raise
        finally:
            dl_pool.shutdown(wait=False)
            try:
                self.quarantine.write_record(self.report.quarantined)
            finally:
                self.quarantine.close()
        report = self._verdict(groups)
        self.safe.close()
        return report

    def _drive(
        self,
        pending: dict[Future[object], tuple[str, Group]],
        fetch: Callable[[Group], None],
        check: Callable[[Group], None],
    ) -> None:
        """React to each finished job until none is left."""
        stopped: str | None = None
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                kind, g = pending.pop(fut)
                if kind == "hash" or _succeeded(fut):  # a download returns its own hash verdict
                    self._hashed(g, fut.result(), stopped, fetch)
                    continue
                stopped, recheck = self._failed(fut, g, stopped, pending)
                if recheck:
                    check(g)

    def _hashed(
        self, g: Group, results: object, stopped: str | None, fetch: Callable[[Group], None]
    ) -> None:
        """A group was hashed: fetch it (once more) when it needs it and the pull goes on."""
        if not self._judge(g, results) or g.error is not None:
            return
        if stopped is not None or g.downloads >= 2:
            if stopped is not None:
                g.error = stopped_error(g, stopped)
            return
        self._say(f"fetching {g.files[0].path}" + (" once more" if g.downloads else ""))
        fetch(g)

    def _failed(
        self,
        fut: Future[object],
        g: Group,
        stopped: str | None,
        pending: dict[Future[object], tuple[str, Group]],
    ) -> tuple[str | None, bool]:
        """A failed or cancelled download: record why. Returns the pull's stop reason (the first
        fatal code stops every other download) and whether to hash whatever is in place now, so
        nothing that landed stays unverified."""
        if fut.cancelled():
            g.error = stopped_error(g, stopped)
            return stopped, True
        exc = fut.exception()
        if isinstance(exc, VerificationError | PathBlocked):
            code = exc.code if isinstance(exc, VerificationError) else "PULL_PATH_BLOCKED"
            detail = exc.message if isinstance(exc, VerificationError) else str(exc)
            self._problem(code, g.files[0].path, detail)
            return stopped, False  # the hub's answer is refused: nothing was kept, no second try
        if isinstance(exc, K3kitError):
            g.error = PullError.of(g.files[0].path, exc)
            if exc.code in FATAL_CODES and stopped is None:
                for other, (other_kind, _) in pending.items():
                    if other_kind == "download":
                        other.cancel()
                return exc.code, True
        elif isinstance(exc, OSError):
            detail = f"writing failed: {exc.strerror or exc}"
            g.error = PullError("LOCAL_IO_ERROR", g.files[0].path, detail)
        elif exc is not None:
            raise exc
        return stopped, True

    def _judge(self, g: Group, results: object) -> bool:
        """Quarantine what is wrong; True when the group needs (another) download."""
        refetch = False
        assert isinstance(results, list)
        origin = "downloaded" if g.downloads else "found on disk"
        moved: set[str] = set()
        for f, data, wrong in results:
            if data is None:
                refetch = True  # absent (e.g. removed as a bad link) -- fetch it
            elif wrong is not None:
                # "": refused before it was placed (already moved); a shared blob moves once
                if data and data not in moved:
                    moved.add(data)
                    self._move(g, data, f, wrong, origin)
                refetch = True
            elif self.on_file_done:
                self.on_file_done(f.path, f.size)
        if refetch and g.downloads >= 2:
            for f, _, wrong in results:
                if wrong is not None:
                    self._problem(
                        "WEIGHTS_DIGEST_MISMATCH",
                        f.path,
                        f"wrong bytes again after one re-fetch ({wrong}); quarantined",
                    )
        if not refetch and g.downloads == 0:
            self.report.files_in_place += len(g.files)
        return refetch

    def _verdict(self, groups: dict[str, Group]) -> PullReport:
        report = self.report
        failed = {f.path for g in groups.values() if g.error for f in g.files}
        failed |= {p.path for p in report.problems}
        report.errors = [g.error for g in groups.values() if g.error is not None]
        try:
            _, problems, present = check_file_set(self.dest, self.lock)
        except VerificationError as exc:  # nothing landed at all (e.g. the first call failed)
            if not report.errors and not report.problems:
                report.problems.append(WeightsProblem(exc.code, "", exc.message))
            return report
        for p in problems:
            if p.path in failed and p.code == "WEIGHTS_FILE_MISSING":
                continue
            if any(q.path == p.path and q.code == p.code for q in report.problems):
                continue
            report.problems.append(p)
        for rel, real in sorted(present.items()):
            if not self._still_verified(rel, real):
                report.problems.append(
                    WeightsProblem(
                        "PULL_NOT_VERIFIED",
                        rel,
                        "not hashed by this pull, or changed after hashing (identity: device, "
                        "inode, size, mtime, ctime)",
                    )
                )
        report.problems.sort(key=lambda p: p.path)
        return report

    def _still_verified(self, rel: str, real: Path) -> bool:
        """The file hashed for ``rel`` is the one there now, unchanged, seen both ways."""
        if rel not in self.verified:
            return False
        data, stamp = self.verified[rel]
        try:
            mine = self.safe.lstat(data)
            theirs = os.stat(real, follow_symlinks=False)
        except (OSError, PathBlocked):
            return False
        return mine is not None and FileStamp.of(mine) == stamp == FileStamp.of(theirs)


def _succeeded(fut: Future[object]) -> bool:
    return not fut.cancelled() and fut.exception() is None
