"""Attacks on `k3kit update`, each made as the attacker would make it against a real static HTTP
server on 127.0.0.1: the server (or whoever sits in front of it) controls every byte served; a
co-tenant controls what the buyer's state folder lets them. Each is refused with its registered
code and nothing is installed (docs/distribution.md lists them with these test names)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from k3kit.channel.errors import channel_error
from k3kit.channel.repository import (
    Expiries,
    Release,
    publish_release,
    renew_timestamp,
    utc_now,
)
from k3kit.signing.schemes import signer_from_uri
from tests.channelkit import (
    PACKAGE,
    Channel,
    Releases,
    copy_repo,
    entitlement,
    init_channel,
    make_keys,
    make_releases,
    publish,
    replace_tree,
    rotate_targets,
    serve,
    update,
)
from tests.conftest import GoldenKit, KeyFiles
from tests.cotenant import COTENANT_UID, cotenant_python, needs_root, shared_folder
from tests.netkit import serving


@pytest.fixture(scope="module")
def releases(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Releases:
    return make_releases(golden, tmp_path_factory.mktemp("releases"))


NOW = utc_now()


def _signers(*keys: KeyFiles) -> list[Any]:
    return [signer_from_uri(str(k.private)) for k in keys]


def _refused(done: Any, code: str, into: Path, exit_code: int = 1) -> None:
    assert done.returncode == exit_code, done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(done.stdout)["error"]["code"] == code, done.stdout
    installed = [p for p in os.listdir(into) if not p.startswith(".")] if into.exists() else []
    assert installed == [], f"installed despite the refusal: {installed}"


def _published(tmp_path: Path, releases: Releases, *archives: Path) -> Channel:
    chan = init_channel(tmp_path)
    for archive in archives:
        done = publish(chan, archive, releases.key.public)
        assert done.returncode == 0, done.stderr
    return chan


def test_a_frozen_channel_is_refused(releases: Releases, tmp_path: Path) -> None:
    """The server keeps serving the timestamp it had two days ago, genuinely signed and long
    expired, so the buyer never hears of v1.1.0 (a freeze)."""
    chan = _published(tmp_path, releases, releases.v100)
    keys = chan.keys
    renew_timestamp(
        chan.repo,
        _signers(keys["timestamp"]),
        now=utc_now() - timedelta(days=2),
        expires=Expiries(timestamp=timedelta(hours=1)),
    )
    into = tmp_path / "kits"
    with serve(chan.repo) as url:
        done = update(url, chan, into, tmp_path / "state", releases.key.public)
    _refused(done, "CHANNEL_FROZEN", into)
    assert "mirror" in json.loads(done.stdout)["error"]["hint"]


def test_a_rolled_back_channel_is_refused(releases: Releases, tmp_path: Path) -> None:
    """The buyer has seen the channel with v1.1.0; the server then serves an older copy of the
    whole channel (every file genuinely signed and unexpired) to hide v1.1.0's successor."""
    chan = _published(tmp_path, releases, releases.v100)
    older = copy_repo(chan.repo, tmp_path / "older")
    assert publish(chan, releases.v110, releases.key.public).returncode == 0
    served = copy_repo(chan.repo, tmp_path / "served")
    into, state = tmp_path / "kits", tmp_path / "state"
    with serve(served) as url:
        assert update(url, chan, into, state, releases.key.public).returncode == 0
        replace_tree(served, older)
        done = update(url, chan, tmp_path / "kits-2", state, releases.key.public)
    _refused(done, "CHANNEL_ROLLBACK", tmp_path / "kits-2")


@pytest.mark.parametrize("role", ["targets", "snapshot"])
def test_mixed_metadata_from_two_views_is_refused(
    releases: Releases, tmp_path: Path, role: str
) -> None:
    """The server serves the new timestamp with the targets (or snapshot) of the older view
    under the new name: each file genuinely signed, the combination never published."""
    chan = _published(tmp_path, releases, releases.v100)
    meta = chan.repo / "metadata"
    old_bytes = (meta / f"1.{role}.json").read_bytes()
    assert publish(chan, releases.v110, releases.key.public).returncode == 0
    served = copy_repo(chan.repo, tmp_path / "served")
    (served / "metadata" / f"2.{role}.json").write_bytes(old_bytes)
    into = tmp_path / "kits"
    with serve(served) as url:
        done = update(url, chan, into, tmp_path / "state", releases.key.public)
    _refused(done, "CHANNEL_INCONSISTENT", into)


