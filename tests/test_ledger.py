"""The ledger on a real SQLite file and a real PostgreSQL server: append-only enforced by the
database, purchases atomic across a killed process, concurrent buyers in separate processes, and
tampering (file bytes, psql with triggers disabled) found by ``ledger verify``.

The CLI calls run in this process (tests/clirunner.py: the same main(), exit codes and output),
so each row costs the ledger's work, not an interpreter start; per database, the concurrent
buyers and the killed purchase are real ``python`` processes, end to end."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KeyFiles, run_k3kit
from tests.ledgerkit import (
    Cluster,
    attacker_rewrite,
    buy,
    on_ledger,
    pg_bin,
    race_purchases,
    sign_licence,
    start_cluster,
    wait_for,
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if pg_bin() is None:
        pytest.skip(
            "PostgreSQL is not installed here (make test installs it with apt-get "
            "as root: scripts/ensure-tools.sh postgres)"
        )
    yield from start_cluster()


_COUNTER = iter(range(10**6))


def test_the_cluster_starts_on_another_port_when_its_free_port_is_taken_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another test run binds the port picked as free before postgres does (a race on a shared
    machine): the cluster starts on the next free port instead of failing the module."""
    import tests.ledgerkit as ledgerkit

    if pg_bin() is None:
        pytest.skip("PostgreSQL is not installed here (scripts/ensure-tools.sh postgres)")
    real = ledgerkit._free_port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        picks = iter([int(taken.getsockname()[1])])
        monkeypatch.setattr(ledgerkit, "_free_port", lambda: next(picks, None) or real())
        with contextlib.closing(start_cluster()) as started:
            running = next(started)
            assert running.port != taken.getsockname()[1]
            assert next(picks, None) is None  # the taken port was tried first
            done = running.psql("SELECT 1")
            assert done.returncode == 0, done.stderr


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = str(tmp_path / "ledger.sqlite")
    else:
        url = request.getfixturevalue("cluster").fresh_db(f"ledger_{next(_COUNTER)}_{os.getpid()}")
    done = run_k3kit("ledger", "init", "--db", url, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["applied"] == [1]
    return url


def _verify(db: str) -> tuple[int, dict[str, object]]:
    done = run_k3kit("ledger", "verify", "--db", db, "--json")
    assert "Traceback" not in done.stderr
    return done.returncode, json.loads(done.stdout)


def _sql(db: str, statement: str, cluster: Cluster | None = None) -> tuple[int, str]:
    """Run SQL the way an operator would: sqlite3 on the file, or psql on the server."""
    if db.startswith("postgresql"):
        name = db.rsplit("/", 1)[1]
        assert cluster is not None
        done = subprocess.run(
            [
                str(cluster.bindir / "psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(cluster.port),
                "-U",
                "postgres",
                "-d",
                name,
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                statement,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return done.returncode, done.stderr
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.executescript(statement)
        return 0, ""
    except sqlite3.DatabaseError as exc:
        return 1, str(exc)
    finally:
        conn.close()


def _cluster(request: pytest.FixtureRequest, db: str) -> Cluster | None:
    return request.getfixturevalue("cluster") if db.startswith("postgresql") else None


def test_purchase_is_chained_and_verifies(db: str, tmp_path: Path, signing_key: KeyFiles) -> None:
    lic, terms = sign_licence(tmp_path, signing_key)
    first = buy(db, lic, terms, "PAY-1")
    second = buy(db, lic, terms, "PAY-2")
    assert first["seq"] == 4 and second["seq"] == 6  # terms, licence once; payment+entitlement
    assert first["valid_until"] == "2027-01-01T00:00:00Z"
    rc, report = _verify(db)
    assert rc == 0, report
    assert report["rows"] == 6
    assert report["counts"] == {
        "terms": 1,
        "licences": 1,
        "payments": 2,
        "entitlements": 2,
        "buyer_receipts": 0,
    }
    orphans = report["orphans"]
    assert isinstance(orphans, dict) and set(orphans.values()) == {0}
    again = run_k3kit(
        "ledger",
        "purchase",
        "--db",
        db,
        "--licence",
        lic,
        "--terms",
        terms,
        "--payment",
        "PAY-1",
        "--amount",
        "250000",
        "--currency",
        "EUR",
        "--package",
        "kimi-k3-b300x8",
        "--json",
    )
    assert again.returncode == 3 and "PAYMENT_EXISTS" in again.stdout


@pytest.mark.parametrize("table", ["entries", "terms", "licences", "payments", "entitlements"])
@pytest.mark.parametrize("op", ["UPDATE", "DELETE"])
def test_database_refuses_update_and_delete(
    db: str,
    tmp_path: Path,
    signing_key: KeyFiles,
    request: pytest.FixtureRequest,
    table: str,
    op: str,
) -> None:
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    statement = f"UPDATE {table} SET seq = seq" if op == "UPDATE" else f"DELETE FROM {table}"
    rc, message = _sql(db, statement, _cluster(request, db))
    assert rc != 0 and "append-only" in message
    assert _verify(db)[0] == 0


def test_payment_without_entitlement_refused_at_commit(
    db: str, tmp_path: Path, signing_key: KeyFiles, request: pytest.FixtureRequest
) -> None:
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    rc, message = _sql(
        db,
        (
            "BEGIN; INSERT INTO entries VALUES (99, 'payments', 'PAY-X', 'sha256:x', 'sha256:p', "
            "'sha256:r'); INSERT INTO payments SELECT 'PAY-X', licence_sha256, 5, 'EUR', paid_at, "
            "'ent-x', 99 FROM payments WHERE ref = 'PAY-1'; COMMIT;"
        ),
        _cluster(request, db),
    )
    assert rc != 0 and "foreign key" in message.lower()
    rc2, report = _verify(db)
    assert rc2 == 0 and report["counts"]["payments"] == 1  # type: ignore[index]


_KILLED = """
import sys, time
from pathlib import Path
from k3kit.commerce.ledger import open_engine, purchase
db, lic, terms, marker = sys.argv[1:5]
def pause():
    Path(marker).write_text("payment inserted")
    time.sleep(600)
purchase(open_engine(db), licence=Path(lic).read_bytes(), terms=Path(terms).read_bytes(),
         terms_name="TERMS.md", payment_ref="PAY-KILLED", amount_minor=250000, currency="EUR",
         package="kimi-k3-b300x8", valid_from="2026-01-01T00:00:00Z",
         valid_until="2027-01-01T00:00:00Z", now="2026-01-01T00:00:00Z", after_payment=pause)
"""


def test_process_killed_between_payment_and_entitlement_leaves_neither(
    db: str, tmp_path: Path, signing_key: KeyFiles
) -> None:
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    marker = tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, db, str(lic), str(terms), str(marker)])
    try:
        wait_for(marker)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    rc, report = _verify(db)
    assert rc == 0, report
    assert report["counts"]["payments"] == 1 and report["counts"]["entitlements"] == 1  # type: ignore[index]
    assert buy(db, lic, terms, "PAY-KILLED")["seq"] == 6  # nothing half-written blocks a retry


def test_concurrent_purchases_from_separate_processes(
    db: str, tmp_path: Path, signing_key: KeyFiles
) -> None:
    """Three buyers in separate processes, three purchases each, released together once all
    three have k3kit imported (eight processes started at once mostly raced their imports: a
    purchase is milliseconds, a start-up most of a second): nine purchases contend for the
    chain's head, and it comes out as one chain, no fork, no gap."""
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-0")
    done = race_purchases(db, lic, terms, processes=3, each=3)
    assert [row["code"] for row in done] == [0] * 9, done
    seqs = sorted(json.loads(row["out"])["seq"] for row in done)
    assert seqs == list(range(6, 6 + 2 * 9, 2))  # one chain, no fork, no gap
    rc, report = _verify(db)
    assert rc == 0 and report["counts"]["entitlements"] == 9 + 1  # type: ignore[index]


def test_tampering_with_psql_found(
    db: str, tmp_path: Path, signing_key: KeyFiles, request: pytest.FixtureRequest
) -> None:
    """An administrator disables the triggers and edits a row: the chain names that row."""
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    buy(db, lic, terms, "PAY-2")
    if db.startswith("postgresql"):
        sql = (
            "ALTER TABLE entitlements DISABLE TRIGGER ALL; UPDATE entitlements SET "
            "valid_until = '2099-01-01T00:00:00Z' WHERE payment_ref = 'PAY-1';"
        )
    else:
        sql = (
            "DROP TRIGGER entitlements_no_update; UPDATE entitlements SET "
            "valid_until = '2099-01-01T00:00:00Z' WHERE payment_ref = 'PAY-1';"
        )
    rc, message = _sql(db, sql, _cluster(request, db))
    assert rc == 0, message
    rc, report = _verify(db)
    assert rc == 1
    first = report["first_broken"]
    assert first == {
        "seq": 4,
        "table": "entitlements",
        "ref": first["ref"],  # type: ignore[index]
        "code": "LEDGER_ROW_CHANGED",
        "detail": "the row differs from what the chain recorded",
    }


def test_deleted_row_found(
    db: str, tmp_path: Path, signing_key: KeyFiles, request: pytest.FixtureRequest
) -> None:
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    buy(db, lic, terms, "PAY-2")
    if db.startswith("postgresql"):
        sql = (
            "SET session_replication_role = replica; "
            "DELETE FROM entitlements WHERE payment_ref = 'PAY-2'; "
            "DELETE FROM payments WHERE ref = 'PAY-2';"
        )
    else:
        sql = (
            "PRAGMA foreign_keys = OFF; DROP TRIGGER entitlements_no_delete; "
            "DROP TRIGGER payments_no_delete; DELETE FROM entitlements WHERE "
            "payment_ref = 'PAY-2'; DELETE FROM payments WHERE ref = 'PAY-2';"
        )
    rc, message = _sql(db, sql, _cluster(request, db))
    assert rc == 0, message
    rc, report = _verify(db)
    assert rc == 1
    assert report["first_broken"]["code"] == "LEDGER_ROW_MISSING"  # type: ignore[index]
    assert report["first_broken"]["seq"] == 5  # type: ignore[index]


def test_sqlite_file_bytes_edited_found(tmp_path: Path, signing_key: KeyFiles) -> None:
    """Edit the database file itself, no SQL at all: the licensee's name in place."""
    db = str(tmp_path / "ledger.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    lic, terms = sign_licence(tmp_path, signing_key, entity="Acme GmbH")
    buy(db, lic, terms, "PAY-1")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    raw = Path(db).read_bytes()
    assert raw.count(b"Acme GmbH") == 1  # the entity column (the envelope is base64)
    Path(db).write_bytes(raw.replace(b"Acme GmbH", b"Acme GmbX"))
    rc, report = _verify(db)
    assert rc == 1
    first = report["first_broken"]
    assert first["table"] == "licences" and first["code"] == "LEDGER_ROW_CHANGED"  # type: ignore[index]
    assert first["seq"] == 2  # type: ignore[index]


def test_chain_entry_rewritten_found(tmp_path: Path, signing_key: KeyFiles) -> None:
    """Rewrite an entry and the typed row together: the next entry's prev_hash gives it away.

    The last hex digit is flipped, never set: setting it to '0' left one hash in sixteen
    unchanged, and CI met that one (the test then saw an intact ledger)."""
    db = str(tmp_path / "ledger.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    rc, message = _sql(
        db,
        "DROP TRIGGER entries_no_update; UPDATE entries SET row_hash = substr(row_hash, 1, 70) "
        "|| CASE WHEN substr(row_hash, 71, 1) = '0' THEN '1' ELSE '0' END WHERE seq = 3;",
    )
    assert rc == 0, message
    rc, report = _verify(db)
    assert rc == 1 and report["first_broken"]["seq"] == 3  # type: ignore[index]
    assert report["first_broken"]["code"] == "LEDGER_CHAIN_BROKEN"  # type: ignore[index]


def test_a_purchase_into_a_mistyped_db_creates_nothing(
    tmp_path: Path, signing_key: KeyFiles
) -> None:
    """`ledger purchase --db typo.sqlite` used to create an empty SQLite file and then say the
    ledger was not initialised, leaving the file behind: only `ledger init` creates a ledger."""
    lic, terms = sign_licence(tmp_path, signing_key)
    typo = tmp_path / "ledgr.sqlite"
    done = run_k3kit(
        "ledger", "purchase", "--db", typo, "--licence", lic, "--terms", terms,
        "--payment", "PAY-1", "--amount", "250000", "--currency", "EUR",
        "--package", "kimi-k3-b300x8", "--term-days", "365", "--json",
    )  # fmt: skip
    assert done.returncode == 3 and "LEDGER_NOT_FOUND" in done.stdout, done.stdout
    assert not typo.exists()


def test_uninitialised_and_unreachable(tmp_path: Path) -> None:
    done = run_k3kit("ledger", "verify", "--db", str(tmp_path / "none.sqlite"), "--json")
    assert done.returncode == 3 and "LEDGER_NOT_FOUND" in done.stdout
    (tmp_path / "empty.sqlite").touch()  # a file that is there but was never `ledger init`ed
    done = run_k3kit("ledger", "verify", "--db", str(tmp_path / "empty.sqlite"), "--json")
    assert done.returncode == 3 and "LEDGER_NOT_INITIALISED" in done.stdout
    done = run_k3kit("ledger", "verify", "--db", "postgresql://u@127.0.0.1:1/x", "--json")
    assert done.returncode == 4 and "LEDGER_UNAVAILABLE" in done.stdout


# --- anchoring: signed heads (docs/ledger.md, "What a signed head detects") -----------------


STRETCH_AND_CUT = [
    "UPDATE entitlements SET valid_until = '2036-01-01T00:00:00Z' WHERE payment_ref = 'PAY-1'",
    "UPDATE payments SET amount_minor = 1 WHERE ref = 'PAY-1'",
]
# the same length (so the licence's signed price still agrees), five years later
SHIFT = [
    "UPDATE entitlements SET valid_from = '2031-01-01T00:00:00Z', "
    "valid_until = '2032-01-01T00:00:00Z' WHERE payment_ref = 'PAY-1'",
]


def _checkpoint(db: str, key: KeyFiles, out: Path) -> dict[str, Any]:
    done = run_k3kit("ledger", "checkpoint", "--db", db, "--key", key.private, "-o", out, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_consistent_rewrite_does_not_extend_the_signed_head(
    db: str,
    tmp_path: Path,
    signing_key: KeyFiles,
    other_key: KeyFiles,
    request: pytest.FixtureRequest,
) -> None:
    """An entitlement bought for 2026 moved to 2031 (same length, so its licence's price still
    agrees), the chain recomputed. Unanchored it reads consistent (and says so, never a bare
    INTACT); against the seller's signed head it is refused."""
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    head = tmp_path / "seller-kept" / "head-4.json"
    head.parent.mkdir()
    assert _checkpoint(db, other_key, head)["seq"] == 4
    buy(db, lic, terms, "PAY-2")  # the ledger goes on after the head
    attacker_rewrite(db, _cluster(request, db), SHIFT)

    rc, report = _verify(db)
    assert rc == 0 and report["verdict"] == "LEDGER CONSISTENT, UNANCHORED"
    assert report["anchored_through"] is None

    done = run_k3kit(
        "ledger", "verify", "--db", db, "--trust", other_key.public, "--checkpoint", head, "--json"
    )
    assert done.returncode == 1, done.stderr
    assert "verdict: LEDGER BROKEN" in done.stderr and "INTACT" not in done.stderr
    first = json.loads(done.stdout)["first_broken"]
    assert first["code"] == "LEDGER_ANCHOR_BROKEN" and first["seq"] == 4
    assert "does not extend the signed head" in first["detail"]


def test_stretched_term_and_cut_payment_break_the_licence_binding(
    tmp_path: Path, signing_key: KeyFiles
) -> None:
    """The issue's attack (1 year stretched to 10, the payment cut to 1, chain recomputed): the
    licence the buyer signed names the price and term, so even with no signed head at hand the
    rewritten rows no longer agree with it."""
    from k3kit.commerce.ledger import verify_ledger

    db = str(tmp_path / "ledger.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    attacker_rewrite(db, None, STRETCH_AND_CUT)
    report = on_ledger(db, verify_ledger)
    found = {(b.table, b.code, b.detail) for b in report.breaks}
    assert found == {
        ("payments", "LICENCE_OTHER_PRICE", "the licence signs amount 250000, not 1"),
        ("entitlements", "LICENCE_OTHER_PRICE", "the licence signs term (days) 365, not 3652"),
    }


def test_untouched_ledger_is_intact_through_the_signed_head(
    tmp_path: Path, signing_key: KeyFiles, other_key: KeyFiles
) -> None:
    from k3kit.commerce.ledger import read_anchor, verify_ledger
    from k3kit.signing.keys import load_public

    db = str(tmp_path / "ledger.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    head = tmp_path / "head.json"
    _checkpoint(db, other_key, head)
    buy(db, lic, terms, "PAY-2")
    seller = [load_public(other_key.public)]
    anchor = read_anchor(head.read_bytes(), seller, source=head.name)
    report = on_ledger(db, verify_ledger, seller, [anchor])
    assert report.ok and report.anchored_through == 4 and report.head[0] == 6


def test_rows_removed_at_or_before_the_signed_head_found(
    tmp_path: Path, signing_key: KeyFiles, other_key: KeyFiles
) -> None:
    """Cutting the last purchase (its rows and entries) leaves a consistent, shorter chain; the
    head signed after that purchase names a seq that is gone."""
    from k3kit.commerce.ledger import read_anchor, verify_ledger
    from k3kit.signing.keys import load_public

    db = str(tmp_path / "ledger.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    buy(db, lic, terms, "PAY-2")
    head = tmp_path / "head.json"
    assert _checkpoint(db, other_key, head)["seq"] == 6
    attacker_rewrite(
        db,
        None,
        [
            "DELETE FROM entitlements WHERE payment_ref = 'PAY-2'",
            "DELETE FROM payments WHERE ref = 'PAY-2'",
            "DELETE FROM entries WHERE seq > 4",
        ],
    )
    seller = [load_public(other_key.public)]
    assert on_ledger(db, verify_ledger, seller).ok  # consistent without the head
    anchor = read_anchor(head.read_bytes(), seller, source="h")
    report = on_ledger(db, verify_ledger, seller, [anchor])
    assert report.first is not None and report.first.code == "LEDGER_ANCHOR_BROKEN"
    assert "removed" in report.first.detail and report.anchored_through is None


def test_tail_after_the_latest_signed_head_is_reported_unanchored(
    tmp_path: Path, signing_key: KeyFiles, other_key: KeyFiles
) -> None:
    """The limit, stated rather than hidden: entries after the latest head are only consistent."""
    db = str(tmp_path / "ledger.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    head = tmp_path / "head.json"
    _checkpoint(db, other_key, head)
    buy(db, lic, terms, "PAY-2")
    done = run_k3kit(
        "ledger", "verify", "--db", db, "--trust", other_key.public, "--checkpoint", head
    )
    assert done.returncode == 0, done.stderr
    assert "verdict: LEDGER INTACT through signed head seq 4\n" in done.stderr
    assert "entries 5..6: consistent, unanchored" in done.stderr


def test_checkpoint_refuses_to_sign_a_broken_ledger(
    tmp_path: Path, signing_key: KeyFiles, other_key: KeyFiles
) -> None:
    """A seller who re-checkpoints after a rewrite is stopped by the previous head they kept."""
    db = str(tmp_path / "ledger.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    first = tmp_path / "head-1.json"
    _checkpoint(db, other_key, first)
    attacker_rewrite(db, None, SHIFT)
    second = tmp_path / "head-2.json"
    done = run_k3kit(
        "ledger",
        "checkpoint",
        "--db",
        db,
        "--key",
        other_key.private,
        "--checkpoint",
        first,
        "-o",
        second,
        "--json",
    )
    assert done.returncode == 1 and "LEDGER_NOT_INTACT" in done.stdout
    assert not second.exists()


def test_checkpoint_signed_by_another_key_is_not_an_anchor(
    tmp_path: Path, signing_key: KeyFiles, other_key: KeyFiles
) -> None:
    """The database's writer signs their own head of the rewritten chain: not the seller's key."""
    db = str(tmp_path / "ledger.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    lic, terms = sign_licence(tmp_path, signing_key)
    buy(db, lic, terms, "PAY-1")
    forged = tmp_path / "forged.json"
    _checkpoint(db, signing_key, forged)  # a key that is not the seller's
    done = run_k3kit(
        "ledger",
        "verify",
        "--db",
        db,
        "--trust",
        other_key.public,
        "--checkpoint",
        forged,
        "--json",
    )
    assert done.returncode == 1 and "LEDGER_CHECKPOINT_UNTRUSTED_KEY" in done.stdout
    done = run_k3kit("ledger", "verify", "--db", db, "--checkpoint", forged, "--json")
    assert done.returncode == 3 and "LEDGER_ANCHOR_NEEDS_TRUST" in done.stdout


# Outside attack pass, finding 7: the database writer stores values of a type k3kit never writes
# (a BLOB, 2^63 - 1, text in an integer column); each is a broken row, never an internal error.
_ODD_VALUES = [
    ("UPDATE entitlements SET valid_from = X'00ff'", "entitlements"),
    ("UPDATE licences SET envelope = X'ff00'", "licences"),
    ("UPDATE terms SET text = X'fffe'", "terms"),
    ("UPDATE payments SET amount_minor = 9223372036854775807", "payments"),
    ("UPDATE payments SET amount_minor = 1e300", "payments"),
    ("UPDATE entries SET seq = 'x' WHERE seq = 4", "entries"),
    ("UPDATE entries SET seq = 9223372036854775807 WHERE seq = 4", "entries"),
]


@pytest.fixture(scope="module")
def bought_ledger(tmp_path_factory: pytest.TempPathFactory, signing_key: KeyFiles) -> Path:
    folder = tmp_path_factory.mktemp("odd-values")
    db = folder / "ledger.sqlite"
    assert run_k3kit("ledger", "init", "--db", str(db)).returncode == 0
    lic, terms = sign_licence(folder, signing_key)
    buy(str(db), lic, terms, "PAY-1")
    return db


@pytest.mark.parametrize(("statement", "table"), _ODD_VALUES, ids=[t for _, t in _ODD_VALUES])
def test_a_value_of_a_type_k3kit_never_writes_is_a_broken_row(
    bought_ledger: Path, tmp_path: Path, statement: str, table: str
) -> None:
    from k3kit.commerce.ledger import verify_ledger

    db = tmp_path / "ledger.sqlite"
    shutil.copyfile(bought_ledger, db)
    conn = sqlite3.connect(db)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("PRAGMA ignore_check_constraints = 1")  # the writer owns the file: no guard holds
    conn.execute(statement)
    conn.commit()
    conn.close()
    report = on_ledger(db, verify_ledger)
    assert not report.ok
    assert any(b.table == table and b.code == "LEDGER_ROW_MALFORMED" for b in report.breaks), (
        report.breaks
    )


def test_ledger_verify_of_a_blob_is_exit_1_not_an_internal_error(
    bought_ledger: Path, tmp_path: Path
) -> None:
    db = tmp_path / "ledger.sqlite"
    shutil.copyfile(bought_ledger, db)
    conn = sqlite3.connect(db)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("UPDATE licences SET envelope = X'ff00'")
    conn.commit()
    conn.close()
    rc, report = _verify(str(db))
    assert rc == 1 and report["first_broken"]["code"] == "LEDGER_ROW_MALFORMED"  # type: ignore[index]


def test_ledger_verify_with_a_mistyped_db_path_refuses_and_creates_nothing(
    tmp_path: Path, signing_key: KeyFiles
) -> None:
    """`ledger verify --db typo.sqlite` used to create an empty database and check it; verbs that
    only read the ledger now refuse a SQLite file that does not exist (exit 3, LEDGER_NOT_FOUND)
    and leave nothing behind, while `ledger init` still creates one."""
    typo = tmp_path / "typo.sqlite"
    for argv in (
        ("ledger", "verify", "--db", typo, "--json"),
        (
            "ledger",
            "checkpoint",
            "--db",
            typo,
            "--key",
            signing_key.private,
            "-o",
            tmp_path / "head.json",
            "--json",
        ),
        ("ledger", "verify", "--db", f"sqlite:///{typo}", "--json"),
    ):
        done = run_k3kit(*argv)
        assert done.returncode == 3, done.stderr
        error = json.loads(done.stdout)["error"]
        assert error["code"] == "LEDGER_NOT_FOUND"
        assert "ledger init" in (error.get("hint") or "")
        assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert run_k3kit("ledger", "init", "--db", typo).returncode == 0
    assert typo.is_file()
    done = run_k3kit("ledger", "verify", "--db", typo, "--json")
    assert done.returncode == 0, done.stderr
