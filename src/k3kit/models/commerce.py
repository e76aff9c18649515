"""Documents of the enterprise tier: the signed licence and the signed buyer receipt.

Why two models and not fields on the receipt: the public receipt says what was measured and is
shown to anyone; the licence is the buyer's agreement and the buyer receipt carries what the
public receipt leaves out (the runtime build record and the measured serve command). Each is its
own DSSE ``payloadType`` so that no signed document can be replayed as another one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from k3kit.models._base import Sha256Hex, Timestamp

LICENCE_PAYLOAD_TYPE = "application/vnd.k3kit.licence+json"
BUYER_RECEIPT_PAYLOAD_TYPE = "application/vnd.k3kit.buyer-receipt+json"
LEDGER_CHECKPOINT_PAYLOAD_TYPE = "application/vnd.k3kit.ledger-checkpoint+json"

# The four affirmations of the enterprise licence; each is signed separately and none has a
# default. Their wording is part of the signed payload, so a changed text is a different licence.
AFFIRMATIONS: dict[str, str] = {
    "redistribution": (
        "The licensed entity will not redistribute the deploy kit, its configuration or the "
        "buyer receipt to any third party."
    ),
    "resale": "The licensed entity will not resell or sublicense the deploy kit or its contents.",
    "traceability": (
        "The licensed entity accepts that every buyer receipt names it and is recorded in the "
        "vendor's append-only ledger, so a leaked copy can be traced to this licence."
    ),
    "scope": (
        "The licensed entity will use the deploy kit only within the scope of use stated in the "
        "terms text whose sha256 this licence signs."
    ),
}

Text = Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[^\x00-\x1f\x7f]+$")]
Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


class _Doc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, defer_build=True)


class Affirmation(_Doc):
    id: Literal["redistribution", "resale", "traceability", "scope"]
    text: str = Field(min_length=1, max_length=2048)


class PublicKeyRef(_Doc):
    """The signer's Ed25519 public key, carried in the payload it signs (self-certifying)."""

    keytype: Literal["ed25519"] = "ed25519"
    public: Sha256Hex  # 32 raw bytes as 64 hex digits


class LicenceSigner(_Doc):
    name: Text
    authority: Text  # why this person may bind the entity ("CTO, board resolution 2026-04")
    key: PublicKeyRef


class LicenceTerms(_Doc):
    name: Text
    sha256: Digest


class LicencePrice(_Doc):
    """What the licence is bought for: the amount of each payment and the term it buys."""

    # Strict: a signed ``true``, ``"100"`` or ``100.0`` is not an amount (pydantic's lax mode
    # would read each as an int, and ``true`` would be shown as a price of 1).
    amount_minor: int = Field(ge=1, le=10**15, strict=True)  # minor units (cents)
    currency: str = Field(pattern=r"^[A-Z]{3}$", strict=True)  # ISO 4217
    term_days: int = Field(ge=1, le=3660, strict=True)  # one entitlement's length per payment


class LicenceBody(_Doc):
    """What a buyer signs: the terms' hash, who binds whom, for which package at which price,
    each affirmation, and when. v2 added ``package`` and ``price`` (docs/licence.md)."""

    schema_: Literal["k3kit.licence/v2"] = Field("k3kit.licence/v2", alias="schema")
    terms: LicenceTerms
    entity: Text
    package: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")
    price: LicencePrice
    signer: LicenceSigner
    affirmations: list[Affirmation] = Field(min_length=1, max_length=16)
    signed_at: Timestamp


class LedgerHead(_Doc):
    """One point of the ledger's hash chain: entry ``seq`` and its ``row_hash``.

    Signed by the seller (in a checkpoint, or inside a buyer receipt), it anchors the chain: a
    chain whose entry ``seq`` no longer hashes to ``head`` was rewritten at or before ``seq``.
    """

    seq: int = Field(ge=1, le=2**63 - 1, strict=True)
    head: Digest


class LedgerCheckpointBody(_Doc):
    """A signed head of the ledger, kept by the seller outside the database (docs/ledger.md)."""

    schema_: Literal["k3kit.ledger-checkpoint/v1"] = Field(
        "k3kit.ledger-checkpoint/v1", alias="schema"
    )
    ledger: LedgerHead
    signed_at: Timestamp


class BuyerKit(_Doc):
    name: Text
    version: Text
    sequence: int = Field(ge=0, strict=True)
    kit_sha256: Digest
    weights_sha256: Digest
    released_at: Timestamp  # the public receipt's issued_at: when this version was released


class BuyerReceiptBody(_Doc):
    """What the public receipt leaves out, bound to one licence, one entitlement and one kit."""

    schema_: Literal["k3kit.buyer-receipt/v2"] = Field("k3kit.buyer-receipt/v2", alias="schema")
    licensee: Text
    licence_sha256: Digest
    entitlement: Text
    kit: BuyerKit
    build_record: dict[str, Any]
    build_record_sha256: Digest
    serve_command: list[Annotated[str, Field(max_length=4096)]] = Field(
        min_length=1, max_length=512
    )
    issued_at: Timestamp
    ledger: LedgerHead  # the signed head this receipt's own ledger entry extends
