"""The pull engine: download pool, hash pool, quarantine and the verdict (see ``k3kit.pull``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from k3kit.errors import K3kitError, VerificationError
from k3kit.hub import FATAL_CODES
from k3kit.layouts import Layout, LinkPolicyViolation, repo_folder_name, resolve_file
from k3kit.models import LockedFile, WeightsLock
from k3kit.pull._parts import (
    Downloader,
    Group,
    Signature,
    hash_with_identity,
    signature,
    stopped_error,
)
from k3kit.pull._quarantine import Quarantine, QuarantineRecord
from k3kit.pull._report import LayoutName, PullError, PullReport
from k3kit.weights import WeightsProblem, check_file_set


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
        self.lock, self.dest, self.layout, self.downloader = lock, dest, layout, downloader
        self.on_file_done, self.on_event = on_file_done, on_event
        repo_dir = dest / repo_folder_name(lock.repo)
        self.root = repo_dir / "snapshots" / lock.commit if layout == "cache" else dest
        self.links = Layout(
            self.root,
            "snapshot",
            (
                Path(os.path.realpath(repo_dir / "blobs")),
                Path(os.path.realpath(dest / "blobs")),
            ),
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
            try:  # the verifier's own symlink policy (k3kit.layouts), never a second copy of it
                real = resolve_file(self.links, rel) if self.layout == "cache" else None
            except LinkPolicyViolation:
                real = None
            if real is None or not real.is_file():
                self._say(f"removing {rel}: a link that is not a blob of this cache")
                path.unlink()
                return None
            return real
        return path

    def inspect(self, group: Group) -> str:
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
        self._say(
            f"quarantined {record.path} ({record.actual}, expected {record.expected}) -> {where}"
        )
        if record.problem:
            self.report.problems.append(
                WeightsProblem("PULL_QUARANTINE_FAILED", record.path, record.problem)
            )

    # -- jobs (run in pool threads) ----------------------------------------------------------

    def download(self, group: Group) -> None:
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

    def hash(self, group: Group) -> list[tuple[LockedFile, Path | None, str | None]]:
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
                    digests, size, identity = hash_with_identity(real, bool(f.blake3))
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
        groups: dict[str, Group] = {}
        for f in self.lock.files:
            groups.setdefault(f.sha256, Group([])).files.append(f)
        pending: dict[Future[object], tuple[str, Group]] = {}
        with (
            ThreadPoolExecutor(max(1, workers), "k3kit-pull") as dl_pool,
            ThreadPoolExecutor(max(1, hash_workers), "k3kit-hash") as hash_pool,
        ):

            def fetch(g: Group) -> None:
                g.downloads += 1
                pending[dl_pool.submit(self.download, g)] = ("download", g)

            def check(g: Group) -> None:
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
        pending: dict[Future[object], tuple[str, Group]],
        fetch: Callable[[Group], None],
        check: Callable[[Group], None],
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
                                g.error = stopped_error(g, stopped)
                            continue
                        self._say(
                            f"fetching {g.files[0].path}" + (" once more" if g.downloads else "")
                        )
                        fetch(g)
                    continue
                # A finished download, failed or cancelled: hash whatever is in place
                # now, so nothing that landed stays unverified.
                if fut.cancelled():
                    g.error = stopped_error(g, stopped)
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

    def _judge(self, g: Group, results: object) -> bool:
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
                    self.report.problems.append(
                        WeightsProblem(
                            "WEIGHTS_DIGEST_MISMATCH",
                            f.path,
                            f"wrong bytes again after one re-fetch ({wrong}); quarantined",
                        )
                    )
        if not refetch and g.downloads == 0:
            self.report.files_in_place += len(g.files)
        return refetch

    def _verdict(self, groups: dict[str, Group]) -> PullReport:
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
            if self.verified.get(real) != signature(os.stat(real)):
                report.problems.append(
                    WeightsProblem(
                        "PULL_NOT_VERIFIED",
                        rel,
                        "not hashed by this pull, or changed after hashing",
                    )
                )
        report.problems.sort(key=lambda p: p.path)
        return report
