"""k3kit._sha256: CPython's built-in sha256 (no hashlib, no cryptography on a node's start-up)
gives hashlib's digest for every length around the block boundaries, for each buffer type."""

from __future__ import annotations

import hashlib
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from k3kit import _sha256
from k3kit._sha256 import sha256_hex


@pytest.mark.parametrize("size", [*range(0, 200), 1 << 16, (1 << 18) + 1])
def test_every_length_gives_hashlibs_digest(size: int) -> None:
    data = bytes((i * 131 + 7) % 256 for i in range(size))
    want = hashlib.sha256(data).hexdigest()
    assert sha256_hex(data) == want
    assert sha256_hex(bytearray(data)) == want
    assert sha256_hex(memoryview(data)) == want


@given(st.binary(max_size=4096))
def test_generated_bytes_give_hashlibs_digest(data: bytes) -> None:
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_the_engine_is_cpythons_builtin_not_openssls() -> None:
    """Loading hashlib's OpenSSL or cryptography's binding for a kit's KBs is what this module
    exists to avoid (docs/performance.md, "Ninth pass")."""
    module = _sha256._SHA256.__module__
    assert module == ("_sha2" if sys.version_info >= (3, 12) else "_sha256"), module


@pytest.mark.parametrize("hidden", [("_sha2",), ("_sha2", "_sha256")])
def test_a_build_without_the_builtin_falls_back_alike(
    hidden: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CPython built without the module (``--with-builtin-hashlib-hashes`` not naming it):
    3.11's name, then hashlib; the digest is the same."""
    for name in hidden:
        monkeypatch.setitem(sys.modules, name, None)  # makes `import name` raise ImportError
    sha256 = _sha256._builtin_sha256()
    assert sha256.__module__ not in hidden, sha256.__module__
    assert sha256(b"abc").hexdigest() == hashlib.sha256(b"abc").hexdigest()
