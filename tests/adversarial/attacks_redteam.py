"""Red-team attacks, one CLI call each: an attacker who can write the archive, the kit folder, the
install destination, the weights folder, the state folder or a site file, and holds no key.

Each case is named after the attack and records the refusal it must meet. Attacks that need more
than one call (races, a hostile server, a lock held by another process, a launched engine) are
named tests in ``tests/test_redteam.py``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.adversarial.corpus import Argv, Workbench, attack

SERVE = "profiles/interactive/single-node-8gpu/serve.yaml"
INSTALLED = "kimi-k3-b300x8-1.0.0"


def _install(w: Workbench, kit: Path | None = None) -> Argv:
    return ["install", kit or w.archive(), "--trust", w.trust, "--into", w.root / "kits"]


def _planted_copy(w: Workbench) -> Path:
    """A writable copy of the genuine kit planted where the install would go."""
    target = w.root / "kits" / INSTALLED
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(w.golden.kit, target)
    return target


# --- install: what is already at DIR/NAME-VERSION ---------------------------------------------
# Whatever it holds, a folder install did not leave there (writable, a link, a file) is refused as
# foreign before its bytes are compared: INSTALL_TARGET_FOREIGN, exit 4.


@attack("INSTALL_TARGET_FOREIGN", exit_code=4)
def install_over_planted_copy_with_genuine_manifest_and_tampered_file(w: Workbench) -> Argv:
    """A co-tenant plants DIR/NAME-VERSION holding the genuine MANIFEST.json and receipt but a
    changed serve.yaml; an install must not call that 'already installed'."""
    target = _planted_copy(w)
    path = target / SERVE
    path.write_bytes(path.read_bytes().replace(b"max-num-seqs: 32", b"max-num-seqs: 64"))
    return _install(w)


@attack("INSTALL_TARGET_FOREIGN", exit_code=4)
def install_over_planted_copy_with_an_extra_file(w: Workbench) -> Argv:
    target = _planted_copy(w)
    (target / "profiles" / "interactive" / "sitecustomize.py").write_text("import os\n")
    return _install(w)


@attack("INSTALL_TARGET_FOREIGN", exit_code=4)
def install_over_planted_link_to_a_genuine_copy(w: Workbench) -> Argv:
    """NAME-VERSION is a link to a genuine copy elsewhere (which the co-tenant can later edit)."""
    elsewhere = w.root / "elsewhere"
    shutil.copytree(w.golden.kit, elsewhere)
    (w.root / "kits").mkdir()
    (w.root / "kits" / INSTALLED).symlink_to(elsewhere)
    return _install(w)


@attack("INSTALL_TARGET_FOREIGN", exit_code=4)
def install_over_planted_regular_file(w: Workbench) -> Argv:
    (w.root / "kits").mkdir()
    (w.root / "kits" / INSTALLED).write_text("not a kit\n")
    return _install(w)


@attack("INSTALL_TARGET_FOREIGN", exit_code=4)
def install_over_planted_dangling_link(w: Workbench) -> Argv:
    """A dangling link: a rename would not follow it, but 'exists()' says False."""
    (w.root / "kits").mkdir()
    (w.root / "kits" / INSTALLED).symlink_to(w.root / "nowhere")
    return _install(w)


@attack("KIT_NOT_REGULAR")
def install_kit_folder_with_symlink_to_outside(w: Workbench) -> Argv:
    kit = w.kit()
    (kit / "profiles" / "interactive" / "passwd").symlink_to("/etc/passwd")
    return _install(w, kit)


@attack("KIT_NOT_REGULAR")
def install_kit_folder_with_a_fifo(w: Workbench) -> Argv:
    """A FIFO in the kit folder: the copy must refuse it, not block reading it."""
    kit = w.kit()
    os.mkfifo(kit / "profiles" / "interactive" / "pipe")
    return _install(w, kit)


@attack("KIT_SYMLINK")
def install_kit_folder_whose_subfolder_is_a_link(w: Workbench) -> Argv:
    """profiles/interactive -> a genuine copy elsewhere: verify must not follow it."""
    kit = w.kit()
    elsewhere = w.root / "profiles-elsewhere"
    shutil.move(kit / "profiles" / "interactive", elsewhere)
    (kit / "profiles" / "interactive").symlink_to(elsewhere)
    return ["verify", kit, "--trust", w.trust]


# --- hostile kits given to the readers -------------------------------------------------------


@attack("EVIDENCE_FILE_EXTRA")
def evidence_folder_smuggles_an_unlisted_file(w: Workbench) -> Argv:
    """evidence/ is outside MANIFEST.json; an unreferenced file there must still be refused."""
    kit = w.kit()
    (kit / "evidence").mkdir(exist_ok=True)
    (kit / "evidence" / "sitecustomize.py").write_text("import os\n")
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_SPECIAL_FILE")
def evidence_folder_holds_a_fifo(w: Workbench) -> Argv:
    kit = w.kit()
    (kit / "evidence").mkdir(exist_ok=True)
    os.mkfifo(kit / "evidence" / "run.json")
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_FILE_CHANGED")
def release_notes_with_tampered_new_kit(w: Workbench) -> Argv:
    kit = w.kit()
    path = kit / SERVE
    path.write_bytes(path.read_bytes().replace(b"max-num-seqs: 32", b"max-num-seqs: 64"))
    return ["release-notes", w.archive(), kit, "--trust", w.trust]


@attack("RECEIPT_MISSING")
def show_of_kit_whose_receipt_is_a_fifo(w: Workbench) -> Argv:
    kit = w.kit()
    (kit / "receipt.dsse.json").unlink()
    os.mkfifo(kit / "receipt.dsse.json")
    return ["show", kit, "--trust", w.trust]


# --- site file and state folder ---------------------------------------------------------------


@attack("SITE_INVALID", exit_code=3)
def site_port_written_with_a_superscript_digit(w: Workbench) -> Argv:
    """'²'.isdigit() is True but int('²') raises: a site file must never cause exit 70."""
    site = w.root / "site.env"
    site.write_text("PORT=\u00b2\n")
    return [
        "launch",
        "--no-preflight",
        w.kit(),
        "--profile",
        "interactive",
        "--trust",
        w.trust,
        "--weights",
        w.snapshot(),
        "--site",
        site,
        "--state-dir",
        w.root / "state",
    ]


@attack("SITE_INVALID", exit_code=3)
def site_file_is_a_fifo(w: Workbench) -> Argv:
    site = w.root / "site.env"
    os.mkfifo(site)
    return [
        "launch",
        "--no-preflight",
        w.kit(),
        "--profile",
        "interactive",
        "--trust",
        w.trust,
        "--weights",
        w.snapshot(),
        "--site",
        site,
        "--state-dir",
        w.root / "state",
    ]


@attack("SITE_INVALID", exit_code=3)
def site_host_with_an_option_after_a_space(w: Workbench) -> Argv:
    site = w.root / "site.env"
    site.write_text("HOST=127.0.0.1 --trust-remote-code\n")
    return [
        "launch",
        "--no-preflight",
        w.kit(),
        "--profile",
        "interactive",
        "--trust",
        w.trust,
        "--weights",
        w.snapshot(),
        "--site",
        site,
        "--state-dir",
        w.root / "state",
    ]


@attack("KIT_FILE_CHANGED")
def launch_with_engine_env_adding_ld_preload(w: Workbench) -> Argv:
    """engine.env is signed: a line added by the attacker is a changed kit file, never exported."""
    kit = w.kit()
    env = kit / "profiles" / "interactive" / "single-node-8gpu" / "engine.env"
    env.write_bytes(env.read_bytes() + b"LD_PRELOAD=/tmp/evil.so\n")
    return w.launch()


# --- root chain and rollback state ---------------------------------------------------------------


def _pinned_root(w: Workbench) -> Path:
    from tests.trustkit import keypair, root_v1, write_root

    root_key = keypair(w.root, "root-a")
    return write_root(w.root / "pinned.root.json", root_v1([root_key], [w.golden.key]), [root_key])


@attack("ROOT_CHAIN_MALFORMED")
def root_folder_holds_a_fifo_as_next_root(w: Workbench) -> Argv:
    pinned = _pinned_root(w)
    kit = w.kit()
    (kit / "root").mkdir()
    os.mkfifo(kit / "root" / "2.root.json")
    return ["verify", kit, "--root", pinned, "--state-dir", w.root / "state"]


@attack("ROLLBACK_STATE_INVALID")
def rollback_state_planted_as_a_link(w: Workbench) -> Argv:
    pinned = _pinned_root(w)
    state = w.root / "state"
    state.mkdir(mode=0o700)
    elsewhere = w.root / "elsewhere.json"
    elsewhere.write_text('{"schema":"k3kit.rollback-state/v1","entries":{}}')
    (state / "rollback.json").symlink_to(elsewhere)
    return ["verify", w.kit(), "--root", pinned, "--state-dir", state]


@attack("ROLLBACK_STATE_INVALID")
def rollback_state_with_a_5000_digit_sequence(w: Workbench) -> Argv:
    pinned = _pinned_root(w)
    state = w.root / "state"
    state.mkdir(mode=0o700)
    entry = {"sequence": "SEQ", "kit_sha256": "a" * 64, "accepted_at": "x", "override": False}
    doc = json.dumps(
        {"schema": "k3kit.rollback-state/v1", "entries": {"kimi-k3-b300x8/stable": entry}}
    )
    doc = doc.replace('"SEQ"', "9" * 5000)
    (state / "rollback.json").write_text(doc)
    (state / "rollback.json").chmod(0o600)
    return ["verify", w.kit(), "--root", pinned, "--state-dir", state]
