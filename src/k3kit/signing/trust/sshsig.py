"""OpenSSH SSHSIG detached signatures, so a buyer with nothing but ``ssh-keygen`` can check a kit.

The signed message is ``MANIFEST.json``, whose sha256 *is* the kit checksum: a buyer runs
``ssh-keygen -Y verify -f allowed_signers -I <principal> -n k3kit -s MANIFEST.json.sig
< MANIFEST.json`` and then compares each file with the sha256 it lists. The wire format
(OpenSSH ``PROTOCOL.sshsig``) is written here with ``cryptography`` rather than by running
ssh-keygen, so the publisher's key stays a k3kit key (any :class:`~k3kit.signing.signers.Signer`);
the tests check the result with the real ssh-keygen binary.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import TYPE_CHECKING

from k3kit.errors import VerificationError
from k3kit.signing.keys import PublicKey, raw_public, verify_signature
from k3kit.signing.signers import Signer

if TYPE_CHECKING:
    from k3kit.signing.memo import SignatureMemo

NAMESPACE = "k3kit"
MAGIC = b"SSHSIG"
_ARMOR = ("-----BEGIN SSH SIGNATURE-----", "-----END SSH SIGNATURE-----")
_PRINCIPAL = re.compile(r"^[A-Za-z0-9._@+-]{1,128}$")


def _string(b: bytes) -> bytes:
    return len(b).to_bytes(4, "big") + b


def _pubkey_blob(pub: PublicKey) -> bytes:
    return _string(b"ssh-ed25519") + _string(raw_public(pub))


def public_openssh(pub: PublicKey) -> str:
    """``ssh-ed25519 AAAA…``, the form authorized_keys and allowed_signers use."""
    return "ssh-ed25519 " + base64.b64encode(_pubkey_blob(pub)).decode()


def allowed_signers_line(pub: PublicKey, principal: str, namespace: str = NAMESPACE) -> str:
    """One ``allowed_signers`` line restricting the key to k3kit's namespace."""
    if not _PRINCIPAL.fullmatch(principal):
        raise ValueError("principal must be 1-128 characters of [A-Za-z0-9._@+-]")
    return f'{principal} namespaces="{namespace}" {public_openssh(pub)}'


def _signed_data(message: bytes, namespace: str, hash_alg: str) -> bytes:
    digest = hashlib.new(hash_alg, message).digest()
    return (
        MAGIC
        + _string(namespace.encode())
        + _string(b"")
        + _string(hash_alg.encode())
        + _string(digest)
    )


def sign(message: bytes, signer: Signer, namespace: str = NAMESPACE) -> str:
    """An armoured SSHSIG (version 1, sha512) over ``message``."""
    hash_alg = "sha512"
    raw_sig = signer.sign(_signed_data(message, namespace, hash_alg))
    blob = (
        MAGIC
        + (1).to_bytes(4, "big")
        + _string(_pubkey_blob(signer.public_key()))
        + _string(namespace.encode())
        + _string(b"")
        + _string(hash_alg.encode())
        + _string(_string(b"ssh-ed25519") + _string(raw_sig))
    )
    text = base64.b64encode(blob).decode()
    lines = [text[i : i + 70] for i in range(0, len(text), 70)]
    return "\n".join([_ARMOR[0], *lines, _ARMOR[1]]) + "\n"


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def string(self) -> bytes:
        return self.take(int.from_bytes(self.take(4), "big"))


def verify(
    armored: str,
    message: bytes,
    pub: PublicKey,
    namespace: str = NAMESPACE,
    *,
    memo: SignatureMemo | None = None,
) -> None:
    """Check an SSHSIG as ``ssh-keygen -Y verify`` would, against one known key."""
    bad = VerificationError("SSHSIG signature does not verify", code="SSHSIG_INVALID")
    body = armored.strip().splitlines()
    if len(body) < 3 or body[0] != _ARMOR[0] or body[-1] != _ARMOR[1]:
        raise bad
    try:
        r = _Reader(base64.b64decode("".join(body[1:-1]), validate=True))
        if r.take(6) != MAGIC or int.from_bytes(r.take(4), "big") != 1:
            raise bad
        key_blob, ns, _reserved, hash_alg = r.string(), r.string(), r.string(), r.string()
        sig = _Reader(r.string())
        sig_type, raw_sig = sig.string(), sig.string()
    except ValueError as exc:
        raise bad from exc
    ok = (
        key_blob == _pubkey_blob(pub)
        and ns == namespace.encode()
        and hash_alg in (b"sha256", b"sha512")
        and sig_type == b"ssh-ed25519"
    )
    if not ok:
        raise bad
    signed = _signed_data(message, namespace, hash_alg.decode())
    if not verify_signature(pub, raw_sig, signed, memo=memo):
        raise bad
