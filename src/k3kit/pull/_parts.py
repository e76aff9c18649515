"""The pieces a pull is made of: the downloader protocol, content groups, hashing with identity."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from k3kit._digest import NotRegularFile, hash_fd
from k3kit.models import LockedFile
from k3kit.pull._report import PullError

Signature = tuple[int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns


class Downloader(Protocol):
    """What a pull needs from a hub; ``k3kit.hub.HfHub`` implements it."""

    def download(
        self, repo: str, commit: str, path: str, *, cache_dir: Path | None, local_dir: Path | None
    ) -> Path: ...


@dataclass
class Group:
    """Lock entries with the same content: in a cache they share one blob, so they move together."""

    files: list[LockedFile]
    downloads: int = 0
    error: PullError | None = None


def signature(st: os.stat_result) -> Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def hash_with_identity(path: Path, blake3: bool) -> tuple[dict[str, str], int, Signature | None]:
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
    same = signature(before) == signature(after)
    return digests, size, signature(after) if same else None


def stopped_error(g: Group, after: str | None) -> PullError:
    reason = f"not fetched: the pull stopped after {after}"
    return PullError(g.files[0].path, "PULL_STOPPED", reason)
