"""`k3kit channel rotate`: key rotation and revocation on the channel's TUF root, driven through
the real CLI, with buyers' `update` (python-tuf's updater) reading the result from a real static
HTTP server on 127.0.0.1 (docs/distribution.md, "Rotating and revoking keys")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from k3kit.channel.tufsigner import tuf_key
from k3kit.signing.keys import load_public
from tests.channelkit import (
    PACKAGE,
    ROLES,
    Channel,
    Releases,
    copy_repo,
    init_channel,
    make_keys,
    make_releases,
    publish,
    rotate_targets,
    serve,
    update,
)
from tests.conftest import GoldenKit, KeyFiles, run_k3kit


@pytest.fixture(scope="module")
def releases(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Releases:
    return make_releases(golden, tmp_path_factory.mktemp("releases"))


def _files(repo: Path) -> dict[str, bytes]:
    """Every file of the repository and its bytes: what "unchanged" is compared on."""
    files = sorted(p for p in repo.rglob("*") if p.is_file())
    return {str(p.relative_to(repo)): p.read_bytes() for p in files}


def _rotate(repo: Path, role: str, *args: str | Path) -> Any:
    return run_k3kit("channel", "rotate", "--repo", repo, "--role", role, *args, "--json")


def _refused(done: Any, code: str, repo: Path, before: dict[str, bytes]) -> dict[str, Any]:
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    error: dict[str, Any] = json.loads(done.stdout)["error"]
    assert error["code"] == code, done.stdout
    assert _files(repo) == before, "a refused rotation changed the repository"
    return error


def _published(tmp_path: Path, releases: Releases) -> Channel:
    chan = init_channel(tmp_path)
    done = publish(chan, releases.v100, releases.key.public)
    assert done.returncode == 0, done.stderr
    return chan


def test_a_revoked_release_key_is_rotated_out_with_the_cli(
    releases: Releases, tmp_path: Path
) -> None:
    """The release (targets) key leaked. The publisher rotates it out with `channel rotate`,
    publishes v1.1.0 with the new key, and the buyer's `update` installs it. A mirror that took
    the new root but still serves the targets the revoked key signed is refused."""
    chan = _published(tmp_path, releases)
    into, state = tmp_path / "kits", tmp_path / "state"
    with serve(chan.repo) as url:
        assert update(url, chan, into, state, releases.key.public).returncode == 0
    stale_mirror = copy_repo(chan.repo, tmp_path / "mirror")
    new = make_keys(tmp_path / "new-keys", ("targets",))["targets"]
    rotated = rotate_targets(chan, new)
    assert rotated.returncode == 0, rotated.stderr
    out = json.loads(rotated.stdout)
    assert out["version"] == 2 and out["resigned"] == ["targets", "snapshot", "timestamp"]
    assert out["keyids"] == [tuf_key(load_public(new.public)).keyid]
    after = Channel(chan.repo, {**chan.keys, "targets": new})
    assert publish(after, releases.v110, releases.key.public).returncode == 0
    with serve(chan.repo) as url:
        got = update(url, chan, into, state, releases.key.public)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["version"] == "1.1.0"
    # the mirror copies the new root files but keeps serving the old targets (revoked key)
    shutil.copyfile(Path(out["root"]), stale_mirror / "metadata" / "2.root.json")
    node = tmp_path / "kits-node-2"
    with serve(stale_mirror) as url:
        refused = update(url, chan, node, tmp_path / "state-node-2", releases.key.public)
    assert refused.returncode == 1, refused.stderr
    assert json.loads(refused.stdout)["error"]["code"] == "CHANNEL_UNTRUSTED"
    assert not node.exists() or not [p for p in node.iterdir() if not p.name.startswith(".")]


def _co_signed_channel(tmp_path: Path, releases: Releases) -> tuple[Channel, KeyFiles]:
    """A channel whose root needs 2 of 2 root keys: the publisher's and a co-signer's."""
    keys = make_keys(tmp_path / "keys")
    co_signer = make_keys(tmp_path / "co-signer", ("root",))["root"]
    repo = tmp_path / "repo"
    args: list[str | Path] = ["channel", "init", "--repo", repo, "--root-threshold", "2"]
    args += ["--root-key", co_signer.public, "--key", keys["root"].private]
    args += ["--key", co_signer.private]
    for role in ROLES:
        args += [f"--{role}-key", keys[role].public]
    assert run_k3kit(*args).returncode == 0
    chan = Channel(repo, keys)
    assert publish(chan, releases.v100, releases.key.public).returncode == 0
    return chan, co_signer


def test_a_rotation_without_the_co_signers_root_key_changes_nothing(
    releases: Releases, tmp_path: Path
) -> None:
    """An insider holding one of two root keys (and every online key) tries to swap the release
    key for one of their own: the old root's threshold of 2 is not met, nothing is written."""
    chan, _co_signer = _co_signed_channel(tmp_path, releases)
    before = _files(chan.repo)
    theirs = make_keys(tmp_path / "insider", ("targets",))["targets"]
    done = rotate_targets(chan, theirs)
    error = _refused(done, "CHANNEL_KEYS_MISSING", chan.repo, before)
    assert "root role of root version 1 needs 2" in error["message"]


