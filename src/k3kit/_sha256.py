"""sha256 of bytes in memory: documents, key objects, a kit's small files (KBs).

By CPython's own sha256 (the code behind ``hashlib.sha256`` when OpenSSL is not used:
``_sha2``, HACL*, on 3.12+; ``_sha256``, CPython's older C code, on 3.11), neither ``hashlib``
nor ``cryptography``:

* ``hashlib`` loads the system's libcrypto, about 3.5 ms of CPU on every node start
  (docs/performance.md, "Sixth pass");
* ``cryptography``'s binding, which this module used until the ninth pass, is no longer loaded
  by a warm ``verify`` or ``launch`` at all: their signature is recalled from the verification
  cache (:mod:`k3kit.signing.memo`), and loading the binding for a hash alone cost about 14 M
  instructions.

The digest is the same by every engine (tests/test_sha256.py holds it to hashlib's). A build
without the built-in module (one compiled with ``--with-builtin-hashlib-hashes`` not naming it)
falls back to hashlib. The one implementation, below both its callers' layer:
:mod:`k3kit._digest` (files up to its ``SMALL_BYTES``; larger files and downloads keep hashlib,
which releases the GIL) and :mod:`k3kit._canonical` (a model's checksum).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _builtin_sha256() -> Callable[..., Any]:
    try:
        from _sha2 import sha256  # type: ignore[import-not-found,unused-ignore]  # 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            from hashlib import sha256
    return sha256  # type: ignore[no-any-return,unused-ignore]


_SHA256 = _builtin_sha256()


def sha256_hex(data: bytes | bytearray | memoryview) -> str:
    """The sha256 of ``data`` as lower-case hex."""
    return str(_SHA256(data).hexdigest())
