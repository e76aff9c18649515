"""A strict decoder for exactly one gzip member, streamed in bounded chunks.

Why not :mod:`gzip`: it silently decodes any number of concatenated members (``tar`` does too),
and :mod:`tarfile`'s stream mode stops after the first, so one archive could mean two trees.
Here the member's header flags are parsed strictly, the CRC32 and ISIZE trailer are checked, and
any byte after the trailer, a second member included (even an empty one), is refused. Output is
produced at most ``CHUNK`` bytes at a time and the total is capped, so a decompression bomb costs
bounded memory and bounded time.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from typing import BinaryIO

from k3kit.errors import VerificationError

CHUNK = 1024 * 1024
MAX_HEADER_FIELD = 1024  # FNAME / FCOMMENT / FEXTRA bytes; pack writes none of them

_FTEXT, _FHCRC, _FEXTRA, _FNAME, _FCOMMENT = 1, 2, 4, 8, 16
_RESERVED = 0xE0


def _format(why: str, code: str = "ARCHIVE_FORMAT") -> VerificationError:
    return VerificationError(f"gzip: {why}", code=code)


class GzipMember:
    """Inflates the single gzip member of ``handle``; hashes every compressed byte it reads.

    ``read(n)`` returns exactly ``n`` bytes, or fewer only at the end of the member; the caller
    must then call :meth:`finish`, which checks the trailer and that the file ends there.
    """

    def __init__(self, handle: BinaryIO, *, max_output: int) -> None:
        self._handle = handle
        self.sha256 = hashlib.sha256()
        self._pending = b""  # compressed bytes read but not yet given to zlib
        self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        self._out = bytearray()
        self._crc = 0
        self._size = 0
        self._max_output = max_output
        self._read_header()

    # -- compressed side -------------------------------------------------------------------
    def _fill(self) -> bool:
        data = self._handle.read(CHUNK)
        if data:
            self.sha256.update(data)
            self._pending += data
        return bool(data)

    def _take(self, n: int, what: str) -> bytes:
        while len(self._pending) < n:
            if not self._fill():
                raise _format(f"truncated in the {what}")
        out, self._pending = self._pending[:n], self._pending[n:]
        return out

    def _take_zstring(self, what: str) -> bytes:
        while True:
            end = self._pending.find(b"\0", 0, MAX_HEADER_FIELD + 1)
            if end >= 0:
                return self._take(end + 1, what)
            if len(self._pending) > MAX_HEADER_FIELD:
                raise _format(f"{what} longer than {MAX_HEADER_FIELD} bytes")
            if not self._fill():
                raise _format(f"truncated in the {what}")

    def _read_header(self) -> None:
        fixed = self._take(10, "header")
        magic, method, flags = fixed[:2], fixed[2], fixed[3]
        if magic != b"\x1f\x8b":
            raise _format("not a gzip file (bad magic)")
        if method != 8:
            raise _format(f"compression method {method} is not deflate")
        if flags & _RESERVED:
            raise _format(f"reserved header flags set (0x{flags:02x})")
        header = bytearray(fixed)
        if flags & _FEXTRA:
            raw_len = self._take(2, "extra field length")
            (length,) = struct.unpack("<H", raw_len)
            if length > MAX_HEADER_FIELD:
                raise _format(f"extra field of {length} bytes")
            header += raw_len + self._take(length, "extra field")
        if flags & _FNAME:
            header += self._take_zstring("file name")
        if flags & _FCOMMENT:
            header += self._take_zstring("comment")
        if flags & _FHCRC:
            (stored,) = struct.unpack("<H", self._take(2, "header CRC"))
            if stored != zlib.crc32(header) & 0xFFFF:
                raise _format("header CRC16 does not match")

    # -- inflated side -----------------------------------------------------------------------
    def _inflate_some(self) -> bool:
        """Add up to CHUNK inflated bytes to the buffer; False once the member's data ended."""
        while not self._inflate.eof:
            if not self._pending and not self._fill():
                raise _format("truncated: the compressed data ends early")
            try:
                data = self._inflate.decompress(self._pending, CHUNK)
            except zlib.error as exc:
                raise _format(f"corrupt deflate data ({exc})") from exc
            self._pending = self._inflate.unconsumed_tail
            if self._inflate.eof:
                self._pending = self._inflate.unused_data
            if data:
                self._size += len(data)
                if self._size > self._max_output:
                    raise _format(
                        f"inflates to more than {self._max_output} bytes", "ARCHIVE_TOO_LARGE"
                    )
                self._crc = zlib.crc32(data, self._crc)
                self._out += data
                return True
        return False

    def read(self, n: int) -> bytes:
        while len(self._out) < n and self._inflate_some():
            pass
        out = bytes(self._out[:n])
        del self._out[:n]
        return out

    def finish(self) -> None:
        """Check that the data ended, the trailer matches, and nothing follows the member."""
        if self._out or self._inflate_some():
            raise _format("data remains after the tar archive was read")
        crc, isize = struct.unpack("<II", self._take(8, "CRC32/ISIZE trailer"))
        if crc != self._crc:
            raise _format(f"CRC32 mismatch (trailer {crc:08x}, data {self._crc:08x})")
        if isize != self._size & 0xFFFFFFFF:
            raise _format(f"ISIZE mismatch (trailer {isize}, data {self._size})")
        if self._pending or self._fill():
            if self._pending.startswith(b"\x1f\x8b") or self._pending[:1] == b"\x1f":
                raise _format("a second gzip member follows the first: refused")
            raise _format("bytes follow the gzip member")
