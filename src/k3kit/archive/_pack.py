"""Deterministic packing: the same kit directory always gives the same archive bytes.

Sorted members, fixed mtime/uid/gid and empty owner names, modes normalised to 0644/0755, plain
POSIX ustar headers (no PAX, no GNU extensions: the strict reader accepts nothing else), gzip
header mtime 0 and no file name.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import tarfile
from pathlib import Path

from k3kit._fs import atomic_write, walk
from k3kit.errors import InputError

FIXED_MTIME = 0


def pack(kit_dir: Path, out: Path, *, force: bool = False) -> tuple[str, int]:
    """Write a deterministic archive of ``kit_dir``; returns (sha256 hex, size in bytes).

    This only writes bytes; whether the directory is a kit worth packing (it verifies against
    its own manifest and receipt) is decided by ``k3kit.publish.kitpack.pack_kit`` before it calls
    this.
    """
    entries = sorted(walk(kit_dir), key=lambda e: e.rel)
    for entry in entries:
        if entry.kind not in ("file", "dir"):
            raise InputError(
                f"{kit_dir / entry.rel}: cannot pack a {entry.kind}", code="KIT_SOURCE_NOT_REGULAR"
            )
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for entry in entries:
            path = kit_dir / entry.rel
            info = tarfile.TarInfo(entry.rel)
            info.mtime = FIXED_MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if entry.kind == "dir":
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
                continue
            executable = os.stat(path).st_mode & stat.S_IXUSR
            info.mode = 0o755 if executable else 0o644
            info.size = entry.size
            with open(path, "rb") as handle:
                tar.addfile(info, handle)
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    data = packed.getvalue()
    atomic_write(out, data, force=force)
    return hashlib.sha256(data).hexdigest(), len(data)
