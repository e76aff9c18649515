"""The publisher's root verbs end to end through the real CLI, and the state file's defences."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from k3kit.errors import VerificationError
from k3kit.trust import rollback
from tests.conftest import GoldenKit, run_k3kit
from tests.trustkit import keypair


def _ok(*args: object) -> str:
    proc = run_k3kit(*args)  # type: ignore[arg-type]
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_root_create_add_key_sign_attach_then_verify(golden: GoldenKit, tmp_path: Path) -> None:
    a, b = keypair(tmp_path, "root-a"), keypair(tmp_path, "root-b")
    new_release = keypair(tmp_path, "rel-2027")
    one, two = tmp_path / "1.root.json", tmp_path / "2.root.json"
    _ok(
        "root",
        "create",
        "-o",
        one,
        "--root-key",
        a.public,
        "--root-key",
        b.public,
        "--root-threshold",
        "2",
        "--release-key",
        golden.key.public,
        "--expires",
        "2099-01-01T00:00:00Z",
        "--sign-key",
        a.private,
        "--sign-key",
        b.private,
    )
    _ok(
        "root",
        "add-key",
        one,
        "-o",
        two,
        "--key",
        new_release.public,
        "--not-before",
        "2026-01-01T00:00:00Z",
        "--expires",
        "2099-01-01T00:00:00Z",
        "--sign-key",
        a.private,
    )
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    # One of two root signatures: attach refuses the chain, exit 1.
    proc = run_k3kit("root", "attach", kit, one, two)
    assert proc.returncode == 1 and "ROOT_UNTRUSTED" not in proc.stdout
    assert "needs 2" in proc.stderr
    _ok("root", "sign", two, "--key", b.private)
    proc = run_k3kit("root", "sign", two, "--key", b.private)
    assert proc.returncode == 3  # the same key again adds nothing
    _ok("root", "attach", kit, one, two)
    _ok("countersign", kit, "--key", new_release.private)
    out = json.loads(_ok("verify", kit, "--root", one, "--state-dir", tmp_path / "s", "--json"))
    assert out["ok"] is True and out["rollback"]["sequence"] == 1
    assert "signed by 2 of 1 required" in out["checks"][1]["detail"]  # both keys counted


def test_verify_needs_trust_or_root(golden: GoldenKit, tmp_path: Path) -> None:
    assert run_k3kit("verify", golden.kit).returncode == 2
    proc = run_k3kit("verify", golden.kit, "--trust", golden.key.public, "--allow-rollback")
    assert proc.returncode == 2


def test_group_writable_state_file_is_refused_not_ignored(tmp_path: Path) -> None:
    decision = rollback.Decision("p/stable", 3, "c" * 64, None, False, "")
    rollback.record(tmp_path, decision, now="2026-12-01T00:00:00Z")
    state = tmp_path / "rollback.json"
    assert state.stat().st_mode & 0o777 == 0o600
    os.chmod(state, 0o660)
    with pytest.raises(VerificationError) as exc:
        rollback.check(tmp_path, package="p", channel="stable", sequence=4, kit_sha256="d" * 64)
    assert exc.value.code == "ROLLBACK_STATE_INVALID"


def test_check_and_record_for_install_and_launch(golden: GoldenKit, tmp_path: Path) -> None:
    from k3kit.sign import read_receipt
    from tests.trustkit import pub

    statement = read_receipt(golden.kit / "receipt.dsse.json", [pub(golden.key)]).statement
    first = rollback.check_and_record(tmp_path, statement, "e" * 64)
    assert first.previous is None and not first.override
    with pytest.raises(VerificationError) as exc:
        rollback.check_and_record(tmp_path, statement, "f" * 64)
    assert exc.value.code == "EQUIVOCATION"
    forced = rollback.check_and_record(tmp_path, statement, "f" * 64, allow_rollback=True)
    assert forced.override
    with pytest.raises(VerificationError) as exc:
        rollback.check_and_record(tmp_path, statement, "f" * 64, floor=2, allow_rollback=True)
    assert exc.value.code == "ROLLBACK"  # a root floor is not the operator's to lower


def test_archive_carries_the_root_chain(golden: GoldenKit, tmp_path: Path) -> None:
    from k3kit.archive import pack
    from k3kit.trust.edit import add_key
    from tests.trustkit import attach, build_kit, pub, root_v1, write_root

    root_key, new_key = keypair(tmp_path, "root"), keypair(tmp_path, "rel-2027")
    r1 = root_v1([root_key], [golden.key])
    one = write_root(tmp_path / "1.root.json", r1, [root_key])
    two = write_root(tmp_path / "2.root.json",
                     add_key(r1, "release", pub(new_key), expires=r1.expires), [root_key])
    kit = build_kit(tmp_path / "k", golden.lock, new_key)
    attach(kit, one, two)
    archive = tmp_path / "kit.tar.gz"
    pack(kit, archive)
    proc = run_k3kit("verify", archive, "--root", one, "--state-dir", tmp_path / "s", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["checks"][0]["id"] == "archive"
    assert (next((tmp_path / "s" / "roots").iterdir()) / "2.root.json").read_bytes() == (
        two.read_bytes()
    )
