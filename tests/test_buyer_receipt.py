"""The buyer receipt: issued only for a verified kit under an entitlement valid at its release,
and checked by ``verify --buyer-receipt`` against this kit and this licence (no database)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GoldenKit, KeyFiles, make_kit, make_snapshot, run_k3kit
from tests.ledgerkit import attacker_rewrite, buy, on_ledger, sign_licence

BUILD = {
    "engine": "vllm",
    "version": "0.33.0",
    "image": "sha256:" + "ab" * 32,
    "patches": ["fix-moe-routing.patch"],
}
SERVE = "vllm serve /weights --tensor-parallel-size 8 \\\n  --max-model-len 131072\n"


@pytest.fixture
def setup(tmp_path: Path, signing_key: KeyFiles) -> dict[str, Path | str]:
    db = str(tmp_path / "ledger.sqlite")
    assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    buyer = tmp_path / "buyer"
    buyer.mkdir()
    assert run_k3kit("keygen", "--out", buyer / "acme").returncode == 0
    lic, terms = sign_licence(tmp_path, KeyFiles(buyer / "acme.key", buyer / "acme.pub"))
    (tmp_path / "build.json").write_text(json.dumps(BUILD))
    (tmp_path / "serve.sh").write_text(SERVE)
    return {"db": db, "licence": lic, "terms": terms, "dir": tmp_path}


def _issue(
    s: dict[str, Path | str],
    ent: str,
    kit: Path,
    key: KeyFiles,
    trust: Path,
    name: str = "buyer.json",
) -> subprocess.CompletedProcess[str]:
    d = Path(s["dir"])
    return run_k3kit(
        "buyer-receipt",
        "issue",
        ent,
        "--db",
        s["db"],
        "--kit",
        kit,
        "--trust",
        trust,
        "--build-record",
        d / "build.json",
        "--serve-command",
        d / "serve.sh",
        "--key",
        key.private,
        "-o",
        d / name,
        "--json",
    )


def test_issue_and_verify(setup: dict[str, Path | str], golden: GoldenKit) -> None:
    ent = str(
        buy(str(setup["db"]), Path(setup["licence"]), Path(setup["terms"]), "P1")["entitlement"]
    )
    done = _issue(setup, ent, golden.kit, golden.key, golden.key.public)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["licensee"] == "Acme GmbH" and out["released_at"] == "2026-11-01T00:00:00Z"
    receipt = Path(setup["dir"]) / "buyer.json"
    v = run_k3kit(
        "verify",
        golden.kit,
        "--trust",
        golden.key.public,
        "--buyer-receipt",
        receipt,
        "--licence",
        setup["licence"],
        "--json",
    )
    assert v.returncode == 0, v.stderr
    check = json.loads(v.stdout)["checks"][-1]
    assert check["id"] == "buyer_receipt" and check["status"] == "passed"
    import base64

    payload = json.loads(base64.b64decode(json.loads(receipt.read_bytes())["payload"]))
    assert payload["build_record"] == BUILD
    assert payload["serve_command"][:3] == ["vllm", "serve", "/weights"]
    assert "--max-model-len" in payload["serve_command"]
    assert payload["schema"] == "k3kit.buyer-receipt/v2" and payload["ledger"]["seq"] == 4
    lv = run_k3kit("ledger", "verify", "--db", setup["db"], "--trust", golden.key.public, "--json")
    assert lv.returncode == 0 and json.loads(lv.stdout)["counts"]["buyer_receipts"] == 1
    assert json.loads(lv.stdout)["anchored_through"] == 4  # the receipt's signed head
    again = _issue(setup, ent, golden.kit, golden.key, golden.key.public, name="again.json")
    assert again.returncode == 3 and "BUYER_RECEIPT_EXISTS" in again.stdout  # one per kit


def test_receipt_moved_to_another_kit_refused(
    setup: dict[str, Path | str], golden: GoldenKit, signing_key: KeyFiles, tmp_path: Path
) -> None:
    ent = str(
        buy(str(setup["db"]), Path(setup["licence"]), Path(setup["terms"]), "P1")["entitlement"]
    )
    assert _issue(setup, ent, golden.kit, golden.key, golden.key.public).returncode == 0
    other = make_kit(tmp_path / "k2", signing_key, make_snapshot(tmp_path / "k2" / "hf", 2))
    v = run_k3kit(
        "verify",
        other.kit,
        "--trust",
        signing_key.public,
        "--buyer-receipt",
        Path(setup["dir"]) / "buyer.json",
        "--json",
    )
    assert v.returncode == 1
    check = json.loads(v.stdout)["checks"][-1]
    assert check["code"] == "BUYER_RECEIPT_WRONG_KIT"


def test_receipt_with_another_licence_refused(
    setup: dict[str, Path | str], golden: GoldenKit, other_key: KeyFiles, tmp_path: Path
) -> None:
    ent = str(
        buy(str(setup["db"]), Path(setup["licence"]), Path(setup["terms"]), "P1")["entitlement"]
    )
    assert _issue(setup, ent, golden.kit, golden.key, golden.key.public).returncode == 0
    mine, _ = sign_licence(tmp_path, other_key, entity="Globex", name="other.json")
    v = run_k3kit(
        "verify",
        golden.kit,
        "--trust",
        golden.key.public,
        "--buyer-receipt",
        Path(setup["dir"]) / "buyer.json",
        "--licence",
        mine,
        "--json",
    )
    assert v.returncode == 1
    assert json.loads(v.stdout)["checks"][-1]["code"] == "BUYER_RECEIPT_WRONG_LICENCE"
    untrusted = run_k3kit(
        "verify",
        golden.kit,
        "--trust",
        golden.key.public,
        "--buyer-receipt",
        Path(setup["dir"]) / "buyer.json",
        "--json",
    )
    assert untrusted.returncode == 0
    lv = run_k3kit("ledger", "verify", "--db", setup["db"], "--trust", other_key.public, "--json")
    assert lv.returncode == 1 and "LEDGER_UNTRUSTED_ISSUER" in lv.stdout


def test_buyer_receipt_anchors_the_entitlement_it_was_issued_under(
    setup: dict[str, Path | str], golden: GoldenKit
) -> None:
    """The database's writer moves the buyer's entitlement five months later (same length, so
    the licence's price agrees) and recomputes the chain: the receipt row's signed head refuses
    it. They then also delete the receipt row and
    its entry (the tail) and recompute again: the database alone reads consistent, unanchored;
    the copy the buyer holds still names the head, and the chain no longer extends it."""
    from k3kit.commerce.ledger import read_anchor, verify_ledger
    from k3kit.signing.keys import load_public

    db = str(setup["db"])
    ent = str(buy(db, Path(setup["licence"]), Path(setup["terms"]), "P1")["entitlement"])
    assert _issue(setup, ent, golden.kit, golden.key, golden.key.public).returncode == 0
    held = (Path(setup["dir"]) / "buyer.json").read_bytes()
    seller = [load_public(golden.key.public)]
    shift = (
        "UPDATE entitlements SET valid_from = '2026-06-01T00:00:00Z', "
        f"valid_until = '2027-06-01T00:00:00Z' WHERE id = '{ent}'"
    )
    attacker_rewrite(db, None, [shift])
    report = on_ledger(db, verify_ledger, seller)
    assert report.first is not None and report.first.code == "LEDGER_ANCHOR_BROKEN"
    assert report.first.seq == 4
    attacker_rewrite(
        db,
        None,
        ["DELETE FROM buyer_receipts", "DELETE FROM entries WHERE kind = 'buyer_receipts'"],
    )
    report = on_ledger(db, verify_ledger, seller)
    assert report.ok and report.anchored_through is None and report.counts["buyer_receipts"] == 0
    anchor = read_anchor(held, seller, source="buyer.json")
    report = on_ledger(db, verify_ledger, seller, [anchor])
    assert report.first is not None and report.first.code == "LEDGER_ANCHOR_BROKEN"


def test_issue_refuses_an_entitlement_its_licence_does_not_cover(
    setup: dict[str, Path | str], golden: GoldenKit
) -> None:
    """Edited in the database (chain recomputed): an entitlement bought under a licence for
    another package, renamed to this kit's package; and one stretched to ten years. The signed
    licence, read back from the ledger, refuses both; no receipt is written."""
    db, d = str(setup["db"]), Path(setup["dir"])
    mine = str(buy(db, Path(setup["licence"]), Path(setup["terms"]), "P1")["entitlement"])
    buyer = KeyFiles(d / "buyer" / "acme.key", d / "buyer" / "acme.pub")
    other, terms = sign_licence(d, buyer, package="other-pkg", name="other.json")
    theirs = str(buy(db, other, terms, "P2", package="other-pkg")["entitlement"])
    attacker_rewrite(
        db,
        None,
        [
            f"UPDATE entitlements SET package = 'kimi-k3-b300x8' WHERE id = '{theirs}'",
            f"UPDATE entitlements SET valid_until = '2036-01-01T00:00:00Z' WHERE id = '{mine}'",
        ],
    )
    for ent, code in ((theirs, "LICENCE_OTHER_PACKAGE"), (mine, "LICENCE_OTHER_PRICE")):
        done = _issue(setup, ent, golden.kit, golden.key, golden.key.public)
        assert done.returncode == 1, done.stderr
        assert json.loads(done.stdout)["error"]["code"] == code
    assert not (d / "buyer.json").exists()


def test_a_sale_recorded_after_the_release_names_the_valid_from_that_covers_it(
    setup: dict[str, Path | str], golden: GoldenKit
) -> None:
    """The documented mistake (issue 24): the version sold was released 2026-11-01, the purchase
    was recorded with its term starting later (what the default, the purchase time, does). The
    receipt is refused, nothing is written, and the hint names the release time to record the
    sale with (docs/licence.md, "When the term starts")."""
    db, d = str(setup["db"]), Path(setup["dir"])
    late = buy(
        db,
        Path(setup["licence"]),
        Path(setup["terms"]),
        "P-LATE",
        valid_from="2026-12-01T00:00:00Z",
    )["entitlement"]
    refused = _issue(setup, str(late), golden.kit, golden.key, golden.key.public)
    assert refused.returncode == 1, refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "ENTITLEMENT_NOT_VALID_AT_RELEASE"
    assert "--valid-from 2026-11-01T00:00:00Z" in error["hint"]
    assert not (d / "buyer.json").exists()


def test_maintenance_only_within_the_term(setup: dict[str, Path | str], golden: GoldenKit) -> None:
    """The kit was released 2026-11-01: an entitlement that ended 2026-07-01 gets no receipt for
    it, one running 2026-06-01..2027-06-01 does; the database refuses a direct insert too."""
    db, lic, terms = str(setup["db"]), Path(setup["licence"]), Path(setup["terms"])
    expired = str(buy(db, lic, terms, "P-OLD", valid_from="2025-07-01T00:00:00Z")["entitlement"])
    current = str(buy(db, lic, terms, "P-NEW", valid_from="2026-06-01T00:00:00Z")["entitlement"])
    refused = _issue(setup, expired, golden.kit, golden.key, golden.key.public)
    assert refused.returncode == 1
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "ENTITLEMENT_NOT_VALID_AT_RELEASE"
    assert "renewal" in error["hint"]
    assert _issue(setup, current, golden.kit, golden.key, golden.key.public).returncode == 0
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys = ON")
    with pytest.raises(sqlite3.IntegrityError, match="not valid at this release"):
        conn.execute(
            "INSERT INTO buyer_receipts SELECT 'sha256:x', :e, kit_name, kit_version, "
            "'sha256:y', released_at, issued_at, issuer_key, envelope, 999 FROM buyer_receipts",
            {"e": expired},
        )
    conn.close()


def test_kit_that_does_not_verify_gets_no_receipt(
    setup: dict[str, Path | str], kit: Path, golden: GoldenKit, other_key: KeyFiles
) -> None:
    ent = str(
        buy(str(setup["db"]), Path(setup["licence"]), Path(setup["terms"]), "P1")["entitlement"]
    )
    (kit / "README.md").write_text("tampered\n")
    done = _issue(setup, ent, kit, golden.key, golden.key.public)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "KIT_FILE_CHANGED"
    done = _issue(setup, ent, golden.kit, golden.key, other_key.public)
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"]["code"] == "RECEIPT_UNTRUSTED_KEY"
    assert not (Path(setup["dir"]) / "buyer.json").exists()


def test_verify_node_never_imports_a_database() -> None:
    code = (
        "import sys, k3kit.node.verify, k3kit.commerce.buyer_receipt, k3kit.commerce.licence; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sqlalchemy', 'psycopg') or m.startswith('k3kit.commerce.ledger')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_second_buyer_receipt_for_the_same_kit_is_refused_by_name_not_by_sqlite(
    setup: dict[str, Path | str], golden: GoldenKit
) -> None:
    """The seller runs `buyer-receipt issue` twice for the same entitlement and kit (a retry
    after a lost terminal): a registered code and a message naming the receipt already issued,
    not SQLite's "UNIQUE constraint failed"; the first receipt and the ledger stay as they were."""
    ent = str(
        buy(str(setup["db"]), Path(setup["licence"]), Path(setup["terms"]), "P1")["entitlement"]
    )
    first = _issue(setup, ent, golden.kit, golden.key, golden.key.public, name="first.json")
    assert first.returncode == 0, first.stderr
    kept = (Path(setup["dir"]) / "first.json").read_bytes()
    again = _issue(setup, ent, golden.kit, golden.key, golden.key.public, name="again.json")
    assert again.returncode == 3, again.stderr
    error = json.loads(again.stdout)["error"]
    assert error["code"] == "BUYER_RECEIPT_EXISTS"
    assert f"entitlement {ent} already has a buyer receipt" in error["message"]
    assert "one per entitlement and kit" in error["hint"]
    assert "UNIQUE" not in again.stderr + again.stdout
    assert not (Path(setup["dir"]) / "again.json").exists()
    assert (Path(setup["dir"]) / "first.json").read_bytes() == kept
    done = run_k3kit("ledger", "verify", "--db", setup["db"], "--trust", golden.key.public)
    assert done.returncode == 0, done.stderr
