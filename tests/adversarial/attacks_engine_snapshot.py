"""Attacks through a publisher-supplied engine snapshot (issue 22): a hand-edited file given to
`build --engine-snapshot`, and a wheel given to `engine snapshot`. The snapshot may say which flags
exist; it never says what they load, and it is never for another version than the package pins."""

from __future__ import annotations

import json

from tests.adversarial.corpus import Argv, Workbench, attack
from tests.conftest import EXAMPLE
from tests.enginewheel import fake_vllm_wheel, snapshot_doc

VERSION = "0.25.1"


def _build(w: Workbench, doc: dict[str, object], serve: str = "") -> Argv:
    text = (EXAMPLE / "package.toml").read_text()
    text = text.replace('version = "0.33.0"\n', f'version = "{VERSION}"\n', 1)
    text = text.replace("[profiles.interactive.serve]\n", f"[profiles.interactive.serve]\n{serve}")
    package = w.root / "package.toml"
    package.write_text(text)
    snap = w.root / "snapshot.json"
    snap.write_text(json.dumps(doc))
    return [
        "build", package, "--lock", w.golden.lock, "-o", w.root / "out",
        "--engine-snapshot", snap,
    ]  # fmt: skip


@attack("ENGINE_SNAPSHOT_INVALID", exit_code=3)
def build_with_a_snapshot_that_marks_trust_remote_code_inert(w: Workbench) -> Argv:
    doc = snapshot_doc(VERSION)
    doc["loads"] = {"inert": ["trust-remote-code"]}
    return _build(w, doc, "trust-remote-code = true\n")


@attack("ENGINE_SNAPSHOT_INVALID", exit_code=3)
def build_with_a_snapshot_of_another_release(w: Workbench) -> Argv:
    return _build(w, snapshot_doc("0.24.0"))


@attack("ENGINE_SNAPSHOT_INVALID", exit_code=3)
def build_with_a_labelled_snapshot_of_another_release(w: Workbench) -> Argv:
    # A local label is ignored when matching (a +cu126 build parses the same flags), so the
    # attacker dresses 0.24.0's flags as a build of the pin: the release still has to match.
    return _build(w, snapshot_doc(f"0.24.0+v{VERSION.replace('.', '')}"))


@attack("ENGINE_SNAPSHOT_INVALID", exit_code=3)
def build_with_a_snapshot_of_a_post_release_of_the_pin(w: Workbench) -> Argv:
    return _build(w, snapshot_doc(f"{VERSION}.post1+cu126"))


@attack("ENGINE_SNAPSHOT_INVALID", exit_code=3)
def build_with_a_snapshot_whose_flag_carries_a_terminal_escape(w: Workbench) -> Argv:
    flag = {"action": "_StoreAction", "choices": None, "dest": "x", "nargs": None, "type": None}
    return _build(w, snapshot_doc(VERSION, [{**flag, "flags": ["--x\u001b[2J"]}]))


@attack("ENGINE_SETTING_INVALID", exit_code=3)
def build_with_a_snapshot_that_renames_trust_remote_code_a_plain_switch(w: Workbench) -> Argv:
    doc = snapshot_doc(VERSION)
    for opt in doc["options"]:  # type: ignore[attr-defined]
        if "--trust-remote-code" in opt["flags"]:
            opt["action"], opt["dest"] = "_StoreTrueAction", "harmless"
    return _build(w, doc, "trust-remote-code = true\n")


@attack("ENGINE_WHEEL_UNUSABLE", exit_code=3)
def engine_snapshot_of_a_wheel_whose_member_climbs_out(w: Workbench) -> Argv:
    wheel = fake_vllm_wheel(w.root, VERSION, members={"../../../tmp/k3kit-escaped.py": "x = 1\n"})
    return ["engine", "snapshot", "--engine", "vllm", "--wheel", wheel, "-o", w.root / "s.json"]


@attack("ENGINE_WHEEL_UNUSABLE", exit_code=3)
def engine_snapshot_of_a_wheel_that_is_another_engine(w: Workbench) -> Argv:
    wheel = fake_vllm_wheel(w.root, VERSION)
    return ["engine", "snapshot", "--engine", "sglang", "--wheel", wheel, "-o", w.root / "s.json"]
