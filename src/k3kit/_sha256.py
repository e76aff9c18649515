"""sha256 of bytes in memory: documents, key objects, a kit's small files (KBs).

By cryptography's OpenSSL binding, which every verify loads anyway for the receipt's signature,
not by ``hashlib``: importing hashlib loads the system's libcrypto, about 3.5 ms of CPU on every
node start (docs/performance.md, "Sixth pass"). The digest is the same either way. The one
implementation, below both its callers' layer: :mod:`k3kit._digest` (files up to its
``SMALL_BYTES``; larger files and downloads keep hashlib, which releases the GIL) and
:mod:`k3kit._canonical` (a model's checksum).
"""

from __future__ import annotations


def sha256_hex(data: bytes | bytearray | memoryview) -> str:
    """The sha256 of ``data`` as lower-case hex."""
    from cryptography.hazmat.primitives.hashes import SHA256, Hash

    hasher = Hash(SHA256())
    hasher.update(data)
    return hasher.finalize().hex()
