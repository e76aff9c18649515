"""Extraction of a ``.kit.tar.gz`` under an explicit member policy into a fresh staging folder.

Never ``tarfile.extractall``, never tarfile's stream mode: the gzip member is decoded by
:mod:`._gzip`, the headers parsed by :mod:`._tar`, and each member's name must be UTF-8,
printable, pass the one path policy (:mod:`k3kit._policy`) and collide with no other name
(duplicates, case or Unicode variants, a file where a directory is needed). Files are created
with ``O_EXCL|O_NOFOLLOW`` in a staging directory the caller verifies before anything in it is
used; what is verified there is what ``install`` installs, so nothing reads the archive again
once its copy has been verified.

Budget before work: the whole tar index is read first (every header, the caps on members and
bytes, the caller's admission rule) and only an archive that passes it gets a staging directory.
A bomb that would be refused after extraction (10,000 empty files, 100 MiB of zeros that are not
a kit) is refused before a byte of it is written.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

from k3kit._fs import create_new, need_free_space
from k3kit._immutable import NamedTuple
from k3kit._policy import path_problem
from k3kit.archive._gzip import CHUNK, GzipMember
from k3kit.archive._tar import (
    BLOCK,
    DIRECTORY,
    MAX_TRAILING_PADDING,
    REGULAR,
    Header,
    Reader,
    headers,
)
from k3kit.errors import VerificationError

MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 512 * 1024 * 1024
# Everything the tar stream may legitimately hold: content, one header and padding per member,
# the end marker and the record padding after it.
MAX_INFLATED_BYTES = MAX_TOTAL_BYTES + MAX_MEMBERS * 2 * BLOCK + MAX_TRAILING_PADDING + 2 * BLOCK


def _reject(name: str, why: str, code: str = "ARCHIVE_MEMBER_UNSAFE") -> VerificationError:
    # repr() escapes control characters, so no name can paint over a terminal.
    return VerificationError(f"archive member {name!r}: {why}", code=code)


def decode_name(raw: bytes) -> str:
    """The member's name as text, or ``ARCHIVE_NAME_ENCODING`` if it is not printable UTF-8."""
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VerificationError(
            f"archive member {raw!r}: name is not UTF-8", code="ARCHIVE_NAME_ENCODING"
        ) from exc
    if not name.isprintable():
        raise VerificationError(
            f"archive member {name!r}: name has control or non-printable characters",
            code="ARCHIVE_NAME_ENCODING",
        )
    return name


class _Names:
    """Every name seen so far, folded so that two spellings of one path on some filesystem
    (case, Unicode normalisation) cannot both be members, nor a file stand where a directory
    is needed."""

    def __init__(self) -> None:
        self.members: set[str] = set()
        self.kinds: dict[str, str] = {}  # folded path -> "file" | "dir" (explicit or implied)
        self.spelling: dict[str, str] = {}  # folded path -> the spelling first seen

    def add(self, name: str, kind: str) -> str:
        rel = name.rstrip("/") if kind == DIRECTORY else name
        problem = path_problem(rel)
        if problem:
            raise _reject(name, problem)
        key = unicodedata.normalize("NFC", rel).casefold()
        if key in self.members:
            raise _reject(name, "duplicate or case-colliding name")
        parts, folded = rel.split("/"), key.split("/")
        for i in range(1, len(parts) + 1):
            prefix, spelled = "/".join(folded[:i]), "/".join(parts[:i])
            if self.spelling.setdefault(prefix, spelled) != spelled:
                raise _reject(name, f"collides with {self.spelling[prefix]!r} (case or Unicode)")
            if i < len(parts) and self.kinds.setdefault(prefix, DIRECTORY) != DIRECTORY:
                raise _reject(name, "a file of the same name is a parent directory")
        if self.kinds.setdefault(key, kind) != kind:
            raise _reject(name, "a file and a directory of the same name")
        self.members.add(key)
        return rel


def _check_mode(name: str, header: Header) -> None:
    if header.mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
        raise _reject(name, "setuid, setgid or sticky bit")


class Member(NamedTuple):
    """One member as its header declares it, after the member policy accepted it."""

    name: str
    kind: str
    mode: int
    size: int


class ArchiveIndex(NamedTuple):
    """Every member of an archive, read from its headers before anything is written.

    ``documents`` holds the bodies of the members the caller asked to see (``keep``), each only
    if it is a regular file no larger than the size asked for; nothing else is kept in memory.
    """

    members: tuple[Member, ...]
    total_bytes: int
    documents: Mapping[str, bytes]


Admit = Callable[[ArchiveIndex], None]


