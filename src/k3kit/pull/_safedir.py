"""Reach every path under a weights folder through directory descriptors, never through a link.

A pull renames, unlinks and creates files under ``DIR`` while whoever else can write there may
plant links: ``DIR/extra -> /elsewhere``, ``snapshots/<commit> -> /elsewhere``,
``models--org--name/blobs -> /``. Resolving a path string at the moment of the rename would
follow them, so every component is opened here with ``O_DIRECTORY | O_NOFOLLOW`` from the
descriptor of the one before (``openat``-style), and each rename, unlink, symlink or open is done
relative to the descriptor of the entry's own folder. A link in a folder position is refused
(:class:`PathBlocked`), never followed, never removed; a link where a *file* belongs may be
removed by the caller with :meth:`SafeDir.unlink`, which removes that entry itself and can only
ever name something inside ``DIR``.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from k3kit._fs import NotRegularFile, open_nofollow, open_regular

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY  # opened through k3kit._fs.open_nofollow


class PathBlocked(Exception):
    """A folder on the way to a file is a link or not a folder: nothing under it is touched."""

    def __init__(self, rel: str, detail: str) -> None:
        super().__init__(f"{rel}: {detail}")
        self.rel = rel
        self.detail = detail


def split(rel: str) -> tuple[list[str], str]:
    parts = rel.split("/")
    return parts[:-1], parts[-1]


def open_dir_at(parent_fd: int, name: str, rel: str, *, create: bool, mode: int = 0o755) -> int:
    """Open ``name`` in ``parent_fd`` as a folder without following a link (creating it)."""
    try:
        return open_nofollow(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            kind = _kind(parent_fd, name)
            raise PathBlocked(rel, f"is {kind}, not a folder; refusing to go through it") from None
        raise
    with suppress(FileExistsError):
        os.mkdir(name, mode, dir_fd=parent_fd)
    return open_dir_at(parent_fd, name, rel, create=False)


def not_ours(st: os.stat_result) -> str | None:
    """Why another user could change an entry found in place after pull hashed it, else None.

    Bytes that hash right prove nothing about the next read: a file or folder owned by another
    user (a co-tenant who planted the genuine shards in a shared DIR first), or one group or
    others may write, can be swapped after the verdict. Root and this user are trusted; a
    sticky folder (``/tmp``) is safe to share, since only an entry's owner may rename it.
    """
    if st.st_uid not in (0, os.geteuid()):
        return f"belongs to uid {st.st_uid}"
    shared = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if shared and not (stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX):
        return f"can be written by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _refuse_foreign(fd: int, rel: str) -> None:
    why = not_ours(os.fstat(fd))
    if why is not None:
        raise PathBlocked(rel, f"{why}; another user could swap what is in it after it is hashed")


def _kind(parent_fd: int, name: str) -> str:
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except OSError:
        return "gone"
    if stat.S_ISLNK(st.st_mode):
        return "a symlink"
    return "a file" if stat.S_ISREG(st.st_mode) else "a special file"


class SafeDir:
    """``DIR`` held open by descriptor; all paths given to its methods are relative to it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # DIR itself is what the caller named (it may be a link the caller chose); what lies
        # under it is never followed.
        self.fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        os.close(self.fd)

    @contextmanager
    def folder(self, parts: list[str], *, create: bool = False) -> Iterator[int]:
        """A descriptor of the folder ``parts`` (relative to DIR), walked without links."""
        fd = os.dup(self.fd)
        try:
            _refuse_foreign(fd, ".")
            for i, name in enumerate(parts):
                rel = "/".join(parts[: i + 1])
                nxt = open_dir_at(fd, name, rel, create=create)
                os.close(fd)
                fd = nxt
                _refuse_foreign(fd, rel)
            yield fd
        finally:
            os.close(fd)

    def lstat(self, rel: str) -> os.stat_result | None:
        """The entry ``rel`` itself (a link is reported as a link), or None when absent."""
        parents, name = split(rel)
        try:
            with self.folder(parents) as fd:
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def readlink(self, rel: str) -> str:
        parents, name = split(rel)
        with self.folder(parents) as fd:
            return os.readlink(name, dir_fd=fd)

    def unlink(self, rel: str) -> None:
        """Remove the entry ``rel`` (a file or a link: never what a link points to)."""
        parents, name = split(rel)
        with self.folder(parents) as fd:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                raise PathBlocked(rel, "is a folder; not removed")
            os.unlink(name, dir_fd=fd)

    def open_regular(self, rel: str) -> int:
        """A read descriptor of the regular file ``rel``; a FIFO or device is refused unopened."""
        parents, name = split(rel)
        with self.folder(parents) as fd:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise PathBlocked(rel, "is not a regular file; not opened")
            # Non-blocking: should a FIFO be swapped in after the check, opening it cannot hang.
            try:
                out, _ = open_regular(name, dir_fd=fd)
            except NotRegularFile as exc:
                raise PathBlocked(rel, "is not a regular file") from exc
        return out

    def symlink(self, rel: str, target: str) -> None:
        parents, name = split(rel)
        with self.folder(parents, create=True) as fd:
            os.symlink(target, name, dir_fd=fd)
