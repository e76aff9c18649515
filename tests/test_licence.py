"""The signed licence: each affirmation explicit, the terms' hash bound, the signer's key named."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from k3kit._canonical import dumps
from k3kit.errors import VerificationError
from k3kit.models.commerce import LICENCE_PAYLOAD_TYPE
from k3kit.signing.keys import load_private
from k3kit.signing.sign import sign_envelope
from tests.conftest import KeyFiles, run_k3kit
from tests.ledgerkit import ALL, on_ledger, sign_licence

PRICE = ("--package", "kimi-k3-b300x8", "--amount", "250000", "--currency", "EUR")


def _payload(lic: Path) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(base64.b64decode(json.loads(lic.read_bytes())["payload"]))
    return obj


def _resign(lic: Path, key: KeyFiles, change: dict[str, object]) -> Path:
    body = {**_payload(lic), **change}
    out = lic.with_name("forged.json")
    out.write_bytes(
        sign_envelope(dumps(body), LICENCE_PAYLOAD_TYPE, load_private(key.private, None))
    )
    return out


def test_sign_and_verify(tmp_path: Path, signing_key: KeyFiles) -> None:
    lic, terms = sign_licence(tmp_path, signing_key)
    done = run_k3kit(
        "licence", "verify", lic, "--terms", terms, "--trust", signing_key.public, "--json"
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["entity"] == "Acme GmbH" and out["affirmations"] == list(ALL)
    body = _payload(lic)
    assert body["terms"]["sha256"] == out["terms_sha256"]
    assert json.loads(lic.read_bytes())["payloadType"] == LICENCE_PAYLOAD_TYPE


def test_missing_affirmation_refused_at_signing(tmp_path: Path, signing_key: KeyFiles) -> None:
    terms = tmp_path / "TERMS.md"
    terms.write_text("terms\n")
    done = run_k3kit(
        "licence",
        "sign",
        terms,
        "--entity",
        "Acme",
        "--signer",
        "J",
        "--authority",
        "CTO",
        *PRICE,
        "--affirm",
        "redistribution",
        "--affirm",
        "resale",
        "--affirm",
        "scope",
        "--key",
        signing_key.private,
        "-o",
        tmp_path / "lic.json",
        "--json",
    )
    assert done.returncode == 3
    assert json.loads(done.stdout)["error"]["code"] == "LICENCE_AFFIRMATION_NOT_GIVEN"
    assert "traceability" in done.stderr and "[ ] traceability" in done.stderr
    assert not (tmp_path / "lic.json").exists()
    bogus = run_k3kit(
        "licence",
        "sign",
        terms,
        "--entity",
        "A",
        "--signer",
        "J",
        "--authority",
        "C",
        *PRICE,
        "--affirm",
        "all",
        "--key",
        signing_key.private,
        "-o",
        tmp_path / "lic.json",
        "--json",
    )
    assert bogus.returncode == 3 and "LICENCE_AFFIRMATION_UNKNOWN" in bogus.stdout


def test_signed_licence_missing_an_affirmation_refused(
    tmp_path: Path, signing_key: KeyFiles
) -> None:
    """A licence whose signer left one affirmation out, validly signed: verify and the ledger
    both refuse it."""
    lic, terms = sign_licence(tmp_path, signing_key)
    affs = [a for a in _payload(lic)["affirmations"] if a["id"] != "resale"]
    forged = _resign(lic, signing_key, {"affirmations": affs})
    done = run_k3kit("licence", "verify", forged, "--terms", terms, "--json")
    assert done.returncode == 1 and "LICENCE_AFFIRMATION_MISSING" in done.stdout
    db = str(tmp_path / "l.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    bought = run_k3kit(
        "ledger",
        "purchase",
        "--db",
        db,
        "--licence",
        forged,
        "--terms",
        terms,
        "--payment",
        "P1",
        "--amount",
        "5",
        "--currency",
        "EUR",
        "--package",
        "kimi-k3-b300x8",
        "--json",
    )
    assert bought.returncode == 1 and "LICENCE_AFFIRMATION_MISSING" in bought.stdout
    assert '"entitlements": 0' in run_k3kit("ledger", "verify", "--db", db, "--json").stdout


def test_affirmation_text_changed_refused(tmp_path: Path, signing_key: KeyFiles) -> None:
    lic, terms = sign_licence(tmp_path, signing_key)
    affs = [
        {**a, "text": "we may resell"} if a["id"] == "resale" else a
        for a in _payload(lic)["affirmations"]
    ]
    done = run_k3kit(
        "licence",
        "verify",
        _resign(lic, signing_key, {"affirmations": affs}),
        "--terms",
        terms,
        "--json",
    )
    assert done.returncode == 1 and "LICENCE_AFFIRMATION_TEXT" in done.stdout


def test_other_terms_text_refused(tmp_path: Path, signing_key: KeyFiles) -> None:
    lic, terms = sign_licence(tmp_path, signing_key)
    other = tmp_path / "OTHER.md"
    other.write_bytes(terms.read_bytes() + b"\nResale permitted.\n")
    done = run_k3kit("licence", "verify", lic, "--terms", other, "--json")
    assert done.returncode == 1 and "LICENCE_TERMS_MISMATCH" in done.stdout


def test_signer_key_swapped_or_untrusted(
    tmp_path: Path, signing_key: KeyFiles, other_key: KeyFiles
) -> None:
    lic, terms = sign_licence(tmp_path, signing_key)
    # re-signed by another key without changing the named key: no signature verifies
    env = json.loads(lic.read_bytes())
    forged = tmp_path / "swapped.json"
    forged.write_bytes(
        sign_envelope(
            base64.b64decode(env["payload"]),
            LICENCE_PAYLOAD_TYPE,
            load_private(other_key.private, None),
        )
    )
    done = run_k3kit("licence", "verify", forged, "--terms", terms, "--json")
    assert done.returncode == 1 and "LICENCE_UNTRUSTED_KEY" in done.stdout
    done = run_k3kit(
        "licence", "verify", lic, "--terms", terms, "--trust", other_key.public, "--json"
    )
    assert done.returncode == 1 and "LICENCE_UNTRUSTED_KEY" in done.stdout


def _purchase(db: str, lic: Path, terms: Path, **change: Any) -> Any:
    """In process (the CLI path is covered once below): the ledger's own purchase call."""
    from k3kit.commerce.ledger import purchase

    args: dict[str, Any] = {
        "payment_ref": "P1",
        "amount_minor": 250000,
        "currency": "EUR",
        "package": "kimi-k3-b300x8",
        "valid_from": "2026-01-01T00:00:00Z",
        "valid_until": "2027-01-01T00:00:00Z",
        **change,
    }
    return on_ledger(
        db,
        purchase,
        licence=lic.read_bytes(),
        terms=terms.read_bytes(),
        terms_name="TERMS.md",
        now="2026-01-01T00:00:00Z",
        **args,
    )


