"""``file:PATH`` (or a bare PATH): a PKCS#8 PEM Ed25519 key file, optionally passphrase-encrypted.

The key is first opened without a passphrase; only an encrypted key asks the secrets callback for
one, so an unencrypted key never makes a script wait at a prompt.
"""

from __future__ import annotations

from pathlib import Path

from k3kit._text import shown
from k3kit.errors import K3kitError
from k3kit.signing.schemes._registry import SecretsHandler, scheme
from k3kit.signing.signers import PemSigner, Signer


@scheme("file")
def open_file(path_text: str, secrets: SecretsHandler) -> Signer:
    """The key file at ``path_text`` (taken literally: no percent-decoding, no query)."""
    path = Path(path_text)
    try:
        return PemSigner.from_file(path, None)
    except K3kitError as exc:
        if exc.code != "KEY_PASSPHRASE":
            raise
        passphrase = secrets("passphrase", shown(path))
        if passphrase is None:
            raise
    return PemSigner.from_file(path, passphrase)
