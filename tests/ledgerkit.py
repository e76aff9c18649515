"""Test helpers for the ledger: a throw-away PostgreSQL cluster, licences, purchases.

The cluster is a real ``postgres`` from Debian's packages (``scripts/ensure-tools.sh postgres``),
initialised in a temp folder and listening on 127.0.0.1 on a free port (picked again if another
process takes it first); as root it runs as the ``postgres`` user (PostgreSQL refuses to run as
root). Tests skip, with this reason, only where no PostgreSQL binaries are installed.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # conftest is imported lazily: benchmarks/bench_ledger.py uses start_cluster
    from tests.conftest import KeyFiles

TERMS = "# Enterprise terms\n\nScope: inference on the licensee's own nodes.\n"
ALL = ("redistribution", "resale", "traceability", "scope")


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Cluster:
    url: str
    port: int
    bindir: Path

    def psql(self, sql: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(self.bindir / "psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def fresh_db(self, name: str) -> str:
        done = self.psql(f"CREATE DATABASE {name}")
        assert done.returncode == 0, done.stderr
        return self.url.rsplit("/", 1)[0] + "/" + name


#: A free port is only free until someone else binds it: on a machine where other test runs
#: start servers too, the port picked can be taken before postgres binds it. Start again on
#: another one; any other failure is raised at once.
START_TRIES = 5


def _start_on_a_free_port(
    bindir: Path, data: Path, sock: Path, log: Path, as_user: list[str]
) -> int:
    """Start the cluster on a port free a moment ago; the port it listens on."""
    for _ in range(START_TRIES):
        port = _free_port()
        seen = log.stat().st_size if log.exists() else 0
        opts = (
            f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100"
        )
        argv = [str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log)]
        done = subprocess.run(
            [*as_user, *argv, "-w", "-t", "60", "start"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode == 0:
            return port
        with log.open("rb") as f:
            f.seek(seen)
            said = f.read().decode(errors="replace")
        if "could not bind" not in said and "already in use" not in said:
            raise RuntimeError(f"pg_ctl failed: {done.stdout}{done.stderr}{said}")
    raise RuntimeError(f"no free port for postgres after {START_TRIES} tries")


def start_cluster() -> Generator[Cluster, None, None]:
    bindir = pg_bin()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (scripts/ensure-tools.sh postgres)")
    root = Path(tempfile.mkdtemp(prefix="k3kit-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
        os.chmod(root, 0o700)
        as_user = ["runuser", "-u", "postgres", "--"]

    def run(*argv: str) -> None:
        done = subprocess.run(
            [*as_user, *argv], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stdout}{done.stderr}")

    try:
        run(
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        port = _start_on_a_free_port(bindir, data, sock, root / "log", as_user)
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        yield Cluster(url, port, bindir)
    finally:
        subprocess.run(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


def wait_for(path: Path, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > end:
            raise TimeoutError(path)
        time.sleep(0.05)


def sign_licence(
    tmp: Path,
    key: KeyFiles,
    *,
    affirm: tuple[str, ...] = ALL,
    entity: str = "Acme GmbH",
    name: str = "licence.json",
    package: str = "kimi-k3-b300x8",
    price: tuple[int, str, int] = (250000, "EUR", 365),
) -> tuple[Path, Path]:
    from tests.conftest import run_k3kit

    terms = tmp / "TERMS.md"
    if not terms.exists():
        terms.write_text(TERMS)
    out = tmp / name
    args: list[str | Path] = [
        "licence",
        "sign",
        terms,
        "--entity",
        entity,
        "--signer",
        "Jane Roe",
        "--authority",
        "CTO, board resolution 2026-04",
        "--package",
        package,
        "--amount",
        str(price[0]),
        "--currency",
        price[1],
        "--term-days",
        str(price[2]),
        "--key",
        key.private,
        "-o",
        out,
    ]
    for a in affirm:
        args += ["--affirm", a]
    done = run_k3kit(*args)
    assert done.returncode == 0, done.stderr
    return out, terms


def buy(
    db: str,
    lic: Path,
    terms: Path,
    payment: str,
    *,
    package: str = "kimi-k3-b300x8",
    valid_from: str = "2026-01-01T00:00:00Z",
    days: int = 365,
) -> dict[str, object]:
    import json

    from tests.conftest import run_k3kit

    done = run_k3kit(
        "ledger",
        "purchase",
        "--db",
        db,
        "--licence",
        lic,
        "--terms",
        terms,
        "--payment",
        payment,
        "--amount",
        "250000",
        "--currency",
        "EUR",
        "--package",
        package,
        "--valid-from",
        valid_from,
        "--term-days",
        str(days),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


#: One racing buyer: a separate ``python`` process that imports k3kit's CLI and the ledger (and
#: the PostgreSQL driver for a PostgreSQL ledger), says it is ready,
#: waits for the go on stdin, then runs ``k3kit ledger purchase`` (the CLI's own ``main``) once
#: per payment reference given, and prints each one's exit status and output as JSON.
RACER = """
import contextlib, io, json, sys
from k3kit.cli._app import main
import k3kit.cli.commerce, k3kit.commerce.ledger  # what a purchase imports, before the go
common, refs = json.loads(sys.argv[1]), sys.argv[2:]
if common[common.index("--db") + 1].startswith("postgresql"):
    import psycopg