def test_the_co_signed_rotation_is_followed_by_buyers(releases: Releases, tmp_path: Path) -> None:
    """With both root keys given, the same rotation goes through and buyers follow it."""
    chan, co_signer = _co_signed_channel(tmp_path, releases)
    new = make_keys(tmp_path / "new-keys", ("targets",))["targets"]
    assert rotate_targets(chan, new, "--key", co_signer.private).returncode == 0
    after = Channel(chan.repo, {**chan.keys, "targets": new})
    assert publish(after, releases.v110, releases.key.public).returncode == 0
    with serve(chan.repo) as url:
        got = update(url, chan, tmp_path / "kits", tmp_path / "state", releases.key.public)
    assert json.loads(got.stdout)["version"] == "1.1.0", got.stderr


def test_a_rotation_that_leaves_a_role_with_no_keys_is_refused(
    releases: Releases, tmp_path: Path
) -> None:
    chan = _published(tmp_path, releases)
    before = _files(chan.repo)
    done = _rotate(
        chan.repo, "targets", "--remove-key", chan.keys["targets"].public,
        "--key", chan.keys["root"].private, *chan.online_keys(),
    )  # fmt: skip
    error = _refused(done, "CHANNEL_ROTATION_INVALID", chan.repo, before)
    assert "no keys" in error["message"] and "--add-key" in error["hint"]


def test_a_threshold_the_new_keys_cannot_meet_is_refused(
    releases: Releases, tmp_path: Path
) -> None:
    chan = _published(tmp_path, releases)
    before = _files(chan.repo)
    new = make_keys(tmp_path / "new-keys", ("targets",))["targets"]
    done = _rotate(
        chan.repo, "targets", "--add-key", new.public, "--threshold", "3",
        "--key", chan.keys["root"].private, *chan.online_keys(),
    )  # fmt: skip
    error = _refused(done, "CHANNEL_ROTATION_INVALID", chan.repo, before)
    assert "threshold of 3 with 2 keys" in error["message"]


def test_a_new_root_its_own_root_keys_did_not_sign_is_refused(
    releases: Releases, tmp_path: Path
) -> None:
    """Rotating the root key to a new one needs the new key's signature too (TUF's rule): a new
    root only the old key signed could not verify itself, so no buyer could follow it."""
    chan = _published(tmp_path, releases)
    before = _files(chan.repo)
    new_root = make_keys(tmp_path / "new-keys", ("root",))["root"]
    done = _rotate(
        chan.repo, "root", "--add-key", new_root.public,
        "--remove-key", chan.keys["root"].public, "--key", chan.keys["root"].private,
    )  # fmt: skip
    error = _refused(done, "CHANNEL_KEYS_MISSING", chan.repo, before)
    assert "root role of root version 2" in error["message"]


