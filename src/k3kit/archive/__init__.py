"""``.kit.tar.gz``: deterministic packing, and one strict reader that extracts under policy.

The reader is the only way k3kit opens an archive (``verify``, ``install``, ``audit``, ``pull``):
one gzip member (:mod:`._gzip`), strict ustar headers (:mod:`._tar`), an explicit member policy
(:mod:`._extract`). Every refusal is a ``VerificationError`` with a stable code:
``ARCHIVE_FORMAT`` (gzip or tar structure), ``ARCHIVE_TOO_LARGE`` (a bound),
``ARCHIVE_NAME_ENCODING`` (a name that is not printable UTF-8), ``ARCHIVE_MEMBER_UNSAFE``
(links, devices, unsafe paths, collisions, setuid bits). The whole index is read and
admitted before anything is written (:func:`extract_safely`).
"""

from __future__ import annotations

from pathlib import Path

from k3kit._fs import need_free_space
from k3kit.archive._extract import (
    MAX_INFLATED_BYTES,
    MAX_MEMBER_BYTES,
    MAX_MEMBERS,
    MAX_TOTAL_BYTES,
    Admit,
    ArchiveIndex,
    Member,
    extract_safely,
)
from k3kit.archive._pack import FIXED_MTIME, pack
from k3kit.errors import VerificationError

__all__ = [
    "FIXED_MTIME",
    "MAX_INFLATED_BYTES",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_TOTAL_BYTES",
    "Admit",
    "ArchiveIndex",
    "Member",
    "admit_download",
    "extract_safely",
    "pack",
]


def admit_download(dest: Path, size: int, *, what: str, code: str) -> None:
    """Refuse a kit archive about to be downloaded into ``dest`` whose size (read from metadata
    already checked: a digest-checked OCI manifest, a channel's signed targets) is over the kit
    cap (``code``) or more than ``dest``'s disk holds (``DISK_TOO_SMALL``): both before the first
    byte, so a hostile source never fills a disk with what would be refused at the end. The one
    gate of every verb that downloads a kit (install/verify oci://, update)."""
    if size > MAX_TOTAL_BYTES:
        raise VerificationError(
            f"{what}: the kit is {size} bytes, over the kit cap of {MAX_TOTAL_BYTES}; nothing "
            "was downloaded",
            code=code,
            hint="a genuine kit is never this large: ask its publisher what was released",
        )
    need_free_space(dest, size, what=what)