print("ready", flush=True)
if sys.stdin.readline() != "go\\n":
    sys.exit(2)
done = []
for ref in refs:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main([*common, "--payment", ref])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    done.append({"ref": ref, "code": code, "out": out.getvalue()})
print(json.dumps(done), flush=True)
"""


def race_purchases(
    db: str, lic: Path, terms: Path, *, processes: int, each: int
) -> list[dict[str, Any]]:
    """``processes`` buyers in separate processes, each buying ``each`` times in a row, all
    released at once: the start-ups (an interpreter and k3kit's imports each) are over before the
    first purchase, so the purchases overlap in the database instead of in the importing; each
    purchase's exit status, stdout (``--json``) and payment reference, in no particular order."""
    import json
    import sys

    common = ["ledger", "purchase", "--db", db, "--licence", str(lic), "--terms", str(terms)]
    common += ["--amount", "250000", "--currency", "EUR", "--package", "kimi-k3-b300x8", "--json"]
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, json.dumps(common)]
            + [f"PAY-R{p}-{i}" for i in range(each)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(processes)
    ]
    try:
        for racer in racers:  # every one imported and waiting before any is released
            assert racer.stdout is not None
            if racer.stdout.readline() != "ready\n":
                racer.kill()
                raise AssertionError(f"a racer did not start: {racer.communicate()[1]}")
        for racer in racers:  # then all released, before waiting on any
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        outs = [racer.communicate(timeout=300) for racer in racers]
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
                racer.wait()
    assert [r.returncode for r in racers] == [0] * processes, [err for _, err in outs]
    return [row for out, _ in outs for row in json.loads(out)]


def attacker_rewrite(db: str, cluster: Cluster | None, edits: list[str]) -> None:
    """What whoever can write the database does: turn the guards off, edit rows, then recompute
    every body and entry hash with the project's own chain functions, so the chain is consistent
    again (nothing k3kit keeps in the database can tell)."""
    from k3kit.commerce.ledger import chain

    conn: Any
    if db.startswith("postgresql"):
        import psycopg

        assert cluster is not None
        conn, q = psycopg.connect(db), "%s"
        conn.execute("SET session_replication_role = replica")  # every trigger off
    else:
        import sqlite3

        conn, q = sqlite3.connect(db), "?"
        triggers = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        for (name,) in triggers.fetchall():
            conn.execute(f"DROP TRIGGER {name}")
    for statement in edits:
        conn.execute(statement)
    prev = chain.GENESIS
    for seq, kind, ref in conn.execute(
        "SELECT seq, kind, ref FROM entries ORDER BY seq"
    ).fetchall():
        cols = chain.COLUMNS[kind]
        row = conn.execute(f"SELECT {', '.join(cols)} FROM {kind} WHERE seq = {q}", (seq,))
        body = chain.body_hash(kind, dict(zip(cols, row.fetchone(), strict=True)))
        new = chain.entry_hash(seq, kind, ref, body, prev)
        sets = f"body_sha256 = {q}, prev_hash = {q}, row_hash = {q}"
        conn.execute(f"UPDATE entries SET {sets} WHERE seq = {q}", (body, prev, new, seq))
        prev = new
    conn.commit()
    conn.close()


T = TypeVar("T")


def on_ledger(db: str | Path, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(engine, *args, **kwargs)`` on k3kit's engine for ``db``, disposed afterwards (its
    pooled connections closed), as the CLI does (``cli.commerce._open_ledger``). An in-process
    test that dropped the engine left its connections to the garbage collector, whose
    ResourceWarning then landed in whichever test ran next."""
    from k3kit.commerce.ledger import open_engine

    engine = open_engine(str(db))
    try:
        return call(engine, *args, **kwargs)
    finally:
        engine.dispose()
