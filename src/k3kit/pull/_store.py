"""Where each lock entry's bytes live under ``DIR``, and how new bytes get there.

Two layouts. Plain: ``DIR/<path>`` is the file. Cache (what huggingface_hub writes):
``DIR/models--org--name/blobs/<name>`` holds the bytes, ``snapshots/<commit>/<path>`` is a relative
symlink ``../../blobs/<name>`` to it (one more ``../`` per folder level of ``<path>``), and
``<name>`` is the git blob sha1 for a small file, the sha256 for an LFS file, as the client names
them. Only links of exactly that form are believed; anything else at a file's name is removed
(the entry itself, through :class:`SafeDir`) and fetched again.

New bytes go to a hidden part file beside their final name, created with ``O_EXCL | O_NOFOLLOW``
in a folder reached without links, and are hashed as they are written (:class:`StreamHash`, reset
whenever a transfer starts over, so a part is always hashed from its first byte). The engine
renames a part into place only when it is complete AND its whole hash matched the lock, under the
same lock a Ctrl-C takes to delete every part file: nothing half-written or wrong is ever placed
under DIR; a part whose hash fails is handed to the quarantine straight from its hidden name.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from k3kit._digest import FileStamp, StreamHash
from k3kit._fs import create_new
from k3kit.models import LockedFile, WeightsLock
from k3kit.pull._safedir import PathBlocked, SafeDir, not_ours, split
from k3kit.weights.layouts import repo_folder_name

State = Literal["absent", "present", "blocked"]
T = TypeVar("T")


@dataclass(frozen=True)
class Found:
    state: State
    data: str | None = None  # where the bytes are, relative to DIR (present)
    detail: str = ""  # why (blocked), or what was removed on the way (absent)
    code: str = ""  # the problem code (blocked)


class Store:
    def __init__(self, safe: SafeDir, lock: WeightsLock, cache: bool) -> None:
        self.safe, self.lock, self.cache = safe, lock, cache
        self.repo = repo_folder_name(lock.repo)
        self.snapshot = f"{self.repo}/snapshots/{lock.commit}" if cache else ""
        self.cancelled = False
        self.commit_lock = threading.Lock()  # part files are renamed or deleted under it
        self.parts: set[Part] = set()

    # -- names --------------------------------------------------------------------------------

    def entry(self, f: LockedFile) -> str:
        """The name a launcher opens, relative to DIR."""
        return f"{self.snapshot}/{f.path}" if self.cache else f.path

    def blob_name(self, f: LockedFile) -> str:
        return f.git_blob_sha1 if not f.lfs and f.git_blob_sha1 else f.sha256

    def data(self, f: LockedFile) -> str:
        """Where the bytes of ``f`` go, relative to DIR."""
        return f"{self.repo}/blobs/{self.blob_name(f)}" if self.cache else f.path

    def link_target(self, f: LockedFile) -> str:
        return "../" * (f.path.count("/") + 2) + "blobs/" + self.blob_name(f)

    def structure(self) -> list[tuple[str, str]]:
        """Folders of the layout that are links (or not folders): (path, detail) each."""
        if not self.cache:
            return []
        bad = []
        for rel in (
            "blobs",
            self.repo,
            f"{self.repo}/blobs",
            f"{self.repo}/snapshots",
            self.snapshot,
        ):
            try:
                st = self.safe.lstat(rel)
            except PathBlocked:
                continue  # a folder above it is already reported
            if st is not None and not stat.S_ISDIR(st.st_mode):
                kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a folder"
                bad.append((rel, f"is {kind} (planted?); remove it and rerun"))
        return bad

    # -- what is on disk ----------------------------------------------------------------------

    def find(self, f: LockedFile) -> Found:
        """What sits at ``f``'s name now; a link that is not ours is removed (the link only)."""
        name = self.entry(f)
        try:
            st = self.safe.lstat(name)
            if st is None:
                return Found("absent")
            if stat.S_ISLNK(st.st_mode):
                return self._follow_link(f, name)
            return self._regular(name, st)
        except PathBlocked as exc:
            code = "PULL_LINK_PLANTED" if "symlink" in exc.detail else "PULL_PATH_BLOCKED"
            return Found("blocked", detail=f"{exc.rel} {exc.detail}", code=code)

    def _regular(self, rel: str, st: os.stat_result) -> Found:
        if stat.S_ISREG(st.st_mode):
            why = not_ours(st)
            if why is not None:  # right bytes now, anyone's bytes after the verdict
                detail = f"{rel} {why}; remove it (or make it yours) and rerun"
                return Found("blocked", detail=detail, code="PULL_FILE_FOREIGN")
            return Found("present", rel)
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a special file (never opened)"
        return Found("blocked", detail=f"{rel} is {kind}", code="PULL_PATH_BLOCKED")

    def _follow_link(self, f: LockedFile, name: str) -> Found:
        target = self.safe.readlink(name)
        blob = self.data(f)
        if not self.cache or target != self.link_target(f):
            self.safe.unlink(name)
            return Found("absent", detail="a link that is not a blob of this cache")
        st = self.safe.lstat(blob)
        if st is not None and stat.S_ISREG(st.st_mode):
            return self._regular(blob, st)
        if st is None or stat.S_ISLNK(st.st_mode):
            if st is not None:  # a link planted as a blob: remove that link, never its target
                self.safe.unlink(blob)
            self.safe.unlink(name)
            return Found("absent", detail="a link to a blob that is missing or is itself a link")
        return self._regular(blob, st)

    # -- writing ------------------------------------------------------------------------------

    def part(self, f: LockedFile) -> Part:
        """A new part file, created and registered in one step under the commit lock.

        Created first and registered after, a part could be left behind by a Ctrl-C: the main
        thread deleted the registered parts and exited while a daemon thread sat between its
        ``open`` and its own clean-up (seen on a loaded machine). Under the lock, a Ctrl-C's
        ``cancel`` runs either before (nothing is created) or after (it deletes this part too).
        """
        algorithms = ("sha256", "blake3") if f.blake3 else ("sha256",)
        with self.commit_lock:
            if self.cancelled:
                raise InterruptedError("pull cancelled")
            part = Part(self, self.data(f), algorithms)
            self.parts.add(part)
        return part

    def link(self, f: LockedFile) -> None:
        """Point ``f``'s snapshot entry at its blob (cache layout), replacing a stale entry."""
        if not self.cache:
            return
        name = self.entry(f)
        if self.safe.lstat(name) is not None:
            self.safe.unlink(name)
        self.safe.symlink(name, self.link_target(f))

    def cancel(self) -> None:
        """Stop every download at its next chunk and delete every part file (Ctrl-C)."""
        with self.commit_lock:
            self.cancelled = True
            for part in list(self.parts):
                part.unlink()  # its thread closes the descriptors when it notices (next chunk)
            self.parts.clear()


