"""``k3kit ledger verify``: the chain, every row's body, every signature, every pairing.

Why re-verify what the database already enforces: the triggers and constraints stop a client that
plays by the rules; an administrator can drop a trigger, and anyone with the SQLite file can edit
its bytes. This check trusts nothing stored: it recomputes every hash from the rows as they are,
verifies every licence and buyer receipt signature from the stored envelopes, and names the
first row (lowest ``seq``) where the ledger stops holding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, text

from k3kit.commerce.buyer_receipt import read_buyer_receipt
from k3kit.commerce.ledger import chain
from k3kit.commerce.ledger.anchor import CODE as ANCHOR_BROKEN
from k3kit.commerce.ledger.anchor import Anchor, anchor_problem
from k3kit.commerce.ledger.db import reading, require_current
from k3kit.commerce.ledger.purchase import term_days_of
from k3kit.commerce.licence import require_bound, sha256_tag, verify_licence
from k3kit.errors import K3kitError, VerificationError
from k3kit.models.commerce import LicenceBody
from k3kit.signing.keys import PublicKey, keyid, public_from_hex


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
    head: tuple[int, str] = (0, chain.GENESIS)
    # every signed head checked: given from outside (files) and found (trusted buyer receipts)
    anchors: list[Anchor] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.breaks

    @property
    def anchored_through(self) -> int | None:
        """The highest signed head the chain was shown to extend; ``None`` when unanchored."""
        return max((a.seq for a in self.anchors), default=None) if self.ok else None

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


# Every value a k3kit writer stores is NULL, text or an integer that JSON carries exactly (the
# chain hashes rows as RFC 8785 JSON, which refuses integers beyond 2^53 and bytes).
_SAFE_INT = 2**53


def _odd_column(row: Mapping[str, Any]) -> str | None:
    """Why a row read back holds a value no k3kit writer stores, or ``None``.

    Whoever can write the database can store a BLOB, a float or 2^63 - 1 in any column once the
    triggers are gone; each must read as a broken row (exit 1), never reach the hashing or the
    signature checks as a value of the wrong type (an internal error, exit 70)."""
    for name, value in row.items():
        if value is None or isinstance(value, str):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) < _SAFE_INT:
            continue
        return f"column {name} holds a {type(value).__name__}, which k3kit never writes there"
    return None


def _well_typed_entries(stored: list[Any], report: LedgerReport) -> list[Any]:
    """The chain entries whose columns have the types k3kit writes (a positive integer ``seq``,
    text elsewhere); each other entry is a break, and the walk then sees the gap it leaves."""
    kept = []
    for entry in stored:
        seq, *rest = entry
        ok_seq = isinstance(seq, int) and not isinstance(seq, bool) and 0 < seq < _SAFE_INT
        if ok_seq and all(isinstance(v, str) for v in rest):
            kept.append(entry)
            continue
        where = seq if ok_seq else None
        report.breaks.append(
            Break(
                where,
                "entries",
                "*",
                "LEDGER_ROW_MALFORMED",
                f"a chain entry holds a value of a type k3kit never writes ({seq!r:.40})",
            )
        )
    return kept


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


def _check_licence(row: dict[str, Any]) -> LicenceBody:
    """The stored envelope verifies with the stored terms text, and the columns are its own."""
    terms = row.pop("_terms", None)
    if terms is None:
        raise VerificationError("the licence's terms text is not in the ledger", code="LEDGER_ROW")
    lic = verify_licence(row["envelope"].encode(), source=f"licence {row['sha256']}", terms=terms)
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
    if copied != tuple(row[c] for c in chain.COLUMNS["licences"][:7]):
        raise VerificationError("columns differ from the signed licence", code="LEDGER_ROW")
    return b


def _check_receipt(row: dict[str, Any], trusted: list[PublicKey] | None) -> Anchor | None:
    """The receipt verifies with its issuer key (a trusted one, when given), the columns are its
    own; returns the head it signs when its issuer is trusted (an anchor found in the DB)."""
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
    if trusted is None:
        return None
    where = f"buyer receipt {row['sha256']} in the ledger"
    return Anchor(body.ledger.seq, body.ledger.head, where, body.issued_at)


def _check_bound(table: str, row: dict[str, Any], licences: dict[str, LicenceBody]) -> None:
    """A payment or an entitlement stays within what its licence signs (package, price, term):
    a stretched term or a cut payment is found even in a chain no signed head anchors."""
    lic = licences.get(row["licence_sha256"])
    if lic is None:
        return  # the licence row itself is broken or missing: reported there
    if table == "payments":
        require_bound(
            lic, package=lic.package, amount_minor=row["amount_minor"], currency=row["currency"]
        )
    else:
        days = term_days_of(row["valid_from"], row["valid_until"])
        require_bound(lic, package=row["package"], term_days=days)


def _check_row(
    table: str,
    row: dict[str, Any],
    trusted: list[PublicKey] | None,
    licences: dict[str, LicenceBody],
) -> Anchor | None:
    """Signatures, the columns copied out of them and the licence binding; raises
    VerificationError (or InputError for a value that does not parse)."""
    if table == "licences":
        licences[row["sha256"]] = _check_licence(row)
    elif table == "buyer_receipts":
        return _check_receipt(row, trusted)
    elif table in ("payments", "entitlements"):
        _check_bound(table, row, licences)
    elif table == "terms" and sha256_tag(row["text"].encode()) != row["sha256"]:
        raise VerificationError("the terms text does not hash to its key", code="LEDGER_ROW")
    return None


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


def _check_anchors(entries: list[Any], report: LedgerReport) -> None:
    """Every signed head must still be on the chain (see :mod:`k3kit.commerce.ledger.anchor`)."""
    row_hashes = {int(e[0]): str(e[5]) for e in entries}
    for anchor in report.anchors:
        problem = anchor_problem(anchor, row_hashes)
        if problem is not None:
            report.breaks.append(Break(anchor.seq, "entries", anchor.head, ANCHOR_BROKEN, problem))


def verify_ledger(
    engine: Engine,
    trusted: list[PublicKey] | None = None,
    anchors: Sequence[Anchor] = (),
) -> LedgerReport:
    """Check everything; never raises for what it finds (that is the report), only for a
    database that cannot be read or is not a k3kit ledger. ``anchors`` are signed heads from
    outside the database (already verified, see :func:`k3kit.commerce.ledger.anchor.read_anchor`);
    the heads in buyer receipts whose issuer is ``trusted`` are added to them."""
    report = LedgerReport(issuers_checked=trusted is not None, anchors=list(anchors))
    with reading(engine) as conn:
        require_current(conn)
        entries = _read_entries(conn, report)
        _check_chain(entries, report)
        seen = _check_tables(conn, report, {e[0]: e for e in entries}, trusted)
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
        _check_anchors(entries, report)
        _check_orphans(conn, report)
    return report


def _read_entries(conn: Connection, report: LedgerReport) -> list[Any]:
    """The chain's entries in order, those of a shape the chain can hold (the rest reported)."""
    stored = [
        tuple(r)
        for r in conn.execute(
            text(
                "SELECT seq, kind, ref, body_sha256, prev_hash, row_hash FROM entries ORDER BY seq"
            )
        )
    ]
    report.rows = len(stored)
    entries = _well_typed_entries(stored, report)
    if entries:
        report.head = (int(entries[-1][0]), str(entries[-1][5]))
    return entries


