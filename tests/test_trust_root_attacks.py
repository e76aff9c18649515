"""Attacks on the TUF root of trust, written as the attacker does them: real keys, real files,
the real CLI, a real static HTTP server on 127.0.0.1 for the channel. Each test names what the
attacker holds and what they try; it fails if the attack works."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tuf.api.metadata import Metadata, Root, Timestamp
from tuf.api.serialization.json import JSONSerializer

from k3kit.archive import pack
from k3kit.channel.repository import KeyChange, rotate_keys, utc_now
from k3kit.errors import K3kitError
from k3kit.signing.keys import keyid, load_public
from k3kit.signing.trust.edit import sign_root
from k3kit.signing.trust.root import MAX_ROOTS, verify_root
from k3kit.signing.trust.tufroot import K3kitTufSigner
from tests.channelkit import serve
from tests.conftest import GoldenKit, KeyFiles, run_k3kit
from tests.trustkit import (
    FAR,
    attach,
    build_kit,
    keypair,
    kid,
    pub,
    raw_root,
    resign_receipt,
    root_v1,
    signer,
)


def _ok(*args: str | Path) -> str:
    done = run_k3kit(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _publisher(tmp: Path, golden: GoldenKit) -> tuple[Path, dict[str, KeyFiles]]:
    """The publisher's root 1 (``k3kit root create``): root key ``a`` (offline), the release key
    of the example kit, online snapshot and timestamp keys; a channel started from it, with
    v1.0.0 published."""
    keys = {name: keypair(tmp / "keys", name) for name in ("a", "b", "snapshot", "timestamp")}
    pinned = tmp / "pub" / "1.root.json"
    pinned.parent.mkdir()
    _ok(
        "root", "create", "-o", pinned, "--root-key", keys["a"].public,
        "--release-key", golden.key.public, "--snapshot-key", keys["snapshot"].public,
        "--timestamp-key", keys["timestamp"].public, "--expires", FAR,
        "--sign-key", keys["a"].private,
    )  # fmt: skip
    repo = tmp / "repo"
    _ok("channel", "init", "--repo", repo, "--root", pinned)
    archive = tmp / "kimi-k3-b300x8-1.0.0.kit.tar.gz"
    pack(golden.kit, archive)
    _ok(
        "publish", archive, "--channel", "stable", "--repo", repo, "--trust", golden.key.public,
        "--key", golden.key.private, "--key", keys["snapshot"].private,
        "--key", keys["timestamp"].private,
    )  # fmt: skip
    return pinned, keys


def _forked_kit(tmp: Path, golden: GoldenKit, pinned: Path, stolen: KeyFiles) -> Path:
    """What the thief of the old root key ``a`` makes: their own root 2 (root role still ``a``,
    release role their key), signed by ``a`` (root 1's threshold and its own), and a kit signed
    by their release key carrying root 1 and that root 2."""
    evil = keypair(tmp / "thief", "evil")
    forged = tmp / "thief" / "2.root.json"
    _ok(
        "root", "rotate", pinned, "-o", forged, "--role", "release", "--key", evil.public,
        "--threshold", "1", "--expires", FAR, "--sign-key", stolen.private,
    )  # fmt: skip
    kit = build_kit(tmp / "thief" / "v2", golden.lock, evil, sequence=2, version="2.0.0")
    _ok("root", "attach", kit, pinned, forged)
    return kit


def test_a_root_fork_signed_with_a_rotated_out_root_key_is_refused_after_the_channel_moved_on(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The attacker stole root key ``a``; the publisher rotated it out (channel root 2, root
    role ``b``) and the node's ``update`` walked the channel to root 2. The update installed
    nothing (no newer release). The attacker then hands the node a kit carrying their own
    root 2, validly signed by ``a`` as root 1 allows: the node has already accepted another
    root 2, so the fork must be refused, not taken because it came with the kit."""
    pinned, keys = _publisher(tmp_path, golden)
    repo = tmp_path / "repo"
    _ok(
        "channel", "rotate", "--repo", repo, "--role", "root", "--add-key", keys["b"].public,
        "--remove-key", keys["a"].public, "--key", keys["a"].private, "--key", keys["b"].private,
    )  # fmt: skip
    state, into = tmp_path / "state", tmp_path / "kits"
    with serve(repo) as url:
        done = run_k3kit(
            "update", "--channel", "stable", "--from", url, "--root", pinned,
            "--into", into, "--state-dir", state, "--version", "9.9.9", "--json",
        )  # fmt: skip
    assert "CHANNEL_NO_RELEASE" in done.stdout, done.stdout + done.stderr
    kit = _forked_kit(tmp_path, golden, pinned, keys["a"])
    done = run_k3kit("verify", kit, "--root", pinned, "--state-dir", state, "--json")
    assert done.returncode == 1, done.stdout
    assert "ROOT_FORK" in done.stdout, done.stdout
    done = run_k3kit(
        "install", kit, "--root", pinned, "--state-dir", state, "--into", into, "--json"
    )
    assert done.returncode == 1 and "ROOT_FORK" in done.stdout, done.stdout
    assert not into.exists() or not any(into.iterdir())


def test_a_channel_root_the_node_did_not_accept_first_is_a_fork_not_a_silent_switch(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The other order: the thief's kit reached the node first (its root 2 is now the node's),
    then the publisher rotates root key ``a`` out and the node updates from the channel. Two
    roots 2 signed by root 1's keys: the update stops with ``ROOT_FORK`` (fail closed; the
    operator must re-pin), it does not follow either root silently."""
    pinned, keys = _publisher(tmp_path, golden)
    state, into = tmp_path / "state", tmp_path / "kits"
    kit = _forked_kit(tmp_path, golden, pinned, keys["a"])
    _ok("verify", kit, "--root", pinned, "--state-dir", state)  # nothing told it otherwise yet
    repo = tmp_path / "repo"
    _ok(
        "channel", "rotate", "--repo", repo, "--role", "root", "--add-key", keys["b"].public,
        "--remove-key", keys["a"].public, "--key", keys["a"].private, "--key", keys["b"].private,
    )  # fmt: skip
    with serve(repo) as url:
        done = run_k3kit(
            "update", "--channel", "stable", "--from", url, "--root", pinned,
            "--into", into, "--state-dir", state, "--json",
        )  # fmt: skip
    assert done.returncode == 1 and "ROOT_FORK" in done.stdout, done.stdout + done.stderr
    assert not into.exists() or not any(into.iterdir())


def test_root_attach_refused_part_way_leaves_the_kit_as_it_was(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The kit already carries another ``root/2.root.json`` (say the thief's, from a mirror, or
    an older attempt). ``root attach KIT 1 2 3`` without --force must refuse before it writes
    anything: writing 1 and then refusing 2 leaves a kit that is neither the old one nor the
    new one."""
    pinned, keys = _publisher(tmp_path, golden)
    kit = _forked_kit(tmp_path, golden, pinned, keys["a"])
    (kit / "root" / "1.root.json").unlink()
    before = sorted(p.name for p in (kit / "root").iterdir())
    two, three = tmp_path / "pub" / "2.root.json", tmp_path / "pub" / "3.root.json"
    _ok(
        "root", "floor", pinned, "-o", two, "--min-sequence", "kimi-k3-b300x8/stable=1",
        "--expires", FAR, "--sign-key", keys["a"].private,
    )  # fmt: skip
    _ok(
        "root", "floor", two, "-o", three, "--min-sequence", "kimi-k3-b300x8/stable=2",
        "--expires", FAR, "--sign-key", keys["a"].private,
    )  # fmt: skip
    done = run_k3kit("root", "attach", kit, pinned, two, three)
    assert done.returncode == 3 and "2.root.json exists" in done.stderr, done.stdout + done.stderr
    assert sorted(p.name for p in (kit / "root").iterdir()) == before
    _ok("root", "attach", kit, pinned, two, three, "--force")
    assert (kit / "root" / "2.root.json").read_bytes() == two.read_bytes()
    assert sorted(p.name for p in (kit / "root").iterdir()) == [
        "1.root.json", "2.root.json", "3.root.json",
    ]  # fmt: skip


