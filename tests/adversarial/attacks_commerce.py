"""Attacks on the buyer receipt at ``verify --buyer-receipt``: moved to another kit, signed by a
stranger, and a licence envelope replayed as a buyer receipt (payloadType differs)."""

from __future__ import annotations

from pathlib import Path

from k3kit.buyer_receipt import build_body, sign_buyer_receipt
from k3kit.keys import load_private
from k3kit.licence import licence_body, sign_licence
from k3kit.models.commerce import AFFIRMATIONS
from k3kit.signers import PemSigner
from tests.adversarial.corpus import Argv, Workbench, attack

_KIT = {
    "name": "kimi-k3-b300x8",
    "version": "1.0.0",
    "sequence": 1,
    "kit_sha256": "sha256:" + "ab" * 32,
    "weights_sha256": "sha256:" + "cd" * 32,
    "released_at": "2026-11-01T00:00:00Z",
}


def _receipt(w: Workbench, key: Path, **kit: object) -> Path:
    body = build_body(
        licensee="Acme GmbH",
        licence_sha256="sha256:" + "ef" * 32,
        entitlement="ent-1",
        kit={**_KIT, **kit},
        build_record={"engine": "vllm"},
        serve_command=["vllm", "serve"],
        issued_at="2026-11-02T00:00:00Z",
        ledger={"seq": 4, "head": "sha256:" + "12" * 32},
    )
    out = w.root / "buyer.json"
    out.write_bytes(sign_buyer_receipt(body, PemSigner.from_file(key, None)))
    return out


@attack("BUYER_RECEIPT_WRONG_KIT")
def buyer_receipt_moved_to_another_kit(w: Workbench) -> Argv:
    return [
        "verify",
        w.kit(),
        "--trust",
        w.trust,
        "--buyer-receipt",
        _receipt(w, w.golden.key.private),
    ]


@attack("BUYER_RECEIPT_UNTRUSTED_KEY")
def buyer_receipt_signed_by_stranger(w: Workbench) -> Argv:
    return [
        "verify",
        w.kit(),
        "--trust",
        w.trust,
        "--buyer-receipt",
        _receipt(w, w.other_key.private),
    ]


@attack("BUYER_RECEIPT_WRONG_TYPE")
def licence_replayed_as_buyer_receipt(w: Workbench) -> Argv:
    key = load_private(w.golden.key.private, None)
    body = licence_body(
        b"terms",
        "TERMS.md",
        entity="Acme",
        signer_name="J",
        authority="CTO",
        affirm=list(AFFIRMATIONS),
        public_key=key.public_key(),
        signed_at="2026-11-01T00:00:00Z",
    )
    out = w.root / "licence.json"
    out.write_bytes(sign_licence(body, PemSigner.from_file(w.golden.key.private, None)))
    return ["verify", w.kit(), "--trust", w.trust, "--buyer-receipt", out]
