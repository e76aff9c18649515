"""k3kit's signers as securesystemslib ``Signer`` objects, so TUF metadata is signed by the same
keys as kits: a key file, ``file:PATH`` or a ``pkcs11:`` token (:mod:`k3kit.signing.schemes`).

The adapter and the key rule live with the root of trust (:mod:`k3kit.signing.trust.tufroot`),
which the channel's roots share: ``root create`` and ``channel init`` compute one key id the same
way (securesystemslib's, from the public key; never what the signer says about itself).
"""

from __future__ import annotations

from k3kit.signing.trust.tufroot import K3kitTufSigner as K3kitTufSigner
from k3kit.signing.trust.tufroot import tuf_key as tuf_key

__all__ = ["K3kitTufSigner", "tuf_key"]
