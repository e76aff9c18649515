"""The publisher's root verbs end to end through the real CLI, and the state file's defences."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from k3kit.errors import VerificationError
from k3kit.signing.trust import rollback
from tests.conftest import GoldenKit, KeyFiles, run_k3kit
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
    from k3kit.signing.sign import read_receipt
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
    from k3kit.signing.trust.edit import add_key
    from tests.trustkit import attach, build_kit, pub, root_v1, write_root

    root_key, new_key = keypair(tmp_path, "root"), keypair(tmp_path, "rel-2027")
    r1 = root_v1([root_key], [golden.key])
    one = write_root(tmp_path / "1.root.json", r1, [root_key])
    two = write_root(
        tmp_path / "2.root.json",
        add_key(r1, "release", pub(new_key), expires=r1.expires),
        [root_key],
    )
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


def _create(tmp_path: Path, root_key: KeyFiles, *release: KeyFiles) -> Path:
    one = tmp_path / "1.root.json"
    releases = [arg for key in release for arg in ("--release-key", key.public)]
    _ok(
        "root",
        "create",
        "-o",
        one,
        "--root-key",
        root_key.public,
        "--root-threshold",
        "1",
        *releases,
        "--expires",
        "2099-01-01T00:00:00Z",
        "--sign-key",
        root_key.private,
    )
    return one


def _verify_with(golden: GoldenKit, tmp_path: Path, first: Path, *chain: Path) -> dict[str, Any]:
    kit = tmp_path / f"kit-{'-'.join(p.stem for p in chain)}"
    shutil.copytree(golden.kit, kit)
    _ok("root", "attach", kit, first, *chain)
    # A node of its own per chain: one node that saw two different root version 2 files would
    # rightly refuse the second.
    state = tmp_path / f"state-{kit.name}"
    proc = run_k3kit("verify", kit, "--root", first, "--state-dir", state, "--json")
    out: dict[str, Any] = json.loads(proc.stdout)
    out["exit"] = proc.returncode
    return out


def _codes(out: dict[str, Any]) -> set[str]:
    return {c.get("code") for c in out["checks"] if c.get("code")}


def test_root_floor_revoke_and_rotate_through_the_cli(golden: GoldenKit, tmp_path: Path) -> None:
    """Each edit verb writes N+1 and changes the verdict of the same signed kit as it says."""
    a, other = keypair(tmp_path, "root-a"), keypair(tmp_path, "rel-2028")
    one = _create(tmp_path, a, golden.key, other)
    assert _verify_with(golden, tmp_path, one)["exit"] == 0
    common = ("--expires", "2099-01-01T00:00:00Z", "--sign-key", a.private, "--json")

    # A floor above the kit's sequence (1) retires it, whatever this node's state says.
    two = tmp_path / "2.root.json"
    summary = json.loads(
        _ok("root", "floor", one, "-o", two, "--min-sequence", "kimi-k3-b300x8/stable=2", *common)
    )
    assert summary["version"] == 2 and summary["signatures"] == 1
    floored = _verify_with(golden, tmp_path, one, two)
    assert floored["exit"] == 1 and "ROLLBACK" in _codes(floored)

    # Revoking the kit's release key: its only signature no longer counts.
    three = tmp_path / "3.root.json"
    _ok(
        "root",
        "revoke",
        one,
        "-o",
        three,
        "--key",
        golden.key.public,
        "--reason",
        "compromise",
        "--since",
        "2026-01-01T00:00:00Z",
        *common,
    )
    revoked = _verify_with(golden, tmp_path, one, three)
    assert revoked["exit"] == 1 and "RECEIPT_KEY_REVOKED" in _codes(revoked)

    # Rotating the release role to the other key alone: the kit signed by the old one is
    # no longer trusted.
    four = tmp_path / "4.root.json"
    _ok(
        "root",
        "rotate",
        one,
        "-o",
        four,
        "--role",
        "release",
        "--key",
        other.public,
        "--threshold",
        "1",
        *common,
    )
    rotated = _verify_with(golden, tmp_path, one, four)
    assert rotated["exit"] == 1 and "RECEIPT_UNTRUSTED_KEY" in _codes(rotated)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("floor", "--min-sequence", "kimi-k3-b300x8/stable=two"), "expected PACKAGE/CHANNEL=N"),
        (("revoke", "--key", "PUB", "--reason", "lost", "--no-sign"), "No such option"),
    ],
    ids=["floor that is not a number", "an option that does not exist"],
)
def test_root_edit_usage_errors(
    golden: GoldenKit, tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    a = keypair(tmp_path, "root-a")
    one = _create(tmp_path, a, golden.key)
    verb, *rest = (str(golden.key.public) if x == "PUB" else x for x in args)
    proc = run_k3kit(
        "root",
        verb,
        one,
        "-o",
        tmp_path / "2.root.json",
        *rest,
        "--expires",
        "2099-01-01T00:00:00Z",
        "--sign-key",
        a.private,
    )
    assert proc.returncode == 2 and words in proc.stderr
    assert not (tmp_path / "2.root.json").exists()


def test_a_root_edit_without_a_signing_key_is_a_usage_error(
    golden: GoldenKit, tmp_path: Path
) -> None:
    a = keypair(tmp_path, "root-a")
    one = _create(tmp_path, a, golden.key)
    proc = run_k3kit(
        "root",
        "rotate",
        one,
        "-o",
        tmp_path / "2.root.json",
        "--role",
        "release",
        "--key",
        golden.key.public,
        "--threshold",
        "1",
        "--expires",
        "2099-01-01T00:00:00Z",
    )
    assert proc.returncode == 2 and "give at least one --sign-key" in proc.stderr


def test_root_create_says_when_the_release_key_would_sign_timestamps(tmp_path: Path) -> None:
    """A channel renews its timestamp daily on an online machine: a root whose timestamp role
    defaults to the release key would put that key there, so root create says so; with a
    timestamp key of its own it says nothing."""
    root, release, stamp = (keypair(tmp_path, n) for n in ("root", "release", "stamp"))
    base: list[str | Path] = ["root", "create", "--root-key", root.public]
    base += ["--release-key", release.public]
    tail: list[str | Path] = ["--expires", "2099-01-01T00:00:00Z", "--sign-key", root.private]
    defaulted = run_k3kit(*base, "-o", tmp_path / "a.root.json", *tail)
    assert defaulted.returncode == 0, defaulted.stderr
    assert "--timestamp-key" in defaulted.stderr and "offline" in defaulted.stderr
    own = run_k3kit(*base, "--timestamp-key", stamp.public, "-o", tmp_path / "b.root.json", *tail)
    assert own.returncode == 0, own.stderr
    assert "--timestamp-key" not in own.stderr
    stamped = json.loads((tmp_path / "b.root.json").read_text())["signed"]["roles"]["timestamp"]
    assert (
        stamped["keyids"]
        != json.loads((tmp_path / "a.root.json").read_text())["signed"]["roles"]["timestamp"][
            "keyids"
        ]
    )
