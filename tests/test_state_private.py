"""State others can write is never trusted (issue 19, class 3), and one version names one kit
(class 8).

The node's rollback memory (``rollback.json``), the roots it accepted (``roots/``, which carry its
revocation memory), the verification cache and launch's runtime folder all pass one check,
:func:`k3kit._fs.private_dir`. The attacker here is a real second user (uid 65534, through
:mod:`tests.cotenant`): what they try is what the kernel lets them do, not a mock. The node's own
cleanup (a tool that frees space, the owner's ``rm``) is the other way state vanishes: a half that
vanished is ``STATE_LOST``, never a first run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from k3kit._fs import private_dir
from k3kit.errors import EnvironmentProblem
from k3kit.signing.trust.edit import revoke
from tests.conftest import GoldenKit, KeyFiles, run_k3kit
from tests.cotenant import COTENANT_UID, cotenant_python, needs_root, shared_folder
from tests.trustkit import attach, build_kit, keypair, kid, root_v1, write_root

# The co-tenant's steps: each prints what the kernel answered, so a test can show it was refused.
_TRY = """
import os, sys
op, *paths = sys.argv[1:]
try:
    {"remove": os.remove, "rename": os.rename, "mkdir": os.mkdir}[op](*paths)
    print("done")
except OSError as exc:
    print(type(exc).__name__)
"""

_PLANT_STATE = """
import os, sys
folder = sys.argv[1]
os.mkdir(folder)
os.chmod(folder, int(sys.argv[2], 8))
with open(os.path.join(folder, "rollback.json"), "w") as f:
    f.write('{"entries":{},"schema":"k3kit.rollback-state/v1"}')
os.chmod(os.path.join(folder, "rollback.json"), 0o600)
"""


def cotenant_try(op: str, *paths: Path) -> str:
    return cotenant_python(_TRY, op, *map(str, paths)).stdout.strip()


def verify(kit: Path, root: Path, state: Path, *extra: str | Path) -> tuple[int, dict[str, Any]]:
    proc = run_k3kit("verify", kit, "--root", root, "--state-dir", state, "--json", *extra)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}


def codes(report: dict[str, Any]) -> set[str]:
    found = {c["code"] for c in report.get("checks", []) if c.get("code")}
    return found | ({report["error"]["code"]} if "error" in report else set())


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, KeyFiles]:
    folder = tmp_path / "keys"
    return {n: keypair(folder, n) for n in ("root", "rel_old", "rel_new")}


@pytest.fixture
def five_and_four(golden: GoldenKit, tmp_path: Path) -> tuple[Path, Path]:
    five = build_kit(tmp_path / "five", golden.lock, golden.key, sequence=5, version="1.5.0")
    four = build_kit(tmp_path / "four", golden.lock, golden.key, sequence=4, version="1.4.0")
    return five, four


def pinned_root(golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path) -> Path:
    return write_root(
        tmp_path / "1.root.json", root_v1([keys["root"]], [golden.key]), [keys["root"]]
    )


# --- a co-tenant against the rollback memory ---------------------------------------------------


@needs_root
def test_cotenant_cannot_delete_or_rename_rollback_memory_in_a_sticky_shared_folder(
    golden: GoldenKit,
    keys: dict[str, KeyFiles],
    five_and_four: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    five, four = five_and_four
    root = pinned_root(golden, keys, tmp_path)
    with shared_folder(0o1777) as shared:
        state = shared / "state"
        assert verify(five, root, state)[0] == 0
        # The attacker's steps, as uid 65534: each one is refused by the kernel.
        assert cotenant_try("remove", state / "rollback.json") == "PermissionError"
        assert cotenant_try("rename", state / "roots", shared / "roots-gone") == "PermissionError"
        assert cotenant_try("rename", state, shared / "state-gone") == "PermissionError"
        rc, report = verify(four, root, state)
        assert rc == 1 and "ROLLBACK" in codes(report)


@needs_root
def test_cotenant_renames_the_state_folder_away_when_its_parent_is_not_sticky(
    golden: GoldenKit,
    keys: dict[str, KeyFiles],
    five_and_four: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    """Before the fix the renamed-away folder was recreated empty and the older kit verified
    with exit 0: a node that forgets is a node that can be rolled back."""
    five, four = five_and_four
    root = pinned_root(golden, keys, tmp_path)
    with shared_folder(0o1777) as shared:
        state = shared / "state"
        assert verify(five, root, state)[0] == 0
        shared.chmod(0o777)  # the shared folder loses its sticky bit (an admin's slip)
        assert cotenant_try("rename", state, shared / "state-gone") == "done"
        rc, report = verify(four, root, state)
        assert rc == 4 and codes(report) == {"STATE_DIR_UNSAFE"}, report
        assert not state.exists()  # refused, not silently recreated
        # ...and the node refuses the same folder for the newer kit too: the place is unsafe.
        rc, report = verify(five, root, state)
        assert rc == 4 and codes(report) == {"STATE_DIR_UNSAFE"}


@needs_root
@pytest.mark.parametrize("mode", ["700", "777"])
def test_state_folder_planted_by_a_cotenant_is_refused(
    golden: GoldenKit,
    keys: dict[str, KeyFiles],
    five_and_four: tuple[Path, Path],
    tmp_path: Path,
    mode: str,
) -> None:
    """The co-tenant makes the node's state folder first, with an empty memory in it."""
    _five, four = five_and_four
    root = pinned_root(golden, keys, tmp_path)
    with shared_folder(0o1777) as shared:
        state = shared / "state"
        cotenant_python(_PLANT_STATE, str(state), mode)
        assert state.stat().st_uid == COTENANT_UID
        rc, report = verify(four, root, state)
        assert rc == 4 and codes(report) == {"STATE_DIR_UNSAFE"}, report
        assert sorted(p.name for p in state.iterdir()) == ["rollback.json"]  # nothing written


