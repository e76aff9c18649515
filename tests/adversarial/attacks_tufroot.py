"""Attacks on the root of trust's TUF format: roots written by hand (or edited after signing) to
get past the reader, each carried in a kit as ``root/2.root.json`` on top of a genuine pinned root.

Every forged root here except the first two is signed by the genuine root key (a careless or
tricked publisher), so what refuses it is the reader's rule, not a missing signature.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from tuf.api.metadata import Metadata, Root, Timestamp
from tuf.api.serialization.json import JSONSerializer

from k3kit._fs import atomic_write
from k3kit.signing.trust.edit import add_key, rotate, sign_root
from k3kit.signing.trust.tufroot import K3kitTufSigner
from tests.adversarial.corpus import Argv, Workbench, attack
from tests.channelkit import serve_until_exit
from tests.conftest import KeyFiles, run_k3kit
from tests.trustkit import (
    FAR,
    canonical,
    duplicate_signature,
    keypair,
    kid,
    pub,
    raw_root,
    resign_receipt,
    root_v1,
    signer,
    write_root,
)

IDENTITY = bytes([1]) + bytes(31)  # the Ed25519 identity point: verifies forged signatures


def _setup(w: Workbench) -> tuple[KeyFiles, Root, Path, Path]:
    root_key = keypair(w.root, "root-a")
    body = root_v1([root_key], [w.golden.key])
    return root_key, body, write_root(w.root / "pinned.root.json", body, [root_key]), w.root / "st"


def _next(body: Root) -> dict[str, Any]:
    """Root 2 as a plain dict, for hand edits python-tuf's constructor would refuse first."""
    signed = body.to_dict()
    signed["version"] = 2
    return signed


def _carry(w: Workbench, pinned: Path, state: Path, data: bytes) -> Argv:
    kit = w.kit()
    atomic_write(kit / "root" / "2.root.json", data)
    return ["verify", kit, "--root", pinned, "--state-dir", state]