def test_targets_signed_by_a_revoked_release_key_are_refused(
    releases: Releases, tmp_path: Path
) -> None:
    """The old release (targets) key leaked; the publisher rotated the root to a new one. The
    thief signs a release with the old key and serves it with the new root (which is public)."""
    chan = _published(tmp_path, releases, releases.v100)
    into, state = tmp_path / "kits", tmp_path / "state"
    with serve(chan.repo) as url:
        assert update(url, chan, into, state, releases.key.public).returncode == 0
    thief_copy = copy_repo(chan.repo, tmp_path / "thief")
    new = make_keys(tmp_path / "new-keys", ("targets",))["targets"]
    rotated = rotate_targets(chan, new)
    assert rotated.returncode == 0, rotated.stderr
    root_v2 = Path(json.loads(rotated.stdout)["root"])
    stolen = Channel(thief_copy, chan.keys)  # the old targets key, snapshot and timestamp keys
    assert publish(stolen, releases.v110, releases.key.public).returncode == 0
    shutil.copyfile(root_v2, thief_copy / "metadata" / "2.root.json")
    with serve(thief_copy) as url:
        done = update(url, chan, tmp_path / "kits-2", state, releases.key.public)
    _refused(done, "CHANNEL_UNTRUSTED", tmp_path / "kits-2")


def test_the_rotated_key_serves_the_next_release(releases: Releases, tmp_path: Path) -> None:
    """The honest side of the rotation: the publisher re-signs with the new key, buyers follow
    the root chain from the pinned v1 root and install v1.1.0."""
    chan = _published(tmp_path, releases, releases.v100)
    new = make_keys(tmp_path / "new-keys", ("targets",))["targets"]
    assert rotate_targets(chan, new).returncode == 0
    rotated = Channel(chan.repo, {**chan.keys, "targets": new})
    assert publish(rotated, releases.v110, releases.key.public).returncode == 0
    with serve(chan.repo) as url:
        done = update(url, chan, tmp_path / "kits", tmp_path / "state", releases.key.public)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["version"] == "1.1.0"


def test_a_release_after_the_term_is_not_installed(
    releases: Releases, golden: GoldenKit, tmp_path: Path
) -> None:
    """A 20-day term from 2026-11-01 covers v1.0.0 (released 2026-11-01), not v1.1.0 (released
    2026-12-01): the buyer asking for v1.1.0 by name is refused, the default takes v1.0.0."""
    chan = _published(tmp_path, releases, releases.v100, releases.v110)
    receipt, lic = entitlement(tmp_path, golden.key, term_days=20)
    into, state = tmp_path / "kits", tmp_path / "state"
    entitled = ("--buyer-receipt", receipt, "--licence", lic)
    with serve(chan.repo) as url:
        asked = update(url, chan, into, state, releases.key.public, *entitled, "--version", "1.1.0")
        _refused(asked, "CHANNEL_OUT_OF_TERM", into)
        default = update(url, chan, into, state, releases.key.public, *entitled)
    assert default.returncode == 0, default.stderr
    out = json.loads(default.stdout)
    assert out["version"] == "1.0.0" and out["term"]["ends_at"] == "2026-11-21T00:00:00Z"
    assert [e["version"] for e in out["out_of_term"]] == ["1.1.0"]
    assert "skipped  1.1.0" in default.stderr


def test_a_channel_with_nothing_in_term_is_refused(
    releases: Releases, golden: GoldenKit, tmp_path: Path
) -> None:
    chan = _published(tmp_path, releases, releases.v110)
    receipt, lic = entitlement(tmp_path, golden.key, term_days=20)
    into = tmp_path / "kits"
    with serve(chan.repo) as url:
        done = update(
            url, chan, into, tmp_path / "state", releases.key.public,
            "--buyer-receipt", receipt, "--licence", lic,
        )  # fmt: skip
    _refused(done, "CHANNEL_OUT_OF_TERM", into)


def test_a_server_that_changes_the_kit_is_refused(releases: Releases, tmp_path: Path) -> None:
    """The server (or a mirror operator) swaps the kit archive's bytes; the signed targets
    metadata still names the genuine length and hash."""
    chan = _published(tmp_path, releases, releases.v100)
    served = copy_repo(chan.repo, tmp_path / "served")
    (stored,) = (served / "targets").rglob("*.kit.tar.gz")
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped bit always changes the bytes
    stored.write_bytes(bytes(data))
    into = tmp_path / "kits"
    with serve(served) as url:
        done = update(url, chan, into, tmp_path / "state", releases.key.public)
    _refused(done, "CHANNEL_INCONSISTENT", into)


