"""k3kit's signers as securesystemslib ``Signer`` objects, so TUF metadata is signed by the same
keys as kits: a key file, ``file:PATH`` or a ``pkcs11:`` token (:mod:`k3kit.signing.schemes`).

Why an adapter and not securesystemslib's own URI signers: k3kit's schemes already carry its
rules (key file mode, passphrase by variable or prompt, the token's signature checked against its
own public key object), and a publisher names a key one way everywhere. The TUF key id is the one
securesystemslib computes from the public key (never what the signer says about itself).
"""

from __future__ import annotations

from securesystemslib.signer import Key, Signature, SSlibKey
from securesystemslib.signer import Signer as TufSigner

from k3kit.signing.signers import Signer


def tuf_key(signer_or_key: Signer | object) -> SSlibKey:
    """The TUF public key (ed25519, its default key id) of a k3kit signer or an Ed25519 key."""
    public = signer_or_key.public_key() if isinstance(signer_or_key, Signer) else signer_or_key
    return SSlibKey.from_crypto(public)  # type: ignore[arg-type]


class K3kitTufSigner(TufSigner):
    """One k3kit :class:`~k3kit.signing.signers.Signer` behind securesystemslib's interface."""

    def __init__(self, signer: Signer) -> None:
        self._signer = signer
        self._key = tuf_key(signer)

    @property
    def public_key(self) -> Key:
        return self._key

    @property
    def keyid(self) -> str:
        return self._key.keyid

    def sign(self, payload: bytes) -> Signature:
        """Sign ``payload`` (TUF's canonical JSON of the signed part) with the k3kit signer."""
        return Signature(self._key.keyid, self._signer.sign(payload).hex())

    @classmethod
    def from_priv_key_uri(
        cls, priv_key_uri: str, public_key: Key, secrets_handler: object = None
    ) -> TufSigner:
        """Not used: k3kit opens signers with :func:`k3kit.signing.schemes.signer_from_uri`."""
        raise NotImplementedError("open the key with k3kit.signing.schemes.signer_from_uri")
