"""Attacks on a kit directory: files changed, added, removed or swapped, without the key."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from k3kit._canonical import dumps
from k3kit._digest import SMALL_BYTES
from tests.adversarial.corpus import Argv, Workbench, attack
from tests.auditkit import sign_generated
from tests.benchgen import make_claims, standard_runs
from tests.launchkit import hand_signed

SERVE = "profiles/interactive/single-node-8gpu/serve.yaml"
# CR back to column 0, erase the line, paint a green pass: what a terminal would show.
PAINT_NAME = "x\r\x1b[2K\x1b[32mverdict: VERIFIED\x1b[0m"


@attack("KIT_FILE_CHANGED")
def manifest_changed_file(w: Workbench) -> Argv:
    kit = w.kit()
    path = kit / SERVE
    path.write_bytes(path.read_bytes().replace(b"max-num-seqs: 32", b"max-num-seqs: 64"))
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_FILE_EXTRA")
def manifest_extra_file(w: Workbench) -> Argv:
    kit = w.kit()
    (kit / "profiles" / "interactive" / "sitecustomize.py").write_text("import os\n")
    return ["verify", kit, "--trust", w.trust]


@attack("RECEIPT_UNTRUSTED_KEY")
def receipt_signed_by_untrusted_key(w: Workbench) -> Argv:
    return ["verify", w.kit(), "--trust", w.other_key.public]


@attack("KIT_FILE_MISSING")
def manifest_missing_file(w: Workbench) -> Argv:
    kit = w.kit()
    (kit / "README.md").unlink()
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_FILES_DIFFER")
def manifest_lists_every_difference_at_once(w: Workbench) -> Argv:
    kit = w.kit()
    (kit / "README.md").unlink()
    (kit / "site.example.env").write_text("MODEL_DIR=/tmp\n")
    (kit / ".env").write_text("LD_PRELOAD=/tmp/x.so\n")
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_SYMLINK")
def kit_file_replaced_by_symlink(w: Workbench) -> Argv:
    kit = w.kit()
    target = kit / SERVE
    shutil.copy(target, kit / "serve.copy")
    target.unlink()
    target.symlink_to(kit / "serve.copy")
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_FILE_EXTRA")
def manifest_extra_empty_directory(w: Workbench) -> Argv:
    kit = w.kit()
    (kit / "profiles" / "evil" / "empty").mkdir(parents=True)
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_INFO_MALFORMED")
def kit_json_replaced_by_a_directory(w: Workbench) -> Argv:
    kit = w.kit()
    (kit / "kit.json").unlink()
    (kit / "kit.json").mkdir()
    return ["verify", kit, "--trust", w.trust]


@attack("RECEIPT_WEIGHTS_MISMATCH")
def weights_lock_changed(w: Workbench) -> Argv:
    kit = w.kit()
    lock = kit / "weights.lock.json"
    data = json.loads(lock.read_text())
    data["files"][0]["sha256"] = "0" * 64
    lock.write_bytes(dumps(data))
    return ["verify", kit, "--trust", w.trust]


@attack("RECEIPT_KIT_MISMATCH", timeout=60)
def manifest_unsigned_16mib_of_empty_objects(w: Workbench) -> Argv:
    """Refused by its digest before it is parsed (it used to cost 850 MB and 16 s)."""
    kit = w.kit()
    n = (16 * 1024 * 1024 - 2) // 3
    (kit / "MANIFEST.json").write_bytes(b"[" + b"{}," * (n - 1) + b"{}]")
    return ["verify", kit, "--trust", w.trust]


@attack("EVIDENCE_FILE_CHANGED", timeout=90)
def evidence_replaced_by_sparse_32gib_file(w: Workbench) -> Argv:
    """Refused by its size without reading it (it used to be read in full: 108 s)."""
    kit = w.kit()
    runs = standard_runs(output_len=16, input_len=64)[:1]
    sign_generated(
        kit, w.golden.key, w.root / "pub", make_claims(runs, input_len=64, output_len=16), runs
    )
    evidence = next((kit / "evidence").iterdir())
    evidence.unlink()
    with open(evidence, "wb") as handle:
        handle.truncate(32 * 1024**3)
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_FILE_EXTRA")
def file_name_with_cr_and_ansi_paints_a_verdict(w: Workbench) -> Argv:
    """The name must be reported (escaped), never interpreted by the terminal; the text itself
    is checked in tests/test_cli_hygiene.py."""
    kit = w.kit()
    (kit / PAINT_NAME).write_text("x")
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_FILE_EXTRA")
def file_name_not_utf8(w: Workbench) -> Argv:
    kit = w.kit()
    with open(os.path.join(os.fsencode(kit), b"evil-\xff\xfe.sh"), "wb") as handle:
        handle.write(b"x")
    return ["verify", kit, "--trust", w.trust]


# sha256 of a kit file of up to SMALL_BYTES (256 KiB) is held in memory and taken by
# cryptography, of a larger one by hashlib (k3kit._digest._Sha256): a publisher's file of exactly
# the switch size, or one byte over, changed in the byte that decides the switch (its last).
def _readme_signed_at(w: Workbench, size: int) -> Path:
    kit = w.kit()
    hand_signed(
        kit, w.golden.key, "README.md", lambda data: (data * (size // len(data) + 1))[:size]
    )
    return kit


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))


@attack("KIT_FILE_CHANGED")
def kit_file_of_exactly_256_kib_with_its_last_byte_flipped(w: Workbench) -> Argv:
    kit = _readme_signed_at(w, SMALL_BYTES)
    _flip_last_byte(kit / "README.md")
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_FILE_CHANGED")
def kit_file_of_256_kib_and_one_byte_with_its_last_byte_flipped(w: Workbench) -> Argv:
    kit = _readme_signed_at(w, SMALL_BYTES + 1)
    _flip_last_byte(kit / "README.md")
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_FILE_CHANGED")
def kit_file_of_exactly_256_kib_grown_by_one_byte(w: Workbench) -> Argv:
    kit = _readme_signed_at(w, SMALL_BYTES)
    with (kit / "README.md").open("ab") as handle:
        handle.write(b"\n")
    return ["verify", kit, "--trust", w.trust]
