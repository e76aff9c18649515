"""``k3kit ledger checkpoint``: the seller signs the ledger's head, after verifying the chain.

Why verify first: a signed head vouches for every entry at or before it, so signing the head of a
chain that was already rewritten would bless the rewrite. The chain is checked against the
previous checkpoints handed in (and the heads in trusted buyer receipts), and only an intact
ledger gets a new signed head. The head signed is the one read in that same verification, so a
purchase appended meanwhile is simply not covered yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Engine

from k3kit.commerce.ledger.anchor import Anchor, sign_checkpoint
from k3kit.commerce.ledger.audit import LedgerReport, verify_ledger
from k3kit.errors import InputError, VerificationError
from k3kit.signing.keys import PublicKey, keyid
from k3kit.signing.signers import Signer


@dataclass(frozen=True)
class Checkpoint:
    envelope: bytes
    seq: int
    head: str
    report: LedgerReport


def checkpoint(
    engine: Engine,
    signer: Signer,
    *,
    now: str,
    trusted: Sequence[PublicKey] = (),
    anchors: Sequence[Anchor] = (),
) -> Checkpoint:
    """Verify the ledger (buyer receipts issued by the signer or ``trusted``) and sign its head."""
    own = signer.public_key()
    keys = [own, *(k for k in trusted if keyid(k) != keyid(own))]
    report = verify_ledger(engine, keys, anchors)
    first = report.first
    if first is not None:
        raise VerificationError(
            f"the ledger does not verify ({first.code} at seq {first.seq}: {first.detail}); "
            "nothing was signed",
            code="LEDGER_NOT_INTACT",
            hint="find out what changed (k3kit ledger verify) before signing a new head",
        )
    seq, head = report.head
    if seq == 0:
        raise InputError("the ledger is empty: there is no head to sign", code="BAD_INPUT")
    return Checkpoint(sign_checkpoint(seq, head, signer, now), seq, head, report)
