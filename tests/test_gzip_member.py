"""The strict gzip reader, one row per header form it accepts and per reason it refuses.

``k3kit pack`` writes no optional header field, but a kit re-compressed by GNU gzip carries the
file name (FNAME), and RFC 1952 allows an extra field, a comment and a header CRC: each is
accepted when well-formed and bounded, and refused with its reason otherwise. The FNAME row is
produced by the real ``gzip`` tool.
"""

from __future__ import annotations

import io
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from k3kit.archive._gzip import MAX_HEADER_FIELD, GzipMember
from k3kit.errors import VerificationError

PAYLOAD = b"ustar-ish payload " * 4096
FHCRC, FEXTRA, FNAME, FCOMMENT = 2, 4, 8, 16


def _deflate(data: bytes) -> bytes:
    comp = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return comp.compress(data) + comp.flush()


def _trailer(data: bytes, crc: int | None = None, size: int | None = None) -> bytes:
    return struct.pack(
        "<II", zlib.crc32(data) if crc is None else crc, len(data) if size is None else size
    )


def member(
    data: bytes = PAYLOAD,
    *,
    flags: int = 0,
    extra: bytes = b"",
    name: bytes = b"",
    comment: bytes = b"",
    header_crc: int | None = None,
    magic: bytes = b"\x1f\x8b",
    method: int = 8,
    body: bytes | None = None,
    trailer: bytes | None = None,
) -> bytes:
    head = magic + bytes([method, flags]) + b"\0\0\0\0\0\xff"
    if flags & FEXTRA:
        head += struct.pack("<H", len(extra)) + extra
    if flags & FNAME:
        head += name
    if flags & FCOMMENT:
        head += comment
    if flags & FHCRC:
        head += struct.pack("<H", (zlib.crc32(head) & 0xFFFF) if header_crc is None else header_crc)
    return (
        head
        + (_deflate(data) if body is None else body)
        + (_trailer(data) if trailer is None else trailer)
    )


def read_all(raw: bytes, max_output: int = 1 << 24) -> bytes:
    reader = GzipMember(io.BytesIO(raw), max_output=max_output)
    out = b""
    while chunk := reader.read(65536):
        out += chunk
    reader.finish()
    return out


ACCEPTED = [
    ("no optional field (what pack writes)", member()),
    ("extra field", member(flags=FEXTRA, extra=b"AB\x02\x00hi")),
    ("file name", member(flags=FNAME, name=b"kit.tar\0")),
    ("comment", member(flags=FCOMMENT, comment=b"built 2026\0")),
    ("header CRC", member(flags=FHCRC)),
    (
        "every optional field",
        member(flags=FHCRC | FEXTRA | FNAME | FCOMMENT, extra=b"x", name=b"n\0", comment=b"c\0"),
    ),
    ("longest name allowed", member(flags=FNAME, name=b"n" * MAX_HEADER_FIELD + b"\0")),
]


@pytest.mark.parametrize("raw", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_headers(raw: bytes) -> None:
    assert read_all(raw) == PAYLOAD


def test_gnu_gzip_output_with_its_file_name_is_accepted(tmp_path: Path) -> None:
    tool = shutil.which("gzip")
    if tool is None:
        pytest.skip("GNU gzip is not installed")
    src = tmp_path / "kit.tar"
    src.write_bytes(PAYLOAD)
    raw = subprocess.run([tool, "-c", "-9", str(src)], capture_output=True, check=True).stdout
    assert raw[3] & FNAME  # gzip records the name: the FNAME path is exercised
    assert read_all(raw) == PAYLOAD


REFUSED = [
    ("empty file", b"", "truncated in the header"),
    ("bad magic", member(magic=b"PK"), "bad magic"),
    ("not deflate", member(method=7), "compression method 7"),
    ("reserved flag", member(flags=0x20), "reserved header flags set (0x20)"),
    (
        "oversized extra field",
        member(flags=FEXTRA, extra=b"x" * (MAX_HEADER_FIELD + 1)),
        "extra field of 1025 bytes",
    ),
    (
        "truncated extra field",
        member(flags=FEXTRA, extra=b"xy")[:13],
        "truncated in the extra field",
    ),
    (
        "name without end",
        member(flags=FNAME, name=b"n" * (MAX_HEADER_FIELD + 1) + b"\0"),
        "file name longer than 1024 bytes",
    ),
    (
        "name cut by end of file",
        member(flags=FNAME, name=b"kit.tar\0")[:14],
        "truncated in the file name",
    ),
    ("comment without end", member(flags=FCOMMENT, comment=b"c" * 5000), "comment longer than"),
    ("wrong header CRC", member(flags=FHCRC, header_crc=0x1234), "header CRC16 does not match"),
    ("compressed data cut", member()[:-40], "truncated"),
    ("corrupt deflate", member(body=b"\xff" * 64), "corrupt deflate data"),
    ("wrong CRC32", member(trailer=_trailer(PAYLOAD, crc=0)), "CRC32 mismatch"),
    ("wrong ISIZE", member(trailer=_trailer(PAYLOAD, size=1)), "ISIZE mismatch"),
    ("trailer cut", member()[:-3], "truncated in the CRC32/ISIZE trailer"),
    ("second member", member() + member(b""), "a second gzip member follows"),
    ("bytes after the member", member() + b"tar says ignore me", "bytes follow the gzip member"),
]


@pytest.mark.parametrize(("raw", "reason"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_members(raw: bytes, reason: str) -> None:
    with pytest.raises(VerificationError, match=re.escape(reason)) as info:
        read_all(raw)
    assert info.value.code == "ARCHIVE_FORMAT"


def test_a_bomb_stops_at_the_cap() -> None:
    with pytest.raises(VerificationError, match="inflates to more than 1000 bytes") as info:
        read_all(member(), max_output=1000)
    assert info.value.code == "ARCHIVE_TOO_LARGE"


def test_unread_data_at_finish_is_refused() -> None:
    reader = GzipMember(io.BytesIO(member()), max_output=1 << 24)
    reader.read(10)
    with pytest.raises(VerificationError, match="data remains after the tar archive was read"):
        reader.finish()


def test_the_digest_covers_every_compressed_byte() -> None:
    import hashlib

    raw = member(flags=FNAME, name=b"kit.tar\0")
    reader = GzipMember(io.BytesIO(raw), max_output=1 << 24)
    while reader.read(65536):
        pass
    reader.finish()
    assert reader.sha256.hexdigest() == hashlib.sha256(raw).hexdigest()
