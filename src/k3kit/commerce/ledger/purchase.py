"""A purchase: terms, licence signature, payment and entitlement in ONE database transaction.

Why one transaction and deferred keys both ways: an entitlement must never exist without the
payment that bought it and the licence signature that binds the buyer, and a payment must never
exist without its entitlement. The application inserts all of them in one transaction; the
database enforces it (``payments`` and ``entitlements`` reference each other with keys checked at
COMMIT), so a process killed between the two inserts leaves neither, and a hand-written INSERT of
one without the other is refused at commit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine

from k3kit._values import add_days, canonical_timestamp, parse_timestamp
from k3kit.commerce.ledger import chain
from k3kit.commerce.ledger.db import require_current, transaction
from k3kit.commerce.licence import VerifiedLicence, require_bound, sha256_tag, verify_licence
from k3kit.errors import InputError

_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")
# The largest amount recorded, in minor units: 10^15 (ten trillion in a 2-decimal currency) keeps
# every amount, and sums of many, far inside the BIGINT column (2^63 - 1).
MAX_AMOUNT_MINOR = 10**15


@dataclass(frozen=True)
class Purchase:
    entitlement_id: str
    payment_ref: str
    licence_sha256: str
    licensee: str
    package: str
    valid_from: str
    valid_until: str
    seq: int


def term_end(valid_from: str, days: int) -> str:
    """The end of a term of ``days`` from ``valid_from`` (both canonical RFC 3339 UTC); a
    ``ValueError`` for a start the one timestamp parser refuses or an end past year 9999."""
    return add_days(canonical_timestamp(valid_from), days)


def _check_values(amount_minor: int, valid_from: str, valid_until: str) -> None:
    """Range-check what a caller typed before anything is verified or written."""
    if not 0 < amount_minor <= MAX_AMOUNT_MINOR:
        raise InputError(
            f"amount {amount_minor} is outside 1..{MAX_AMOUNT_MINOR} minor units", code="BAD_INPUT"
        )
    try:
        start = parse_timestamp(canonical_timestamp(valid_from))
        end = parse_timestamp(canonical_timestamp(valid_until))
    except ValueError as exc:
        raise InputError(f"entitlement term: {exc}", code="BAD_INPUT") from None
    if end <= start:
        raise InputError("the entitlement term ends before it starts", code="BAD_INPUT")


def term_days_of(valid_from: str, valid_until: str) -> int | float:
    """The length of a term in days (a whole number when it is one), to compare with a price."""
    try:
        span = parse_timestamp(valid_until) - parse_timestamp(valid_from)
    except ValueError as exc:
        raise InputError(f"term {valid_from}..{valid_until}: {exc}", code="BAD_INPUT") from exc
    days = span / timedelta(days=1)
    return int(days) if days.is_integer() else days


def _licence_row(lic: VerifiedLicence, envelope: bytes) -> dict[str, object]:
    b = lic.body
    return {
        "sha256": lic.licence_sha256,
        "terms_sha256": b.terms.sha256,
        "entity": b.entity,
        "signer_name": b.signer.name,
        "authority": b.signer.authority,
        "signer_keyid": lic.signer_keyid,
        "signed_at": b.signed_at,
        # 1 only for an affirmation the verified licence carries; the table's CHECKs refuse 0
        **{f"aff_{a.id}": 1 for a in b.affirmations},
        "envelope": envelope.decode("utf-8"),  # strict_loads accepted it as UTF-8
    }


def purchase(
    engine: Engine,
    *,
    licence: bytes,
    terms: bytes,
    terms_name: str,
    payment_ref: str,
    amount_minor: int,
    currency: str,
    package: str,
    valid_from: str,
    valid_until: str,
    now: str,
    after_payment: Callable[[], None] | None = None,
) -> Purchase:
    """Record a purchase; the licence is verified (with this terms text) and must be for this
    package, amount, currency and term length before anything is written. ``after_payment``
    runs between the payment and the entitlement inserts (tests kill the process there to show
    that nothing half-written survives)."""
    _check_values(amount_minor, valid_from, valid_until)
    for what, value in (("payment reference", payment_ref), ("package", package)):
        if not _REF.fullmatch(value):
            raise InputError(f"{what} {value!r} is not a plain identifier", code="BAD_INPUT")
    if not re.fullmatch(r"[A-Z]{3}", currency):
        raise InputError(f"currency {currency!r} is not an ISO 4217 code", code="BAD_INPUT")
    lic = verify_licence(licence, source="licence", terms=terms)
    require_bound(
        lic.body,
        package=package,
        amount_minor=amount_minor,
        currency=currency,
        term_days=term_days_of(valid_from, valid_until),
    )
    try:
        text = terms.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("the terms text is not UTF-8", code="BAD_INPUT") from exc
    entitlement_id = "ent-" + sha256_tag(f"{payment_ref}\n{lic.licence_sha256}".encode())[7:31]
    with transaction(engine) as conn:
        require_current(conn)
        if chain.exists(conn, "payments", payment_ref):
            raise InputError(f"payment {payment_ref!r} is already recorded", code="PAYMENT_EXISTS")
        if not chain.exists(conn, "terms", lic.body.terms.sha256):
            chain.append(
                conn, "terms", {"sha256": lic.body.terms.sha256, "name": terms_name, "text": text}
            )
        if not chain.exists(conn, "licences", lic.licence_sha256):
            chain.append(conn, "licences", _licence_row(lic, licence))
        chain.append(
            conn,
            "payments",
            {
                "ref": payment_ref,
                "licence_sha256": lic.licence_sha256,
                "amount_minor": amount_minor,
                "currency": currency,
                "paid_at": now,
                "entitlement_id": entitlement_id,
            },
        )
        if after_payment is not None:
            after_payment()
        seq = chain.append(
            conn,
            "entitlements",
            {
                "id": entitlement_id,
                "payment_ref": payment_ref,
                "licence_sha256": lic.licence_sha256,
                "package": package,
                "valid_from": valid_from,
                "valid_until": valid_until,
            },
        )
    return Purchase(
        entitlement_id,
        payment_ref,
        lic.licence_sha256,
        lic.body.entity,
        package,
        valid_from,
        valid_until,
        seq,
    )
