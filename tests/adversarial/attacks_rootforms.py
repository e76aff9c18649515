"""One kit, one verdict: ``root/`` shapes shipped as a ``.kit.tar.gz`` get the code the same kit
gets as a folder (tests/test_root_chain_forms.py runs every shape through both forms)."""

from __future__ import annotations

import shutil

from k3kit.archive import pack
from tests.adversarial.corpus import Argv, Workbench, attack
from tests.trustkit import attach, keypair, root_v1, write_root


def _archive_with(w: Workbench, rel: str, data: bytes) -> Argv:
    root_key = keypair(w.root, "root-a")
    pinned = write_root(
        w.root / "pinned.root.json", root_v1([root_key], [w.golden.key]), [root_key]
    )
    kit = w.root / "kit"
    shutil.copytree(w.golden.kit, kit)
    attach(kit, pinned)
    (kit / rel).write_bytes(data)
    archive = w.root / "kimi.kit.tar.gz"
    pack(kit, archive)
    return [archive, "--root", pinned, "--state-dir", w.root / "state"]


@attack("ROOT_CHAIN_MALFORMED")
def verify_archive_with_a_stray_file_under_root(w: Workbench) -> Argv:
    """``root/notes.txt`` is ROOT_CHAIN_MALFORMED in a folder; as an archive it was judged by
    another rule (ARCHIVE_NOT_A_KIT)."""
    args = _archive_with(w, "root/notes.txt", b"x")
    return ["verify", *args]


@attack("ROOT_CHAIN_GAP")
def install_archive_with_a_root_past_the_walks_reach(w: Workbench) -> Argv:
    """A root numbered past what the walk can reach: the archive's check from its tar index
    offered only the reachable versions, so it passed (recording the roots it walked) and only
    the extracted copy failed; now the index check itself refuses it, as the folder is."""
    args = _archive_with(w, "root/900.root.json", b"{}")
    return ["install", *args, "--into", w.root / "kits"]
