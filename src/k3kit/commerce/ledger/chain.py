"""The hash chain: every ledger row is announced by an ``entries`` row carrying the previous
entry's hash, so a row changed, removed or inserted out of band breaks the chain at that row.

Why a separate ``entries`` table rather than chain columns on each table: one sequence across
all tables gives one order to verify, and the database can enforce it (``seq`` primary key,
``prev_hash`` unique: two writers that read the same head cannot both append, so no fork).
The body hash covers the typed row's columns exactly as stored, so editing a licence's entity
in place is found even when the chain table itself is left untouched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, text

from k3kit._canonical import dumps

GENESIS = "sha256:" + "0" * 64

# The columns each table's body hash covers (all but ``seq``), in a fixed order.
COLUMNS: dict[str, tuple[str, ...]] = {
    "terms": ("sha256", "name", "text"),
    "licences": (
        "sha256",
        "terms_sha256",
        "entity",
        "signer_name",
        "authority",
        "signer_keyid",
        "signed_at",
        "aff_redistribution",
        "aff_resale",
        "aff_traceability",
        "aff_scope",
        "envelope",
    ),
    "payments": ("ref", "licence_sha256", "amount_minor", "currency", "paid_at", "entitlement_id"),
    "entitlements": (
        "id",
        "payment_ref",
        "licence_sha256",
        "package",
        "valid_from",
        "valid_until",
    ),
    "buyer_receipts": (
        "sha256",
        "entitlement_id",
        "kit_name",
        "kit_version",
        "kit_sha256",
        "released_at",
        "issued_at",
        "issuer_key",
        "envelope",
    ),
}
KEY = {
    "terms": "sha256",
    "licences": "sha256",
    "payments": "ref",
    "entitlements": "id",
    "buyer_receipts": "sha256",
}


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def body_hash(kind: str, row: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of the row's columns (ints stay ints, text stays text)."""
    return _sha(dumps({c: row[c] for c in COLUMNS[kind]}))


def entry_hash(seq: int, kind: str, ref: str, body_sha256: str, prev_hash: str) -> str:
    return _sha(
        dumps({"seq": seq, "kind": kind, "ref": ref, "body": body_sha256, "prev": prev_hash})
    )


def head(conn: Connection) -> tuple[int, str]:
    """The last entry's ``(seq, row_hash)``; ``(0, GENESIS)`` for an empty chain."""
    row = conn.execute(text("SELECT seq, row_hash FROM entries ORDER BY seq DESC LIMIT 1")).first()
    return (0, GENESIS) if row is None else (int(row[0]), str(row[1]))


def append(conn: Connection, kind: str, row: Mapping[str, Any]) -> int:
    """Insert ``row`` into table ``kind`` with its chain entry; returns the entry's ``seq``.

    Must run inside :func:`k3kit.commerce.ledger.db.transaction`, which holds the writer lock, so
    the head read here is still the head when the entry is inserted.
    """
    last, prev = head(conn)
    seq = last + 1
    ref = str(row[KEY[kind]])
    body = body_hash(kind, row)
    conn.execute(
        text(
            "INSERT INTO entries (seq, kind, ref, body_sha256, prev_hash, row_hash) "
            "VALUES (:seq, :kind, :ref, :body, :prev, :hash)"
        ),
        {
            "seq": seq,
            "kind": kind,
            "ref": ref,
            "body": body,
            "prev": prev,
            "hash": entry_hash(seq, kind, ref, body, prev),
        },
    )
    cols = (*COLUMNS[kind], "seq")
    names, params = ", ".join(cols), ", ".join(":" + c for c in cols)
    conn.execute(
        text(f"INSERT INTO {kind} ({names}) VALUES ({params})"),  # noqa: S608 - fixed names
        {**{c: row[c] for c in COLUMNS[kind]}, "seq": seq},
    )
    return seq


def exists(conn: Connection, kind: str, key: str) -> bool:
    sql = f"SELECT 1 FROM {kind} WHERE {KEY[kind]} = :k"  # noqa: S608 - names from COLUMNS only
    return conn.execute(text(sql), {"k": key}).first() is not None
