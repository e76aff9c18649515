"""Attacks on what a buyer reads: a tampered or foreign kit must get no `show` and no card."""

from __future__ import annotations

from tests.adversarial.corpus import Argv, Workbench, attack

SERVE = "profiles/batch/single-node-8gpu/serve.yaml"


@attack("KIT_FILE_CHANGED")
def card_of_tampered_kit(w: Workbench) -> Argv:
    kit = w.kit()
    path = kit / SERVE
    path.write_bytes(path.read_bytes().replace(b"max-num-seqs: 256", b"max-num-seqs: 512"))
    return ["card", kit, "--trust", w.trust, "-o", w.root / "card.html"]


@attack("KIT_FILE_CHANGED")
def show_of_tampered_kit_json(w: Workbench) -> Argv:
    kit = w.kit()
    info = kit / "kit.json"
    info.write_bytes(info.read_bytes().replace(b'"amount":"2300"', b'"amount":"23"'))
    return ["show", kit, "--trust", w.trust]


@attack("RECEIPT_UNTRUSTED_KEY")
def card_signed_by_untrusted_key(w: Workbench) -> Argv:
    return ["card", w.kit(), "--trust", w.other_key.public, "-o", w.root / "card.html"]


@attack("RECEIPT_UNTRUSTED_KEY")
def release_notes_with_foreign_new_version(w: Workbench) -> Argv:
    return ["release-notes", w.kit(), w.archive(), "--trust", w.other_key.public]
