"""Signers behind one interface, so keys that never leave a device can sign without touching
``sign`` or ``verify``.

Why a protocol and not a class hierarchy (in the spirit of securesystemslib's ``Signer``): the
only things a DSSE envelope, a root of trust or an SSHSIG need from a key are its public half and
a signature over exact bytes. A PEM file on disk is the first implementation; an Ed25519 private
key object from ``cryptography`` satisfies the protocol as it is; :mod:`k3kit.signing.schemes`
opens one from a ``--key`` URI (``file:`` for this module's :class:`PemSigner`, ``pkcs11:`` for a
token signing with ``CKM_EDDSA``; a cloud KMS would be one more scheme module). Nothing in
:func:`k3kit.signing.sign.sign_envelope` or the verifier changes with the signer, because every
caller recomputes the key id from :meth:`Signer.public_key` and never trusts what the signer says
about itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from k3kit.signing.keys import PublicKey, keyid, load_private


@runtime_checkable
class Signer(Protocol):
    """Anything that can produce an Ed25519 signature over bytes and name its public key."""

    def public_key(self) -> PublicKey:
        """The verifying key; the key id is always recomputed from it."""
        ...

    def sign(self, data: bytes) -> bytes:
        """A 64-byte Ed25519 signature over ``data`` (pure Ed25519, not Ed25519ph)."""
        ...


@dataclass(frozen=True)
class PemSigner:
    """A PKCS#8 PEM private key file (mode 0600, optionally passphrase-encrypted).

    The passphrase is resolved by the CLI layer (an environment variable, or a prompt when stdin
    is a terminal), because this level never reads the environment or a terminal.
    """

    path: Path
    _key: Ed25519PrivateKey

    @classmethod
    def from_file(cls, path: Path, passphrase: bytes | None) -> PemSigner:
        return cls(path, load_private(path, passphrase))

    def public_key(self) -> PublicKey:
        return self._key.public_key()

    def sign(self, data: bytes) -> bytes:
        return self._key.sign(data)

    @property
    def keyid(self) -> str:
        return keyid(self.public_key())
