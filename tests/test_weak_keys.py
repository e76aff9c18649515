"""Degenerate Ed25519 keys and signatures, tried as a forger with no private key would.

OpenSSL (under ``cryptography``) accepts any 32 bytes as a public key. With the identity point
as the key, R = identity and S = 0 satisfy [S]B = R + [k]A for every message, so one fixed
signature "verifies" anything. Each test below is such a forgery driven through the real CLI or
the library entry point a verifier uses; all must be refused with ``KEY_WEAK`` (or no signature).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from k3kit.errors import VerificationError
from k3kit.signing.keys import public_from_hex, public_from_raw, verify_signature
from tests.adversarial.attacks_values import forged_licence
from tests.conftest import KeyFiles, run_k3kit

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493


def _le(n: int, sign: int = 0) -> bytes:
    return (n | (sign << 255)).to_bytes(32, "little")


# The 8 points of order dividing 8 (canonical encodings: libsodium's blocklist), then every
# non-canonical encoding of them: y + p for y in {0, 1}, and x = 0 with the sign bit set.
IDENTITY = _le(1)
ORDER_8_Y = 2707385501144840649318225287225658788936804267575313519463743609750303402022
SMALL_ORDER = {
    "identity": IDENTITY,
    "order-2 (0,-1)": _le(P - 1),
    "order-4 y=0 +": _le(0),
    "order-4 y=0 -": _le(0, 1),
    "order-8 a+": _le(ORDER_8_Y),
    "order-8 a-": _le(ORDER_8_Y, 1),
    "order-8 b+": _le(P - ORDER_8_Y),
    "order-8 b-": _le(P - ORDER_8_Y, 1),
    "identity y=p+1": _le(P + 1),
    "identity y=p+1 sign": _le(P + 1, 1),
    "identity sign bit": _le(1, 1),
    "order-2 sign bit": _le(P - 1, 1),
    "order-4 y=p": _le(P),
    "order-4 y=p sign": _le(P, 1),
}
FORGED_SIG = IDENTITY + bytes(32)  # R = identity, S = 0


def test_the_written_out_square_root_of_minus_one_is_rfc_8032s() -> None:
    from k3kit.signing import keys

    assert pow(2, (keys._P - 1) // 4, keys._P) == keys._SQRT_M1
    assert keys._SQRT_M1 * keys._SQRT_M1 % keys._P == keys._P - 1


def test_openssl_alone_accepts_the_forgery() -> None:
    """The premise: without k3kit's checks the identity key verifies a fixed signature."""
    Ed25519PublicKey.from_public_bytes(IDENTITY).verify(FORGED_SIG, b"any message at all")


@pytest.mark.parametrize("name", sorted(SMALL_ORDER))
def test_every_small_order_encoding_is_refused(name: str) -> None:
    enc = SMALL_ORDER[name]
    with pytest.raises(VerificationError) as info:
        public_from_raw(enc, source="key")
    assert info.value.code == "KEY_WEAK"
    with pytest.raises(VerificationError):
        public_from_hex(enc.hex(), source="key")


def test_non_canonical_encoding_of_a_real_key_is_refused() -> None:
    """y + p for a large-order point with a small y (a second key id for one key)."""
    for y in range(2, 19):
        enc = _le(y)
        try:
            public_from_raw(enc, source="k")
        except VerificationError:
            continue  # not a point
        with pytest.raises(VerificationError):
            public_from_raw(_le(y + P), source="k")
        return
    pytest.fail("no valid point with y < 19 found")


def test_genuine_keys_pass_and_verify() -> None:
    for _ in range(20):
        priv = Ed25519PrivateKey.generate()
        raw = priv.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        pub = public_from_raw(raw, source="k")
        assert verify_signature(pub, priv.sign(b"m"), b"m")
        assert not verify_signature(pub, priv.sign(b"m"), b"n")


def test_signature_with_small_order_r_or_large_s_is_refused() -> None:
    priv = Ed25519PrivateKey.generate()
    pub = priv.public_key()
    sig = priv.sign(b"m")
    s = int.from_bytes(sig[32:], "little")
    assert not verify_signature(pub, sig[:32] + (s + L).to_bytes(32, "little"), b"m")
    for enc in SMALL_ORDER.values():
        assert not verify_signature(pub, enc + sig[32:], b"m")
    # the identity key object from elsewhere (cryptography accepts it) is refused at verify too
    weak = Ed25519PublicKey.from_public_bytes(IDENTITY)
    assert not verify_signature(weak, FORGED_SIG, b"m")


def test_forged_licence_refused_by_licence_verify(tmp_path: Path) -> None:
    lic, terms = forged_licence(tmp_path)
    done = run_k3kit("licence", "verify", lic, "--terms", terms, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "KEY_WEAK"


def test_forged_licence_not_recorded_by_ledger_purchase(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    lic, terms = forged_licence(tmp_path)
    done = run_k3kit(
        "ledger", "purchase", "--db", db, "--licence", lic, "--terms", terms,
        "--payment", "pay-1", "--amount", "100", "--currency", "EUR",
        "--package", "kimi-k3-b300x8", "--json",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "KEY_WEAK"
    verify = run_k3kit("ledger", "verify", "--db", db, "--json")
    assert json.loads(verify.stdout)["ok"] is True  # nothing was recorded


def test_small_order_trust_key_file_refused(tmp_path: Path, kit: Path) -> None:
    """A PEM --trust file holding the identity point (someone hands the buyer a 'key')."""
    pem = tmp_path / "weak.pub"
    pem.write_bytes(
        Ed25519PublicKey.from_public_bytes(IDENTITY).public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    done = run_k3kit("verify", kit, "--trust", pem, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "KEY_WEAK"


def test_real_key_still_verifies(kit: Path, signing_key: KeyFiles) -> None:
    done = run_k3kit("verify", kit, "--trust", signing_key.public)
    assert done.returncode == 0, done.stderr