@pytest.mark.parametrize("role", ["snapshot", "timestamp"])
def test_a_stolen_online_key_cannot_sign_a_receipt(
    golden: GoldenKit, tmp_path: Path, role: str
) -> None:
    """The attacker stole the channel's online snapshot or timestamp key (it sits on the cron
    machine that renews the channel) and re-signs a kit's receipt with it. Only the release
    (TUF targets) role signs receipts: the kit is refused, whatever role names the key."""
    pinned, keys = _publisher(tmp_path, golden)
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    resign_receipt(kit, [keys[role]])
    done = run_k3kit("verify", kit, "--root", pinned, "--state-dir", tmp_path / "s", "--json")
    assert done.returncode == 1 and "RECEIPT_UNTRUSTED_KEY" in done.stdout, done.stdout


def test_a_stolen_release_key_cannot_sign_the_next_root(golden: GoldenKit, tmp_path: Path) -> None:
    """The thief of the release key writes root 2 that makes their own key the root key, and
    signs it with the release key and their own: root 1's root role does not name the release
    key, so the kit carrying it is refused (ROOT_UNTRUSTED) and its kit never verifies."""
    pinned, _ = _publisher(tmp_path, golden)
    thief = keypair(tmp_path / "thief", "thief")
    forged = tmp_path / "thief" / "2.root.json"
    done = run_k3kit(
        "root", "rotate", pinned, "-o", forged, "--role", "root", "--key", thief.public,
        "--threshold", "1", "--expires", FAR, "--sign-key", golden.key.private,
        "--sign-key", thief.private,
    )  # fmt: skip
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    attach(kit, forged)
    done = run_k3kit("verify", kit, "--root", pinned, "--state-dir", tmp_path / "s", "--json")
    assert done.returncode == 1 and "ROOT_UNTRUSTED" in done.stdout, done.stdout


