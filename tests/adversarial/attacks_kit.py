"""Attacks on a kit directory: files changed, added, removed or swapped, without the key."""

from __future__ import annotations

from tests.adversarial.corpus import Argv, Workbench, attack

SERVE = "profiles/interactive/single-node-8gpu/serve.yaml"


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
