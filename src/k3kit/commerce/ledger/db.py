"""Opening the ledger database (SQLite by default, PostgreSQL by URL) and migrating it.

This package is the one home of SQLAlchemy and the PostgreSQL driver (import-linter forbids them
elsewhere), and ``k3kit.node.verify`` never imports it: a buyer's node verifies kits without a
database.

Why these connection settings: SQLite runs in WAL mode (readers never block the writer), with
foreign keys on (they are off by default, per connection) and ``BEGIN IMMEDIATE`` so that a
writer takes the write lock before it reads the chain's head; PostgreSQL takes a transaction-scoped
advisory lock for the same reason. Appends are serialized by the database, not by this process.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from k3kit._resources import require_extra
from k3kit.commerce.ledger.schema import LATEST, MIGRATIONS
from k3kit.errors import EnvironmentProblem, InputError, VerificationError

BUSY_TIMEOUT_S = 60
_ADVISORY_KEY = 0x6B336B6974  # "k3kit": the one lock every appender takes on PostgreSQL


def url_for(db: str) -> str:
    """A database URL from ``--db``: a SQLAlchemy/PostgreSQL URL, or else a SQLite file path."""
    if db.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + db.split("://", 1)[1]
    if "://" in db:
        return db
    return "sqlite:///" + str(Path(db).absolute())


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # SQLAlchemy's "begin" event below issues BEGIN itself
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
    cur.execute("PRAGMA journal_mode = WAL")
    cur.execute("PRAGMA synchronous = FULL")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.close()


def _sqlite_begin(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def _require_sqlite_file(db: str, database: str | None) -> None:
    """Refuse a SQLite ledger file that does not exist: SQLite would create an empty one, so a
    typo in ``--db`` of a verb that only reads would report on (and leave behind) a new database."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    if not Path(database).exists():
        raise InputError(
            f"no ledger database at {db} (nothing was created)",
            code="LEDGER_NOT_FOUND",
            hint="check --db (or K3KIT_LEDGER); `k3kit ledger init --db PATH` creates a ledger",
        )


def open_engine(db: str, *, create: bool = True) -> Engine:
    """An engine for ``db``; nothing is connected yet. ``create=False`` (every verb but ``ledger
    init``) refuses a SQLite file that does not exist instead of creating it: a typo in ``--db``
    of ``purchase`` would otherwise leave an empty database behind and report "not initialised"."""
    try:
        url = make_url(url_for(db))
    except ArgumentError as exc:
        raise InputError(f"not a database URL or path: {db}", code="LEDGER_URL") from exc
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise InputError(f"unsupported database {url.get_backend_name()!r}", code="LEDGER_URL")
    if url.get_backend_name() == "sqlite":
        if not create:
            _require_sqlite_file(db, url.database)
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    require_extra("ledger", "psycopg")  # SQLAlchemy's postgresql:// driver
    return create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 10})


def dialect(conn: Connection) -> str:
    return conn.dialect.name


@contextmanager
def transaction(engine: Engine) -> Iterator[Connection]:
    """One serialized write transaction: committed on success, rolled back on any error."""
    try:
        with engine.begin() as conn:
            if dialect(conn) == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_KEY})
            yield conn
    except DBAPIError as exc:
        raise translate(exc) from exc


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """A read-only look (``ledger verify``): database errors become k3kit errors."""
    try:
        with engine.connect() as conn:
            yield conn
    except DBAPIError as exc:
        raise translate(exc) from exc


# SQLite's primary result codes for a disk that is full, failing or read-only
# (SQLITE_FULL, SQLITE_IOERR, SQLITE_READONLY), and PostgreSQL's SQLSTATEs for the same
# (disk_full, io_error, read_only_sql_transaction): the disk's fault, never the input's.
_SQLITE_DISK = frozenset({13, 10, 8})
_PG_DISK = frozenset({"53100", "58030", "25006"})


def _disk_failure(orig: object) -> bool:
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _SQLITE_DISK:
        return True
    return getattr(orig, "sqlstate", None) in _PG_DISK


def translate(exc: DBAPIError) -> Exception:
    """A database refusal as a k3kit error: constraint and trigger refusals are bad input (3),
    a database that cannot be reached, or whose disk is full or failing, is the environment (4)."""
    msg = str(exc.orig).splitlines()[0] if exc.orig is not None else str(exc)
    if _disk_failure(exc.orig):
        return EnvironmentProblem(
            f"ledger database: {msg} (the disk holding the ledger)",
            code="DISK_UNWRITABLE",
            hint="free space (or quota) on the disk holding the ledger (--db), or make it "
            "writable; then rerun: the transaction was rolled back, nothing was recorded",
        )
    if exc.connection_invalidated or "connect" in msg.lower() or "unable to open" in msg:
        return EnvironmentProblem(f"ledger database: {msg}", code="LEDGER_UNAVAILABLE")
    if "append-only" in msg:
        return InputError(f"ledger refused: {msg}", code="LEDGER_APPEND_ONLY")
    if "not valid at this release" in msg:  # the same fact issue.py checks first: exit 1
        return VerificationError(msg, code="ENTITLEMENT_NOT_VALID_AT_RELEASE")
    if "UNIQUE" in msg or "duplicate key" in msg:  # SQLite's and PostgreSQL's wording
        # The verbs check their own duplicates first; this is the race between two writers.
        return InputError(
            f"ledger refused a duplicate: that row is already recorded ({msg})",
            code="LEDGER_CONSTRAINT",
            hint="nothing was recorded by this call; look the existing row up with "
            "`k3kit ledger verify --db DB`",
        )
    return InputError(f"ledger refused: {msg}", code="LEDGER_CONSTRAINT")


def schema_version(conn: Connection) -> int:
    try:
        with conn.begin_nested():
            row = conn.execute(text("SELECT max(version) FROM ledger_meta")).scalar()
    except SQLAlchemyError:
        return 0
    return int(row or 0)


def migrate(engine: Engine, now: str) -> list[int]:
    """Apply every migration the database lacks, each in its own transaction; returns them."""
    applied: list[int] = []
    for version, description, statements in MIGRATIONS:
        with transaction(engine) as conn:
            if schema_version(conn) >= version:
                continue
            for sql in statements(dialect(conn)):
                conn.exec_driver_sql(sql)
            conn.execute(
                text("INSERT INTO ledger_meta VALUES (:v, :d, :t)"),
                {"v": version, "d": description, "t": now},
            )
            applied.append(version)
    return applied


def require_current(conn: Connection) -> None:
    version = schema_version(conn)
    if version != LATEST:
        raise InputError(
            f"the ledger schema is at version {version}, this k3kit needs {LATEST}",
            code="LEDGER_NOT_INITIALISED",
            hint="run `k3kit ledger init --db ...` first",
        )
