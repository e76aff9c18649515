#!/usr/bin/env python3
"""Parse a rendered engine config with the engine's OWN argument parser; print the values.

Run with a Python that has the engine installed (see scripts/engine_snapshot.py):

    PY scripts/engine_parse.py vllm  MODEL_DIR serve.yaml
    PY scripts/engine_parse.py sglang MODEL_DIR serve.yaml

Prints one JSON object: each YAML key -> the value the engine's parser produced for it (by the
option's dest), so a test can check that every rendered value means what k3kit meant. Exits
non-zero (with the parser's message) when the engine refuses the config.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_snapshot import STUBS, _stub


def _keys(config: Path) -> list[str]:
    return [
        line.split(":", 1)[0]
        for line in config.read_text().splitlines()
        if line and not line.startswith("#") and ":" in line
    ]


def _dests(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {
        flag[2:]: a.dest
        for a in parser._actions
        for flag in a.option_strings
        if flag.startswith("--")
    }


def parse_vllm(model: str, config: Path) -> tuple[argparse.Namespace, dict[str, str]]:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.entrypoints.cli.serve import cmd_init
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    root = FlexibleArgumentParser(prog="vllm")
    serve = cmd_init()[0].subparser_init(root.add_subparsers(dest="subcommand"))
    return root.parse_args(["serve", model, "--config", str(config)]), _dests(serve)


def parse_sglang(model: str, config: Path) -> tuple[argparse.Namespace, dict[str, str]]:
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    argv = ConfigArgumentMerger(parser).merge_config_with_args(
        ["--model-path", model, "--config", str(config)]
    )
    return parser.parse_args(argv), _dests(parser)


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, dict | list | str | int | float | bool) or value is None:
        return value
    return str(value)


def main() -> int:
    engine, model, config = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    _stub(STUBS[engine])
    ns, dests = (parse_vllm if engine == "vllm" else parse_sglang)(model, config)
    out = {
        key: _plain(getattr(ns, dests[key], None)) if key in dests else "<unknown flag>"
        for key in _keys(config)
    }
    print(json.dumps(out, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
