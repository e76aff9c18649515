"""Attacks through the engine version a kit pins (issue 21): text that is not a version the engine
prints, smuggled into a package, never reaches a comparison, a snapshot file name or a terminal as
anything but refused input. (A kit.json carrying one cannot even be signed: `sign` reads it with
the same model.)"""

from __future__ import annotations

import json

from tests.adversarial.corpus import Argv, Workbench, attack
from tests.conftest import EXAMPLE


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