def test_a_release_key_removed_by_channel_rotate_no_longer_signs_the_timestamp(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """`root create` without --snapshot-key/--timestamp-key makes the release key the snapshot
    and timestamp key too. The release key leaks; the publisher runs `channel rotate --role
    targets --remove-key` ("a removed key is revoked: buyers refuse whatever it signs"). The
    thief then serves the node a fresh timestamp signed with the leaked key (a freeze: the node
    keeps believing the view the thief chooses). It must be refused like anything else the
    removed key signs."""
    a, new = keypair(tmp_path / "keys", "a"), keypair(tmp_path / "keys", "release-2")
    pinned = tmp_path / "1.root.json"
    _ok(
        "root", "create", "-o", pinned, "--root-key", a.public,
        "--release-key", golden.key.public, "--expires", FAR, "--sign-key", a.private,
    )  # fmt: skip
    repo = tmp_path / "repo"
    _ok("channel", "init", "--repo", repo, "--root", pinned)
    archive = tmp_path / "kimi-k3-b300x8-1.0.0.kit.tar.gz"
    pack(golden.kit, archive)
    _ok("publish", archive, "--channel", "stable", "--repo", repo, "--trust", golden.key.public,
        "--key", golden.key.private)  # fmt: skip
    state, into = tmp_path / "state", tmp_path / "kits"
    with serve(repo) as url:
        _ok("update", "--channel", "stable", "--from", url, "--root", pinned, "--into", into,
            "--state-dir", state)  # fmt: skip
        # The leak. The publisher still holds the key (it leaked, it was not lost) and gives
        # every key it has; the rotation takes what the new root asks for.
        _ok(
            "channel", "rotate", "--repo", repo, "--role", "targets", "--add-key", new.public,
            "--remove-key", golden.key.public, "--key", a.private, "--key", new.private,
            "--key", golden.key.private,
        )  # fmt: skip
        root2 = Metadata[Root].from_bytes((repo / "metadata" / "2.root.json").read_bytes())
        leaked = keyid(load_public(golden.key.public))
        held = [name for name, role in root2.signed.roles.items() if leaked in role.keyids]
        stamp_path = repo / "metadata" / "timestamp.json"
        stamp = Metadata[Timestamp].from_bytes(stamp_path.read_bytes())
        stamp.signed.version += 1
        stamp.signatures.clear()
        stamp.sign(K3kitTufSigner(signer(golden.key)))
        stamp_path.write_bytes(stamp.to_bytes(JSONSerializer()))
        done = run_k3kit(
            "update", "--channel", "stable", "--from", url, "--root", pinned,
            "--into", tmp_path / "kits2", "--state-dir", state, "--json",
        )  # fmt: skip
    assert done.returncode == 1 and "CHANNEL_UNTRUSTED" in done.stdout, done.stdout + done.stderr
    assert held == [], f"the removed key still holds {held}"


def test_a_root_nobody_signed_fails_alike_on_a_fresh_node_and_on_one_that_holds_that_version(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A mirror puts its own root 2 (signed by a key of its own) into a kit. A node that already
    accepted the genuine root 2 must not ignore it (it once did: the node's root 2 won) nor call
    it a fork (no root key signed it): the same ROOT_UNTRUSTED a fresh node gives."""
    pinned, keys = _publisher(tmp_path, golden)
    genuine = tmp_path / "pub" / "2.root.json"
    _ok(
        "root", "floor", pinned, "-o", genuine, "--min-sequence", "kimi-k3-b300x8/stable=1",
        "--expires", FAR, "--sign-key", keys["a"].private,
    )  # fmt: skip
    seen = tmp_path / "seen"
    honest = tmp_path / "honest"
    shutil.copytree(golden.kit, honest)
    _ok("root", "attach", honest, pinned, genuine)
    _ok("verify", honest, "--root", pinned, "--state-dir", seen)
    mirror = keypair(tmp_path / "mirror", "m")
    forged = tmp_path / "mirror" / "2.root.json"
    _ok(
        "root", "floor", pinned, "-o", forged, "--min-sequence", "kimi-k3-b300x8/stable=0",
        "--expires", FAR, "--sign-key", mirror.private,
    )  # fmt: skip
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    attach(kit, forged)
    for state in (tmp_path / "fresh", seen):
        done = run_k3kit("verify", kit, "--root", pinned, "--state-dir", state, "--json")
        assert done.returncode == 1 and "ROOT_UNTRUSTED" in done.stdout, done.stdout


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    """An edit of one field of a root's ``signed`` part, by a dotted path (``@`` = the first
    key id)."""

    def edit(signed: dict[str, Any]) -> None:
        keys = path.split(".")
        node: Any = signed
        for key in keys[:-1]:
            node = node[next(iter(signed["keys"])) if key == "@" else key]
        last = keys[-1]
        node[next(iter(signed["keys"])) if last == "@" else last] = value

    return edit


_DEGENERATE: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "threshold 0": (_set("roles.root.threshold", 0), "ROOT_MALFORMED"),
    "threshold 2**40": (_set("roles.root.threshold", 2**40), "ROOT_MALFORMED"),
    "threshold true": (_set("roles.root.threshold", True), "ROOT_MALFORMED"),
    "version 2**63": (_set("version", 2**63), "ROOT_MALFORMED"),
    "version -2": (_set("version", -2), "ROOT_MALFORMED"),
    "expires with a fraction": (_set("expires", "2099-01-01T00:00:00.5Z"), "ROOT_MALFORMED"),
    "expires with an offset": (_set("expires", "2099-01-01T00:00:00+01:00"), "ROOT_MALFORMED"),
    "spec_version 2.0": (_set("spec_version", "2.0"), "ROOT_MALFORMED"),
    "consistent_snapshot 'true'": (_set("consistent_snapshot", "true"), "ROOT_MALFORMED"),
    "key id in upper case": (
        lambda s: s.__setitem__("keys", {k.upper(): v for k, v in s["keys"].items()}),
        "ROOT_MALFORMED",
    ),
    "extra field in keyval": (_set("keys.@.keyval.private", "00" * 32), "ROOT_MALFORMED"),
    "role key id a number": (_set("roles.targets.keyids", [5]), "ROOT_MALFORMED"),
    "unknown x-k3kit field": (_set("x-k3kit-trust-everything", True), "ROOT_MALFORMED"),
    "unknown key in x-k3kit-revoked": (
        lambda s: s.__setitem__(
            "x-k3kit-revoked",
            {next(iter(s["keys"])): {"reason": "x", "since": FAR, "also": 1}},
        ),
        "ROOT_MALFORMED",
    ),
    "floor true": (_set("x-k3kit-min-sequence", {"a/b": True}), "ROOT_MALFORMED"),
    "a targets file": (_set("_type", "targets"), "ROOT_WRONG_TYPE"),
}


@pytest.mark.parametrize("case", sorted(_DEGENERATE))
def test_degenerate_root_values_signed_by_the_root_key_are_refused_with_their_code(
    tmp_path: Path, case: str
) -> None:
    """Root 2 signed by the genuine root key (a tricked publisher) with one degenerate value:
    each is refused with a registered code (never accepted, never an internal error)."""
    a, release = keypair(tmp_path, "a"), keypair(tmp_path, "release")
    pinned = verify_root(
        sign_root(root_v1([a], [release]), [signer(a)]), trusted=None, source="pinned"
    )
    signed = root_v1([a], [release]).to_dict()
    signed["version"] = 2
    edit, code = _DEGENERATE[case]
    before = json.dumps(signed, sort_keys=True)
    edit(signed)
    assert json.dumps(signed, sort_keys=True) != before  # the edit is never a no-op
    with pytest.raises(K3kitError) as refused:
        verify_root(raw_root(signed, [a]), trusted=pinned, source="kit root 2.root.json")
    assert refused.value.code == code, refused.value.message


def test_a_channel_that_moved_past_the_walk_cap_is_not_followed_half_way(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The walk follows at most 64 root versions past the pinned one; python-tuf's updater
    follows more. After 64 routine root renewals the publisher's 65th rotation (root 66) takes
    the leaked release key out. A node pinned to root 1 must not judge the kit by root 65 (which
    still trusts the leaked key) while the channel stands on root 66: it is told to pin a newer
    root, and installs nothing."""
    pinned, keys = _publisher(tmp_path, golden)
    repo, new = tmp_path / "repo", keypair(tmp_path / "keys", "release-2")
    for _ in range(MAX_ROOTS):  # roots 2..65: renewals, nothing changes
        rotate_keys(repo, KeyChange("root"), [signer(keys["a"])], now=utc_now())
    online = [signer(k) for k in (keys["a"], new, keys["snapshot"], keys["timestamp"])]
    change = KeyChange("targets", add=(pub(new),), remove=(kid(golden.key),))
    rotate_keys(repo, change, online, now=utc_now())  # root 66: the leaked key is out
    assert (repo / "metadata" / f"{MAX_ROOTS + 2}.root.json").is_file()
    into = tmp_path / "kits"
    with serve(repo) as url:
        done = run_k3kit(
            "update", "--channel", "stable", "--from", url, "--root", pinned,
            "--into", into, "--state-dir", tmp_path / "state", "--json",
        )  # fmt: skip
    assert done.returncode == 1 and "ROOT_CHAIN_GAP" in done.stdout, done.stdout + done.stderr
    assert "pin a newer root" in done.stdout
    assert not into.exists() or not any(into.iterdir())


def test_channel_init_refuses_a_root_chain_that_has_expired(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Expiry is judged at the run's start on every path: a channel started from an expired root
    would be refused by every buyer (CHANNEL_FROZEN), so `channel init --root` refuses it and
    writes nothing; the same chain with a later, unexpired root starts the channel."""
    a = keypair(tmp_path / "keys", "a")
    old, later = tmp_path / "1.root.json", tmp_path / "2.root.json"
    _ok(
        "root", "create", "-o", old, "--root-key", a.public, "--release-key", golden.key.public,
        "--expires", "2020-01-01T00:00:00Z", "--sign-key", a.private,
    )  # fmt: skip
    done = run_k3kit("channel", "init", "--repo", tmp_path / "r1", "--root", old, "--json")
    assert done.returncode == 3 and "CHANNEL_REPO_INVALID" in done.stdout, done.stdout
    assert "expired" in done.stdout and not (tmp_path / "r1" / "metadata").exists()
    _ok("root", "floor", old, "-o", later, "--min-sequence", "kimi-k3-b300x8/stable=1",
        "--expires", FAR, "--sign-key", a.private)  # fmt: skip
    _ok("channel", "init", "--repo", tmp_path / "r2", "--root", old, "--root", later)


def test_a_channel_mirror_withholding_a_root_the_node_already_holds_cannot_use_its_revoked_key(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The timestamp key leaks; the publisher rotates it out (root 2) and hands root 2 out with
    the next kit, which the node verifies (its state now holds root 2). The thief keeps a copy
    of the channel from before the rotation and serves it, withholding root 2, with a fresh
    timestamp signed by the leaked key. python-tuf starts from the pin and follows what the
    server serves, so the channel would be judged by root 1: a server behind the root the node
    holds is a rollback of the channel's root (CHANNEL_ROLLBACK), and nothing is installed."""
    pinned, keys = _publisher(tmp_path, golden)
    repo, t2 = tmp_path / "repo", keypair(tmp_path / "keys", "timestamp-2")
    frozen = tmp_path / "frozen"
    shutil.copytree(repo, frozen)  # the thief's copy, before the rotation
    _ok(
        "channel", "rotate", "--repo", repo, "--role", "timestamp", "--add-key", t2.public,
        "--remove-key", keys["timestamp"].public, "--key", keys["a"].private,
        "--key", t2.private,
    )  # fmt: skip
    kit, state = tmp_path / "kit", tmp_path / "state"
    shutil.copytree(golden.kit, kit)
    _ok("root", "attach", kit, pinned, repo / "metadata" / "2.root.json")
    _ok("verify", kit, "--root", pinned, "--state-dir", state)  # the node holds root 2 now
    path = frozen / "metadata" / "timestamp.json"
    stamp = Metadata[Timestamp].from_bytes(path.read_bytes())
    stamp.signed.version += 1
    stamp.signatures.clear()
    stamp.sign(K3kitTufSigner(signer(keys["timestamp"])))
    path.write_bytes(stamp.to_bytes(JSONSerializer()))
    with serve(frozen) as url:
        done = run_k3kit(
            "update", "--channel", "stable", "--from", url, "--root", pinned,
            "--into", tmp_path / "kits", "--state-dir", state, "--json",
        )  # fmt: skip
    assert done.returncode == 1 and "CHANNEL_ROLLBACK" in done.stdout, done.stdout + done.stderr
    assert not (tmp_path / "kits").exists() or not any((tmp_path / "kits").iterdir())
