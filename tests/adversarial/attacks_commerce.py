"""Attacks on the buyer receipt at ``verify --buyer-receipt``: moved to another kit, signed by a
stranger, and a licence envelope replayed as a buyer receipt (payloadType differs)."""

from __future__ import annotations

from pathlib import Path

from k3kit.commerce.buyer_receipt import build_body, sign_buyer_receipt
from k3kit.commerce.licence import licence_body, sign_licence
from k3kit.models.commerce import AFFIRMATIONS
from k3kit.signing.keys import load_private
from k3kit.signing.signers import PemSigner
from tests.adversarial.corpus import Argv, Workbench, attack
from tests.conftest import run_k3kit
from tests.ledgerkit import on_ledger

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
        package="kimi-k3-b300x8",
        price={"amount_minor": 250000, "currency": "EUR", "term_days": 365},
        signer_name="J",
        authority="CTO",
        affirm=list(AFFIRMATIONS),
        public_key=key.public_key(),
        signed_at="2026-11-01T00:00:00Z",
    )
    out = w.root / "licence.json"
    out.write_bytes(sign_licence(body, PemSigner.from_file(w.golden.key.private, None)))
    return ["verify", w.kit(), "--trust", w.trust, "--buyer-receipt", out]


# --- the ledger: signed heads and the licence's binding (docs/ledger.md, docs/licence.md) ---

_PRICE: dict[str, int | str] = {"amount_minor": 250000, "currency": "EUR", "term_days": 365}


def _licence(w: Workbench, package: str = "kimi-k3-b300x8") -> tuple[Path, Path]:
    """A licence the buyer (``w.other_key``) signs for ``package`` at ``_PRICE``."""
    terms = w.root / "TERMS.md"
    terms.write_bytes(b"terms\n")
    signer = PemSigner.from_file(w.other_key.private, None)
    body = licence_body(
        terms.read_bytes(),
        "TERMS.md",
        entity="Acme GmbH",
        package=package,
        price=_PRICE,
        signer_name="J",
        authority="CTO",
        affirm=list(AFFIRMATIONS),
        public_key=signer.public_key(),
        signed_at="2026-01-01T00:00:00Z",
    )
    out = w.root / f"licence-{package}.json"
    out.write_bytes(sign_licence(body, signer))
    return out, terms


def _ledger(w: Workbench) -> str:
    """A ledger with one honest purchase of the golden package."""
    from k3kit.commerce.ledger import migrate, purchase

    db = str(w.root / "ledger.sqlite")
    on_ledger(db, migrate, "2026-01-01T00:00:00Z")
    lic, terms = _licence(w)
    on_ledger(
        db,
        purchase,
        licence=lic.read_bytes(),
        terms=terms.read_bytes(),
        terms_name="TERMS.md",
        payment_ref="PAY-1",
        amount_minor=250000,
        currency="EUR",
        package="kimi-k3-b300x8",
        valid_from="2026-01-01T00:00:00Z",
        valid_until="2027-01-01T00:00:00Z",
        now="2026-01-01T00:00:00Z",
    )
    return db


def _checkpoint(w: Workbench, db: str, key: Path) -> Path:
    from k3kit.commerce.ledger import checkpoint

    done = on_ledger(db, checkpoint, PemSigner.from_file(key, None), now="2026-01-02T00:00:00Z")
    out = w.root / "head.json"
    out.write_bytes(done.envelope)
    return out


@attack("LEDGER_ANCHOR_BROKEN")
def ledger_rewritten_consistently_after_a_signed_head(w: Workbench) -> Argv:
    """Triggers dropped, the entitlement moved five years on, the chain recomputed."""
    from tests.ledgerkit import attacker_rewrite

    db = _ledger(w)
    head = _checkpoint(w, db, w.golden.key.private)
    attacker_rewrite(
        db,
        None,
        [
            "UPDATE entitlements SET valid_from = '2031-01-01T00:00:00Z', "
            "valid_until = '2032-01-01T00:00:00Z'"
        ],
    )
    return ["ledger", "verify", "--db", db, "--trust", w.trust, "--checkpoint", head]


@attack("LEDGER_CHECKPOINT_UNTRUSTED_KEY")
def ledger_checkpoint_signed_by_the_database_writer(w: Workbench) -> Argv:
    db = _ledger(w)
    head = _checkpoint(w, db, w.other_key.private)
    return ["ledger", "verify", "--db", db, "--trust", w.trust, "--checkpoint", head]


def _purchase_argv(w: Workbench, lic: Path, terms: Path, amount: str) -> Argv:
    db = str(w.root / "ledger.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    return [
        "ledger",
        "purchase",
        "--db",
        db,
        "--licence",
        lic,
        "--terms",
        terms,
        "--payment",
        "PAY-1",
        "--amount",
        amount,
        "--currency",
        "EUR",
        "--package",
        "kimi-k3-b300x8",
    ]


@attack("LICENCE_OTHER_PACKAGE")
def licence_for_another_package_recorded(w: Workbench) -> Argv:
    lic, terms = _licence(w, package="kimi-k3-lite")
    return _purchase_argv(w, lic, terms, "250000")


@attack("LICENCE_OTHER_PRICE")
def payment_below_the_signed_price_recorded(w: Workbench) -> Argv:
    lic, terms = _licence(w)
    return _purchase_argv(w, lic, terms, "1")