def test_licence_names_its_package_and_price(tmp_path: Path, signing_key: KeyFiles) -> None:
    lic, _ = sign_licence(tmp_path, signing_key, package="kimi-k3-b300x8")
    body = _payload(lic)
    assert body["schema"] == "k3kit.licence/v2" and body["package"] == "kimi-k3-b300x8"
    assert body["price"] == {"amount_minor": 250000, "currency": "EUR", "term_days": 365}


def test_purchase_outside_the_signed_package_or_price_refused(
    tmp_path: Path, signing_key: KeyFiles
) -> None:
    """The seller records a licence signed for one package at one price against another package,
    a smaller payment, another currency or a longer term: each refused, nothing written."""
    lic, terms = sign_licence(tmp_path, signing_key)
    db = str(tmp_path / "l.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    done = run_k3kit(
        "ledger",
        "purchase",
        "--db",
        db,
        "--licence",
        lic,
        "--terms",
        terms,
        "--payment",
        "P1",
        "--amount",
        "250000",
        "--currency",
        "EUR",
        "--package",
        "kimi-k3-b300x8-pro",
        "--valid-from",
        "2026-01-01T00:00:00Z",
        "--json",
    )
    assert done.returncode == 1 and json.loads(done.stdout)["error"]["code"] == (
        "LICENCE_OTHER_PACKAGE"
    )
    for change in (
        {"amount_minor": 1},
        {"currency": "USD"},
        {"valid_until": "2036-01-01T00:00:00Z"},
    ):
        with pytest.raises(VerificationError) as caught:
            _purchase(db, lic, terms, **change)
        assert caught.value.code == "LICENCE_OTHER_PRICE", change
    assert '"entitlements": 0' in run_k3kit("ledger", "verify", "--db", db, "--json").stdout
    assert _purchase(db, lic, terms).package == "kimi-k3-b300x8"  # the signed terms pass


def test_version_1_licence_refused(tmp_path: Path, signing_key: KeyFiles) -> None:
    """A licence in the old format (no package, no price) is not accepted as a v2 one."""
    lic, terms = sign_licence(tmp_path, signing_key)
    old = {k: v for k, v in _payload(lic).items() if k not in ("package", "price")}
    out = lic.with_name("v1.json")
    key = load_private(signing_key.private, None)
    out.write_bytes(
        sign_envelope(dumps({**old, "schema": "k3kit.licence/v1"}), LICENCE_PAYLOAD_TYPE, key)
    )
    done = run_k3kit("licence", "verify", out, "--terms", terms, "--json")
    assert done.returncode == 1 and "LICENCE_MALFORMED" in done.stdout


@pytest.mark.parametrize(
    ("field", "value"),
    [("amount_minor", True), ("amount_minor", "100"), ("term_days", True), ("term_days", "365")],
    ids=["amount-true", "amount-text", "term-true", "term-text"],
)
def test_a_price_of_another_json_type_is_refused(
    tmp_path: Path, signing_key: KeyFiles, field: str, value: object
) -> None:
    """Second outside pass: a signed ``true`` read as an amount of 1 (and shown "at 1 EUR"), and
    ``"100"`` as 100; the signed JSON type is part of what was signed. (``100.0`` is not a case:
    the canonical JSON the payload must be writes it ``100``.)"""
    lic, terms = sign_licence(tmp_path, signing_key)
    price = {**_payload(lic)["price"], field: value}
    forged = _resign(lic, signing_key, {"price": price})
    done = run_k3kit("licence", "verify", forged, "--terms", terms, "--json")
    assert done.returncode == 1 and "LICENCE_MALFORMED" in done.stdout, done.stdout
