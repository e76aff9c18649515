"""Attacks through the engine's own reading of signed settings (issue 19, class 6): a value its
config loader turns into an option, settings that load code or files nothing verified, a listen
address that passes for an option. Kits "signed by hand" stand for a kit from an older k3kit or a
publisher's own tooling: they verify, so only launch's own checks stand in the way."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from k3kit._canonical import dumps
from tests.adversarial.corpus import Argv, Workbench, attack
from tests.conftest import EXAMPLE
from tests.launchkit import hand_signed

PROFILE_DIR = "profiles/interactive/single-node-8gpu"
SMUGGLED = b'ignore-patterns: ["*.pt", "--load-format", "dummy"]\n'


def _launch(w: Workbench, *extra: str) -> Argv:
    return w.launch(*extra)


def _hand_signed(w: Workbench, rel: str, line: bytes) -> None:
    hand_signed(w.kit(), w.golden.key, f"{PROFILE_DIR}/{rel}", lambda data: data + line)


@attack("ENGINE_SETTING_INVALID", exit_code=3)
def build_with_load_format_dummy_hidden_in_a_list_value(w: Workbench) -> Argv:
    text = (EXAMPLE / "package.toml").read_text()
    anchor = "[profiles.interactive.serve]\n"
    package = w.root / "package.toml"
    package.write_text(
        text.replace(anchor, anchor + 'ignore-patterns = ["*.pt", "--load-format", "dummy"]\n')
    )
    return ["build", package, "--lock", w.golden.lock, "-o", w.root / "out"]


@attack("ENGINE_VALUE_IS_OPTION")
def launch_hand_signed_kit_with_load_format_dummy_hidden_in_a_list(w: Workbench) -> Argv:
    _hand_signed(w, "serve.yaml", SMUGGLED)
    return _launch(w)


@attack("ENGINE_LOADS_UNDECLARED")
def launch_hand_signed_kit_with_ld_preload_in_engine_env(w: Workbench) -> Argv:
    _hand_signed(w, "engine.env", b"LD_PRELOAD=/tmp/x.so\n")
    return _launch(w)


@attack("ENGINE_LOADS_UNDECLARED")
def launch_hand_signed_kit_with_a_relative_tool_parser_plugin(w: Workbench) -> Argv:
    _hand_signed(w, "serve.yaml", b'tool-parser-plugin: "plugin.py"\n')
    return _launch(w)


@attack("ENGINE_LOADS_UNDECLARED")
def launch_hand_signed_kit_with_trust_remote_code(w: Workbench) -> Argv:
    _hand_signed(w, "serve.yaml", b"trust-remote-code: true\n")
    return _launch(w)


@attack("LAUNCH_ADDRESS_INVALID", exit_code=3)
def launch_with_a_host_that_is_an_option(w: Workbench) -> Argv:
    return _launch(w, "--host", "--load-format=dummy")


def _kit_json(w: Workbench, change: Callable[[dict[str, Any]], None]) -> None:
    """kit.json changed by ``change``, manifest and receipt signed again over it by hand."""

    def edit(data: bytes) -> bytes:
        info = json.loads(data)
        change(info)
        return dumps(info)

    hand_signed(w.kit(), w.golden.key, "kit.json", edit)


def _launched(info: dict[str, Any]) -> dict[str, Any]:
    """The profile the attacks launch: interactive on one node."""
    return next(p for p in info["profiles"] if p["name"] == "interactive" and p["nodes"] == 1)


# launch reads kit.json with the pydantic-free reader verify uses (issue 23, fifth pass), so a
# value pydantic's lax mode would have coerced (true for 1, "8" for 8) cannot read one way in the
# verifier and another in the launcher: both refuse it before the engine is looked for.
@attack("KIT_INFO_MALFORMED")
def launch_hand_signed_kit_whose_profile_runs_on_true_nodes(w: Workbench) -> Argv:
    _kit_json(w, lambda info: _launched(info).update(nodes=True))
    return _launch(w)


@attack("KIT_INFO_MALFORMED")
def launch_hand_signed_kit_whose_tensor_parallel_size_is_text(w: Workbench) -> Argv:
    _kit_json(w, lambda info: _launched(info)["parallel"].update(tp="8"))
    return _launch(w)
