"""Ed25519 key files, key ids and fingerprints.

The key id is the TUF / securesystemslib one (sha256 of the canonical key object), always recomputed
from key material and never read from a file, so a verifier cannot be told which key a signature is
"from". The OpenSSH ``SHA256:`` fingerprint is printed for humans who compare keys out of band.
"""

from __future__ import annotations

import binascii
import functools
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from k3kit._canonical import dumps
from k3kit._digest import sha256_hex  # not hashlib: see k3kit._digest.SMALL_BYTES
from k3kit._fs import atomic_write, check_trust_anchor, read_capped
from k3kit._immutable import NamedTuple
from k3kit._text import shown
from k3kit._values import is_lower_hex
from k3kit.errors import EnvironmentProblem, InputError, VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from k3kit.signing.memo import SignatureMemo

MAX_KEY_FILE = 16 * 1024
DEFAULT_KEY_NAME = "publisher"


# RFC 8032 edwards25519: field prime, curve constant d, sqrt(-1), and the prime group order L.
_P = 2**255 - 19
_D = -121665 * pow(121666, -1, _P) % _P
# pow(2, (_P - 1) // 4, _P), written out: computing it cost every node start ~0.17 ms of CPU
# (tests/test_weak_keys.py holds the two equal)
_SQRT_M1 = 19681161376707505956807079304988542015446066515923890162744021073123829784752
_L = 2**252 + 27742317777372353535851937790883648493
_Point = tuple[int, int]


