"""Purchases per second on the ledger with 16 concurrent processes, SQLite and PostgreSQL.

Each of 16 separate processes (multiprocessing, spawn) opens its own engine and records N
purchases (payment + entitlement, each in one transaction bound to one verified licence), all
at once against one ledger. Reports wall-clock purchases per second, then runs `ledger verify`'s
checks and reports the count of entitlements without a payment or licence (must be 0) and of
payments without an entitlement. PostgreSQL is a throw-away cluster started from Debian's
binaries (tests/ledgerkit.py). Writes benchmarks/results/ledger.json.
Run: python benchmarks/bench_ledger.py [--per-process 25]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from tests.ledgerkit import TERMS, pg_bin, start_cluster  # noqa: E402

from k3kit.commerce.ledger import migrate, open_engine, purchase, verify_ledger  # noqa: E402
from k3kit.commerce.licence import licence_body, sign_licence  # noqa: E402
from k3kit.models.commerce import AFFIRMATIONS  # noqa: E402

PROCS = 16
NOW = "2026-11-01T00:00:00Z"


def _licence() -> bytes:
    key = Ed25519PrivateKey.generate()
    body = licence_body(
        TERMS.encode(),
        "TERMS.md",
        entity="Acme GmbH",
        package="kimi-k3-b300x8",
        price={"amount_minor": 250000, "currency": "EUR", "term_days": 365},
        signer_name="J",
        authority="CTO",
        affirm=list(AFFIRMATIONS),
        public_key=key.public_key(),
        signed_at=NOW,
    )
    return sign_licence(body, key)


def _worker(db: str, licence: bytes, proc: int, n: int) -> None:
    engine = open_engine(db)
    for i in range(n):
        purchase(
            engine,
            licence=licence,
            terms=TERMS.encode(),
            terms_name="TERMS.md",
            payment_ref=f"PAY-{proc}-{i}",
            amount_minor=250000,
            currency="EUR",
            package="kimi-k3-b300x8",
            valid_from=NOW,
            valid_until="2027-11-01T00:00:00Z",
            now=NOW,
        )


def run(db: str, per_process: int) -> dict[str, object]:
    engine = open_engine(db)
    migrate(engine, NOW)
    licence = _licence()
    _worker(db, licence, 999, 1)  # terms and licence recorded once, outside the timing
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(db, licence, p, per_process)) for p in range(PROCS)]
    start = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - start
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    report = verify_ledger(engine)
    total = PROCS * per_process
    return {
        "processes": PROCS,
        "purchases": total,
        "failed_processes": len(failed),
        "seconds": round(elapsed, 3),
        "purchases_per_second": round(total / elapsed, 1),
        "ledger_ok": report.ok,
        "rows": report.rows,
        "orphans": report.orphans,
        "note": "wall clock includes 16 interpreter starts (spawn) and engine connects",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-process", type=int, default=25)
    args = ap.parse_args()
    results: dict[str, object] = {"machine": platform.platform(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        results["sqlite"] = run(str(Path(tmp) / "bench.sqlite"), args.per_process)
        print("sqlite    ", json.dumps(results["sqlite"]))
    if pg_bin() is None:
        results["postgresql"] = "not run: PostgreSQL is not installed"
    else:
        gen = start_cluster()
        cluster = next(gen)
        try:
            results["postgresql"] = run(cluster.fresh_db("bench"), args.per_process)
        finally:
            gen.close()
    print("postgresql", json.dumps(results["postgresql"]))
    out = ROOT / "benchmarks" / "results" / "ledger.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
