"""Attacks on trust over time: forged or stale roots, revoked and out-of-window keys, thresholds
met by one key counted twice, cross-type replays, rollback and equivocation.

Each case pins a root of trust whose root role is a fresh key and whose release role is the
genuine publisher key (``w.trust``), seeds the node's state where the attack needs history, and
runs one ``k3kit verify --root``.
"""

from __future__ import annotations

from pathlib import Path

from tuf.api.metadata import Root

from k3kit._fs import atomic_write
from k3kit.formats.manifest import RECEIPT_NAME
from k3kit.signing.trust import RootAnchor, rollback
from k3kit.signing.trust.edit import add_key, revoke, rotate, set_floor
from tests.adversarial.corpus import Argv, Workbench, attack
from tests.conftest import KeyFiles
from tests.trustkit import (
    FAR,
    attach,
    duplicate_signature,
    keypair,
    kid,
    pub,
    root_v1,
    with_version,
    write_root,
)

NOW = "2026-12-01T00:00:00Z"


def _publisher(w: Workbench) -> KeyFiles:
    return w.golden.key


def _setup(w: Workbench, **kw: object) -> tuple[KeyFiles, Root, Path, Path]:
    root_key = keypair(w.root, "root-a")
    body = root_v1([root_key], [_publisher(w)], **kw)  # type: ignore[arg-type]
    return root_key, body, write_root(w.root / "pinned.root.json", body, [root_key]), w.root / "st"


def _verify(kit: Path, pinned: Path, state: Path) -> Argv:
    return ["verify", kit, "--root", pinned, "--state-dir", state]


@attack("ROOT_UNTRUSTED")
def root_rotated_by_new_keys_alone(w: Workbench) -> Argv:
    _, body, pinned, state = _setup(w)
    thief = keypair(w.root, "thief")
    forged = rotate(body, "root", [pub(thief)], 1, expires=FAR)
    forged = rotate(forged, "release", [pub(w.other_key)], 1, expires=FAR)
    forged = with_version(forged, 2)
    kit = w.kit()
    attach(kit, write_root(w.root / "2.root.json", forged, [thief]))
    return _verify(kit, pinned, state)


@attack("ROOT_EXPIRED")
def root_expired(w: Workbench) -> Argv:
    _, _, pinned, state = _setup(w, expires="2020-01-01T00:00:00Z")
    return _verify(w.kit(), pinned, state)


@attack("RECEIPT_KEY_REVOKED")
def key_revoked_by_root_seen_before(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    survivor = keypair(w.root, "rel-2027")
    two = add_key(body, "release", pub(survivor), expires=FAR)
    three = revoke(two, kid(_publisher(w)), reason="compromise", since=NOW, expires=FAR)
    seen = w.root / "seen"
    attach(
        seen,
        write_root(w.root / "2.root.json", two, [root_key]),
        write_root(w.root / "3.root.json", three, [root_key]),
    )
    RootAnchor(pinned.read_bytes(), "pinned", state, NOW).resolve(seen)  # the node saw root 3
    return _verify(w.kit(), pinned, state)  # the kit carries no root at all


@attack("RECEIPT_KEY_OUTSIDE_VALIDITY")
def receipt_issued_after_key_window(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    other = keypair(w.root, "rel-old")
    two = add_key(body, "release", pub(other), expires=FAR)
    # The publisher key gets a window that closed before the receipt was issued.
    window = {kid(_publisher(w)): {"not_after": "2026-06-30T00:00:00Z"}}
    two.unrecognized_fields["x-k3kit-key-validity"] = window
    kit = w.kit()
    attach(kit, write_root(w.root / "2.root.json", two, [root_key]))
    return _verify(kit, pinned, state)


@attack("RECEIPT_THRESHOLD_NOT_MET")
def threshold_met_by_one_signature_twice(w: Workbench) -> Argv:
    _, _, pinned, state = _setup_threshold(w)
    kit = w.kit()
    duplicate_signature(kit)
    return _verify(kit, pinned, state)


@attack("RECEIPT_THRESHOLD_NOT_MET")
def threshold_met_by_one_key_under_two_keyids(w: Workbench) -> Argv:
    _, _, pinned, state = _setup_threshold(w)
    kit = w.kit()
    duplicate_signature(kit, hint=kid(w.other_key))
    return _verify(kit, pinned, state)


def _setup_threshold(w: Workbench) -> tuple[KeyFiles, Root, Path, Path]:
    root_key = keypair(w.root, "root-a")
    body = root_v1([root_key], [_publisher(w), w.other_key], release_threshold=2)
    return root_key, body, write_root(w.root / "p.root.json", body, [root_key]), w.root / "st"


@attack("RECEIPT_MALFORMED")
def root_replayed_as_receipt(w: Workbench) -> Argv:
    _, body, pinned, state = _setup(w)
    kit = w.kit()
    # A root signed by the publisher's own key (it is in the release role) put where the
    # receipt belongs: TUF metadata is no DSSE envelope, and never passes as a receipt.
    write_root(kit / RECEIPT_NAME, body, [_publisher(w)])
    return _verify(kit, pinned, state)


@attack("ROOT_WRONG_TYPE")
def receipt_replayed_as_root(w: Workbench) -> Argv:
    _, _, pinned, state = _setup(w)
    kit = w.kit()
    atomic_write(kit / "root" / "2.root.json", (kit / RECEIPT_NAME).read_bytes())
    return _verify(kit, pinned, state)


@attack("ROOT_CHAIN_GAP")
def root_chain_skips_a_version(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    three = add_key(
        add_key(body, "release", pub(w.other_key), expires=FAR),
        "root",
        pub(keypair(w.root, "b")),
        expires=FAR,
    )
    kit = w.kit()
    attach(kit, write_root(w.root / "3.root.json", three, [root_key]))
    return _verify(kit, pinned, state)


@attack("ROOT_CHAIN_MALFORMED")
def root_folder_smuggles_a_script(w: Workbench) -> Argv:
    kit = w.kit()
    (kit / "root").mkdir()
    (kit / "root" / "hook.sh").write_text("#!/bin/sh\n")
    return ["verify", kit, "--trust", w.trust]


@attack("ROLLBACK")
def rollback_to_older_sequence(w: Workbench) -> Argv:
    _, _, pinned, state = _setup(w)
    decision = rollback.Decision("kimi-k3-b300x8/stable", 5, "a" * 64, None, False, "")
    rollback.record(state, decision, now=NOW)  # the node accepted sequence 5 earlier
    return _verify(w.kit(), pinned, state)


@attack("EQUIVOCATION")
def equivocation_same_sequence_other_kit(w: Workbench) -> Argv:
    _, _, pinned, state = _setup(w)
    decision = rollback.Decision("kimi-k3-b300x8/stable", 1, "b" * 64, None, False, "")
    rollback.record(state, decision, now=NOW)
    return _verify(w.kit(), pinned, state)


@attack("ROLLBACK")
def kit_below_root_minimum_sequence(w: Workbench) -> Argv:
    root_key, body, pinned, state = _setup(w)
    two = set_floor(body, {"kimi-k3-b300x8/stable": 2}, expires=FAR)
    kit = w.kit()
    attach(kit, write_root(w.root / "2.root.json", two, [root_key]))
    return _verify(kit, pinned, state)  # a fresh node: no state, the floor alone refuses