def _decode_point(enc: bytes) -> _Point | None:
    """RFC 8032 section 5.1.3, strictly: None for anything that is not the one canonical
    encoding of a curve point (y >= p, x = 0 with the sign bit set, no square root)."""
    if len(enc) != 32:
        return None
    y = int.from_bytes(enc, "little") & ((1 << 255) - 1)
    sign = enc[31] >> 7
    if y >= _P:
        return None
    u, v = (y * y - 1) % _P, (_D * y * y + 1) % _P
    x = u * pow(v, 3, _P) * pow(u * pow(v, 7, _P), (_P - 5) // 8, _P) % _P  # one exponentiation
    if (v * x * x - u) % _P:
        x = x * _SQRT_M1 % _P
    if (v * x * x - u) % _P:
        return None
    if x == 0 and sign:
        return None
    if x & 1 != sign:
        x = _P - x
    return (x, y)


def _times_eight_is_identity(point: _Point) -> bool:
    """[8]P == identity, by three doublings in projective coordinates (no inversions; the
    "dbl-2008-hwcd" formulas for a = -1); the identity is X = 0, Y = Z."""
    x, y, z = point[0], point[1], 1
    for _ in range(3):
        a, b, c = x * x % _P, y * y % _P, 2 * z * z % _P
        e = ((x + y) * (x + y) - a - b) % _P
        g = (b - a) % _P
        f, h = (g - c) % _P, (-a - b) % _P
        x, y, z = e * f % _P, g * h % _P, f * g % _P
    return x == 0 and y == z


@functools.lru_cache(maxsize=1024)
def _strong_point(enc: bytes) -> bool:
    """True for a canonical encoding of a point whose order is not a divisor of 8.

    A small-order point ([8]A is the identity) is the degenerate key: with A the identity,
    R the identity and S = 0, the verification equation [S]B = R + [k]A holds for every
    message k, so one fixed signature "verifies" anything, and OpenSSL accepts such keys.
    Cached: the same few keys are checked for every signature.
    """
    point = _decode_point(enc)
    return point is not None and not _times_eight_is_identity(point)


class PublicKey(Protocol):
    """What k3kit asks of an Ed25519 public key: its 32 bytes, and a check of one signature.

    Both :class:`RawPublicKey` (every key k3kit reads from a file, a root, a licence or a ledger
    row) and ``cryptography``'s ``Ed25519PublicKey`` (a signer's own key, a caller's) have both
    methods, so either may be handed in; what decides a verdict is :func:`verify_signature`."""

    def public_bytes_raw(self) -> bytes: ...

    def verify(self, signature: bytes, data: bytes) -> None: ...


class RawPublicKey:
    """An Ed25519 public key held as its 32 bytes; ``cryptography``'s key object is made on the
    first :meth:`verify` only.

    Why not ``cryptography``'s object from the start: importing its Rust/OpenSSL binding costs a
    node about 14 M instructions and a tenth of ``launch``'s CPU (docs/performance.md, "Ninth
    pass"), and a warm ``verify`` or ``launch`` recalls its signature from the verification cache
    (:mod:`k3kit.signing.memo`) without one. k3kit's readers make it through
    :func:`public_from_raw`, so the bytes are a canonical point of large order, and
    :func:`verify_signature` checks them again whoever made the object. Equal to another
    ``RawPublicKey`` with the same bytes (never to a ``cryptography`` key: compare key ids).
    """

    __slots__ = ("_key", "_raw")

    def __init__(self, raw: bytes) -> None:
        self._raw = bytes(raw)
        self._key: Ed25519PublicKey | None = None

    def public_bytes_raw(self) -> bytes:
        return self._raw

    def verify(self, signature: bytes, data: bytes) -> None:
        """``cryptography``'s verify: raises its ``InvalidSignature`` when the check fails."""
        if self._key is None:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

            self._key = Ed25519PublicKey.from_public_bytes(self._raw)
        self._key.verify(signature, data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RawPublicKey):
            return NotImplemented
        return self._raw == other._raw

    def __hash__(self) -> int:
        return hash((RawPublicKey, self._raw))

    def __repr__(self) -> str:
        return f"RawPublicKey({self._raw.hex()})"


def to_cryptography(pub: PublicKey) -> Ed25519PublicKey:
    """``cryptography``'s object for ``pub``: for the few callers that need its encodings (a
    TUF key, a PEM file), never on a node's verify path."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if isinstance(pub, Ed25519PublicKey):
        return pub
    return Ed25519PublicKey.from_public_bytes(pub.public_bytes_raw())


def public_from_raw(raw: bytes, *, source: str) -> PublicKey:
    """THE way k3kit turns public key bytes into a key: every PEM file, hex key in a root,
    licence, buyer receipt or ledger row comes through here (via :func:`check_public`).

    Refused (``KEY_WEAK``): not 32 bytes, a non-canonical encoding (so one key has one key id),
    not a curve point, or a point of small order (which would verify forgeries).
    """
    if len(raw) != 32 or not _strong_point(raw):
        raise VerificationError(
            f"{source}: the Ed25519 public key is not a canonical point of large order "
            "(a degenerate key lets anyone forge signatures)",
            code="KEY_WEAK",
            hint="use the publisher's real key; a key like 0100…00 is the identity point",
        )
    return RawPublicKey(raw)


def public_from_hex(text: object, *, source: str) -> PublicKey:
    """A key written as 64 lowercase hex digits (roots, licences, ledger rows)."""
    if not is_lower_hex(text, 64):
        raise VerificationError(
            f"{source}: the public key is not 64 lowercase hex digits", code="KEY_WEAK"
        )
    return public_from_raw(bytes.fromhex(text), source=source)


def check_public(pub: PublicKey, *, source: str) -> PublicKey:
    """``pub`` if it passes :func:`public_from_raw`'s checks (for keys parsed elsewhere)."""
    return public_from_raw(raw_public(pub), source=source)


def verify_signature(
    pub: PublicKey, sig: bytes, message: bytes, *, memo: SignatureMemo | None = None
) -> bool:
    """THE Ed25519 check every signature in k3kit goes through.

    Before ``cryptography``'s verify: the key must pass :func:`public_from_raw` again (a key
    object may come from anywhere), the signature must be 64 bytes, its R a canonical point not
    of small order and its S below the group order L (RFC 8032's malleability rule), so no
    degenerate key or signature takes part in a verdict.

    With ``memo`` (a node's verification cache, :mod:`k3kit.signing.memo`), a key, signature
    and message that this check passed before are recalled instead of checked again, and one
    that passes now is remembered; a failure is never remembered. The checks above run either
    way: a memo cannot let a degenerate key or signature through.
    """
    if len(sig) != 64 or int.from_bytes(sig[32:], "little") >= _L:
        return False
    raw = raw_public(pub)
    if not _strong_point(raw) or not _strong_point(sig[:32]):
        return False
    if memo is not None and memo.recall(raw, sig, message):
        return True
    from cryptography.exceptions import InvalidSignature

    try:
        pub.verify(sig, message)
    except InvalidSignature:
        return False
    if memo is not None:
        memo.remember(raw, sig, message)
    return True


def raw_public(pub: PublicKey) -> bytes:
    return pub.public_bytes_raw()


def key_object(pub: PublicKey) -> dict[str, object]:
    """The TUF/securesystemslib key object for an Ed25519 public key."""
    return {"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": raw_public(pub).hex()}}


