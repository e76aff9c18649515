"""`k3kit publish --channel` and `k3kit update`: a real TUF repository written by the real CLI,
served by a real static HTTP server on 127.0.0.1, read by python-tuf's updater (docs/
distribution.md). The attacks on the channel are in tests/test_channel_attacks.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.channelkit import (
    PACKAGE,
    Channel,
    Releases,
    init_channel,
    make_keys,
    make_releases,
    publish,
    serve,
    update,
)
from tests.conftest import GoldenKit, KeyFiles, run_k3kit
from tests.hsmkit import make_token, needs_softhsm


@pytest.fixture(scope="module")
def releases(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Releases:
    return make_releases(golden, tmp_path_factory.mktemp("releases"))


@pytest.fixture
def chan(tmp_path: Path, releases: Releases) -> Channel:
    """A channel holding v1.0.0 and v1.1.0, published with the real CLI."""
    made = init_channel(tmp_path)
    for archive in (releases.v100, releases.v110):
        done = publish(made, archive, releases.key.public)
        assert done.returncode == 0, done.stderr
    return made


def test_update_installs_the_newest_release_from_a_static_server(
    chan: Channel, releases: Releases, tmp_path: Path
) -> None:
    into, state = tmp_path / "kits", tmp_path / "state"
    with serve(chan.repo) as url:
        done = update(url, chan, into, state, releases.key.public)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["version"] == "1.1.0" and out["name"] == PACKAGE
    assert out["release"]["path"] == f"stable/{PACKAGE}/1.1.0.kit.tar.gz"
    assert out["release"]["sequence"] == 2 and out["term"] is None
    assert "term     not checked" in done.stderr
    target = into / f"{PACKAGE}-1.1.0"
    assert Path(out["installed"]) == target.resolve()
    assert sorted(os.listdir(into)) == [f"{PACKAGE}-1.1.0"]  # nothing but the kit left behind
    assert run_k3kit("verify", target, "--trust", releases.key.public).returncode == 0


def test_update_reports_where_the_kit_came_from_not_its_deleted_download(
    chan: Channel, releases: Releases, tmp_path: Path
) -> None:
    """The kit is downloaded into a staging folder removed before update returns: --json's
    ``kit``, the human line and the library's report name the channel's target and where it
    was installed, never a path that no longer exists."""
    from k3kit import api
    from k3kit.signing.keys import load_public

    into, state = tmp_path / "kits", tmp_path / "state"
    with serve(chan.repo) as url:
        done = update(url, chan, into, state, releases.key.public)
        human = run_k3kit(
            "update", "--channel", "stable", "--from", url, "--channel-root", chan.root,
            "--into", tmp_path / "human", "--trust", releases.key.public, "--state-dir", state,
        )  # fmt: skip
        lib = api.update_from_channel(
            url, "stable", chan.root, tmp_path / "lib", [load_public(releases.key.public)],
            state_dir=state,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    source = f"stable/{PACKAGE}/1.1.0.kit.tar.gz from {url}"
    assert out["kit"] == source and Path(out["installed"]).is_dir()
    assert out["kit_sha256"] == lib.installed.kit_sha256
    assert human.returncode == 0, human.stderr
    line = f"(kit sha256 {out['kit_sha256']}) from {source} into "
    assert line in human.stderr and Path(human.stdout.strip()).is_dir()
    assert lib.installed.report.kit == source and lib.installed.path.is_dir()


def test_a_second_update_finds_it_installed(
    chan: Channel, releases: Releases, tmp_path: Path
) -> None:
    into, state = tmp_path / "kits", tmp_path / "state"
    with serve(chan.repo) as url:
        first = update(url, chan, into, state, releases.key.public)
        again = update(url, chan, into, state, releases.key.public)
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["already_installed"] is True


def test_update_from_1_0_0_to_1_1_0_as_releases_arrive(releases: Releases, tmp_path: Path) -> None:
    """The buyer updates with v1.0.0 out; the publisher releases v1.1.0; the next update takes it
    into a new folder beside the first."""
    chan = init_channel(tmp_path)
    assert publish(chan, releases.v100, releases.key.public).returncode == 0
    into, state = tmp_path / "kits", tmp_path / "state"
    with serve(chan.repo) as url:
        first = update(url, chan, into, state, releases.key.public)
        assert json.loads(first.stdout)["version"] == "1.0.0", first.stderr
        assert publish(chan, releases.v110, releases.key.public).returncode == 0
        second = update(url, chan, into, state, releases.key.public)
    assert json.loads(second.stdout)["version"] == "1.1.0", second.stderr
    assert sorted(os.listdir(into)) == [f"{PACKAGE}-1.0.0", f"{PACKAGE}-1.1.0"]


def test_the_repository_is_laid_out_for_a_static_host(chan: Channel) -> None:
    meta = chan.repo / "metadata"
    names = sorted(p.name for p in meta.iterdir())
    assert names == [
        "1.root.json",
        "1.snapshot.json",
        "1.targets.json",
        "2.snapshot.json",
        "2.targets.json",
        "root.json",
        "timestamp.json",
    ]
    targets = json.loads((meta / "2.targets.json").read_text())["signed"]["targets"]
    entry = targets[f"stable/{PACKAGE}/1.1.0.kit.tar.gz"]
    assert entry["custom"]["version"] == "1.1.0" and entry["custom"]["sequence"] == 2
    assert entry["custom"]["released_at"] == "2026-12-01T00:00:00Z"
    stored = (
        chan.repo / "targets/stable" / PACKAGE / f"{entry['hashes']['sha256']}.1.1.0.kit.tar.gz"
    )
    assert stored.is_file() and stored.stat().st_size == entry["length"]


def test_publishing_the_same_archive_again_is_a_no_op(chan: Channel, releases: Releases) -> None:
    done = publish(chan, releases.v110, releases.key.public)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["published"] is False
    assert not (chan.repo / "metadata" / "3.targets.json").exists()


def test_publish_refuses_a_kit_that_does_not_verify(
    chan: Channel, releases: Releases, other_key: KeyFiles
) -> None:
    """A kit signed by a key the publisher does not trust is not signed into the channel."""
    before = sorted(p.name for p in (chan.repo / "metadata").iterdir())
    done = publish(chan, releases.v110, other_key.public)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "CHANNEL_KIT_UNVERIFIED"
    assert sorted(p.name for p in (chan.repo / "metadata").iterdir()) == before


def test_publish_without_the_online_keys_writes_nothing(
    chan: Channel, releases: Releases, tmp_path: Path
) -> None:
    fresh = init_channel(tmp_path / "fresh")
    done = run_k3kit(
        "publish", releases.v100, "--channel", "stable", "--repo", fresh.repo,
        "--trust", releases.key.public, "--key", fresh.keys["targets"].private, "--json",
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "CHANNEL_KEYS_MISSING"
    assert sorted(p.name for p in (fresh.repo / "metadata").iterdir()) == [
        "1.root.json",
        "root.json",
    ]
    assert not (fresh.repo / "targets").exists()  # the kit was not copied in either


@needs_softhsm
def test_a_release_key_held_by_softhsm_signs_the_channel(
    releases: Releases, tmp_path: Path
) -> None:
    """The targets role's key never leaves a PKCS#11 token (SoftHSM2): `publish --key pkcs11:`
    signs the channel's targets through the same signer as receipts, and python-tuf's updater
    accepts it."""
    token = make_token(tmp_path / "softhsm")
    keys = make_keys(tmp_path / "keys", ("root", "snapshot", "timestamp"))
    repo = tmp_path / "repo"
    made = run_k3kit(
        "channel", "init", "--repo", repo, "--key", keys["root"].private,
        "--root-key", keys["root"].public, "--targets-key", token.release_public,
        "--snapshot-key", keys["snapshot"].public, "--timestamp-key", keys["timestamp"].public,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    done = run_k3kit(
        "publish", releases.v100, "--channel", "stable", "--repo", repo,
        "--trust", releases.key.public, "--key", token.uri(),
        "--key", keys["snapshot"].private, "--key", keys["timestamp"].private, "--json",
        env=token.env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    chan = Channel(repo, {**keys, "targets": KeyFiles(token.release_public, token.release_public)})
    with serve(repo) as url:
        got = update(url, chan, tmp_path / "kits", tmp_path / "state", releases.key.public)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["version"] == "1.0.0"


def test_a_publish_killed_before_its_timestamp_does_not_block_the_next(
    releases: Releases, tmp_path: Path
) -> None:
    """A publish killed after writing 2.targets.json and 2.snapshot.json but before the timestamp
    named them: no client could have read them as a view, and the next publish writes over them."""
    chan = init_channel(tmp_path)
    assert publish(chan, releases.v100, releases.key.public).returncode == 0
    meta = chan.repo / "metadata"
    (meta / "2.targets.json").write_bytes(b"half-written by a killed publish")
    (meta / "2.snapshot.json").write_bytes(b"half-written by a killed publish")
    done = publish(chan, releases.v110, releases.key.public)
    assert done.returncode == 0, done.stderr
    with serve(chan.repo) as url:
        got = update(url, chan, tmp_path / "kits", tmp_path / "state", releases.key.public)
    assert json.loads(got.stdout)["version"] == "1.1.0", got.stderr
