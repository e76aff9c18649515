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

__all__ = [
    "FIXED_MTIME",
    "MAX_INFLATED_BYTES",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_TOTAL_BYTES",
    "Admit",
    "ArchiveIndex",
    "Member",
    "extract_safely",
    "pack",
]