class Part:
    """A download in progress: a hidden file beside its final name, written through an fd."""

    def __init__(self, store: Store, rel: str, algorithms: tuple[str, ...]) -> None:
        self.store, self.rel = store, rel
        parents, self.final = split(rel)
        self.name = f".{self.final[:64]}.k3kit-part-{secrets.token_hex(6)}"
        self.part_rel = "/".join([*parents, self.name])  # the hidden name, relative to DIR
        self.hash = StreamHash(algorithms)  # of exactly the bytes written since the last restart
        with store.safe.folder(parents, create=True) as fd:
            self.dir_fd = os.dup(fd)
        self.fd = create_new(self.name, 0o644, dir_fd=self.dir_fd)
        self.received = 0  # every byte taken from the network, all attempts together
        self.closed = False

    def restart(self) -> None:
        """Start the file over, and its hash with it: no byte of a failed attempt counts."""
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        self.hash.restart()

    def write(self, data: bytes) -> None:
        if self.store.cancelled:
            raise InterruptedError("pull cancelled")
        self.received += len(data)
        view = memoryview(data)
        self.hash.update(view)  # the bytes as received, before they touch the disk
        while view:
            view = view[os.write(self.fd, view) :]

    def commit(self) -> FileStamp:
        """Rename the complete file to its final name (read-only), unless the pull was cancelled.

        Call it only after the streamed hash matched. The hidden name must still be this part's
        own file (the one written through ``fd``), and so must the final name after the rename:
        what gets placed is the file that was hashed. Returns its stamp once in place.
        """
        os.fchmod(self.fd, 0o444)
        os.fsync(self.fd)
        with self.store.commit_lock:
            if self.store.cancelled:
                raise InterruptedError("pull cancelled")
            try:
                st = os.stat(self.final, dir_fd=self.dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise PathBlocked(self.rel, "is a folder; not replaced")
            self._same_file(self.name)
            os.rename(self.name, self.final, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            stamp = FileStamp.of(os.fstat(self.fd))  # after the rename, which moves the ctime
            self._same_file(self.final)
            self.store.parts.discard(self)
            self._close()
        return stamp

    def _same_file(self, name: str) -> None:
        st, mine = os.stat(name, dir_fd=self.dir_fd, follow_symlinks=False), os.fstat(self.fd)
        if (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino):
            raise PathBlocked(self.rel, "the part file was replaced while downloading")

    def hand_over(self, take: Callable[[str], T]) -> T:
        """Give the hidden part file (wrong bytes) to ``take``, by its name relative to DIR.

        ``take`` (the quarantine) moves it out under the commit lock, so a Ctrl-C cannot delete
        it half-way; the part is then closed and no longer tracked. It was never placed.
        """
        with self.store.commit_lock:
            if self.store.cancelled:
                raise InterruptedError("pull cancelled")
            try:
                return take(self.part_rel)
            finally:
                self.store.parts.discard(self)
                self._close()

    def unlink(self) -> None:
        try:
            os.unlink(self.name, dir_fd=self.dir_fd)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise

    def discard(self) -> None:
        """Delete the part file (from the thread that writes it)."""
        if self.closed:
            return
        with self.store.commit_lock:
            self.unlink()
            self.store.parts.discard(self)
        self._close()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)
            os.close(self.dir_fd)
