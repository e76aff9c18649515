"""Hashing of bytes and files: sha256 (hub-comparable) and blake3 (fast, parallel within a file).

Files are read with ``readinto`` into one reusable buffer, so memory stays flat whatever the file
size; hashlib and blake3 release the GIL on large buffers, so threads hashing different files scale
with cores.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

import blake3

CHUNK = 4 * 1024 * 1024
ALGORITHMS = ("sha256", "blake3")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class NotRegularFile(OSError):
    """Raised when a path that should hold file content is a FIFO, device or directory."""


def hash_fd(
    fd: int, algorithms: Iterable[str] = ("sha256",), *, blake3_threads: int = 1
) -> tuple[dict[str, str], int]:
    """Hash an open file descriptor from its current offset; returns (digests, bytes read)."""
    algos = tuple(algorithms)
    sha = hashlib.sha256() if "sha256" in algos else None
    b3 = None
    if "blake3" in algos:
        b3 = blake3.blake3(max_threads=blake3_threads) if blake3_threads != 1 else blake3.blake3()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    total = 0
    while True:
        n = os.readv(fd, [buf])
        if n == 0:
            break
        chunk = view[:n]
        if sha is not None:
            sha.update(chunk)
        if b3 is not None:
            b3.update(chunk)
        total += n
    out: dict[str, str] = {}
    if sha is not None:
        out["sha256"] = sha.hexdigest()
    if b3 is not None:
        out["blake3"] = b3.hexdigest()
    return out, total


def hash_file(
    path: Path,
    algorithms: Iterable[str] = ("sha256",),
    *,
    follow_symlinks: bool = False,
    blake3_threads: int = 1,
) -> tuple[dict[str, str], int]:
    """Hash a regular file; refuses to follow a symlink unless asked and refuses special files."""
    flags = os.O_RDONLY | (0 if follow_symlinks else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"not a regular file: {path}")
        return hash_fd(fd, algorithms, blake3_threads=blake3_threads)
    finally:
        os.close(fd)