def index_archive(handle: BinaryIO, keep: Mapping[str, int]) -> tuple[ArchiveIndex, str]:
    """Read the whole archive once without writing a byte: every header through the member
    policy, the caps checked on the running totals, bodies discarded (or kept, per ``keep``).

    Returns the index and the sha256 of the archive's bytes. This is the budget: the write pass
    that follows writes exactly these members with exactly these sizes, or nothing.
    """
    gz = GzipMember(handle, max_output=MAX_INFLATED_BYTES)
    names, total = _Names(), 0
    members: list[Member] = []
    documents: dict[str, bytes] = {}
    for header, body in headers(gz, max_members=MAX_MEMBERS, max_member_bytes=MAX_MEMBER_BYTES):
        name = decode_name(header.raw_name)
        rel = names.add(name, header.kind)
        _check_mode(name, header)
        total += header.size
        if total > MAX_TOTAL_BYTES:
            raise _reject(name, "archive content too large", "ARCHIVE_TOO_LARGE")
        members.append(Member(rel, header.kind, header.mode, header.size))
        wanted = header.kind == REGULAR and header.size <= keep.get(rel, -1)
        data = _read_body(rel, header.size, body, keep_bytes=wanted)
        if wanted:
            documents[rel] = data
    gz.finish()
    return ArchiveIndex(tuple(members), total, documents), gz.sha256.hexdigest()


def _read_body(rel: str, size: int, body: Reader, *, keep_bytes: bool) -> bytes:
    """Read one member's body in bounded chunks; its bytes are returned only if ``keep_bytes``."""
    kept = bytearray()
    remaining = size
    while remaining:
        chunk = body.read(min(remaining, CHUNK))
        if len(chunk) < min(remaining, CHUNK):
            raise _reject(rel, "truncated member", "ARCHIVE_FORMAT")
        if keep_bytes:
            kept += chunk
        remaining -= len(chunk)
    return bytes(kept)


def extract_safely(
    archive: Path,
    dest_parent: Path | None = None,
    *,
    admit: Admit | None = None,
    keep: Mapping[str, int] | None = None,
) -> tuple[Path, str]:
    """Extract ``archive`` into a new staging directory; returns (directory, archive sha256).

    Two passes over one open file: :func:`index_archive` checks every header, the caps and then
    ``admit(index)`` (the caller's own rule, e.g. "every member is listed in the archive's
    manifest"), all before the staging directory exists; a refused archive writes nothing. The
    write pass then requires each header to be the indexed one, in order, so an archive rewritten
    between the passes cannot write more than was budgeted (``KIT_CHANGED``). On any violation
    the staging directory is removed and a ``VerificationError`` names the member.
    """
    with open(archive, "rb") as handle:
        index, digest = index_archive(handle, keep or {})
        if admit is not None:
            admit(index)
        # The one free-space check (k3kit._fs): refused before the staging folder exists.
        need_free_space(
            Path(dest_parent or tempfile.gettempdir()),
            index.total_bytes,
            what=f"extracting {archive.name}",
        )
        handle.seek(0)
        staging = Path(tempfile.mkdtemp(prefix="k3kit-kit-", dir=dest_parent))
        try:
            if _write_indexed(handle, staging, index) != digest:
                raise _changed("its bytes differ between the two reads")
            return staging, digest
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def _changed(why: str) -> VerificationError:
    return VerificationError(
        f"the archive changed while it was read: {why}",
        code="KIT_CHANGED",
        hint="copy the archive somewhere no one else writes, then run this again",
    )


def _write_indexed(handle: BinaryIO, staging: Path, index: ArchiveIndex) -> str:
    """Write the members of ``index`` from a second read of ``handle``; returns its sha256."""
    gz = GzipMember(handle, max_output=MAX_INFLATED_BYTES)
    seen = 0
    for header, body in headers(gz, max_members=MAX_MEMBERS, max_member_bytes=MAX_MEMBER_BYTES):
        expected = index.members[seen] if seen < len(index.members) else None
        name = decode_name(header.raw_name)
        rel = name.rstrip("/") if header.kind == DIRECTORY else name
        if Member(rel, header.kind, header.mode, header.size) != expected:
            raise _changed(f"member {header.number} is not the one indexed")
        seen += 1
        _write_member(staging, rel, header, body)
    if seen != len(index.members):
        raise _changed(f"{seen} members, {len(index.members)} indexed")
    gz.finish()
    return gz.sha256.hexdigest()


def _write_member(staging: Path, rel: str, header: Header, body: Reader) -> None:
    target = staging / rel
    if header.kind == DIRECTORY:
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o755 if header.mode & stat.S_IXUSR else 0o644
    fd = create_new(target, mode)
    with os.fdopen(fd, "wb") as out:
        remaining = header.size
        while remaining:
            chunk = body.read(min(remaining, CHUNK))
            if len(chunk) < min(remaining, CHUNK):
                raise _reject(rel, "truncated member", "ARCHIVE_FORMAT")
            out.write(chunk)
            remaining -= len(chunk)