def test_a_root_key_rotation_then_a_timestamp_revoked_by_key_id(
    releases: Releases, tmp_path: Path
) -> None:
    """Root 2 replaces the root key (signed by the old and the new one); root 3, signed by the
    new root key alone, revokes the timestamp key named only by its key id. A buyer pinned on
    1.root.json walks 1 -> 2 -> 3 and installs; the old root key can no longer rotate."""
    chan = _published(tmp_path, releases)
    into, state = tmp_path / "kits", tmp_path / "state"
    with serve(chan.repo) as url:
        assert update(url, chan, into, state, releases.key.public).returncode == 0
    new = make_keys(tmp_path / "new-keys", ("root", "timestamp"))
    root_change = _rotate(
        chan.repo, "root", "--add-key", new["root"].public,
        "--remove-key", chan.keys["root"].public,
        "--key", chan.keys["root"].private, "--key", new["root"].private,
    )  # fmt: skip
    assert root_change.returncode == 0, root_change.stderr
    assert json.loads(root_change.stdout)["resigned"] == []
    old_keyid = tuf_key(load_public(chan.keys["timestamp"].public)).keyid
    before = _files(chan.repo)
    with_old_root = _rotate(
        chan.repo, "timestamp", "--add-key", new["timestamp"].public,
        "--remove-key", old_keyid, "--key", chan.keys["root"].private,
        "--key", new["timestamp"].private,
    )  # fmt: skip
    _refused(with_old_root, "CHANNEL_KEYS_MISSING", chan.repo, before)
    stamp = _rotate(
        chan.repo, "timestamp", "--add-key", new["timestamp"].public,
        "--remove-key", old_keyid, "--key", new["root"].private,
        "--key", new["timestamp"].private,
    )  # fmt: skip
    assert stamp.returncode == 0, stamp.stderr
    assert json.loads(stamp.stdout)["version"] == 3
    after = Channel(chan.repo, {**chan.keys, "timestamp": new["timestamp"]})
    assert publish(after, releases.v110, releases.key.public).returncode == 0
    with serve(chan.repo) as url:
        got = update(url, chan, into, state, releases.key.public)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["version"] == "1.1.0"
    assert sorted(p.name for p in into.iterdir() if not p.name.startswith(".")) == [
        f"{PACKAGE}-1.0.0",
        f"{PACKAGE}-1.1.0",
    ]


def test_a_rotation_that_changes_nothing_renews_the_root(tmp_path: Path) -> None:
    """The root expires after 365 days: `rotate --role root` with no change writes root 2 with
    the same keys and a later expiry, re-signing nothing else."""
    chan = init_channel(tmp_path)
    done = _rotate(chan.repo, "root", "--key", chan.keys["root"].private)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["version"] == 2 and out["resigned"] == []
    meta = chan.repo / "metadata"
    first = json.loads((meta / "1.root.json").read_text())["signed"]
    second = json.loads((meta / "2.root.json").read_text())["signed"]
    assert second["roles"] == first["roles"] and second["keys"] == first["keys"]
    assert second["expires"] >= first["expires"]
    assert (meta / "root.json").read_bytes() == (meta / "2.root.json").read_bytes()


def test_a_rotation_killed_part_way_is_finished_by_a_rotation_without_change(
    releases: Releases, tmp_path: Path
) -> None:
    """A rotation of the release key killed after root 2 was written, before the re-signed
    targets, snapshot and timestamp: buyers would meet targets the revoked key signed. Running
    `rotate --role targets` again with no change re-signs them under the newest root."""
    chan = _published(tmp_path, releases)
    meta = chan.repo / "metadata"
    timestamp_1 = (meta / "timestamp.json").read_bytes()
    new = make_keys(tmp_path / "new-keys", ("targets",))["targets"]
    assert rotate_targets(chan, new).returncode == 0
    (meta / "2.targets.json").unlink()  # as if the kill came before them: root 2 is all it wrote
    (meta / "2.snapshot.json").unlink()
    (meta / "timestamp.json").write_bytes(timestamp_1)
    with serve(chan.repo) as url:
        broken = update(url, chan, tmp_path / "kits-0", tmp_path / "state-0", releases.key.public)
    assert json.loads(broken.stdout)["error"]["code"] == "CHANNEL_UNTRUSTED", broken.stderr
    done = _rotate(
        chan.repo, "targets", "--key", chan.keys["root"].private,
        *Channel(chan.repo, {**chan.keys, "targets": new}).online_keys(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resigned"] == ["targets", "snapshot", "timestamp"]
    with serve(chan.repo) as url:
        got = update(url, chan, tmp_path / "kits", tmp_path / "state", releases.key.public)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["version"] == "1.0.0"
