"""More attacks on `k3kit update` from the outside attack pass: the download's size is known
from signed metadata before a byte arrives, so a disk that cannot hold it is refused first."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.channelkit import (
    Channel,
    Releases,
    entitlement,
    init_channel,
    make_releases,
    publish,
    serve,
    update,
)
from tests.conftest import GoldenKit, run_k3kit
from tests.netkit import OFF_MACHINE, recording_server, redirector, self_signed, tls_env
from tests.tmpfs import mounted_tmpfs


@pytest.fixture(scope="module")
def releases(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Releases:
    return make_releases(golden, tmp_path_factory.mktemp("releases"))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 256 KiB tmpfs (root only): room for the channel's metadata, not for a kit."""
    yield from mounted_tmpfs(tmp_path / "disk", "256k")


def test_update_into_a_state_disk_too_small_for_the_kit_is_refused_before_download(
    releases: Releases, tmp_path: Path, small_disk: Path
) -> None:
    """The buyer's state folder sits on a nearly full disk (or a hostile channel's huge release
    would fill it): the signed length says v1.1.0 cannot fit, so nothing is downloaded and the
    refusal is DISK_TOO_SMALL naming the disk, not a write failing part-way."""
    chan = init_channel(tmp_path / "chan")
    assert publish(chan, releases.v100, releases.key.public).returncode == 0
    state = small_disk / "state"
    with serve(chan.repo) as url:
        first = update(url, chan, tmp_path / "kits-1", state, releases.key.public)
        assert first.returncode == 0, first.stderr
        assert publish(chan, releases.v110, releases.key.public).returncode == 0
        # leave three pages: room to refresh the metadata, not for the kit (four or more)
        free = shutil.disk_usage(small_disk).free
        (small_disk / "filler").write_bytes(b"\0" * (free - 3 * 4096))
        assert releases.v110.stat().st_size > shutil.disk_usage(small_disk).free
        into = tmp_path / "kits-2"
        done = update(url, chan, into, state, releases.key.public)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 4, (done.returncode, done.stdout, done.stderr)
    assert json.loads(done.stdout)["error"]["code"] == "DISK_TOO_SMALL", done.stdout
    kits = [p.name for p in state.rglob("*.kit.tar.gz")]
    assert kits == [], kits
    assert not into.exists() or os.listdir(into) == []


def test_a_term_that_ends_after_year_9999_is_a_clear_answer_not_a_crash(
    releases: Releases, golden: GoldenKit, tmp_path: Path
) -> None:
    """A buyer receipt issued 9999-06-01 under a licence of 3660 days (the most a licence may
    give): its term ends past what a date can hold. The buyer's update must answer (the term
    covers every release), never exit 70 with an OverflowError from bytes the seller signed."""
    chan = init_channel(tmp_path / "chan")
    assert publish(chan, releases.v100, releases.key.public).returncode == 0
    receipt, lic = entitlement(
        tmp_path, golden.key, term_days=3660, issued_at="9999-06-01T00:00:00Z"
    )
    into = tmp_path / "kits"
    with serve(chan.repo) as url:
        done = update(
            url, chan, into, tmp_path / "state", releases.key.public,
            "--buyer-receipt", receipt, "--licence", lic,
        )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    out = json.loads(done.stdout)
    assert out["version"] == "1.0.0" and out["term"]["ends_at"].startswith("9999-12-31T23:59:59")


def test_update_over_plain_http_from_another_machine_is_refused_before_any_request(
    releases: Releases, tmp_path: Path
) -> None:
    """Whoever sits on the path to a channel served over plain http reads every kit the buyer
    installs (TUF keeps the bytes honest, not private): refused, whatever the network does."""
    chan = init_channel(tmp_path / "chan")
    into = tmp_path / "kits"
    done = update("http://channel.example.com/c", chan, into, tmp_path / "st", releases.key.public)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    assert json.loads(done.stdout)["error"]["code"] == "CHANNEL_URL_REFUSED"
    assert not (tmp_path / "st").exists() and not into.exists()


def test_a_password_in_the_channel_url_is_neither_sent_nor_printed(
    releases: Releases, tmp_path: Path
) -> None:
    """The buyer pastes https://user:password@… from their portal (here a real channel on this
    machine): the password would go out as Basic auth and be echoed in every message naming the
    URL. Refused before a request, and the password appears nowhere in the output."""
    chan = init_channel(tmp_path / "chan")
    assert publish(chan, releases.v100, releases.key.public).returncode == 0
    into = tmp_path / "kits"
    with serve(chan.repo) as url:
        with_password = url.replace("http://", "http://buyer:hunter2@")
        done = update(with_password, chan, into, tmp_path / "st", releases.key.public)
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    assert json.loads(done.stdout)["error"]["code"] == "CHANNEL_URL_REFUSED"
    assert "hunter2" not in done.stdout + done.stderr
    assert not into.exists()


def test_a_remote_channel_redirecting_into_this_machine_is_not_followed(
    releases: Releases, tmp_path: Path
) -> None:
    """A channel server off this machine (https, a valid certificate) answers with a redirect
    to http://127.0.0.1:PORT/admin/wipe: the buyer's own local services. Not followed (no
    request reaches them), refused with the redirect's own code."""
    chan = init_channel(tmp_path / "chan")
    hits: list[str] = []
    local = recording_server(hits)
    target = f"http://127.0.0.1:{local.server_address[1]}/admin/wipe"
    cert, key = self_signed(tmp_path, OFF_MACHINE)
    try:
        with redirector(OFF_MACHINE, target, tls=(cert, key)) as port:
            done = run_k3kit(
                *_update_args(f"https://{OFF_MACHINE}:{port}/c", chan, tmp_path, releases),
                env=tls_env(cert),
            )
    finally:
        local.shutdown()
    assert "Traceback" not in done.stderr, done.stderr
    assert hits == [], f"the buyer's node requested {hits} on this machine"
    assert json.loads(done.stdout)["error"]["code"] == "CHANNEL_REDIRECT_REFUSED", done.stdout


def test_a_channel_redirecting_to_plain_http_elsewhere_is_not_followed(
    releases: Releases, tmp_path: Path
) -> None:
    """The channel's server (here on this machine) redirects every file to plain http on
    another machine, where anyone on the path reads what the buyer installs: not followed."""
    chan = init_channel(tmp_path / "chan")
    hits: list[str] = []
    elsewhere = recording_server(hits, host=OFF_MACHINE)
    target = f"http://{OFF_MACHINE}:{elsewhere.server_address[1]}/c/metadata/2.root.json"
    try:
        with redirector("127.0.0.1", target) as port:
            done = run_k3kit(
                *_update_args(f"http://127.0.0.1:{port}/c", chan, tmp_path, releases),
                env={"NO_PROXY": "*", "no_proxy": "*"},
            )
    finally:
        elsewhere.shutdown()
    assert "Traceback" not in done.stderr, done.stderr
    assert hits == [], f"the buyer's node requested {hits} over plain http elsewhere"
    assert json.loads(done.stdout)["error"]["code"] == "CHANNEL_REDIRECT_REFUSED", done.stdout


def _update_args(url: str, chan: Channel, tmp_path: Path, releases: Releases) -> list[str | Path]:
    return [
        "update", "--channel", "stable", "--from", url, "--channel-root", chan.root,
        "--into", tmp_path / "kits", "--trust", releases.key.public,
        "--state-dir", tmp_path / "state", "--json",
    ]  # fmt: skip
