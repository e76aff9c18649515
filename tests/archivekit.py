"""Byte-level builders for hostile ``.kit.tar.gz`` files, shared by the archive tests.

Headers are written by hand (not with tarfile) so that a test can put exactly the bytes an
attacker would: a wrong checksum, garbage in an octal field, an extension header claiming
gigabytes, a name that is not UTF-8.
"""

from __future__ import annotations

import gzip
import struct
import tarfile
import zlib
from pathlib import Path

BLOCK = 512
RUN_SH = "profiles/interactive/single-node-8gpu/run.sh"


def octal(value: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, value)


def header(
    name: bytes | str,
    size: int = 0,
    *,
    typeflag: bytes = b"0",
    mode: int = 0o644,
    linkname: bytes = b"",
    prefix: bytes = b"",
    magic: bytes = b"ustar\x0000",
    fields: dict[tuple[int, int], bytes] | None = None,
    checksum: int | None = None,
) -> bytes:
    """One 512-byte ustar header; ``fields`` overwrites raw byte ranges before the checksum."""
    raw_name = name.encode() if isinstance(name, str) else name
    block = bytearray(BLOCK)
    block[0 : len(raw_name)] = raw_name[:100]
    block[100:108] = octal(mode, 8)
    block[108:116] = octal(0, 8)
    block[116:124] = octal(0, 8)
    block[124:136] = octal(size, 12)
    block[136:148] = octal(0, 12)
    block[156:157] = typeflag
    block[157 : 157 + len(linkname)] = linkname
    block[257:265] = magic
    block[329:337] = octal(0, 8)
    block[337:345] = octal(0, 8)
    block[345 : 345 + len(prefix)] = prefix
    for (start, end), value in (fields or {}).items():
        block[start:end] = value.ljust(end - start, b"\0")[: end - start]
    block[148:156] = b" " * 8
    total = sum(block) if checksum is None else checksum
    block[148:156] = b"%06o\0 " % total
    return bytes(block)


def member(name: bytes | str, data: bytes = b"x", **kw: object) -> bytes:
    """A regular-file member (or any type via ``typeflag``) with its body and padding."""
    head = header(name, len(data), **kw)  # type: ignore[arg-type]
    return head + data + b"\0" * (-len(data) % BLOCK)


def directory(name: str) -> bytes:
    return header(name, 0, typeflag=b"5", mode=0o755)


def inflate_one(archive: Path) -> bytes:
    """The tar bytes of a single-member gzip file."""
    return zlib.decompress(archive.read_bytes(), wbits=31)


def end_offset(tar: bytes) -> int:
    """Offset of the end-of-archive marker in a well-formed tar stream."""
    pos = 0
    while tar[pos : pos + BLOCK].strip(b"\0"):
        size = int(tar[pos + 124 : pos + 136].strip(b"\0 ") or b"0", 8)
        pos += BLOCK + size + (-size % BLOCK)
    return pos


def insert(tar: bytes, extra: bytes) -> bytes:
    """``extra`` members added just before the end marker (the marker and padding kept)."""
    at = end_offset(tar)
    return tar[:at] + extra + tar[at:]


def finish(members: bytes) -> bytes:
    """Members followed by the end marker and padding to a 10 KiB record, as tar writes."""
    body = members + b"\0" * (2 * BLOCK)
    return body + b"\0" * (-len(body) % 10240)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def rewrite(archive: Path, tar: bytes) -> Path:
    archive.write_bytes(gz(tar))
    return archive


def gzip_trailer(data: bytes) -> bytes:
    return struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


MIB = 1024 * 1024
#: One part of :func:`gzip_parts`: bytes as they are, or an int: that many zero bytes.
Part = bytes | int


def gzip_parts(parts: list[Part]) -> bytes:
    """A gzip (level 9) of the parts' concatenation, an int part being that many zeros, built
    without compressing hundreds of MiB of zeros: after a full flush (which empties the
    compressor's window) a MiB of zeros always compresses to the same bytes, so it is compressed
    once and repeated; the trailer's CRC-32 and size are the whole stream's. A valid gzip of the
    same bytes (``gzip.decompress`` gives them back), as an attacker in a hurry would make it;
    compressing 448 MiB of zeros had cost a bomb test 2 s of its 4.7 s."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros, block = bytes(MIB), b""
    out, crc, size = [], 0, 0
    for part in parts:
        data = bytes(part) if isinstance(part, int) and part < MIB else part
        if isinstance(data, bytes):
            out.append(comp.compress(data))
            crc, size = zlib.crc32(data, crc), size + len(data)
            continue
        whole, rest = divmod(data, MIB)
        out.append(comp.flush(zlib.Z_FULL_FLUSH))  # the header, and an empty window
        if not block:
            block = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
        out.append(block * whole)
        for _ in range(whole):
            crc = zlib.crc32(zeros, crc)
        out.append(comp.compress(bytes(rest)))
        crc, size = zlib.crc32(bytes(rest), crc), size + data
    out.append(comp.flush()[:-8])  # the trailer it ends with counted the compressed bytes only
    return b"".join(out) + struct.pack("<II", crc, size & 0xFFFFFFFF)


def tar_parts(files: list[tuple[str, Part]]) -> list[Part]:
    """What ``tarfile`` writes (ustar, its default header fields) for ``files``, as parts of
    :func:`gzip_parts`: each header, the data (zeros kept as a count), its padding, the end."""
    parts: list[Part] = []
    total = 0
    for name, data in files:
        info = tarfile.TarInfo(name)
        info.size = data if isinstance(data, int) else len(data)
        head = info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
        pad = -info.size % BLOCK
        parts += [head, data, pad]
        total += len(head) + info.size + pad
    end = 2 * BLOCK
    end += -(total + end) % tarfile.RECORDSIZE
    return [*parts, end]