def keyid(pub: PublicKey) -> str:
    """sha256 of the canonical key object; equals ``SSlibKey.from_crypto(pub).keyid``."""
    return sha256_hex(dumps(key_object(pub)))


def ssh_fingerprint(pub: PublicKey) -> str:
    """OpenSSH ``SHA256:`` fingerprint (sha256 of the ssh-ed25519 wire blob, unpadded base64)."""

    def string(b: bytes) -> bytes:
        return len(b).to_bytes(4, "big") + b

    import hashlib  # publisher-side (keygen, trust show): see k3kit._digest.SMALL_BYTES

    blob = string(b"ssh-ed25519") + string(raw_public(pub))
    digest = binascii.b2a_base64(hashlib.sha256(blob).digest(), newline=False)  # b64encode's
    return "SHA256:" + digest.decode().rstrip("=")


# A NamedTuple, not a frozen dataclass: this module is on verify's start-up path, where a frozen
# dataclass costs ~0.5 ms of CPU to create (docs/performance.md, "Start-up").
class KeyPairPaths(NamedTuple):
    private: Path
    public: Path


def key_prefix(out: str) -> Path:
    """Where ``--out OUT`` puts the pair: ``OUT.key``/``OUT.pub``; but a folder (one that exists,
    or ``OUT`` ending in ``/``) means ``OUT/publisher.key`` and ``OUT/publisher.pub`` inside it,
    never ``./OUT.key`` beside it as ``keys/`` used to."""
    if out.endswith(("/", os.sep)) or Path(out).is_dir():
        return Path(out) / DEFAULT_KEY_NAME
    return Path(out)


def write_keypair(out: Path, passphrase: bytes | None) -> tuple[KeyPairPaths, PublicKey]:
    """Generate a key pair and write ``OUT.key`` (0600, PKCS#8) and ``OUT.pub``; never overwrite."""
    paths = KeyPairPaths(out.with_name(out.name + ".key"), out.with_name(out.name + ".pub"))
    for path in (paths.private, paths.public):
        if path.exists():
            raise InputError(
                f"{shown(path)} exists; refusing to overwrite a key",
                code="OUTPUT_EXISTS",
                hint="choose another --out; keys are never replaced",
            )
    from cryptography.hazmat.primitives import serialization  # see _SPKI_PEM
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

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


# PEM SubjectPublicKeyInfo, RFC 4716 and the OpenSSH one-line forms (ssh-ed25519, ssh-rsa, ...).
_PUBLIC_KEY_STARTS = (
    b"-----BEGIN PUBLIC KEY-----",
    b"---- BEGIN SSH2 PUBLIC KEY ----",
    b"ssh-",
    b"ecdsa-sha2-",
    b"sk-ssh-",
    b"sk-ecdsa-",
)


def _refuse_public_key(path: Path, data: bytes) -> None:
    """A public key handed to ``--key`` (the ``.pub`` beside the ``.key``) is named as such,
    before the permission check: telling someone to ``chmod 600`` a public key, then that the
    passphrase is wrong, sends them after the wrong fix."""
    if not data.lstrip().startswith(_PUBLIC_KEY_STARTS):
        return
    private = shown(path.with_suffix(".key")) if path.suffix == ".pub" else "the .key file"
    raise EnvironmentProblem(
        f"{shown(path)} is a public key; --key needs the private key "
        f"({private}, not {shown(path)})",
        code="KEY_IS_PUBLIC",
        hint="give the .key file keygen wrote beside the .pub (the .pub is for --trust)",
    )


