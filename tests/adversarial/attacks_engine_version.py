"""Attacks through the engine version a kit pins (issue 21): text that is not a version the engine
prints, smuggled into a package, never reaches a comparison, a snapshot file name or a terminal as
anything but refused input. (A kit.json carrying one cannot even be signed: `sign` reads it with
the same model.)"""

from __future__ import annotations

import json

from k3kit._canonical import dumps
from tests.adversarial.corpus import Argv, Workbench, attack
from tests.conftest import EXAMPLE
from tests.launchkit import hand_signed


def _package(w: Workbench, version: str) -> Argv:
    text = (EXAMPLE / "package.toml").read_text()
    package = w.root / "package.toml"
    package.write_text(text.replace('version = "0.33.0"\n', f"version = {json.dumps(version)}\n"))
    return ["build", package, "--lock", w.golden.lock, "-o", w.root / "out"]


@attack("BAD_INPUT", exit_code=3)
def build_with_an_engine_version_that_walks_out_of_the_snapshot_folder(w: Workbench) -> Argv:
    return _package(w, "0.33.0+../../../etc/passwd")


@attack("BAD_INPUT", exit_code=3)
def build_with_an_engine_version_carrying_a_terminal_escape(w: Workbench) -> Argv:
    return _package(w, "0.33.0\u001b[2J")


def _kit_pinning(w: Workbench, version: str) -> Argv:
    """A publisher's hand-made kit whose kit.json pins ``version``, manifest and receipt signed
    again over it: only verify's reader of kit.json (a pattern for canonical versions, packaging
    for anything it does not match) stands between it and a node."""

    def pin(data: bytes) -> bytes:
        info = json.loads(data)
        info["engine"]["version"] = version
        return dumps(info)

    kit = hand_signed(w.kit(), w.golden.key, "kit.json", pin)
    return ["verify", kit, "--trust", w.trust]


@attack("KIT_INFO_MALFORMED")
def verify_of_a_signed_kit_pinning_an_engine_version_with_a_leading_zero(w: Workbench) -> Argv:
    # packaging reads "0.033.0" as 0.33.0: a second spelling of the same pin
    return _kit_pinning(w, "0.033.0")


@attack("KIT_INFO_MALFORMED")
def verify_of_a_signed_kit_pinning_an_upper_case_local_build(w: Workbench) -> Argv:
    # packaging lower-cases the local label: "+CU129" would be a second spelling of "+cu129"
    return _kit_pinning(w, "0.33.0+CU129")
