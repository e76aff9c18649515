"""Attacks on `k3kit update` from a channel served by a real static HTTP server on 127.0.0.1
(tests/test_channel_attacks.py has the same attacks with the install folder checked too). Each
builder sets the channel up as the attacker leaves it and returns the buyer's `update` call; the
last two return a publisher-side `channel rotate` an insider or a mistake makes
(tests/test_channel_rotate.py checks that those leave the repository byte for byte unchanged)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from k3kit.archive import pack
from k3kit.channel.repository import Expiries, renew_timestamp, utc_now
from k3kit.publish.kit import sign
from k3kit.signing.keys import load_private
from k3kit.signing.schemes import signer_from_uri
from tests.adversarial.corpus import Argv, Workbench, attack
from tests.channelkit import (
    Channel,
    copy_repo,
    entitlement,
    init_channel,
    make_keys,
    publish,
    replace_tree,
    rotate_targets,
    serve_until_exit,
)
from tests.conftest import EXAMPLE, FIXED_TIME, run_k3kit


def _channel(w: Workbench, *channels: str) -> Channel:
    """The genuine v1.0.0 published to each of ``channels`` (one new view per channel)."""
    chan = init_channel(w.root / "publisher")
    for name in channels or ("stable",):
        done = publish(chan, w.archive(), w.trust, "--channel", name)
        assert done.returncode == 0, done.stderr
    return chan


def _update(w: Workbench, url: str, chan: Channel, *extra: str | Path) -> list[str | Path]:
    return [
        "update", "--channel", "stable", "--from", url, "--channel-root", chan.root,
        "--into", w.root / "kits", "--trust", w.trust, "--state-dir", w.root / "state", *extra,
    ]  # fmt: skip


def _first_update(w: Workbench, url: str, chan: Channel) -> None:
    """The buyer's earlier, honest update: what the node remembers of the channel."""
    done = run_k3kit(*_update(w, url, chan))
    assert done.returncode == 0, done.stderr


@attack("CHANNEL_FROZEN")
def channel_freeze_expired_timestamp(w: Workbench) -> Argv:
    chan = _channel(w)
    renew_timestamp(
        chan.repo,
        [signer_from_uri(str(chan.keys["timestamp"].private))],
        now=utc_now() - timedelta(days=2),
        expires=Expiries(timestamp=timedelta(hours=1)),
    )
    return _update(w, serve_until_exit(chan.repo), chan)


@attack("CHANNEL_ROLLBACK")
def channel_rollback_to_an_older_copy(w: Workbench) -> Argv:
    chan = _channel(w)
    older = copy_repo(chan.repo, w.root / "older")
    assert publish(chan, w.archive(), w.trust, "--channel", "beta").returncode == 0
    served = copy_repo(chan.repo, w.root / "served")
    url = serve_until_exit(served)
    _first_update(w, url, chan)
    replace_tree(served, older)
    return _update(w, url, chan, "--into", w.root / "kits-2")


@attack("CHANNEL_INCONSISTENT")
def channel_mix_and_match_targets(w: Workbench) -> Argv:
    chan = _channel(w, "stable", "beta")
    served = copy_repo(chan.repo, w.root / "served")
    meta = served / "metadata"
    (meta / "2.targets.json").write_bytes((meta / "1.targets.json").read_bytes())
    return _update(w, serve_until_exit(served), chan)


@attack("CHANNEL_UNTRUSTED")
def channel_targets_signed_by_a_revoked_key(w: Workbench) -> Argv:
    chan = _channel(w)
    url = serve_until_exit(chan.repo)
    _first_update(w, url, chan)
    thief = copy_repo(chan.repo, w.root / "thief")
    new = make_keys(w.root / "new-keys", ("targets",))["targets"]
    rotated = rotate_targets(chan, new)
    assert rotated.returncode == 0, rotated.stderr
    root_v2 = Path(json.loads(rotated.stdout)["root"])
    stolen = Channel(thief, chan.keys)
    assert publish(stolen, w.archive(), w.trust, "--channel", "beta").returncode == 0
    (thief / "metadata" / "2.root.json").write_bytes(root_v2.read_bytes())
    return _update(w, serve_until_exit(thief), chan, "--into", w.root / "kits-2")


@attack("CHANNEL_OUT_OF_TERM")
def channel_release_after_the_term(w: Workbench) -> Argv:
    chan = _channel(w)
    receipt, lic = entitlement(w.root, w.golden.key, term_days=20, issued_at="2026-10-01T00:00:00Z")
    url = serve_until_exit(chan.repo)
    return _update(w, url, chan, "--buyer-receipt", receipt, "--licence", lic)


@attack("CHANNEL_INCONSISTENT")
def channel_server_swaps_the_kit_bytes(w: Workbench) -> Argv:
    chan = _channel(w)
    served = copy_repo(chan.repo, w.root / "served")
    (stored,) = (served / "targets").rglob("*.kit.tar.gz")
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))
    return _update(w, serve_until_exit(served), chan)


def _rotate_targets_argv(chan: Channel, new: Path, *keys: Path) -> Argv:
    """`channel rotate` swapping the targets key for ``new`` (a .pub), signed by ``keys``."""
    argv: list[str | Path] = [
        "channel", "rotate", "--repo", chan.repo, "--role", "targets", "--add-key", new,
        "--remove-key", chan.keys["targets"].public,
    ]  # fmt: skip
    for key in keys:
        argv += ["--key", key]
    return argv


@attack("CHANNEL_KEYS_MISSING", exit_code=3)
def channel_rotate_without_the_old_roots_threshold(w: Workbench) -> Argv:
    """An insider with every online key but no root key swaps in a release key of their own."""
    chan = _channel(w)
    theirs = make_keys(w.root / "insider", ("targets",))["targets"]
    online = [chan.keys[role].private for role in ("snapshot", "timestamp")]
    return _rotate_targets_argv(chan, theirs.public, theirs.private, *online)


@attack("CHANNEL_ROTATION_INVALID", exit_code=3)
def channel_rotate_leaves_the_release_role_without_keys(w: Workbench) -> Argv:
    chan = _channel(w)
    return [
        "channel", "rotate", "--repo", chan.repo, "--role", "targets",
        "--remove-key", chan.keys["targets"].public, "--key", chan.keys["root"].private,
    ]  # fmt: skip


@attack("CHANNEL_URL_REFUSED", exit_code=3)
def channel_update_over_plain_http_off_this_machine(w: Workbench) -> Argv:
    """Anyone on the path would read every kit the buyer installs: refused before a request."""
    chan = init_channel(w.root / "publisher")
    return _update(w, "http://channel.example.com/kits", chan)


@attack("CHANNEL_KIT_UNVERIFIED")
def channel_publish_of_a_kit_resigned_by_an_outsider(w: Workbench) -> Argv:
    """Someone who can write the release pipeline's drop folder leaves the genuine kit there
    re-signed with their own key, for the channel's keys to vouch for it: `publish --channel`
    verifies the archive against the publisher's --trust first, and refuses it."""
    kit = w.kit()
    sign(kit, load_private(w.other_key.private, None), EXAMPLE / "claims.toml",
         issued_at=FIXED_TIME, force=True)  # fmt: skip
    forged = w.root / "drop" / w.archive_path.name
    forged.parent.mkdir()
    pack(kit, forged)
    chan = init_channel(w.root / "publisher")
    return ["publish", forged, "--channel", "stable", "--repo", chan.repo, "--trust", w.trust,
            *chan.online_keys()]  # fmt: skip
