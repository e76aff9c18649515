"""Interop: securesystemslib's DSSE implementation and k3kit agree byte for byte, both ways."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError as SslibVerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey

from k3kit.models import PAYLOAD_TYPE
from k3kit.signing.keys import load_private
from k3kit.signing.sign import pae, sign_envelope, verify_envelope
from tests.conftest import GoldenKit, KeyFiles


def _sslib_key(pub_path: Path) -> SSlibKey:
    pub = serialization.load_pem_public_key(pub_path.read_bytes())
    return SSlibKey.from_crypto(pub)


def test_k3kit_receipt_verifies_with_securesystemslib(golden: GoldenKit) -> None:
    envelope = json.loads((golden.kit / "receipt.dsse.json").read_text())
    env = Envelope.from_dict(copy.deepcopy(envelope))  # from_dict mutates its argument
    key = _sslib_key(golden.key.public)
    verified = env.verify([key], 1)
    assert list(verified) == [key.keyid]
    assert env.payload_type == PAYLOAD_TYPE
    statement = json.loads(env.payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert {s["name"] for s in statement["subject"]} == {
        "kit:MANIFEST.json",
        "weights:weights.lock.json",
    }


def test_securesystemslib_rejects_k3kit_receipt_under_another_key(
    golden: GoldenKit, other_key: KeyFiles
) -> None:
    env = Envelope.from_dict(json.loads((golden.kit / "receipt.dsse.json").read_text()))
    with pytest.raises(SslibVerificationError):
        env.verify([_sslib_key(other_key.public)], 1)


def test_securesystemslib_envelope_verifies_with_k3kit_and_signatures_match(
    signing_key: KeyFiles,
) -> None:
    payload = b'{"_type":"https://in-toto.io/Statement/v1","note":"interop"}'
    private = load_private(signing_key.private, None)
    signer = CryptoSigner(private)
    env = Envelope(payload=payload, payload_type=PAYLOAD_TYPE, signatures={})
    env.sign(signer)
    theirs = env.to_dict()
    ours = json.loads(sign_envelope(payload, PAYLOAD_TYPE, private))
    # Ed25519 is deterministic: same key, same PAE -> the same signature bytes.
    assert theirs["signatures"][0]["sig"] == ours["signatures"][0]["sig"]
    assert theirs["signatures"][0]["keyid"] == ours["signatures"][0]["keyid"]
    verified = verify_envelope(
        json.dumps(theirs).encode(),
        [private.public_key()],
        expected_type=PAYLOAD_TYPE,
        source="sslib envelope",
    )
    assert verified.payload == payload


def test_pae_matches_the_dsse_spec_vector() -> None:
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_receipt_payload_is_the_canonical_statement(golden: GoldenKit) -> None:
    import rfc8785

    envelope = json.loads((golden.kit / "receipt.dsse.json").read_text())
    payload = base64.b64decode(envelope["payload"])
    assert rfc8785.dumps(json.loads(payload)) == payload
