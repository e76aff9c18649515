"""The buyer's entitlement term: which releases ``update`` may install.

The term comes from two signed documents the buyer already holds: the buyer receipt (signed by
the seller, naming the kit and when it was issued) and the licence it was issued under (signed
by the buyer's signatory, naming the price and the term one payment buys, ``term_days``). The
term ends ``term_days`` after the receipt's ``issued_at``; a release whose ``released_at`` (the
kit receipt's ``issued_at``, in the signed targets metadata) is later is out of term.

Why both documents: the receipt alone does not say how long the term is, the licence alone
does not say when it started. Without either, ``update`` installs the newest release and says
that the term was not checked (docs/distribution.md): the channel's own access control (who may
read the server) is then the only limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from k3kit._fs import read_capped
from k3kit._values import add_days, format_timestamp, parse_timestamp
from k3kit.commerce.buyer_receipt import read_buyer_receipt
from k3kit.commerce.licence import verify_licence
from k3kit.errors import UsageProblem, VerificationError
from k3kit.signing.keys import PublicKey
from k3kit.signing.sign import MAX_ENVELOPE_BYTES


@dataclass(frozen=True)
class Term:
    """An entitlement: the package it covers and the last instant a release may carry."""

    package: str
    ends_at: datetime
    licensee: str

    def covers(self, released_at: datetime) -> bool:
        return released_at <= self.ends_at

    def as_json(self) -> dict[str, str]:
        return {
            "package": self.package,
            "ends_at": format_timestamp(self.ends_at),
            "licensee": self.licensee,
        }


def term_for(buyer_receipt: Path | None, licence: Path | None, trusted: object) -> Term | None:
    """The term ``update`` holds releases to, or None when neither document is given.

    Why here and not in the CLI: the API's ``update_from_channel`` and ``k3kit update`` must
    refuse the same halves of an entitlement (one document without the other says nothing about
    the term) and the same trust (a buyer receipt is signed by keys, a root does not name them).
    """
    if (buyer_receipt is None) != (licence is None):
        raise UsageProblem(
            "--buyer-receipt and --licence go together: the receipt says when the term began, "
            "the licence how long it is"
        )
    if buyer_receipt is None or licence is None:
        return None
    if not isinstance(trusted, list):
        raise VerificationError(
            "a buyer receipt is checked against --trust keys, not --root",
            code="BUYER_RECEIPT_NEEDS_TRUST",
        )
    return read_term(buyer_receipt, licence, trusted)


def read_term(buyer_receipt: Path, licence: Path, trusted: list[PublicKey]) -> Term:
    """The term the two documents sign; each must verify, and the receipt must have been issued
    under this licence (``BUYER_RECEIPT_WRONG_LICENCE`` otherwise)."""
    receipt_bytes = read_capped(
        buyer_receipt,
        MAX_ENVELOPE_BYTES,
        what="buyer receipt",
        error=VerificationError,
        code="BUYER_RECEIPT_MISSING",
    )
    licence_bytes = read_capped(
        licence, MAX_ENVELOPE_BYTES, what="licence", error=VerificationError, code="LICENCE_MISSING"
    )
    body = read_buyer_receipt(receipt_bytes, trusted, source=buyer_receipt.name)
    lic = verify_licence(licence_bytes, source=licence.name)
    if lic.licence_sha256 != body.licence_sha256 or lic.body.entity != body.licensee:
        raise VerificationError(
            f"{buyer_receipt.name} was issued under licence {body.licence_sha256}, not "
            f"{lic.licence_sha256}",
            code="BUYER_RECEIPT_WRONG_LICENCE",
        )
    return Term(
        package=body.kit.name,
        ends_at=_term_end(body.issued_at, lic.body.price.term_days),
        licensee=body.licensee,
    )


def _term_end(issued_at: str, days: int) -> datetime:
    """``days`` after ``issued_at`` by k3kit's one date arithmetic (:func:`add_days`); a term
    that ends past year 9999 covers every release a timestamp can name, so it ends at the last
    instant one can (a signed receipt dated 9999 is the seller's to sign, not a crash)."""
    parse_timestamp(issued_at)  # a malformed date is refused here, never read as "no end"
    try:
        return parse_timestamp(add_days(issued_at, days))
    except ValueError:
        return datetime.max.replace(microsecond=0, tzinfo=UTC)
