"""Degenerate values, sent as the forger or the careless/hostile author would send them: a
licence "signed" by the identity point with no private key, a small-order --trust key, a root
whose expiry is written in Arabic-Indic digits, amounts and dates past what the ledger can hold,
and a GPU-name regex that does not compile or backtracks for ever."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from k3kit._canonical import dumps
from k3kit.commerce.ledger import migrate
from k3kit.commerce.licence import licence_body, sign_licence
from k3kit.models.commerce import AFFIRMATIONS, LICENCE_PAYLOAD_TYPE
from k3kit.signing.sign import pae
from k3kit.signing.signers import PemSigner
from tests.adversarial.corpus import Argv, Workbench, attack
from tests.launchkit import hand_signed
from tests.ledgerkit import TERMS, on_ledger
from tests.trustkit import keypair, raw_root, root_v1

IDENTITY = bytes([1]) + bytes(31)  # the neutral point, the degenerate Ed25519 key
FORGED_SIG = IDENTITY + bytes(32)  # R = identity, S = 0: [0]B == R + [k]A for every k
PREFLIGHT = Path(__file__).parents[1] / "data" / "preflight"
# What the licences below sign (licence v2 binds package and price): what _purchase buys.
PRICE: dict[str, int | str] = {"amount_minor": 100, "currency": "EUR", "term_days": 365}


def forged_licence(folder: Path) -> tuple[Path, Path]:
    """A complete licence whose signer key is the identity point and whose signature is the
    fixed one that verifies under it (OpenSSL alone accepts it). No private key involved."""
    terms = folder / "TERMS.md"
    terms.write_text(TERMS)
    body = licence_body(
        terms.read_bytes(),
        terms.name,
        entity="Mallory Ltd",
        package="kimi-k3-b300x8",
        price=PRICE,
        signer_name="Nobody",
        authority="none",
        affirm=list(AFFIRMATIONS),
        public_key=Ed25519PublicKey.from_public_bytes(IDENTITY),
        signed_at="2026-11-01T00:00:00Z",
    )
    payload = dumps(body.model_dump(by_alias=True))
    Ed25519PublicKey.from_public_bytes(IDENTITY).verify(
        FORGED_SIG, pae(LICENCE_PAYLOAD_TYPE, payload)
    )  # the premise: OpenSSL accepts this forgery
    envelope = {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": LICENCE_PAYLOAD_TYPE,
        "signatures": [{"keyid": "", "sig": base64.b64encode(FORGED_SIG).decode()}],
    }
    out = folder / "licence.json"
    out.write_bytes(dumps(envelope))
    return out, terms


def _ledger(w: Workbench) -> str:
    db = str(w.root / "ledger.sqlite")
    on_ledger(db, migrate, "2026-11-01T00:00:00Z")
    return db


def _genuine_licence(w: Workbench) -> tuple[Path, Path]:
    terms = w.root / "TERMS.md"
    terms.write_text(TERMS)
    signer_ = PemSigner.from_file(w.other_key.private, None)
    body = licence_body(
        terms.read_bytes(),
        terms.name,
        entity="Acme GmbH",
        package="kimi-k3-b300x8",
        price=PRICE,
        signer_name="Jane Roe",
        authority="CTO",
        affirm=list(AFFIRMATIONS),
        public_key=signer_.public_key(),
        signed_at="2026-11-01T00:00:00Z",
    )
    out = w.root / "licence.json"
    out.write_bytes(sign_licence(body, signer_))
    return out, terms


def _purchase(w: Workbench, lic: Path, terms: Path, *extra: str) -> Argv:
    return [
        "ledger", "purchase", "--db", _ledger(w), "--licence", lic, "--terms", terms,
        "--payment", "pay-1", "--currency", "EUR", "--package", "kimi-k3-b300x8", *extra,
    ]  # fmt: skip


@attack("KEY_WEAK")
def licence_forged_with_identity_point_key(w: Workbench) -> Argv:
    lic, terms = forged_licence(w.root)
    return ["licence", "verify", lic, "--terms", terms]


@attack("KEY_WEAK")
def ledger_purchase_of_licence_forged_with_identity_point(w: Workbench) -> Argv:
    lic, terms = forged_licence(w.root)
    return _purchase(w, lic, terms, "--amount", "100")


@attack("KEY_WEAK")
def verify_trusting_an_identity_point_pem(w: Workbench) -> Argv:
    pem = w.root / "weak.pub"
    pem.write_bytes(
        Ed25519PublicKey.from_public_bytes(IDENTITY).public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return ["verify", w.kit(), "--trust", pem]


@attack("ROOT_MALFORMED")
def root_expiring_2020_in_arabic_indic_digits(w: Workbench) -> Argv:
    key = keypair(w.root / "keys", "root")
    body = root_v1([key], [w.golden.key]).to_dict()
    body["expires"] = "\u0662\u0660\u0662\u0660-01-01T00:00:00Z"  # ٢٠٢٠ sorted after "2026"
    root = w.root / "1.root.json"
    root.write_bytes(raw_root(body, [key]))
    return ["verify", w.kit(), "--root", root, "--state-dir", w.root / "state"]


@attack("BAD_INPUT", exit_code=3)
def ledger_purchase_amount_two_to_the_63(w: Workbench) -> Argv:
    lic, terms = _genuine_licence(w)
    return _purchase(w, lic, terms, "--amount", str(2**63))


@attack("BAD_INPUT", exit_code=3)
def ledger_purchase_term_past_year_9999(w: Workbench) -> Argv:
    lic, terms = _genuine_licence(w)
    return _purchase(w, lic, terms, "--amount", "100", "--valid-from", "9999-12-31T23:59:59Z")


@attack("BAD_INPUT", exit_code=3)
def ledger_purchase_amount_in_fullwidth_digits(w: Workbench) -> Argv:
    lic, terms = _genuine_licence(w)
    return _purchase(w, lic, terms, "--amount", "\uff11\uff10\uff10")


@attack("KIT_INFO_MALFORMED")
def preflight_gpu_pattern_that_backtracks_for_ever(w: Workbench) -> Argv:
    """Signed by the publisher (preflight judges only a kit that verified against its receipt):
    the pattern is the publisher's own, and still may not hang the node check."""

    def hostile(data: bytes) -> bytes:
        doc = json.loads(data)
        doc["hardware"]["gpu_name_pattern"] = "(B+)+$"
        return dumps(doc)

    kit = hand_signed(w.kit(), w.golden.key, "kit.json", hostile)
    return [
        "preflight", kit, "--trust", w.trust, "--profile", "interactive",
        "--nvidia-smi-xml", PREFLIGHT / "b300x8.synthetic.xml",
        "--os-facts", PREFLIGHT / "node-os.synthetic.json",
    ]  # fmt: skip