def _check_tables(
    conn: Connection,
    report: LedgerReport,
    by_seq: Mapping[Any, Any],
    trusted: list[PublicKey] | None,
) -> set[int]:
    """Every row of every chained table against its chain entry and its own signatures;
    returns the sequence numbers of the rows found."""
    terms = {
        r["sha256"]: r["text"].encode()
        for r in _rows(conn, "terms")
        if isinstance(r["text"], str)  # any other value is reported with its row below
    }
    seen: set[int] = set()
    licences: dict[str, LicenceBody] = {}
    for table in chain.COLUMNS:
        rows = _rows(conn, table)
        report.counts[table] = len(rows)
        for row in rows:
            seq, ref = row.pop("seq"), str(row[chain.KEY[table]])
            seen.add(seq)
            broken = _unchained(table, row, by_seq.get(seq), ref)
            if broken is not None:
                report.breaks.append(Break(seq, table, ref, *broken))
                continue
            if table == "licences":
                row["_terms"] = terms.get(row["terms_sha256"])
            try:
                found = _check_row(table, row, trusted, licences)
                if found is not None:
                    report.anchors.append(found)
            except (K3kitError, ValueError, TypeError, AttributeError) as exc:
                # a NULL where a NOT NULL constraint was dropped reaches here as a TypeError
                code = getattr(exc, "code", "LEDGER_ROW")
                report.breaks.append(Break(seq, table, ref, code, str(exc)))
    return seen


def _unchained(table: str, row: dict[str, Any], entry: Any, ref: str) -> tuple[str, str] | None:
    """Why ``row`` is not what its chain ``entry`` recorded (code, detail), or None."""
    if entry is None or entry[1] != table or entry[2] != ref:
        return "LEDGER_ROW_UNCHAINED", "no chain entry announces this row"
    odd = _odd_column(row)
    if odd is not None:
        return "LEDGER_ROW_MALFORMED", odd
    if chain.body_hash(table, row) != entry[3]:
        return "LEDGER_ROW_CHANGED", "the row differs from what the chain recorded"
    return None


def _check_orphans(conn: Connection, report: LedgerReport) -> None:
    """Rows that reference what is not there (a licence for no payment, ...): counted."""
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
