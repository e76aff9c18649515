"""A strict parser for the plain POSIX ustar headers that ``pack`` writes, and nothing else.

Why parse by hand: :mod:`tarfile` treats a bad header in stream mode as a silent end of archive,
reads PAX and GNU long-name bodies of any declared size into memory before anyone can look at
them, and follows chained extension headers recursively. Here every 512-byte header has its
checksum verified and every numeric field is strict octal; only regular files and directories
are members, and any extension header (PAX ``x``/``g``, GNU ``L``/``K``/``S``) is refused from its
header alone, so a body claiming gigabytes is never read. The end-of-archive marker (two zero
blocks) is required, and only zero padding may follow it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Protocol

from k3kit._immutable import NamedTuple
from k3kit.errors import VerificationError

BLOCK = 512
MAX_TRAILING_PADDING = 1024 * 1024  # tar -b 2048 pads to 1 MiB records; beyond is not padding

REGULAR, DIRECTORY = "file", "dir"
_EXTENSIONS = {
    b"x": "a PAX extended header",
    b"g": "a PAX global header",
    b"L": "a GNU long-name header",
    b"K": "a GNU long-link header",
    b"S": "a GNU sparse file",
    b"V": "a GNU volume header",
    b"M": "a GNU multi-volume continuation",
    b"N": "a GNU old long-name header",
}
_LINKS_AND_SPECIALS = {
    b"1": "a hard link",
    b"2": "a symbolic link",
    b"3": "a character device",
    b"4": "a block device",
    b"6": "a FIFO",
    b"7": "a contiguous file",
}
_OCTAL = re.compile(rb"^ *([0-7]+)[ \0]*$")
_EMPTY = re.compile(rb"^[ \0]*$")


class Reader(Protocol):
    def read(self, n: int) -> bytes: ...


def _format(why: str) -> VerificationError:
    return VerificationError(f"tar: {why}", code="ARCHIVE_FORMAT")


class Header(NamedTuple):
    """One member header; ``raw_name`` is still bytes: decoding it is the member policy's job."""

    #: the member's place in the archive (0, 1, ...); not ``index``, which is tuple's method
    number: int
    raw_name: bytes
    kind: str
    mode: int
    size: int


def _octal(block: bytes, start: int, end: int, field: str, *, empty_ok: bool = False) -> int:
    raw = block[start:end]
    match = _OCTAL.fullmatch(raw)  # not match: $ would pass a final newline
    if match:
        return int(match.group(1), 8)
    if empty_ok and _EMPTY.fullmatch(raw):
        return 0
    raise _format(f"header field {field} is not a strict octal number: {raw!r}")


def _cstring(block: bytes, start: int, end: int, field: str) -> bytes:
    raw = block[start:end]
    value, nul, rest = raw.partition(b"\0")
    if nul and rest.strip(b"\0"):
        raise _format(f"header field {field} has bytes after its terminating NUL")
    return value


def parse_header(block: bytes, index: int) -> Header:
    """Parse one non-zero 512-byte header; refusals are ``ARCHIVE_FORMAT`` (structure) or
    ``ARCHIVE_MEMBER_UNSAFE`` (a link or special file)."""
    stored = _octal(block, 148, 156, "chksum")
    actual = sum(block[:148]) + 8 * 0x20 + sum(block[156:])
    if stored != actual:
        raise _format(f"header {index}: checksum {stored} does not match the header ({actual})")
    if block[257:265] != b"ustar\x0000":
        raise _format(f"header {index}: not a POSIX ustar header (magic {block[257:265]!r})")
    typeflag = block[156:157]
    if typeflag in _EXTENSIONS:
        # Refused from the header alone: its body, whatever size it claims, is never read.
        raise _format(f"header {index} is {_EXTENSIONS[typeflag]} ({typeflag!r}); refused")
    mode = _octal(block, 100, 108, "mode")
    for start, end, field in ((108, 116, "uid"), (116, 124, "gid"), (136, 148, "mtime")):
        _octal(block, start, end, field)
    size = _octal(block, 124, 136, "size")
    _octal(block, 329, 337, "devmajor", empty_ok=True)
    _octal(block, 337, 345, "devminor", empty_ok=True)
    linkname = _cstring(block, 157, 257, "linkname")
    _cstring(block, 265, 297, "uname")
    _cstring(block, 297, 329, "gname")
    if block[500:512].strip(b"\0"):
        raise _format(f"header {index}: bytes in the header's padding")
    name = _cstring(block, 0, 100, "name")
    prefix = _cstring(block, 345, 500, "prefix")
    raw_name = prefix + b"/" + name if prefix else name
    if typeflag in _LINKS_AND_SPECIALS:
        raise VerificationError(
            f"archive member {raw_name!r} is {_LINKS_AND_SPECIALS[typeflag]}: only regular "
            "files and directories are allowed",
            code="ARCHIVE_MEMBER_UNSAFE",
        )
    if typeflag not in (b"0", b"\0", b"5"):
        raise _format(f"header {index}: unknown type flag {typeflag!r}")
    if mode > 0o7777:
        raise _format(f"header {index}: mode {mode:o} has bits beyond 07777")
    if linkname:
        raise _format(f"header {index}: a link name on a file or directory")
    kind = DIRECTORY if typeflag == b"5" else REGULAR
    if kind == DIRECTORY and size:
        raise _format(f"header {index}: a directory with a size of {size}")
    if kind == REGULAR and raw_name.endswith(b"/"):
        # tar and tarfile read an old-style file whose name ends in '/' as a directory.
        raise _format(f"header {index}: a regular file whose name ends with '/'")
    return Header(index, raw_name, kind, mode, size)


def headers(
    source: Reader, *, max_members: int, max_member_bytes: int
) -> Iterator[tuple[Header, Reader]]:
    """Yield each member's header and a reader positioned at its body.

    The caller must read exactly ``header.size`` bytes from the reader before asking for the next
    header; this generator then checks the block padding, and at the end requires the two-zero-block
    marker followed only by (bounded) zero padding up to the end of the stream.
    """
    index = 0
    while True:
        block = source.read(BLOCK)
        if len(block) < BLOCK:
            raise _format("the end-of-archive marker (two zero blocks) is missing")
        if not block.strip(b"\0"):
            second = source.read(BLOCK)
            if len(second) < BLOCK or second.strip(b"\0"):
                raise _format("a zero block not followed by a second one (no end marker)")
            _require_zero_tail(source)
            return
        index += 1
        if index > max_members:
            raise VerificationError(f"more than {max_members} members", code="ARCHIVE_TOO_LARGE")
        header = parse_header(block, index)
        if header.size > max_member_bytes:
            raise VerificationError(
                f"archive member {header.raw_name!r}: {header.size} bytes is larger than "
                f"{max_member_bytes}",
                code="ARCHIVE_TOO_LARGE",
            )
        yield header, source
        padding = -header.size % BLOCK
        if padding:
            pad = source.read(padding)
            if len(pad) < padding:
                raise _format(f"truncated after member {index}")
            if pad.strip(b"\0"):
                raise _format(f"non-zero padding after member {index}")


def _require_zero_tail(source: Reader) -> None:
    seen = 0
    while True:
        chunk = source.read(64 * 1024)
        if not chunk:
            return
        if chunk.strip(b"\0"):
            raise _format("data after the end-of-archive marker")
        seen += len(chunk)
        if seen > MAX_TRAILING_PADDING:
            raise _format(f"more than {MAX_TRAILING_PADDING} bytes of padding after the end marker")