def refuse_shared_secret(path: Path, mode: int, what: str) -> None:
    """A secret file (a private key, a token's PIN) that group or others can open is refused,
    as ssh-keygen refuses such a key: another user on the machine may already have read it."""
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise EnvironmentProblem(
            f"{what} {path} is accessible by group or others (mode {stat.S_IMODE(mode):o})",
            code="KEY_TOO_PERMISSIVE",
            hint=f"run: chmod 600 {path}",
        )


def load_private(path: Path, passphrase: bytes | None) -> Ed25519PrivateKey:
    """Load a private key, refusing a public key by name and one that other users can read (as
    ssh-keygen does)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot read key {path}: {exc.strerror}", code="KEY_UNREADABLE"
        ) from exc
    data = read_capped(
        path, MAX_KEY_FILE, what="private key", error=EnvironmentProblem, code="KEY_UNREADABLE"
    )
    _refuse_public_key(path, data)
    refuse_shared_secret(path, mode, "private key")
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization  # see _SPKI_PEM
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

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


def load_public(path: Path) -> PublicKey:
    """Load a trusted public key (PEM SubjectPublicKeyInfo, Ed25519 only), from a file no
    other user could have put or swapped (:func:`k3kit._fs.check_trust_anchor`)."""
    check_trust_anchor(path, "public key")
    data = read_capped(
        path, MAX_KEY_FILE, what="public key", error=EnvironmentProblem, code="KEY_UNREADABLE"
    )
    key = _spki_pem_ed25519(data)
    if key is None:  # any other spelling: cryptography's own PEM reader decides
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            other = serialization.load_pem_public_key(data)
        except (ValueError, UnsupportedAlgorithm) as exc:
            raise EnvironmentProblem(
                f"public key {path} is not a PEM public key", code="KEY_UNREADABLE"
            ) from exc
        if not isinstance(other, Ed25519PublicKey):
            raise EnvironmentProblem(f"public key {path} is not Ed25519", code="KEY_UNSUPPORTED")
        return check_public(other, source=f"public key {shown(path)}")
    return check_public(key, source=f"public key {shown(path)}")


# The one byte string every Ed25519 SubjectPublicKeyInfo starts with (RFC 8410: SEQUENCE {
# SEQUENCE { OID 1.3.101.112 }, BIT STRING of 32 bytes }), and the PEM that keygen writes.
_SPKI_ED25519 = bytes.fromhex("302a300506032b6570032100")
_SPKI_PEM = re.compile(
    rb"-----BEGIN PUBLIC KEY-----\n([A-Za-z0-9+/]{59}=)\n-----END PUBLIC KEY-----\n?", re.ASCII
)


def _spki_pem_ed25519(data: bytes) -> RawPublicKey | None:
    """The key of a PEM Ed25519 public key in exactly the form ``keygen`` (and OpenSSL) writes,
    or None for anything else, which then goes to cryptography's PEM reader.

    Why: ``cryptography.hazmat.primitives.serialization`` (its SSH, PKCS#12 and cipher modules)
    costs about as much CPU to import as Ed25519 itself, on every ``verify`` of a GPU node's
    start-up (docs/performance.md). For this one fixed form the two readers give the same key;
    every other form, and every refusal, is still cryptography's."""
    match = _SPKI_PEM.fullmatch(data)
    if match is None:
        return None
    # base64.b64decode(validate=True) is this call; the base64 module (with struct) is ~0.7 ms
    # of CPU to import on every node start
    der = binascii.a2b_base64(match.group(1), strict_mode=True)
    if len(der) != 44 or not der.startswith(_SPKI_ED25519):
        return None
    return RawPublicKey(der[len(_SPKI_ED25519) :])
