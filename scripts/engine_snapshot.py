#!/usr/bin/env python3
"""Make an engine snapshot (flags, environment variables, registries) from its released wheel.

Run it with a Python that has the engine wheel installed WITHOUT its GPU dependencies (a CPU
torch is enough to import the argument parser); `scripts/engine-env.sh` makes such a venv:

    scripts/engine-env.sh vllm 0.32.0          # -> .engines/vllm-0.32.0/ (git-ignored)
    .engines/vllm-0.32.0/bin/python scripts/engine_snapshot.py vllm --wheel WHEEL \
        --out src/k3kit/data

It writes ``<engine>-<version>-serve-flags.json``, ``-env-vars.json`` and ``-registries.json``
in the format ``k3kit.engines`` reads, each with its provenance (the wheel's name, size and
sha256, the torch used, the modules stubbed). The parser is the engine's own: vLLM's ``vllm
serve`` subcommand parser, SGLang's ``ServerArgs.add_cli_args``. Modules that only matter at
run time and cannot be imported on CPU are replaced by empty stand-ins and listed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def _introspection() -> ModuleType:
    """k3kit's own engine introspection (``src/k3kit/engines/_introspect.py``, what ``k3kit
    engine snapshot`` runs), loaded by its path: it is standard library only so that an engine's
    interpreter can run it, and that interpreter has no k3kit installed. One stub finder, one
    stub list: a module stubbed here is stubbed the same way there."""
    path = Path(__file__).resolve().parents[1] / "src" / "k3kit" / "engines" / "_introspect.py"
    spec = importlib.util.spec_from_file_location("k3kit_engines_introspect", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_INTROSPECT = _introspection()
STUBS: dict[str, list[str]] = _INTROSPECT.STUBS  # scripts/engine_parse.py imports these two
_stub = _INTROSPECT._stub
_type_name = _INTROSPECT._type_name


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def describe(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    groups = {id(a): g.title for g in parser._action_groups for a in g._group_actions}
    out = []
    for action in parser._actions:
        out.append(
            {
                "action": type(action).__name__,
                "choices": [str(c) for c in action.choices] if action.choices else None,
                "default": _jsonable(action.default),
                "deprecated": bool(getattr(action, "deprecated", False))
                or "Deprecated" in type(action).__name__,
                "dest": action.dest,
                "flags": list(action.option_strings),
                "group": groups.get(id(action), ""),
                "nargs": action.nargs if isinstance(action.nargs, int | str) else None,
                "type": _type_name(action),
            }
        )
    return out


def vllm_snapshot() -> tuple[list[dict[str, Any]], list[str], dict[str, list[str]]]:
    # Without a GPU, vLLM's platform detection finds nothing unless told "cpu"; the parser and
    # its defaults do not depend on the device otherwise.
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.entrypoints.cli.serve import cmd_init
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    root = FlexibleArgumentParser(prog="vllm")
    serve = cmd_init()[0].subparser_init(root.add_subparsers())
    import vllm.envs as envs

    env_vars = sorted(getattr(envs, "environment_variables", {}))
    regs: dict[str, list[str]] = {}
    try:
        from vllm.tool_parsers import ToolParserManager

        regs["tool_call_parsers"] = sorted(ToolParserManager.list_registered())
    except Exception as exc:
        print(f"note: tool parsers not listed: {exc}", file=sys.stderr)
    try:
        from vllm.reasoning import ReasoningParserManager

        regs["reasoning_parsers"] = sorted(ReasoningParserManager.list_registered())
    except Exception as exc:
        print(f"note: reasoning parsers not listed: {exc}", file=sys.stderr)
    try:
        import typing

        from vllm.config.cache import CacheDType

        regs["kv_cache_dtype"] = sorted(typing.get_args(CacheDType))
    except Exception as exc:
        print(f"note: kv cache dtypes not listed: {exc}", file=sys.stderr)
    regs["distributed_executor_backend"] = ["ray", "mp", "uni", "external_launcher"]
    regs["data_parallel_backend"] = ["ray", "mp"]
    return describe(serve), env_vars, regs


def sglang_snapshot() -> tuple[list[dict[str, Any]], list[str], dict[str, list[str]]]:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    env_vars: list[str] = []
    try:
        from sglang.srt import environ

        env_vars = sorted(n for n in dir(environ.envs) if n.isupper())
    except Exception as exc:
        print(f"note: environment variables not listed: {exc}", file=sys.stderr)
    regs: dict[str, list[str]] = {}
    for action in parser._actions:
        if action.choices and action.dest in (
            "tool_call_parser",
            "reasoning_parser",
            "speculative_algorithm",
        ):
            key = {
                "tool_call_parser": "tool_call_parsers",
                "reasoning_parser": "reasoning_parsers",
                "speculative_algorithm": "speculative_algorithms",
            }[action.dest]
            regs[key] = sorted(str(c) for c in action.choices)
    return describe(parser), env_vars, regs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("engine", choices=sorted(STUBS))
    ap.add_argument("--wheel", type=Path, required=True, help="the wheel that is installed")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    stubbed = _stub(STUBS[args.engine])
    flags, env_vars, regs = vllm_snapshot() if args.engine == "vllm" else sglang_snapshot()
    version = importlib.metadata.version(args.engine)
    import torch

    wheel = args.wheel.read_bytes()
    provenance = (
        (
            "argument parser of `vllm serve`"
            if args.engine == "vllm"
            else "sglang ServerArgs.add_cli_args"
        )
        + f" from the {args.engine} {version} wheel on PyPI ({args.wheel.name}, {len(wheel):,} "
        f"bytes, sha256 {hashlib.sha256(wheel).hexdigest()}), imported on CPU with torch "
        f"{torch.__version__}; modules stubbed: {', '.join(stubbed) or 'none'}; help texts "
        "removed; generated by scripts/engine_snapshot.py"
    )
    prefix = f"{args.engine}-{version}"
    docs = {
        "serve-flags": {
            "engine": args.engine,
            "engine_version": version,
            "options": flags,
            "provenance": provenance,
        },
        "env-vars": {
            "env_vars": env_vars,
            f"{args.engine}_version": version,
            "provenance": provenance,
        },
        "registries": {**regs, f"{args.engine}_version": version, "provenance": provenance},
    }
    for kind, doc in docs.items():
        path = args.out / f"{prefix}-{kind}.json"
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
