"""Issuing a buyer receipt: only for a kit that verifies, to an entitlement valid at its release.

Why the release time is the public receipt's ``issued_at``: it is signed by the publisher with
the kit, so the buyer can check it too. Maintenance is a term: version N+1 gets a buyer receipt
only when its release lies in ``[valid_from, valid_until)`` of the entitlement. The check is made
here (to give a clear refusal) and again by the database's insert trigger (so no other writer
can skip it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, text

from k3kit._values import parse_timestamp
from k3kit.commerce.buyer_receipt import build_body, sign_buyer_receipt
from k3kit.commerce.ledger import chain
from k3kit.commerce.ledger.db import require_current, transaction
from k3kit.commerce.ledger.purchase import term_days_of
from k3kit.commerce.licence import require_bound, sha256_tag, verify_licence
from k3kit.errors import InputError, VerificationError
from k3kit.node.verify import KitNotVerified, verify_path
from k3kit.signing.keys import PublicKey, raw_public
from k3kit.signing.signers import Signer


def _term_hint(released_at: str, valid_from: str) -> str:
    """What to do: a version released before the term began was sold with a term that starts
    at the purchase (the default); the sale of that version needs a term that starts at its
    release (docs/licence.md, "Selling a kit")."""
    if released_at < valid_from:  # both canonical RFC 3339 UTC: string order is time order
        return (
            "the term starts after this version's release: record the sale with "
            f"`ledger purchase --valid-from {released_at}` (the release time `k3kit show KIT "
            "--json` prints as released_at); a term starting at the purchase covers only "
            "versions released later"
        )
    return "this version was released after the term ended: a renewal (a new purchase) covers it"


def _in_term(released_at: str, valid_from: str, valid_until: str) -> bool:
    """``valid_from <= released_at < valid_until`` as instants; a row the one timestamp parser
    refuses (someone wrote the database by hand) is a ledger fault, not a crash."""
    try:
        start, end = parse_timestamp(valid_from), parse_timestamp(valid_until)
    except ValueError as exc:
        raise VerificationError(f"entitlement row: {exc}", code="LEDGER_ROW") from None
    return start <= parse_timestamp(released_at) < end


@dataclass(frozen=True)
class Issued:
    envelope: bytes
    sha256: str
    entitlement_id: str
    licensee: str
    kit_sha256: str
    released_at: str
    seq: int


def _tag(value: Any) -> str:
    s = str(value)
    return s if s.startswith("sha256:") else "sha256:" + s


def _refuse_second_receipt(conn: Connection, entitlement_id: str, kit_ref: dict[str, Any]) -> None:
    """One buyer receipt per entitlement and kit (the table's UNIQUE pair): a second is refused
    by name, before anything is signed, instead of the database's raw UNIQUE message."""
    issued_at = conn.execute(
        text("SELECT issued_at FROM buyer_receipts WHERE entitlement_id = :e AND kit_sha256 = :k"),
        {"e": entitlement_id, "k": kit_ref["kit_sha256"]},
    ).scalar()
    if issued_at is not None:
        raise InputError(
            f"entitlement {entitlement_id} already has a buyer receipt for {kit_ref['name']} "
            f"{kit_ref['version']}, issued {issued_at}; nothing was signed or recorded",
            code="BUYER_RECEIPT_EXISTS",
            hint="give the buyer the receipt issued then (one per entitlement and kit); a new "
            "kit version gets its own",
        )


def issue(
    engine: Engine,
    entitlement_id: str,
    *,
    kit: Path,
    trusted: list[PublicKey],
    build_record: dict[str, Any],
    serve_command: list[str],
    signer: Signer,
    now: str,
) -> Issued:
    report = verify_path(kit, trusted)
    if not report.ok:
        raise KitNotVerified(report)
    receipt = report.facts["receipt"]
    kit_ref: dict[str, Any] = {
        "name": receipt["kit"],
        "version": receipt["version"],
        "sequence": receipt["sequence"],
        "kit_sha256": _tag(report.facts["kit_sha256"]),
        "weights_sha256": _tag(report.facts["weights_lock_sha256"]),
        "released_at": receipt["issued_at"],
    }
    with transaction(engine) as conn:
        require_current(conn)
        row = conn.execute(
            text(
                "SELECT e.package, e.valid_from, e.valid_until, e.licence_sha256, l.entity, "
                "l.envelope "
                "FROM entitlements e JOIN licences l ON l.sha256 = e.licence_sha256 "
                "JOIN payments p ON p.ref = e.payment_ref WHERE e.id = :id"
            ),
            {"id": entitlement_id},
        ).first()
        if row is None:
            raise InputError(f"no entitlement {entitlement_id!r}", code="ENTITLEMENT_UNKNOWN")
        _refuse_second_receipt(conn, entitlement_id, kit_ref)
        package, valid_from, valid_until, licence_sha256, entity, envelope = row
        if package != kit_ref["name"]:
            raise VerificationError(
                f"entitlement {entitlement_id} is for package {package}, not {kit_ref['name']}",
                code="ENTITLEMENT_OTHER_PACKAGE",
            )
        # the signed licence, not only the entitlement row, must be for this package and term
        licence = verify_licence(envelope.encode(), source=f"licence {licence_sha256}")
        term = term_days_of(valid_from, valid_until)
        require_bound(licence.body, package=kit_ref["name"], term_days=term)
        if not _in_term(kit_ref["released_at"], valid_from, valid_until):
            raise VerificationError(
                f"{kit_ref['name']} {kit_ref['version']} was released {kit_ref['released_at']}, "
                f"outside entitlement {entitlement_id}'s term [{valid_from}, {valid_until})",
                code="ENTITLEMENT_NOT_VALID_AT_RELEASE",
                hint=_term_hint(kit_ref["released_at"], valid_from),
            )
        body = build_body(
            licensee=entity,
            licence_sha256=licence_sha256,
            entitlement=entitlement_id,
            kit=kit_ref,
            build_record=build_record,
            serve_command=serve_command,
            issued_at=now,
            ledger=dict(zip(("seq", "head"), chain.head(conn), strict=True)),
        )
        envelope = sign_buyer_receipt(body, signer)
        digest = sha256_tag(envelope)
        seq = chain.append(
            conn,
            "buyer_receipts",
            {
                "sha256": digest,
                "entitlement_id": entitlement_id,
                "kit_name": kit_ref["name"],
                "kit_version": kit_ref["version"],
                "kit_sha256": kit_ref["kit_sha256"],
                "released_at": kit_ref["released_at"],
                "issued_at": now,
                "issuer_key": raw_public(signer.public_key()).hex(),
                "envelope": envelope.decode("ascii"),
            },
        )
    return Issued(
        envelope, digest, entitlement_id, entity, kit_ref["kit_sha256"], kit_ref["released_at"], seq
    )