@attack("ROOT_UNTRUSTED")
def root_custom_field_added_after_signing(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    genuine = json.loads(
        sign_root(add_key(body, "release", pub(w.other_key), expires=FAR), [signer(root_key)])
    )
    # A mirror adds a key window to a genuine root 2 so an old receipt counts again: the
    # custom fields are inside 'signed', so the root key's signature no longer verifies.
    genuine["signed"]["x-k3kit-key-validity"] = {kid(w.golden.key): {"not_before": FAR}}
    return _carry(w, pinned, state, json.dumps(genuine).encode())


@attack("ROOT_UNTRUSTED")
def root_signed_with_the_release_key_only(w: Workbench) -> Argv:
    _, body, pinned, state = _setup(w)
    # Whoever holds the release key (it signs every receipt: the online one) writes root 2
    # moving the root role to a key of their own, and signs it with both: the release key is
    # not a root key of root 1, so root 1's threshold is not met.
    thief = keypair(w.root, "thief")
    two = rotate(body, "root", [pub(thief)], 1, expires=FAR)
    return _carry(w, pinned, state, sign_root(two, [signer(w.golden.key), signer(thief)]))


@attack("KEY_WEAK")
def root_whose_targets_key_is_small_order(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    weak = {"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": IDENTITY.hex()}}
    weak_id = hashlib.sha256(canonical(weak)).hexdigest()  # the honest key id
    signed = _next(body)
    signed["keys"][weak_id] = weak
    signed["roles"]["targets"] = {"keyids": [weak_id], "threshold": 1}
    return _carry(w, pinned, state, raw_root(signed, [root_key]))


@attack("ROOT_MALFORMED")
def root_lists_one_key_under_two_ids(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    signed = _next(body)
    genuine = kid(w.golden.key)
    alias = hashlib.sha256(b"alias of the publisher key").hexdigest()
    signed["keys"][alias] = signed["keys"][genuine]
    signed["roles"]["targets"] = {"keyids": [genuine, alias], "threshold": 2}
    kit_args = _carry(w, pinned, state, raw_root(signed, [root_key]))
    duplicate_signature(w.kit(), hint=alias)  # one key's signature twice meets "2 of 2"
    return kit_args


@attack("ROOT_MALFORMED")
def root_revoked_key_still_in_targets(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    signed = _next(body)
    revoked = {"reason": "compromise", "since": "2026-01-01T00:00:00Z"}
    signed["x-k3kit-revoked"] = {kid(w.golden.key): revoked}  # ...but targets still lists it
    return _carry(w, pinned, state, raw_root(signed, [root_key]))


@attack("ROOT_MALFORMED")
def root_with_an_unknown_top_level_role(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    signed = _next(body)
    signed["roles"]["mirrors"] = {"keyids": [kid(root_key)], "threshold": 1}
    return _carry(w, pinned, state, raw_root(signed, [root_key]))


@attack("ROOT_MALFORMED")
def root_key_window_in_arabic_indic_digits(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    signed = _next(body)
    # ٢٠٢٠: a window that closed in 2020 to k3kit's eye, or one a loose parser never closes.
    signed["x-k3kit-key-validity"] = {
        kid(w.golden.key): {"not_after": "\u0662\u0660\u0662\u0660-01-01T00:00:00Z"}
    }
    return _carry(w, pinned, state, raw_root(signed, [root_key]))


@attack("ROOT_WRONG_TYPE")
def channel_targets_metadata_replayed_as_root(w: Workbench) -> Argv:
    root_key, _, pinned, state = _setup(w)
    # TUF targets metadata signed by the root key has the same outer shape as a root.
    signed = {
        "_type": "targets",
        "version": 2,
        "spec_version": "1.0.31",
        "expires": FAR,
        "targets": {},
    }
    return _carry(w, pinned, state, raw_root(signed, [root_key]))


# --- shapes python-tuf reads loosely: a mirror's bytes, no key needed ----------------------------


@attack("ROOT_MALFORMED")
def root_role_naming_a_key_by_a_number(w: Workbench) -> Argv:
    _, body, pinned, state = _setup(w)
    # A mirror writes root 2 with a key id that is a JSON number: python-tuf's reader keeps it,
    # and k3kit's own role check then met an int where it sliced a string (exit 70, an
    # internal error, from bytes anyone between publisher and node can write).
    signed = _next(body)
    signed["roles"]["targets"]["keyids"] = [5]
    return _carry(w, pinned, state, raw_root(signed, []))


@attack("ROOT_MALFORMED")
def root_threshold_spelled_true(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    # `true` is 1 to Python: a second spelling of the threshold python-tuf accepted.
    signed = _next(body)
    signed["roles"]["root"]["threshold"] = True
    return _carry(w, pinned, state, raw_root(signed, [root_key]))


@attack("ROOT_MALFORMED")
def root_sequence_floor_spelled_true(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    signed = _next(body)
    signed["x-k3kit-min-sequence"] = {"kimi-k3-b300x8/stable": True}
    return _carry(w, pinned, state, raw_root(signed, [root_key]))


@attack("ROOT_MALFORMED")
def root_signatures_as_an_object(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    data = json.loads(raw_root(_next(body), [root_key]))
    data["signatures"] = {s["keyid"]: s for s in data["signatures"]}  # python-tuf iterates it
    return _carry(w, pinned, state, json.dumps(data).encode())


@attack("ROOT_MALFORMED")
def root_with_a_duplicate_key_the_signature_does_not_cover(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    # The genuine root 2, signed; the mirror writes a second "version" ahead of the signed one.
    # python-tuf's json.loads keeps the last (the signed 2), so the signature still verifies;
    # any reader that kept the first would see version 3: one document, two readings.
    genuine = raw_root(_next(body), [root_key]).decode()
    forged = genuine.replace('"signed": {', '"signed": {"version": 3, ', 1)
    assert forged != genuine
    return _carry(w, pinned, state, forged.encode())


# --- one lineage, and a removed key signs nothing: the channel and the kits together -----------


def _ok(*args: str | Path) -> None:
    done = run_k3kit(*args)
    assert done.returncode == 0, done.stdout + done.stderr


def _publisher_channel(w: Workbench, a: KeyFiles) -> tuple[Path, Path]:
    """`root create` with root key ``a`` and the example's release key (the release key is the
    snapshot and timestamp key too: the default), a channel started from it, v1.0.0 published."""
    pinned = w.root / "pub" / "1.root.json"
    pinned.parent.mkdir(parents=True)
    _ok("root", "create", "-o", pinned, "--root-key", a.public, "--release-key",
        w.golden.key.public, "--expires", FAR, "--sign-key", a.private)  # fmt: skip
    repo = w.root / "repo"
    _ok("channel", "init", "--repo", repo, "--root", pinned)
    _ok("publish", w.archive(), "--channel", "stable", "--repo", repo, "--trust",
        w.golden.key.public, "--key", w.golden.key.private)  # fmt: skip
    return pinned, repo


@attack("ROOT_FORK")
def root_fork_from_a_rotated_out_root_key_after_the_channel_moved_on(w: Workbench) -> Argv:
    a, b = keypair(w.root, "root-a"), keypair(w.root, "root-b")
    pinned, repo = _publisher_channel(w, a)
    _ok("channel", "rotate", "--repo", repo, "--role", "root", "--add-key", b.public,
        "--remove-key", a.public, "--key", a.private, "--key", b.private)  # fmt: skip
    state = w.root / "state"
    # The node's daily update walks the channel to root 2; nothing newer to install.
    done = run_k3kit("update", "--channel", "stable", "--from", serve_until_exit(repo), "--root",
                     pinned, "--into", w.root / "kits", "--state-dir", state, "--version",
                     "9.9.9", "--json")  # fmt: skip
    assert "CHANNEL_NO_RELEASE" in done.stdout, done.stdout + done.stderr
    # The thief of `a` forks root 2 (their release key) and hands over a kit carrying it.
    evil = keypair(w.root, "evil")
    forged = w.root / "2.root.json"
    _ok("root", "rotate", pinned, "-o", forged, "--role", "release", "--key", evil.public,
        "--threshold", "1", "--expires", FAR, "--sign-key", a.private)  # fmt: skip
    kit = w.kit()
    resign_receipt(kit, [evil])
    _ok("root", "attach", kit, pinned, forged)
    return ["verify", kit, "--root", pinned, "--state-dir", state]


@attack("CHANNEL_UNTRUSTED")
def channel_timestamp_signed_by_a_release_key_rotated_out(w: Workbench) -> Argv:
    a, new = keypair(w.root, "root-a"), keypair(w.root, "release-2")
    pinned, repo = _publisher_channel(w, a)
    url, state = serve_until_exit(repo), w.root / "state"
    _ok("update", "--channel", "stable", "--from", url, "--root", pinned, "--into",
        w.root / "kits", "--state-dir", state)  # fmt: skip
    _ok("channel", "rotate", "--repo", repo, "--role", "targets", "--add-key", new.public,
        "--remove-key", w.golden.key.public, "--key", a.private, "--key", new.private,
        "--key", w.golden.key.private)  # fmt: skip
    # The thief of the removed release key (it was the timestamp key too) serves a fresh
    # timestamp of their own: a freeze on the view they choose.
    path = repo / "metadata" / "timestamp.json"
    stamp = Metadata[Timestamp].from_bytes(path.read_bytes())
    stamp.signed.version += 1
    stamp.signatures.clear()
    stamp.sign(K3kitTufSigner(signer(w.golden.key)))
    path.write_bytes(stamp.to_bytes(JSONSerializer()))
    return ["update", "--channel", "stable", "--from", url, "--root", pinned, "--into",
            w.root / "kits2", "--state-dir", state]  # fmt: skip


@attack("CHANNEL_ROLLBACK")
def channel_mirror_withholds_the_root_that_removed_a_leaked_timestamp_key(w: Workbench) -> Argv:
    a, t2 = keypair(w.root, "root-a"), keypair(w.root, "timestamp-2")
    pinned, repo = _publisher_channel(w, a)
    frozen = w.root / "frozen"
    shutil.copytree(repo, frozen)  # the thief's copy, before the rotation
    # The release key doubled as timestamp key; the publisher moves the timestamp to t2 and
    # hands root 2 out with the next kit, which the node verifies.
    _ok("channel", "rotate", "--repo", repo, "--role", "timestamp", "--add-key", t2.public,
        "--remove-key", w.golden.key.public, "--key", a.private, "--key", t2.private,
        "--key", w.golden.key.private)  # fmt: skip
    kit, state = w.kit(), w.root / "state"
    _ok("root", "attach", kit, pinned, repo / "metadata" / "2.root.json")
    _ok("verify", kit, "--root", pinned, "--state-dir", state)
    path = frozen / "metadata" / "timestamp.json"
    stamp = Metadata[Timestamp].from_bytes(path.read_bytes())
    stamp.signed.version += 1
    stamp.signatures.clear()
    stamp.sign(K3kitTufSigner(signer(w.golden.key)))
    path.write_bytes(stamp.to_bytes(JSONSerializer()))
    return ["update", "--channel", "stable", "--from", serve_until_exit(frozen), "--root", pinned,
            "--into", w.root / "kits", "--state-dir", state]  # fmt: skip
