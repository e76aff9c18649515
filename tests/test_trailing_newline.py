"""Degenerate values: a trailing newline (attack class 4).

Python's ``$`` matches at the end of the text *and* before a final newline, so a pattern
``^[A-Za-z0-9._-]+$`` checked with ``match`` (or ``search``) let ``"name\\n"`` through. pydantic's
patterns (Rust's regex) and the lite reader (``$`` written as ``\\Z``) never did; the hand-written
validators below did, until they used ``fullmatch`` (issue 23's eighth pass, found while timing
their compiles). One test per validator that takes text from outside: each refuses the value
with a newline and accepts it without.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from k3kit._fs import root_chain_names
from k3kit._policy import path_problem
from k3kit.commerce.ledger.purchase import purchase
from k3kit.errors import InputError, VerificationError
from k3kit.hub.policy import resolve_endpoint
from k3kit.node.launch import parse_engine_env
from k3kit.signing.trust import sshsig


def test_a_kit_path_segment_may_not_end_in_a_newline() -> None:
    """The one rule for a path made from untrusted input (manifests, archive members, evidence):
    a name with a newline is a second file that prints as the first in every listing."""
    assert path_problem("profiles/interactive/serve.yaml") is None
    assert path_problem("profiles/interactive/serve.yaml\n") is not None
    assert path_problem("profiles\n/serve.yaml") is not None


def test_a_root_file_name_may_not_end_in_a_newline() -> None:
    """``root/1.root.json\\n`` was read as version 1: two names for one root in one kit."""
    good = [("root", "dir", 0), ("root/1.root.json", "file", 10)]
    assert root_chain_names(good) == {1: "root/1.root.json"}
    with pytest.raises(VerificationError) as info:
        root_chain_names([("root", "dir", 0), ("root/1.root.json\n", "file", 10)])
    assert info.value.code == "ROOT_CHAIN_MALFORMED"


def test_an_allowed_signers_principal_may_not_end_in_a_newline() -> None:
    """With the newline, the line k3kit writes for ssh-keygen became two: ``alice`` alone, then
    ``namespaces="k3kit" ssh-ed25519 ...``, which ssh-keygen reads as the key for a principal
    named ``namespaces="k3kit"`` with no namespace restriction."""
    pub = Ed25519PrivateKey.generate().public_key()
    assert sshsig.allowed_signers_line(pub, "release@k3kit").count("\n") == 0
    with pytest.raises(ValueError, match="principal"):
        sshsig.allowed_signers_line(pub, "release@k3kit\n")


def test_a_payment_reference_may_not_end_in_a_newline() -> None:
    """``PAY-1`` and ``PAY-1\\n`` are two rows to the ledger and one payment to the seller. The
    reference is refused before the ledger is touched (no database is given here)."""
    values: dict[str, Any] = {
        "licence": b"",
        "terms": b"",
        "terms_name": "terms.md",
        "amount_minor": 100,
        "currency": "EUR",
        "package": "kimi-k3-b300x8",
        "valid_from": "2026-01-01T00:00:00Z",
        "valid_until": "2027-01-01T00:00:00Z",
        "now": "2026-01-01T00:00:00Z",
    }
    for field, bad in (("payment_ref", "PAY-1\n"), ("package", "kimi-k3-b300x8\n")):
        with pytest.raises(InputError) as info:
            purchase(cast(Any, None), **{"payment_ref": "PAY-1", **values, field: bad})
        assert info.value.code == "BAD_INPUT" and "plain identifier" in info.value.message


def test_a_hub_endpoint_may_not_end_in_a_newline() -> None:
    assert resolve_endpoint("https://hub.example") == "https://hub.example"
    with pytest.raises(InputError) as info:
        resolve_endpoint("https://hub.example\n")
    assert info.value.code == "BAD_ENDPOINT"


def test_an_engine_env_key_is_a_whole_identifier() -> None:
    """engine.env is split into lines first, so a key never holds a newline; the key check is a
    full match all the same, like every other."""
    assert parse_engine_env(b"VLLM_USE_V1=1\n", source="engine.env") == {"VLLM_USE_V1": "1"}
    with pytest.raises(VerificationError):
        parse_engine_env(b"VLLM USE=1\n", source="engine.env")
