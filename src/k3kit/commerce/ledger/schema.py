"""The ledger's one schema, as plain SQL migrations for SQLite and PostgreSQL.

Why plain SQL and not Alembic: what makes this ledger trustworthy is dialect-specific DDL that an
ORM does not model (triggers that refuse UPDATE/DELETE/TRUNCATE, deferred foreign keys in both
directions between payments and entitlements, an insert trigger that checks an entitlement's term).
Written out here, a reviewer reads exactly what the database enforces; the tables themselves are
the same text for both databases, and only the trigger bodies differ. Each migration runs in one
transaction and records itself in ``ledger_meta`` (itself append-only); a new migration is a new
entry at the end of :data:`MIGRATIONS`.
"""

from __future__ import annotations

from collections.abc import Callable

TABLES = ("entries", "terms", "licences", "payments", "entitlements", "buyer_receipts")
KINDS = ("terms", "licences", "payments", "entitlements", "buyer_receipts")
HASH = "VARCHAR(71)"  # "sha256:" + 64 hex digits


def _digest_ok(col: str) -> str:
    # substr, not LIKE 'sha256:%': a '%' in DDL would be a placeholder to the PostgreSQL driver
    return f"CHECK (substr({col}, 1, 7) = 'sha256:')"


def _tables(dialect: str) -> list[str]:
    # PostgreSQL checks a foreign key's target table at CREATE time, SQLite at use: the one
    # circular pair (payment <-> entitlement) is added by ALTER on PostgreSQL, inline on SQLite.
    pay_to_ent = (
        "FOREIGN KEY (entitlement_id, ref) REFERENCES entitlements (id, payment_ref) "
        "DEFERRABLE INITIALLY DEFERRED"
    )
    return [
        "CREATE TABLE ledger_meta (version INTEGER PRIMARY KEY, description TEXT NOT NULL, "
        "applied_at VARCHAR(20) NOT NULL)",
        f"""CREATE TABLE entries (
            seq BIGINT PRIMARY KEY CHECK (seq > 0),
            kind VARCHAR(16) NOT NULL CHECK (kind IN ({", ".join(f"'{k}'" for k in KINDS)})),
            ref VARCHAR(200) NOT NULL,
            body_sha256 {HASH} NOT NULL {_digest_ok("body_sha256")},
            prev_hash {HASH} NOT NULL UNIQUE {_digest_ok("prev_hash")},
            row_hash {HASH} NOT NULL UNIQUE {_digest_ok("row_hash")},
            UNIQUE (kind, ref))""",
        f"""CREATE TABLE terms (
            sha256 {HASH} PRIMARY KEY {_digest_ok("sha256")},
            name VARCHAR(512) NOT NULL,
            text TEXT NOT NULL,
            seq BIGINT NOT NULL UNIQUE REFERENCES entries (seq))""",
        f"""CREATE TABLE licences (
            sha256 {HASH} PRIMARY KEY {_digest_ok("sha256")},
            terms_sha256 {HASH} NOT NULL REFERENCES terms (sha256),
            entity VARCHAR(512) NOT NULL,
            signer_name VARCHAR(512) NOT NULL,
            authority VARCHAR(512) NOT NULL,
            signer_keyid VARCHAR(64) NOT NULL,
            signed_at VARCHAR(20) NOT NULL,
            aff_redistribution INTEGER NOT NULL CHECK (aff_redistribution = 1),
            aff_resale INTEGER NOT NULL CHECK (aff_resale = 1),
            aff_traceability INTEGER NOT NULL CHECK (aff_traceability = 1),
            aff_scope INTEGER NOT NULL CHECK (aff_scope = 1),
            envelope TEXT NOT NULL,
            seq BIGINT NOT NULL UNIQUE REFERENCES entries (seq))""",
        f"""CREATE TABLE payments (
            ref VARCHAR(200) PRIMARY KEY,
            licence_sha256 {HASH} NOT NULL REFERENCES licences (sha256),
            amount_minor BIGINT NOT NULL CHECK (amount_minor > 0),
            currency VARCHAR(3) NOT NULL CHECK (length(currency) = 3),
            paid_at VARCHAR(20) NOT NULL,
            entitlement_id VARCHAR(200) NOT NULL UNIQUE,
            seq BIGINT NOT NULL UNIQUE REFERENCES entries (seq),
            UNIQUE (ref, licence_sha256){"," + pay_to_ent if dialect == "sqlite" else ""})""",
        f"""CREATE TABLE entitlements (
            id VARCHAR(200) PRIMARY KEY,
            payment_ref VARCHAR(200) NOT NULL UNIQUE,
            licence_sha256 {HASH} NOT NULL REFERENCES licences (sha256),
            package VARCHAR(200) NOT NULL,
            valid_from VARCHAR(20) NOT NULL,
            valid_until VARCHAR(20) NOT NULL,
            seq BIGINT NOT NULL UNIQUE REFERENCES entries (seq),
            CHECK (valid_until > valid_from),
            UNIQUE (id, payment_ref),
            FOREIGN KEY (payment_ref, licence_sha256) REFERENCES payments (ref, licence_sha256)
                DEFERRABLE INITIALLY DEFERRED)""",
        *(
            [f"ALTER TABLE payments ADD CONSTRAINT payments_entitlement_fk {pay_to_ent}"]
            if dialect != "sqlite"
            else []
        ),
        f"""CREATE TABLE buyer_receipts (
            sha256 {HASH} PRIMARY KEY {_digest_ok("sha256")},
            entitlement_id VARCHAR(200) NOT NULL REFERENCES entitlements (id),
            kit_name VARCHAR(200) NOT NULL,
            kit_version VARCHAR(200) NOT NULL,
            kit_sha256 {HASH} NOT NULL,
            released_at VARCHAR(20) NOT NULL,
            issued_at VARCHAR(20) NOT NULL,
            issuer_key VARCHAR(64) NOT NULL,
            envelope TEXT NOT NULL,
            seq BIGINT NOT NULL UNIQUE REFERENCES entries (seq),
            UNIQUE (entitlement_id, kit_sha256))""",
    ]


