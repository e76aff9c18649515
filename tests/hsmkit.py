"""A real PKCS#11 token for the ``pkcs11:`` signer's tests: SoftHSM2 from Debian, in a tmp folder.

The token is initialised with ``softhsm2-util`` and its keys are made by a separate Python process
through PyKCS11 (``C_GenerateKeyPair``), as an HSM administrator would; the process under test only
ever reaches the token through ``k3kit``. SoftHSM2 reads ``SOFTHSM2_CONF`` when it is first loaded,
so every step runs in its own process with that variable, never in the test process (a second
token in another folder would otherwise be invisible to an already-initialised module).

Objects on the token (label, id):

- ``release`` (01): an Ed25519 key pair, the release key;
- ``p256`` (02): an ECDSA P-256 key pair (a key k3kit cannot sign with);
- ``swapped`` (03): an Ed25519 private key whose public key object holds ``other``'s point (a
  mismatched pair: what a token administrator's mistake or a planted object looks like);
- ``other`` (04): an Ed25519 key pair;
- ``pubonly`` (05): an Ed25519 public key object and no private key.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

SOFTHSM_MODULES = (
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
)
LABEL = "k3kit-release"
PIN = "1234"
SO_PIN = "5678"
_PINS = ("--pin", PIN, "--so-pin", SO_PIN)

_MAKE_KEYS = r"""
import sys
import PyKCS11 as P

lib = P.PyKCS11Lib()
lib.load(sys.argv[1])
slot = next(s for s in lib.getSlotList(tokenPresent=True)
            if lib.getTokenInfo(s).label.rstrip() == sys.argv[2])
se = lib.openSession(slot, P.CKF_SERIAL_SESSION | P.CKF_RW_SESSION)
se.login(sys.argv[3])
ED25519 = tuple(bytes.fromhex("130c656477617264733235353139"))  # PrintableString edwards25519
P256 = tuple(bytes.fromhex("06082a8648ce3d030107"))  # OID 1.2.840.10045.3.1.7


def pair(label, kid, ktype, mech, params):
    common = [(P.CKA_TOKEN, True), (P.CKA_LABEL, label), (P.CKA_ID, (kid,))]
    pub = [(P.CKA_CLASS, P.CKO_PUBLIC_KEY), (P.CKA_KEY_TYPE, ktype), (P.CKA_VERIFY, True),
           (P.CKA_EC_PARAMS, params), *common]
    prv = [(P.CKA_CLASS, P.CKO_PRIVATE_KEY), (P.CKA_KEY_TYPE, ktype), (P.CKA_PRIVATE, True),
           (P.CKA_SENSITIVE, True), (P.CKA_SIGN, True), *common]
    return se.generateKeyPair(pub, prv, mecha=P.Mechanism(mech))


def point(handle):
    return se.getAttributeValue(handle, [P.CKA_EC_POINT])[0]


def public_object(label, kid, ec_point):
    se.createObject([(P.CKA_CLASS, P.CKO_PUBLIC_KEY), (P.CKA_KEY_TYPE, P.CKK_EC_EDWARDS),
                     (P.CKA_TOKEN, True), (P.CKA_LABEL, label), (P.CKA_ID, (kid,)),
                     (P.CKA_VERIFY, True), (P.CKA_EC_PARAMS, ED25519),
                     (P.CKA_EC_POINT, tuple(ec_point))])


EDDSA = (P.CKK_EC_EDWARDS, P.CKM_EC_EDWARDS_KEY_PAIR_GEN, ED25519)
release, _ = pair("release", 1, *EDDSA)
pair("p256", 2, P.CKK_EC, P.CKM_EC_KEY_PAIR_GEN, P256)
swapped, _ = pair("swapped", 3, *EDDSA)
other, _ = pair("other", 4, *EDDSA)
se.destroyObject(swapped)
public_object("swapped", 3, point(other))
public_object("pubonly", 5, point(release))
print(bytes(point(release)).hex())
"""


def softhsm_module() -> str | None:
    """SoftHSM2's PKCS#11 module when Debian's softhsm2 package is installed, else None."""
    if shutil.which("softhsm2-util") is None:
        return None
    return next((m for m in SOFTHSM_MODULES if Path(m).is_file()), None)


needs_softhsm = pytest.mark.skipif(
    softhsm_module() is None,
    reason="SoftHSM2 is not installed (Debian package softhsm2; `make tools` installs it)",
)


@dataclass(frozen=True)
class Token:
    """An initialised SoftHSM2 token with the keys above, and how to reach it."""

    module: str
    conf: Path
    release_public: Path  # the release key's public half, as PEM (what a buyer is given)

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to see the token; the module comes from the environment."""
        return {"SOFTHSM2_CONF": str(self.conf), "K3KIT_PKCS11_MODULE": self.module}

    def uri(self, obj: str = "release", *, pin: str | None = PIN, extra: str = "") -> str:
        """``pkcs11:token=...;object=OBJ[EXTRA]?pin-value=PIN`` (no query when ``pin`` is None)."""
        query = f"?pin-value={pin}" if pin is not None else ""
        return f"pkcs11:token={LABEL};object={obj}{extra}{query}"


def make_token(root: Path) -> Token:
    """A fresh token under ``root``: config, token folder, keys, the release key's PEM."""
    module = softhsm_module()
    assert module is not None
    tokens = root / "tokens"
    tokens.mkdir(parents=True)
    conf = root / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {tokens}\nobjectstore.backend = file\n")
    env = {**os.environ, "SOFTHSM2_CONF": str(conf)}
    subprocess.run(
        ["softhsm2-util", "--init-token", "--free", "--label", LABEL, *_PINS],
        env=env,
        check=True,
        capture_output=True,
    )
    made = subprocess.run(
        [sys.executable, "-c", _MAKE_KEYS, module, LABEL, PIN],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    ec_point = bytes.fromhex(made.stdout.strip())
    assert ec_point[:2] == b"\x04\x20"  # DER OCTET STRING of the 32-byte key
    pub = Ed25519PublicKey.from_public_bytes(ec_point[2:])
    pem = root / "release.pub"
    pem.write_bytes(
        pub.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Token(module, conf, pem)
