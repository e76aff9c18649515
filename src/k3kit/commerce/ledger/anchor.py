"""Signed heads: what anchors the hash chain to something the database's writer cannot redo.

Why the chain alone is not enough: ``row_hash`` is computed from the rows with no secret, so
whoever can write the database (drop the triggers, change a row, recompute every hash after it)
produces a chain that is consistent again. What they cannot produce is the seller's signature
over a head they changed. So the seller signs heads (``ledger checkpoint``), every buyer receipt
carries the head its own entry extends, and ``ledger verify`` checks that the chain still passes
through every signed head it is given or finds. Signed heads kept only in the database would
prove nothing (the writer deletes them), which is why a checkpoint is a file the seller keeps
elsewhere and a buyer receipt is a file the buyer keeps: both can be handed back to ``verify``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from k3kit._canonical import dumps, require_canonical, strict_loads
from k3kit.commerce.buyer_receipt import read_buyer_receipt
from k3kit.errors import InputError, VerificationError
from k3kit.models import load
from k3kit.models.commerce import (
    BUYER_RECEIPT_PAYLOAD_TYPE,
    LEDGER_CHECKPOINT_PAYLOAD_TYPE,
    LedgerCheckpointBody,
    LedgerHead,
)
from k3kit.signing.keys import PublicKey
from k3kit.signing.sign import MAX_ENVELOPE_BYTES, sign_envelope, verify_envelope
from k3kit.signing.signers import Signer

KIND = "LEDGER_CHECKPOINT"
BAD = f"{KIND}_MALFORMED"
CODE = "LEDGER_ANCHOR_BROKEN"


@dataclass(frozen=True)
class Anchor:
    """A head signed by a trusted key, and where it came from (for the report)."""

    seq: int
    head: str
    source: str
    signed_at: str


def sign_checkpoint(seq: int, head: str, signer: Signer, now: str) -> bytes:
    """The DSSE envelope over ``k3kit.ledger-checkpoint/v1`` for entry ``seq`` = ``head``."""
    obj = {"schema": "k3kit.ledger-checkpoint/v1", "ledger": {"seq": seq, "head": head}}
    body = load(
        LedgerCheckpointBody,
        {**obj, "signed_at": now},
        source="checkpoint",
        error=InputError,
        code="BAD_INPUT",
    )
    return sign_envelope(
        dumps(body.model_dump(by_alias=True)), LEDGER_CHECKPOINT_PAYLOAD_TYPE, signer
    )


def _payload_type(data: bytes, source: str) -> object:
    """The envelope's claimed payloadType, only to choose the reader; the reader verifies it."""
    env = strict_loads(data, source=source, max_bytes=MAX_ENVELOPE_BYTES, code=BAD)
    return env.get("payloadType") if isinstance(env, dict) else None


def read_anchor(data: bytes, trusted: list[PublicKey], *, source: str) -> Anchor:
    """A signed head from a checkpoint file or a buyer receipt, verified with ``trusted``.

    Raises :class:`VerificationError`: a head nobody trusted signed is not an anchor, and a file
    the operator named as one must not be skipped quietly.
    """
    if _payload_type(data, source) == BUYER_RECEIPT_PAYLOAD_TYPE:
        receipt = read_buyer_receipt(data, trusted, source=source)
        return _anchor(receipt.ledger, source, receipt.issued_at)
    verified = verify_envelope(
        data, trusted, expected_type=LEDGER_CHECKPOINT_PAYLOAD_TYPE, source=source, kind=KIND
    )
    obj = strict_loads(verified.payload, source=source, max_bytes=len(verified.payload), code=BAD)
    require_canonical(verified.payload, obj, source=f"{source} payload")
    body = load(LedgerCheckpointBody, obj, source=source, error=VerificationError, code=BAD)
    return _anchor(body.ledger, source, body.signed_at)


def _anchor(head: LedgerHead, source: str, signed_at: str) -> Anchor:
    return Anchor(head.seq, head.head, source, signed_at)


def anchor_problem(anchor: Anchor, row_hashes: Mapping[int, str]) -> str | None:
    """Why the chain (``row_hashes``: each entry's stored ``row_hash`` by ``seq``) does not
    extend ``anchor``, or ``None`` when it does. The stored hashes are compared, not recomputed:
    the chain walk already proved each one follows from the rows before it."""
    said = f"the head signed {anchor.signed_at} ({anchor.source}) is seq {anchor.seq}"
    stored = row_hashes.get(anchor.seq)
    if stored is None:
        return (
            f"{said}, but the chain ends at seq {max(row_hashes, default=0)}: "
            "entries the seller signed were removed"
        )
    if stored != anchor.head:
        return (
            f"{said} = {anchor.head}; the chain there is {stored}: "
            f"the chain does not extend the signed head (an entry at or before seq "
            f"{anchor.seq} was rewritten)"
        )
    return None
