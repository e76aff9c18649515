"""Ed25519 key files, key ids and fingerprints.

The key id is the TUF / securesystemslib one (sha256 of the canonical key object), always recomputed
from key material and never read from a file, so a verifier cannot be told which key a signature is
"from". The OpenSSH ``SHA256:`` fingerprint is printed for humans who compare keys out of band.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from k3kit._canonical import dumps
from k3kit._fs import atomic_write, read_capped
from k3kit._text import shown
from k3kit.errors import EnvironmentProblem, InputError

MAX_KEY_FILE = 16 * 1024
DEFAULT_KEY_NAME = "publisher"


def raw_public(pub: Ed25519PublicKey) -> bytes:
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_object(pub: Ed25519PublicKey) -> dict[str, object]:
    """The TUF/securesystemslib key object for an Ed25519 public key."""
    return {"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": raw_public(pub).hex()}}


def keyid(pub: Ed25519PublicKey) -> str:
    """sha256 of the canonical key object; equals ``SSlibKey.from_crypto(pub).keyid``."""
    return hashlib.sha256(dumps(key_object(pub))).hexdigest()


def ssh_fingerprint(pub: Ed25519PublicKey) -> str:
    """OpenSSH ``SHA256:`` fingerprint (sha256 of the ssh-ed25519 wire blob, unpadded base64)."""

    def string(b: bytes) -> bytes:
        return len(b).to_bytes(4, "big") + b

    blob = string(b"ssh-ed25519") + string(raw_public(pub))
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


@dataclass(frozen=True)
class KeyPairPaths:
    private: Path
    public: Path


def key_prefix(out: str) -> Path:
    """Where ``--out OUT`` puts the pair: ``OUT.key``/``OUT.pub``; but a folder (one that exists,
    or ``OUT`` ending in ``/``) means ``OUT/publisher.key`` and ``OUT/publisher.pub`` inside it,
    never ``./OUT.key`` beside it as ``keys/`` used to."""
    if out.endswith(("/", os.sep)) or Path(out).is_dir():
        return Path(out) / DEFAULT_KEY_NAME
    return Path(out)


def write_keypair(out: Path, passphrase: bytes | None) -> tuple[KeyPairPaths, Ed25519PublicKey]:
    """Generate a key pair and write ``OUT.key`` (0600, PKCS#8) and ``OUT.pub``; never overwrite."""
    paths = KeyPairPaths(out.with_name(out.name + ".key"), out.with_name(out.name + ".pub"))
    for path in (paths.private, paths.public):
        if path.exists():
            raise InputError(
                f"{shown(path)} exists; refusing to overwrite a key",
                code="OUTPUT_EXISTS",
                hint="choose another --out; keys are never replaced",
            )
    priv = Ed25519PrivateKey.generate()
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    priv_pem = priv.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    pub = priv.public_key()
    pub_pem = pub.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    atomic_write(paths.private, priv_pem, mode=0o600)
    atomic_write(paths.public, pub_pem, mode=0o644)
    return paths, pub


def load_private(path: Path, passphrase: bytes | None) -> Ed25519PrivateKey:
    """Load a private key, refusing one that other users can read (as ssh-keygen does)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot read key {path}: {exc.strerror}", code="KEY_UNREADABLE"
        ) from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise EnvironmentProblem(
            f"private key {path} is accessible by group or others (mode {stat.S_IMODE(mode):o})",
            code="KEY_TOO_PERMISSIVE",
            hint=f"run: chmod 600 {path}",
        )
    data = read_capped(
        path, MAX_KEY_FILE, what="private key", error=EnvironmentProblem, code="KEY_UNREADABLE"
    )
    try:
        key = serialization.load_pem_private_key(data, password=passphrase)
    except TypeError as exc:
        raise EnvironmentProblem(
            f"private key {path}: {exc}",
            code="KEY_PASSPHRASE",
            hint="give the passphrase with --passphrase-env VAR" if passphrase is None else None,
        ) from exc
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise EnvironmentProblem(
            f"private key {path} cannot be loaded (wrong passphrase or not a PEM key)",
            code="KEY_UNREADABLE",
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise EnvironmentProblem(f"private key {path} is not Ed25519", code="KEY_UNSUPPORTED")
    return key


def load_public(path: Path) -> Ed25519PublicKey:
    """Load a trusted public key (PEM SubjectPublicKeyInfo, Ed25519 only)."""
    data = read_capped(
        path, MAX_KEY_FILE, what="public key", error=EnvironmentProblem, code="KEY_UNREADABLE"
    )
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise EnvironmentProblem(
            f"public key {path} is not a PEM public key", code="KEY_UNREADABLE"
        ) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise EnvironmentProblem(f"public key {path} is not Ed25519", code="KEY_UNSUPPORTED")
    return key