_WINDOW = (
    "NOT EXISTS (SELECT 1 FROM entitlements e WHERE e.id = NEW.entitlement_id "
    "AND e.package = NEW.kit_name AND NEW.released_at >= e.valid_from "
    "AND NEW.released_at < e.valid_until)"
)
_WINDOW_MSG = "k3kit ledger: entitlement not valid at this release"


def _sqlite_triggers() -> list[str]:
    out = []
    for t in ("ledger_meta", *TABLES):
        for op in ("UPDATE", "DELETE"):
            out.append(
                f"CREATE TRIGGER {t}_no_{op.lower()} BEFORE {op} ON {t} "
                f"BEGIN SELECT RAISE(ABORT, 'k3kit ledger: {t} is append-only'); END"
            )
    out.append(
        f"CREATE TRIGGER buyer_receipts_window BEFORE INSERT ON buyer_receipts WHEN {_WINDOW} "
        f"BEGIN SELECT RAISE(ABORT, '{_WINDOW_MSG}'); END"
    )
    return out


def _postgresql_triggers() -> list[str]:
    out = [
        "CREATE FUNCTION k3kit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "RAISE EXCEPTION USING MESSAGE = 'k3kit ledger: ' || TG_TABLE_NAME || "
        "' is append-only', ERRCODE = 'restrict_violation'; END $$",
        "CREATE FUNCTION k3kit_receipt_window() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF {_WINDOW} THEN RAISE EXCEPTION USING MESSAGE = '{_WINDOW_MSG}', "
        "ERRCODE = 'check_violation'; END IF; RETURN NEW; END $$",
        "CREATE TRIGGER buyer_receipts_window BEFORE INSERT ON buyer_receipts "
        "FOR EACH ROW EXECUTE FUNCTION k3kit_receipt_window()",
    ]
    for t in ("ledger_meta", *TABLES):
        out.append(
            f"CREATE TRIGGER {t}_append_only BEFORE UPDATE OR DELETE ON {t} "
            "FOR EACH ROW EXECUTE FUNCTION k3kit_append_only()"
        )
        out.append(
            f"CREATE TRIGGER {t}_no_truncate BEFORE TRUNCATE ON {t} "
            "FOR EACH STATEMENT EXECUTE FUNCTION k3kit_append_only()"
        )
    return out


def _initial(dialect: str) -> list[str]:
    triggers = _sqlite_triggers() if dialect == "sqlite" else _postgresql_triggers()
    return _tables(dialect) + triggers


# (version, description, statements for a dialect name)
MIGRATIONS: list[tuple[int, str, Callable[[str], list[str]]]] = [
    (1, "tables, append-only triggers, deferred payment<->entitlement keys, term window", _initial),
]
LATEST = MIGRATIONS[-1][0]
