"""Named scenarios, one per attack class on trust over time (after python-tuf's key-rotation
tests): rotation, revocation, expiry, a root signed by new keys alone, thresholds, rollback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from k3kit.signing.trust.edit import add_key, revoke, rotate
from tests.conftest import GoldenKit, KeyFiles, run_k3kit
from tests.trustkit import (
    attach,
    build_kit,
    duplicate_signature,
    keypair,
    kid,
    pub,
    resign_receipt,
    root_v1,
    with_version,
    write_root,
)


def verify(kit: Path, root: Path, state: Path, *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    proc = run_k3kit("verify", kit, "--root", root, "--state-dir", state, "--json", *extra)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}


def codes(report: dict) -> set[str]:  # type: ignore[type-arg]
    return {c["code"] for c in report.get("checks", []) if c.get("code")}


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, KeyFiles]:
    folder = tmp_path / "keys"
    return {n: keypair(folder, n) for n in ("root_a", "root_b", "rel_2026", "rel_2027")}


def test_key_added_by_root_2_verifies_on_node_pinned_to_root_1(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    r1 = root_v1([keys["root_a"]], [keys["rel_2026"]])
    root1 = write_root(tmp_path / "1.root.json", r1, [keys["root_a"]])
    r2 = add_key(r1, "release", pub(keys["rel_2027"]), expires=r1.expires)
    root2 = write_root(tmp_path / "2.root.json", r2, [keys["root_a"]])
    kit = build_kit(tmp_path / "k", golden.lock, keys["rel_2027"])
    rc, report = verify(kit, root1, tmp_path / "state")
    assert rc == 1 and "RECEIPT_UNTRUSTED_KEY" in codes(report)  # root 1 alone does not know it
    attach(kit, root1, root2)
    rc, report = verify(kit, root1, tmp_path / "state")
    assert rc == 0, report
    assert "accepted root version(s) 2" in report["checks"][0]["detail"]
    assert (tmp_path / "state" / "roots").is_dir()


def test_key_revoked_by_root_2_fails_once_seen_even_from_kit_carrying_only_root_1(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    r1 = root_v1([keys["root_a"]], [keys["rel_2026"], keys["rel_2027"]])
    root1 = write_root(tmp_path / "1.root.json", r1, [keys["root_a"]])
    r2 = revoke(
        r1,
        kid(keys["rel_2026"]),
        reason="compromise",
        since="2026-05-02T00:00:00Z",
        expires=r1.expires,
    )
    root2 = write_root(tmp_path / "2.root.json", r2, [keys["root_a"]])
    state = tmp_path / "state"
    # The node sees root 2 through a genuine kit signed by the surviving key.
    good = build_kit(tmp_path / "good", golden.lock, keys["rel_2027"])
    attach(good, root1, root2)
    assert verify(good, root1, state)[0] == 0
    # A kit signed by the revoked key, carrying only root 1, verified before root 2 was seen...
    stale = build_kit(tmp_path / "stale", golden.lock, keys["rel_2026"])
    attach(stale, root1)
    assert verify(stale, root1, tmp_path / "fresh-node")[0] == 0
    # ...is refused on the node that has seen root 2.
    rc, report = verify(stale, root1, state)
    assert rc == 1 and "RECEIPT_KEY_REVOKED" in codes(report)


def test_expired_root_is_refused(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    r1 = root_v1([keys["root_a"]], [golden.key], expires="2020-01-01T00:00:00Z")
    root1 = write_root(tmp_path / "1.root.json", r1, [keys["root_a"]])
    rc, report = verify(golden.kit, root1, tmp_path / "state")
    assert rc == 1 and "ROOT_EXPIRED" in codes(report)
    assert report["checks"][1]["status"] == "not checked"


def test_root_signed_by_the_new_keys_alone_is_refused(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    r1 = root_v1([keys["root_a"]], [keys["rel_2026"]])
    root1 = write_root(tmp_path / "1.root.json", r1, [keys["root_a"]])
    # An attacker's root 2: root role moved to their key, the release role to golden's key.
    r2 = rotate(r1, "root", [pub(keys["root_b"])], 1, expires=r1.expires)
    r2 = rotate(r2, "release", [pub(golden.key)], 1, expires=r1.expires)
    assert r2.version == 3  # two edits: make it 2 again for the attack
    r2 = with_version(r2, 2)
    root2 = write_root(tmp_path / "2.root.json", r2, [keys["root_b"]])
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    attach(kit, root2)
    rc, report = verify(kit, root1, tmp_path / "state")
    assert rc == 1 and "ROOT_UNTRUSTED" in codes(report)
    assert not (tmp_path / "state" / "roots").exists() or not any(
        (tmp_path / "state" / "roots").rglob("2.root.json")
    )
    # Signed by both the old and the new root keys, the same rotation is accepted.
    write_root(tmp_path / "2.root.json", r2, [keys["root_a"], keys["root_b"]])
    attach(kit, tmp_path / "2.root.json")
    assert verify(kit, root1, tmp_path / "state")[0] == 0


@pytest.mark.parametrize("hint", [None, "0" * 64], ids=["same_key_twice", "two_keyids_one_key"])
def test_threshold_2_not_met_by_one_key_counted_twice(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path, hint: str | None
) -> None:
    r1 = root_v1([keys["root_a"]], [golden.key, keys["rel_2027"]], release_threshold=2)
    root1 = write_root(tmp_path / "1.root.json", r1, [keys["root_a"]])
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    duplicate_signature(kit, hint=hint)
    rc, report = verify(kit, root1, tmp_path / "state")
    assert rc == 1 and "RECEIPT_THRESHOLD_NOT_MET" in codes(report)
    # Two distinct keys meet it; the second one is added with the countersign verb.
    resign_receipt(kit, [golden.key])
    proc = run_k3kit("countersign", kit, "--key", keys["rel_2027"].private)
    assert proc.returncode == 0, proc.stderr
    assert verify(kit, root1, tmp_path / "state")[0] == 0


def test_node_that_accepted_sequence_5_refuses_4_and_another_5(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    r1 = root_v1([keys["root_a"]], [golden.key])
    root1 = write_root(tmp_path / "1.root.json", r1, [keys["root_a"]])
    state = tmp_path / "state"
    five = build_kit(tmp_path / "five", golden.lock, golden.key, sequence=5, version="1.5.0")
    four = build_kit(tmp_path / "four", golden.lock, golden.key, sequence=4, version="1.4.0")
    other5 = build_kit(tmp_path / "other5", golden.lock, golden.key, sequence=5, version="1.5.1")
    assert verify(five, root1, state)[0] == 0
    assert verify(five, root1, state)[0] == 0  # the same kit again is fine
    rc, report = verify(four, root1, state)
    assert rc == 1 and "ROLLBACK" in codes(report)
    rc, report = verify(other5, root1, state)
    assert rc == 1 and "EQUIVOCATION" in codes(report)
    saved = json.loads((state / "rollback.json").read_bytes())
    assert saved["entries"]["kimi-k3-b300x8/stable"]["sequence"] == 5
    assert (state / "rollback.json").stat().st_mode & 0o777 == 0o600
    # The operator's override is loud and recorded.
    proc = run_k3kit("verify", four, "--root", root1, "--state-dir", state, "--allow-rollback")
    assert proc.returncode == 0 and "WARNING" in proc.stderr
    saved = json.loads((state / "rollback.json").read_bytes())
    assert saved["entries"]["kimi-k3-b300x8/stable"] | {"accepted_at": ""} == {
        "sequence": 4,
        "kit_sha256": saved["entries"]["kimi-k3-b300x8/stable"]["kit_sha256"],
        "accepted_at": "",
        "override": True,
    }


def test_install_and_launch_apply_rollback_protection(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    from tests.launchkit import engine_env, make_fake_engine

    r1 = root_v1([keys["root_a"]], [golden.key])
    root1 = write_root(tmp_path / "1.root.json", r1, [keys["root_a"]])
    state = tmp_path / "state"
    five = build_kit(tmp_path / "five", golden.lock, golden.key, sequence=5, version="1.5.0")
    four = build_kit(tmp_path / "four", golden.lock, golden.key, sequence=4, version="1.4.0")
    into = tmp_path / "kits"
    args = ("--root", root1, "--state-dir", state, "--into", into, "--json")
    assert run_k3kit("install", five, *args).returncode == 0
    proc = run_k3kit("install", four, *args)
    assert proc.returncode == 1 and "ROLLBACK" in proc.stdout
    assert sorted(p.name for p in into.iterdir()) == ["kimi-k3-b300x8-1.5.0"]
    fake = make_fake_engine(tmp_path / "engine")
    proc = run_k3kit(
        "launch",
        four,
        "--no-preflight",
        "--profile",
        "interactive",
        "--root",
        root1,
        "--state-dir",
        state,
        "--weights",
        golden.snapshot,
        "--dry-run",
        env=engine_env(fake),
    )
    assert proc.returncode == 1 and "ROLLBACK" in proc.stderr
    assert "the engine was not started" in proc.stderr
