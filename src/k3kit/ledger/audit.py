"""``k3kit ledger verify``: the chain, every row's body, every signature, every pairing.

Why re-verify what the database already enforces: the triggers and constraints stop a client that
plays by the rules; an administrator can drop a trigger, and anyone with the SQLite file can edit
its bytes. This check trusts nothing stored: it recomputes every hash from the rows as they are,
verifies every licence and buyer receipt signature from the stored envelopes, and names the
first row (lowest ``seq``) where the ledger stops holding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import Engine, text

from k3kit.buyer_receipt import read_buyer_receipt
from k3kit.errors import VerificationError
from k3kit.keys import keyid, public_from_hex
from k3kit.ledger import chain
from k3kit.ledger.db import reading, require_current
from k3kit.licence import sha256_tag, verify_licence


@dataclass(frozen=True)
class Break:
    seq: int | None
    table: str
    ref: str
    code: str
    detail: str


@dataclass
class LedgerReport:
    rows: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    breaks: list[Break] = field(default_factory=list)
    orphans: dict[str, int] = field(default_factory=dict)
    issuers_checked: bool = False

    @property
    def ok(self) -> bool:
        return not self.breaks

    @property
    def first(self) -> Break | None:
        keyed = [b for b in self.breaks if b.seq is not None]
        if keyed:
            return min(keyed, key=lambda b: b.seq or 0)
        return self.breaks[0] if self.breaks else None


def _rows(conn: Any, table: str) -> list[dict[str, Any]]:
    cols = (*chain.COLUMNS[table], "seq")
    sql = f"SELECT {', '.join(cols)} FROM {table}"  # noqa: S608 - fixed names
    return [dict(r._mapping) for r in conn.execute(text(sql))]


def _check_chain(entries: list[Any], report: LedgerReport) -> None:
    prev = chain.GENESIS
    for expected, (seq, kind, ref, body, prev_hash, row_hash) in enumerate(entries, start=1):

        def bad(code: str, detail: str, s: int = seq, k: str = kind, r: str = ref) -> None:
            report.breaks.append(Break(s, k, r, code, detail))

        if seq != expected:
            bad("LEDGER_CHAIN_GAP", f"entry {expected} is missing (next is {seq})")
            return
        if prev_hash != prev:
            bad("LEDGER_CHAIN_BROKEN", "prev_hash is not the previous entry's hash")
            return
        if chain.entry_hash(seq, kind, ref, body, prev_hash) != row_hash:
            bad("LEDGER_CHAIN_BROKEN", "the entry's hash does not match its contents")
            return
        prev = row_hash


def _check_row(table: str, row: dict[str, Any], trusted: list[Ed25519PublicKey] | None) -> None:
    """Signatures and the columns copied out of them; raises VerificationError."""
    if table == "licences":
        terms = row.pop("_terms", None)
        if terms is None:
            raise VerificationError(
                "the licence's terms text is not in the ledger", code="LEDGER_ROW"
            )
        lic = verify_licence(
            row["envelope"].encode(), source=f"licence {row['sha256']}", terms=terms
        )
        b = lic.body
        copied = (
            lic.licence_sha256,
            b.terms.sha256,
            b.entity,
            b.signer.name,
            b.signer.authority,
            lic.signer_keyid,
            b.signed_at,
        )
        stored = tuple(row[c] for c in chain.COLUMNS["licences"][:7])
        if copied != stored:
            raise VerificationError("columns differ from the signed licence", code="LEDGER_ROW")
    elif table == "buyer_receipts":
        key = public_from_hex(row["issuer_key"], source="issuer_key")
        if trusted is not None and keyid(key) not in {keyid(k) for k in trusted}:
            raise VerificationError("issued by an untrusted key", code="LEDGER_UNTRUSTED_ISSUER")
        envelope = row["envelope"].encode()
        body = read_buyer_receipt(envelope, [key], source=f"buyer receipt {row['sha256']}")
        copied = (
            sha256_tag(envelope),
            body.entitlement,
            body.kit.name,
            body.kit.version,
            body.kit.kit_sha256,
            body.kit.released_at,
            body.issued_at,
        )
        if copied != tuple(row[c] for c in chain.COLUMNS["buyer_receipts"][:7]):
            raise VerificationError("columns differ from the signed receipt", code="LEDGER_ROW")
    elif table == "terms" and sha256_tag(row["text"].encode()) != row["sha256"]:
        raise VerificationError("the terms text does not hash to its key", code="LEDGER_ROW")


_ORPHANS = {
    "entitlements_without_payment": "SELECT count(*) FROM entitlements e WHERE NOT EXISTS "
    "(SELECT 1 FROM payments p WHERE p.ref = e.payment_ref AND p.entitlement_id = e.id "
    "AND p.licence_sha256 = e.licence_sha256)",
    "entitlements_without_licence": "SELECT count(*) FROM entitlements e WHERE NOT EXISTS "
    "(SELECT 1 FROM licences l WHERE l.sha256 = e.licence_sha256)",
    "payments_without_entitlement": "SELECT count(*) FROM payments p WHERE NOT EXISTS "
    "(SELECT 1 FROM entitlements e WHERE e.id = p.entitlement_id AND e.payment_ref = p.ref)",
    "receipts_outside_term": "SELECT count(*) FROM buyer_receipts r WHERE NOT EXISTS "
    "(SELECT 1 FROM entitlements e WHERE e.id = r.entitlement_id AND e.package = r.kit_name "
    "AND r.released_at >= e.valid_from AND r.released_at < e.valid_until)",
}


def verify_ledger(engine: Engine, trusted: list[Ed25519PublicKey] | None = None) -> LedgerReport:
    """Check everything; never raises for what it finds (that is the report), only for a
    database that cannot be read or is not a k3kit ledger."""
    report = LedgerReport(issuers_checked=trusted is not None)
    with reading(engine) as conn:
        require_current(conn)
        entries = [
            tuple(r)
            for r in conn.execute(
                text(
                    "SELECT seq, kind, ref, body_sha256, prev_hash, row_hash"
                    " FROM entries ORDER BY seq"
                )
            )
        ]
        report.rows = len(entries)
        _check_chain(entries, report)
        by_seq = {e[0]: e for e in entries}
        terms = {r["sha256"]: r["text"].encode() for r in _rows(conn, "terms")}
        seen: set[int] = set()
        for table in chain.COLUMNS:
            rows = _rows(conn, table)
            report.counts[table] = len(rows)
            for row in rows:
                seq, ref = row.pop("seq"), str(row[chain.KEY[table]])
                seen.add(seq)
                entry = by_seq.get(seq)
                if entry is None or entry[1] != table or entry[2] != ref:
                    report.breaks.append(
                        Break(
                            seq,
                            table,
                            ref,
                            "LEDGER_ROW_UNCHAINED",
                            "no chain entry announces this row",
                        )
                    )
                    continue
                if chain.body_hash(table, row) != entry[3]:
                    report.breaks.append(
                        Break(
                            seq,
                            table,
                            ref,
                            "LEDGER_ROW_CHANGED",
                            "the row differs from what the chain recorded",
                        )
                    )
                    continue
                if table == "licences":
                    row["_terms"] = terms.get(row["terms_sha256"])
                try:
                    _check_row(table, row, trusted)
                except (VerificationError, ValueError) as exc:
                    code = getattr(exc, "code", "LEDGER_ROW")
                    report.breaks.append(Break(seq, table, ref, code, str(exc)))
        for seq, kind, ref, *_ in entries:
            if seq not in seen:
                report.breaks.append(
                    Break(
                        seq,
                        kind,
                        ref,
                        "LEDGER_ROW_MISSING",
                        "the chain announces a row that is not there",
                    )
                )
        for name, sql in _ORPHANS.items():
            report.orphans[name] = int(conn.execute(text(sql)).scalar() or 0)
            if report.orphans[name]:
                report.breaks.append(
                    Break(
                        None,
                        name.split("_")[0],
                        "*",
                        "LEDGER_ORPHANS",
                        f"{report.orphans[name]} {name.replace('_', ' ')}",
                    )
                )
    return report
