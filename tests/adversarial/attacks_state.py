"""Attacks on the node's own state: the folder that remembers which kits and roots it accepted.

Whoever can delete, rename or pre-create that memory can roll the node back or undo a revocation,
so every state folder must be this user's alone (``STATE_DIR_UNSAFE``, exit 4), a half of the
memory that vanished is ``STATE_LOST`` (never a first run), and one version names one kit
(``EQUIVOCATION``). Each case seeds the state the way the node itself would have, then runs one
``k3kit verify --root`` (or ``install --root``) as the victim.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from k3kit.signing.trust import rollback
from tests.adversarial.corpus import Argv, Workbench, attack
from tests.trustkit import keypair, root_v1, write_root

NOW = "2026-12-01T00:00:00Z"
PACKAGE = "kimi-k3-b300x8"
OTHER_UID = 65534  # a real second user (nobody), as in tests/cotenant.py


def _pinned(w: Workbench) -> Path:
    root_key = keypair(w.root, "root-s")
    return write_root(w.root / "pinned.root.json", root_v1([root_key], [w.golden.key]), [root_key])


def _seeded(w: Workbench, sequence: int = 0, version_kit: str | None = None) -> Path:
    """A state folder in which the node accepted a kit earlier (as ``record`` writes it)."""
    state = w.root / "state"
    decision = rollback.Decision(
        f"{PACKAGE}/stable",
        sequence,
        version_kit or "a" * 64,
        None,
        False,
        "",
        f"{PACKAGE}@1.0.0" if version_kit else None,
    )
    rollback.record(state, decision, now=NOW)
    return state


def _verify(w: Workbench, pinned: Path, state: Path) -> Argv:
    return ["verify", w.kit(), "--root", pinned, "--state-dir", state]


def _as_root_only() -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another uid needs root (CI runs as root)")


@attack("STATE_DIR_UNSAFE", exit_code=4)
def state_folder_owned_by_another_user(w: Workbench) -> Argv:
    _as_root_only()
    pinned = _pinned(w)
    state = w.root / "state"
    state.mkdir(mode=0o700)
    (state / "rollback.json").write_text('{"entries":{},"schema":"k3kit.rollback-state/v1"}')
    os.chown(state / "rollback.json", OTHER_UID, OTHER_UID)
    os.chown(state, OTHER_UID, OTHER_UID)  # the co-tenant made it first, with an empty memory
    return _verify(w, pinned, state)


@attack("STATE_DIR_UNSAFE", exit_code=4)
def state_folder_in_a_folder_anyone_can_write(w: Workbench) -> Argv:
    pinned = _pinned(w)
    shared = w.root / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone can rename the state folder away and plant one
    return _verify(w, pinned, shared / "state")


@attack("STATE_DIR_UNSAFE", exit_code=4)
def state_folder_group_writable(w: Workbench) -> Argv:
    pinned = _pinned(w)
    state = _seeded(w, sequence=5)
    state.chmod(0o770)
    return _verify(w, pinned, state)


@attack("STATE_DIR_UNSAFE", exit_code=4)
def install_with_a_state_folder_in_a_folder_anyone_can_write(w: Workbench) -> Argv:
    pinned = _pinned(w)
    shared = w.root / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    return ["install", w.kit(), "--root", pinned, "--state-dir", shared / "st", "--into", w.root]


@attack("STATE_LOST")
def rollback_memory_deleted_roots_kept(w: Workbench) -> Argv:
    pinned = _pinned(w)
    state = _seeded(w, sequence=5)  # the node accepted sequence 5; this kit is sequence 1
    pin = hashlib.sha256(pinned.read_bytes()).hexdigest()[:32]
    rollback.accepted_root(state, pin)  # the node has used this root: roots/<pin>/ exists
    (state / "rollback.json").unlink()
    return _verify(w, pinned, state)


@attack("STATE_LOST")
def roots_folder_renamed_away(w: Workbench) -> Argv:
    pinned = _pinned(w)
    state = _seeded(w)
    (state / "roots").rename(state / "roots.old")
    return _verify(w, pinned, state)


@attack("STATE_LOST")
def accepted_root_deleted_from_the_state(w: Workbench) -> Argv:
    pinned = _pinned(w)
    state = _seeded(w)
    pin = hashlib.sha256(pinned.read_bytes()).hexdigest()[:32]
    rollback.note_root(state, pin, 2)  # the node accepted root 2 (say, one that revoked a key)
    shutil.rmtree(state / "roots")
    (state / "roots").mkdir(mode=0o700)  # ...and its file is gone
    return _verify(w, pinned, state)


@attack("EQUIVOCATION")
def second_kit_under_an_accepted_version(w: Workbench) -> Argv:
    pinned = _pinned(w)
    # The node accepted another kit as kimi-k3-b300x8 1.0.0 (sequence 0, so only the version
    # memory can tell): this genuine-signature kit is a second one under the same version.
    state = _seeded(w, sequence=0, version_kit="b" * 64)
    return _verify(w, pinned, state)
