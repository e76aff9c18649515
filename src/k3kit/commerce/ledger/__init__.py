"""The licence ledger: terms, licence signatures, payments, entitlements and buyer receipts in
SQLite (default) or PostgreSQL (by URL), insert-only and hash-chained, enforced by the database.

This package is the only importer of SQLAlchemy and the PostgreSQL driver, and nothing on the
verification path (``k3kit.node.verify``, ``k3kit.commerce.buyer_receipt``) imports it. See
docs/ledger.md.

SQLAlchemy comes with the ``ledger`` extra: :mod:`._requires`, imported first, turns its absence
into ``EXTRA_NOT_INSTALLED`` naming the extra, before any module here imports it.
"""

from k3kit.commerce.ledger import _requires  # noqa: F401  (first: the extra's check)
from k3kit.commerce.ledger.anchor import Anchor, read_anchor
from k3kit.commerce.ledger.audit import Break, LedgerReport, verify_ledger
from k3kit.commerce.ledger.checkpoint import Checkpoint, checkpoint
from k3kit.commerce.ledger.db import migrate, open_engine
from k3kit.commerce.ledger.issue import Issued, issue
from k3kit.commerce.ledger.purchase import MAX_AMOUNT_MINOR, Purchase, purchase, term_end

__all__ = [
    "MAX_AMOUNT_MINOR",
    "Anchor",
    "Break",
    "Checkpoint",
    "Issued",
    "LedgerReport",
    "Purchase",
    "checkpoint",
    "issue",
    "migrate",
    "open_engine",
    "purchase",
    "read_anchor",
    "term_end",
    "verify_ledger",
]
