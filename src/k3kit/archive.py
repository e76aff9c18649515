"""Deterministic ``.kit.tar.gz`` packing, and extraction under an explicit member policy.

Packing: sorted members, fixed mtime/uid/gid/owner names, modes normalised to 0644/0755, gzip
header mtime 0 and no file name, so the same kit always gives the same bytes.

Extraction never calls ``tarfile.extractall``: every member's effective name is checked against the
path policy, only regular files and directories are accepted, duplicates and case/Unicode
collisions are refused, sizes are capped, and files are created with ``O_EXCL|O_NOFOLLOW`` in a
fresh staging directory that the caller verifies before anything in it is used.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
import unicodedata
from pathlib import Path
from typing import IO

from k3kit._fs import atomic_write, walk
from k3kit._pathpolicy import path_problem
from k3kit.errors import InputError, VerificationError

FIXED_MTIME = 0
MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 512 * 1024 * 1024


def pack(kit_dir: Path, out: Path, *, force: bool = False) -> tuple[str, int]:
    """Write a deterministic archive of ``kit_dir``; returns (sha256 hex, size in bytes)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for entry in walk(kit_dir):
            if entry.kind not in ("file", "dir"):
                raise InputError(
                    f"{kit_dir / entry.rel}: cannot pack a {entry.kind}", code="KIT_NOT_REGULAR"
                )
        entries = sorted(walk(kit_dir), key=lambda e: e.rel)
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


class _HashingReader(io.RawIOBase):
    """Counts and hashes the compressed bytes as tarfile streams them."""

    def __init__(self, inner: IO[bytes]) -> None:
        self._inner = inner
        self.sha256 = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buf: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._inner.read(len(buf))
        self.sha256.update(data)
        buf[: len(data)] = data
        return len(data)


def _reject(name: str, why: str, code: str = "ARCHIVE_MEMBER_UNSAFE") -> VerificationError:
    return VerificationError(f"archive member {name!r}: {why}", code=code)


def _check_member(member: tarfile.TarInfo, seen: set[str], kinds: dict[str, str]) -> None:
    name = member.name
    problem = path_problem(name.rstrip("/") if member.isdir() else name)
    if problem:
        raise _reject(name, problem)
    if not (member.isreg() or member.isdir()) or member.type not in (
        tarfile.REGTYPE,
        tarfile.AREGTYPE,
        tarfile.DIRTYPE,
    ):
        raise _reject(name, "only regular files and directories are allowed")
    if member.mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
        raise _reject(name, "setuid, setgid or sticky bit")
    if member.size > MAX_MEMBER_BYTES:
        raise _reject(name, f"larger than {MAX_MEMBER_BYTES} bytes", "ARCHIVE_TOO_LARGE")
    key = unicodedata.normalize("NFC", name.rstrip("/")).casefold()
    if key in seen:
        raise _reject(name, "duplicate or case-colliding name")
    parts = key.split("/")
    for i in range(1, len(parts)):
        if kinds.get("/".join(parts[:i])) == "file":
            raise _reject(name, "a file of the same name is a parent directory")
    seen.add(key)
    kinds[key] = "dir" if member.isdir() else "file"


def extract_safely(archive: Path, dest_parent: Path | None = None) -> tuple[Path, str]:
    """Extract ``archive`` into a new staging directory; returns (directory, archive sha256).

    On any violation the staging directory is removed and a ``VerificationError`` names the member.
    """
    staging = Path(tempfile.mkdtemp(prefix="k3kit-kit-", dir=dest_parent))
    try:
        with open(archive, "rb") as handle:
            magic = handle.read(2)
            if magic != b"\x1f\x8b":
                raise VerificationError(f"{archive}: not a gzip archive", code="ARCHIVE_FORMAT")
            handle.seek(0)
            reader = _HashingReader(handle)
            buffered = io.BufferedReader(reader, buffer_size=1024 * 1024)
            total = 0
            seen: set[str] = set()
            kinds: dict[str, str] = {}
            try:
                with tarfile.open(fileobj=buffered, mode="r|gz") as tar:
                    for count, member in enumerate(tar, start=1):
                        if count > MAX_MEMBERS:
                            raise _reject(member.name, "too many members", "ARCHIVE_TOO_LARGE")
                        _check_member(member, seen, kinds)
                        total += member.size
                        if total > MAX_TOTAL_BYTES:
                            raise _reject(
                                member.name, "archive content too large", "ARCHIVE_TOO_LARGE"
                            )
                        _write_member(tar, member, staging)
            except (tarfile.TarError, EOFError, gzip.BadGzipFile, OSError) as exc:
                raise VerificationError(
                    f"{archive}: unreadable archive: {exc}", code="ARCHIVE_FORMAT"
                ) from exc
            while buffered.read(1024 * 1024):  # hash any trailing bytes too
                pass
        return staging, reader.sha256.hexdigest()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, staging: Path) -> None:
    target = staging / member.name.rstrip("/")
    if member.isdir():
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o755 if member.mode & stat.S_IXUSR else 0o644
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as out:
        source = tar.extractfile(member)
        if source is None:
            raise _reject(member.name, "no content")
        remaining = member.size
        while remaining:
            chunk = source.read(min(remaining, 1024 * 1024))
            if not chunk:
                raise _reject(member.name, "truncated member", "ARCHIVE_FORMAT")
            out.write(chunk)
            remaining -= len(chunk)