@needs_root
def test_cotenant_cannot_remove_the_revocation_memory_in_a_sticky_shared_folder(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """The node learnt from root 2 that ``rel_old`` is revoked. Forgetting root 2 would let a kit
    signed by the revoked key verify against the pinned root 1 again."""
    good, stale, root1 = _revocation_setup(golden, keys, tmp_path)
    with shared_folder(0o1777) as shared:
        state = shared / "state"
        assert verify(good, root1, state)[0] == 0
        pin = next((state / "roots").iterdir())
        assert cotenant_try("remove", pin / "2.root.json") == "PermissionError"
        assert cotenant_try("rename", state / "roots", shared / "x") == "PermissionError"
        rc, report = verify(stale, root1, state)
        assert rc == 1 and "RECEIPT_KEY_REVOKED" in codes(report)


def _revocation_setup(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> tuple[Path, Path, Path]:
    r1 = root_v1([keys["root"]], [keys["rel_old"], keys["rel_new"]])
    root1 = write_root(tmp_path / "1.root.json", r1, [keys["root"]])
    r2 = revoke(
        r1,
        kid(keys["rel_old"]),
        reason="compromise",
        since="2026-05-02T00:00:00Z",
        expires=r1.expires,
    )
    root2 = write_root(tmp_path / "2.root.json", r2, [keys["root"]])
    good = build_kit(tmp_path / "good", golden.lock, keys["rel_new"])
    attach(good, root1, root2)
    stale = build_kit(tmp_path / "stale", golden.lock, keys["rel_old"])
    attach(stale, root1)
    return good, stale, root1


# --- state the owner's own tools delete ----------------------------------------------------------


def test_rollback_json_deleted_while_roots_remain_is_state_lost_not_a_first_run(
    golden: GoldenKit,
    keys: dict[str, KeyFiles],
    five_and_four: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    five, four = five_and_four
    root = pinned_root(golden, keys, tmp_path)
    state = tmp_path / "state"
    assert verify(five, root, state)[0] == 0
    (state / "rollback.json").unlink()
    rc, report = verify(four, root, state)
    assert rc == 1 and "STATE_LOST" in codes(report), report
    assert not (state / "rollback.json").exists()  # not recreated behind the operator's back


def test_roots_folder_removed_while_rollback_json_remains_is_state_lost(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    good, stale, root1 = _revocation_setup(golden, keys, tmp_path)
    state = tmp_path / "state"
    assert verify(good, root1, state)[0] == 0
    shutil.rmtree(state / "roots")
    rc, report = verify(stale, root1, state)
    assert rc == 1 and "STATE_LOST" in codes(report), report
    assert "RECEIPT_KEY_REVOKED" not in codes(report)  # it never got as far as trusting root 1


def test_an_accepted_root_deleted_from_roots_is_state_lost(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    good, stale, root1 = _revocation_setup(golden, keys, tmp_path)
    state = tmp_path / "state"
    assert verify(good, root1, state)[0] == 0
    pin = hashlib.sha256(root1.read_bytes()).hexdigest()[:32]
    (state / "roots" / pin / "2.root.json").unlink()
    rc, report = verify(stale, root1, state)
    assert rc == 1 and "STATE_LOST" in codes(report), report
    # A kit that carries the chain up to what the node accepted brings it back.
    rc, report = verify(good, root1, state)
    assert rc == 0, report
    assert (state / "roots" / pin / "2.root.json").exists()


def test_removing_the_whole_state_folder_is_a_fresh_node_as_documented(
    golden: GoldenKit,
    keys: dict[str, KeyFiles],
    five_and_four: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    """What the owner can still do: docs/trust.md says deleting the folder forgets everything."""
    five, four = five_and_four
    root = pinned_root(golden, keys, tmp_path)
    state = tmp_path / "state"
    assert verify(five, root, state)[0] == 0
    shutil.rmtree(state)
    assert verify(four, root, state)[0] == 0


# --- how state folders are made and checked ------------------------------------------------------


def test_missing_state_folders_are_created_0700_one_by_one(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    root = pinned_root(golden, keys, tmp_path)
    state = tmp_path / "a" / "b" / "state"
    old = os.umask(0o022)  # the usual umask would make `mkdir -p` parents 0755
    try:
        assert verify(golden.kit, root, state)[0] == 0
    finally:
        os.umask(old)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", state, state / "roots"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE((state / "rollback.json").stat().st_mode) == 0o600


def test_group_writable_state_folder_is_refused_with_the_fix(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    root = pinned_root(golden, keys, tmp_path)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    state.chmod(0o770)
    proc = run_k3kit("verify", golden.kit, "--root", root, "--state-dir", state, "--json")
    assert proc.returncode == 4
    assert json.loads(proc.stdout)["error"]["code"] == "STATE_DIR_UNSAFE"
    assert f"chmod 700 {state}" in proc.stderr
    assert not (state / "rollback.json").exists()


def test_install_refuses_a_state_folder_it_cannot_trust(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    root = pinned_root(golden, keys, tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone could swap the state folder inside it
    into = tmp_path / "kits"
    proc = run_k3kit(
        "install",
        golden.kit,
        "--root",
        root,
        "--state-dir",
        shared / "state",
        "--into",
        into,
        "--json",
    )
    assert proc.returncode == 4, proc.stderr
    assert json.loads(proc.stdout)["error"]["code"] == "STATE_DIR_UNSAFE"
    assert not (shared / "state").exists()
    assert not into.exists() or not any(into.iterdir())


@needs_root
def test_a_link_owned_by_a_cotenant_on_the_way_to_the_state_folder_is_refused(
    tmp_path: Path,
) -> None:
    target = tmp_path / "mine"
    target.mkdir(mode=0o700)
    link = tmp_path / "via"
    link.symlink_to(target)
    os.lchown(link, COTENANT_UID, COTENANT_UID)
    with pytest.raises(EnvironmentProblem) as exc:
        private_dir(link / "state")
    assert exc.value.code == "STATE_DIR_UNSAFE" and str(link) in exc.value.message


def test_the_state_folder_itself_may_not_be_a_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "state").symlink_to(tmp_path / "real")
    with pytest.raises(EnvironmentProblem) as exc:
        private_dir(tmp_path / "state")
    assert exc.value.code == "STATE_DIR_UNSAFE"


# --- the verification cache: the same check, and a refused cache is simply not used ----------


@needs_root
def test_cache_folder_made_by_a_cotenant_is_never_read_nor_written(
    golden: GoldenKit, tmp_path: Path
) -> None:
    with shared_folder(0o1777) as shared:
        state = shared / "s"
        cotenant_python(
            "import os, sys; os.mkdir(sys.argv[1]); os.chmod(sys.argv[1], 0o777)", str(state)
        )
        proc = run_k3kit(
            "verify",
            golden.kit,
            "--trust",
            golden.key.public,
            "--weights",
            golden.snapshot,
            "--state-dir",
            state,
            "--json",
        )
        assert proc.returncode == 0, proc.stderr  # the cache decides nothing: every file hashed
        weights = json.loads(proc.stdout)["weights"]
        assert weights["files_from_cache"] == 0 and weights["cache"]["saved"] is False
        assert weights["cache"]["status"].startswith("refused (STATE_DIR_UNSAFE")
        assert "STATE_DIR_UNSAFE" in proc.stderr  # the note names the code and the fix
        assert list(state.iterdir()) == []


# --- equivocation per (package, version) --------------------------------------------------------


def test_a_second_kit_under_an_accepted_version_is_equivocation(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """A release key signs two different kits as "1.5.0"; the second carries a higher sequence,
    so the per-sequence check alone let it through."""
    root = pinned_root(golden, keys, tmp_path)
    first = build_kit(tmp_path / "a", golden.lock, golden.key, sequence=5, version="1.5.0")
    second = build_kit(tmp_path / "b", golden.lock, golden.key, sequence=6, version="1.5.0")
    state = tmp_path / "state"
    assert verify(first, root, state)[0] == 0
    rc, report = verify(second, root, state)
    assert rc == 1 and "EQUIVOCATION" in codes(report), report
    assert "kimi-k3-b300x8@1.5.0" in json.dumps(report)
    saved = json.loads((state / "rollback.json").read_bytes())
    assert saved["entries"]["kimi-k3-b300x8/stable"]["sequence"] == 5  # nothing recorded
    # The operator's loud override records the new kit under that version.
    proc = run_k3kit("verify", second, "--root", root, "--state-dir", state, "--allow-rollback")
    assert proc.returncode == 0 and "WARNING" in proc.stderr
    saved = json.loads((state / "rollback.json").read_bytes())
    assert (
        saved["versions"]["kimi-k3-b300x8@1.5.0"]
        == saved["entries"]["kimi-k3-b300x8/stable"]["kit_sha256"]
    )


def test_install_refuses_a_second_kit_under_an_installed_version(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    root = pinned_root(golden, keys, tmp_path)
    first = build_kit(tmp_path / "a", golden.lock, golden.key, sequence=5, version="1.5.0")
    second = build_kit(tmp_path / "b", golden.lock, golden.key, sequence=6, version="1.5.0")
    state = tmp_path / "state"
    assert verify(first, root, state)[0] == 0
    into = tmp_path / "kits"
    proc = run_k3kit("install", second, "--root", root, "--state-dir", state, "--into", into)
    assert proc.returncode == 1 and "EQUIVOCATION" in proc.stderr, proc.stderr
    assert not into.exists() or not any(into.iterdir())


def test_the_state_folder_is_never_a_cache_folder_by_default(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """Without --state-dir, rollback memory goes to $XDG_STATE_HOME/k3kit and survives the
    cache folder being emptied."""
    root = pinned_root(golden, keys, tmp_path)
    env = {"XDG_STATE_HOME": str(tmp_path / "xdg-state"), "XDG_CACHE_HOME": str(tmp_path / "c")}
    five = build_kit(tmp_path / "five", golden.lock, golden.key, sequence=5, version="1.5.0")
    four = build_kit(tmp_path / "four", golden.lock, golden.key, sequence=4, version="1.4.0")
    assert run_k3kit("verify", five, "--root", root, env=env).returncode == 0
    assert (tmp_path / "xdg-state" / "k3kit" / "rollback.json").is_file()
    shutil.rmtree(tmp_path / "c", ignore_errors=True)  # a tool frees space
    proc = run_k3kit("verify", four, "--root", root, "--json", env=env)
    assert proc.returncode == 1 and "ROLLBACK" in proc.stdout


def test_rollback_memory_left_in_the_old_cache_folder_is_not_silently_forgotten(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """Earlier k3kit kept rollback.json under $XDG_CACHE_HOME/k3kit: an upgrade that started
    afresh in the new state folder would accept the older kit."""
    root = pinned_root(golden, keys, tmp_path)
    five = build_kit(tmp_path / "five", golden.lock, golden.key, sequence=5, version="1.5.0")
    four = build_kit(tmp_path / "four", golden.lock, golden.key, sequence=4, version="1.4.0")
    old = tmp_path / "c" / "k3kit"
    assert verify(five, root, old)[0] == 0  # what the old default did: state in the cache
    env = {"XDG_STATE_HOME": str(tmp_path / "xdg-state"), "XDG_CACHE_HOME": str(tmp_path / "c")}
    proc = run_k3kit("verify", four, "--root", root, "--json", env=env)
    assert proc.returncode == 1 and json.loads(proc.stdout)["error"]["code"] == "STATE_LOST"
    assert f"--state-dir {old}" in proc.stderr
    assert not (tmp_path / "xdg-state" / "k3kit").exists()
