"""Where wrong bytes go: a quarantine folder beside the weights folder, never inside it.

``<DIR>.k3kit-quarantine/<commit12>-<time>-<pid>/<path>`` keeps the evidence of one pull run
(with ``quarantine.json`` saying what was expected and what arrived) out of every place a
launcher or ``verify --weights DIR`` looks. The base must be a real folder owned by this user: a
planted link there would make the pull write where it points, so it is refused before anything
is downloaded (:meth:`Quarantine.check`). A move is a ``rename`` between two folder descriptors
(the source reached under DIR without links, see ``_safedir``); when that is impossible (``DIR``
is its own filesystem: EXDEV) the entry is deleted instead -- the entry itself, which is inside
DIR by construction, never a link's target -- since keeping wrong bytes in place is never an option.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from k3kit._canonical import dumps
from k3kit._fs import open_nofollow
from k3kit._values import utc_file_stamp
from k3kit.errors import EnvironmentProblem
from k3kit.models import LockedFile
from k3kit.pull._safedir import PathBlocked, SafeDir, open_dir_at, split


@dataclass(frozen=True)
class QuarantineRecord:
    path: str
    expected: str
    actual: str
    origin: str  # "downloaded" or "found on disk"
    moved_to: str | None  # None: deleted, because it could not be moved
    problem: str | None = None  # set when the file could be neither moved nor deleted


def quarantine_dir(dest: Path) -> Path:
    """The quarantine folder of a weights folder: a sibling, so never part of the weights."""
    return dest.parent / f"{dest.name}.k3kit-quarantine"


def _rename(src: str, dst: str, src_fd: int, dst_fd: int) -> None:
    """One seam for tests that simulate a move across filesystems (EXDEV)."""
    os.rename(src, dst, src_dir_fd=src_fd, dst_dir_fd=dst_fd)


class Quarantine:
    def __init__(self, dest: Path, commit: str) -> None:
        self.base = quarantine_dir(dest)
        self.commit = commit
        self.run_dir: Path | None = None
        self._run_fd: int | None = None
        self._lock = threading.Lock()

    def check(self) -> None:
        """Refuse a quarantine base that is a link, not a folder, or someone else's."""
        try:
            st = os.stat(self.base, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a folder"
            raise EnvironmentProblem(
                f"the quarantine folder {self.base} is {kind}; refusing to write through it",
                code="PULL_QUARANTINE_UNSAFE",
                hint="remove it (pull recreates it as a private folder) and rerun",
            )
        if st.st_uid != os.geteuid():
            raise EnvironmentProblem(
                f"the quarantine folder {self.base} belongs to uid {st.st_uid}, not to this user",
                code="PULL_QUARANTINE_UNSAFE",
                hint="remove it or pull as its owner",
            )

    def _open_run(self) -> int:
        if self._run_fd is None:
            stamp = utc_file_stamp()
            run = f"{self.commit[:12]}-{stamp}-{os.getpid()}"
            parent = os.open(self.base.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                base = open_dir_at(parent, self.base.name, self.base.name, create=True, mode=0o700)
            finally:
                os.close(parent)
            try:
                if os.fstat(base).st_uid != os.geteuid():
                    raise PathBlocked(self.base.name, "belongs to another user")
                self._run_fd = open_dir_at(base, run, run, create=True, mode=0o700)
            finally:
                os.close(base)
            self.run_dir = self.base / run
        return self._run_fd

    def move(
        self,
        safe: SafeDir,
        data: str,
        entry: LockedFile,
        actual: str,
        origin: str,
    ) -> QuarantineRecord:
        """Take the file ``data`` (relative to DIR) out of the weights folder."""
        moved_to: str | None = None
        problem = None
        with self._lock:
            try:
                run_fd = self._open_run()
                parents, name = split(data)
                target_parents, target = split(entry.path)
                with safe.folder(parents) as src_fd:
                    dst_fd = os.dup(run_fd)
                    try:
                        for i, part in enumerate(target_parents):
                            nxt = open_dir_at(
                                dst_fd,
                                part,
                                "/".join(target_parents[: i + 1]),
                                create=True,
                                mode=0o700,
                            )
                            os.close(dst_fd)
                            dst_fd = nxt
                        n, final = 0, target
                        while _exists(final, dst_fd):
                            n += 1
                            final = f"{target}.{n}"
                        _rename(name, final, src_fd, dst_fd)
                    finally:
                        os.close(dst_fd)
                assert self.run_dir is not None
                moved_to = str(self.run_dir / "/".join([*target_parents, final]))
            except (OSError, PathBlocked):
                try:
                    safe.unlink(data)
                except (OSError, PathBlocked) as exc:
                    problem = f"could not move or delete {data}: {exc}"
        expected = f"sha256 {entry.sha256[:16]}…, {entry.size} bytes"
        return QuarantineRecord(entry.path, expected, actual, origin, moved_to, problem)

    def write_record(self, records: list[QuarantineRecord]) -> None:
        if self.run_dir is None or self._run_fd is None or not records:
            return
        doc = dumps({"commit": self.commit, "quarantined": [asdict(r) for r in records]})
        name = "quarantine.json"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        fd = open_nofollow(name + ".tmp", flags, 0o600, dir_fd=self._run_fd)
        try:
            view = memoryview(doc)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(name + ".tmp", name, src_dir_fd=self._run_fd, dst_dir_fd=self._run_fd)

    def close(self) -> None:
        if self._run_fd is not None:
            os.close(self._run_fd)
            self._run_fd = None


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