def test_a_server_that_sends_more_than_the_signed_length_is_refused(
    releases: Releases, tmp_path: Path
) -> None:
    """The server appends bytes to the kit (its Content-Length agrees with what it sends): the
    download stops at the signed length, whatever the server says."""
    chan = _published(tmp_path, releases, releases.v100)
    served = copy_repo(chan.repo, tmp_path / "served")
    (stored,) = (served / "targets").rglob("*.kit.tar.gz")
    with stored.open("ab") as handle:
        handle.write(b"\0" * 4096)
    into = tmp_path / "kits"
    with serve(served) as url:
        done = update(url, chan, into, tmp_path / "state", releases.key.public)
    _refused(done, "CHANNEL_INCONSISTENT", into)


def test_garbage_metadata_from_the_server_fails_closed(releases: Releases, tmp_path: Path) -> None:
    chan = _published(tmp_path, releases, releases.v100)
    served = copy_repo(chan.repo, tmp_path / "served")
    (served / "metadata" / "timestamp.json").write_bytes(b'{"signed": [1, 2, 3]}')
    into = tmp_path / "kits"
    with serve(served) as url:
        done = update(url, chan, into, tmp_path / "state", releases.key.public)
    _refused(done, "CHANNEL_INVALID", into)


def test_an_unknown_python_tuf_error_still_has_a_registered_code() -> None:
    class NewTufError(Exception):
        pass

    error = channel_error(NewTufError("something python-tuf adds later"), where="channel")
    assert error.code == "CHANNEL_INVALID" and int(error.exit_code) == 1


@needs_root
def test_a_cotenant_cannot_plant_the_channel_memory(releases: Releases, tmp_path: Path) -> None:
    """The buyer keeps state in a shared sticky folder; a co-tenant made the state folder first
    (to plant an old timestamp.json and so reset the rollback memory). It is refused, not
    adopted."""
    chan = _published(tmp_path, releases, releases.v100)
    into = tmp_path / "kits"
    with shared_folder() as shared:
        state = shared / "state"
        cotenant_python(
            "import os, sys; os.makedirs(sys.argv[1] + '/channel', mode=0o755)", str(state)
        )
        assert state.stat().st_uid == COTENANT_UID
        with serve(chan.repo) as url:
            done = update(url, chan, into, state, releases.key.public)
    _refused(done, "STATE_DIR_UNSAFE", into, exit_code=4)


def test_a_channel_root_another_user_could_replace_is_refused(
    releases: Releases, tmp_path: Path
) -> None:
    chan = _published(tmp_path, releases, releases.v100)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by everyone, not sticky: anyone can swap the file in it
    pinned = shared / "1.root.json"
    shutil.copyfile(chan.root, pinned)
    into = tmp_path / "kits"
    with serve(chan.repo) as url:
        done = update(url, chan, into, tmp_path / "state", releases.key.public, root=pinned)
    _refused(done, "TRUST_ANCHOR_UNSAFE", into, exit_code=4)


def test_a_channel_entry_naming_another_kit_is_refused(releases: Releases, tmp_path: Path) -> None:
    """Whoever holds the channel's online keys (not the release key) lists the genuine v1.0.0
    archive as version 9.9.9, sequence 99, so that every node takes it as the newest release."""
    chan = init_channel(tmp_path)
    liar = Release(
        path=f"stable/{PACKAGE}/9.9.9.kit.tar.gz",
        package=PACKAGE,
        version="9.9.9",
        sequence=99,
        kit_sha256="0" * 64,
        released_at="2026-11-01T00:00:00Z",
    )
    keys = chan.keys
    publish_release(
        chan.repo,
        releases.v100,
        liar,
        _signers(keys["targets"], keys["snapshot"], keys["timestamp"]),
        now=NOW,
    )
    into = tmp_path / "kits"
    with serve(chan.repo) as url:
        done = update(url, chan, into, tmp_path / "state", releases.key.public)
    _refused(done, "CHANNEL_TARGET_MISMATCH", into)


class _ShortLength(http.server.SimpleHTTPRequestHandler):
    """A server that says every kit is 1 byte long (and sends all of it anyway)."""

    def send_header(self, keyword: str, value: str) -> None:
        if keyword == "Content-Length" and self.path.endswith(".kit.tar.gz"):
            value = "1"
        super().send_header(keyword, value)

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_a_server_lying_about_the_length_is_not_believed(
    releases: Releases, tmp_path: Path
) -> None:
    """Content-Length is the server's word: the bytes it leads the client to read are checked
    against the signed length and sha256, and refused."""
    chan = _published(tmp_path, releases, releases.v100)
    handler = functools.partial(_ShortLength, directory=str(chan.repo))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    into = tmp_path / "kits"
    with serving(server):
        url = f"http://127.0.0.1:{server.server_address[1]}"
        done = update(url, chan, into, tmp_path / "state", releases.key.public)
    _refused(done, "CHANNEL_INCONSISTENT", into)
