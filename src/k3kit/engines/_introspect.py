"""Read an engine's server flags from its own argument parser: run as a script, never imported.

``k3kit engine snapshot`` runs this file with the interpreter that can import the engine (a venv
with a CPU torch is enough: the parser does not touch a GPU), in a subprocess, with the unpacked
wheel first on ``sys.path``. It writes one JSON object to the file named by its third argument
(not stdout: an engine may log there while it is imported): the parser's options, the
engine's environment variables and registries, the modules it had to stub, and the module the
parser was read from (relative to the wheel, so the caller can record that file's digest).

Standard library only, because the interpreter is the engine's, not k3kit's. Modules that matter
only at run time and cannot be imported on CPU are replaced by empty stand-ins and listed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
from collections.abc import Callable
from typing import Any
from unittest import mock

STUBS = {
    "vllm": ["llguidance", "openai_harmony", "xgrammar"],
    "sglang": ["IPython", "IPython.display", "triton", "triton.language", "sgl_kernel"],
}

Found = tuple[argparse.ArgumentParser, str]


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stands in for stubbed packages and every submodule of them."""

    def __init__(self, roots: list[str]) -> None:
        self.roots = roots

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if any(name == r or name.startswith(r + ".") for r in self.roots):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> Any:
        module = mock.MagicMock(name=spec.name)
        module.__path__ = []
        module.__spec__ = spec
        return module

    def exec_module(self, module: Any) -> None:
        return None


def _stub(names: list[str]) -> list[str]:
    stubbed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            sys.modules.pop(name, None)
            stubbed.append(name)
    sys.meta_path.insert(0, _StubFinder(stubbed))
    return stubbed


def _type_name(action: argparse.Action) -> str | None:
    kind = action.type
    if kind is None:
        return None
    return str(getattr(kind, "__name__", type(kind).__name__))


def describe(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    """Each option as the snapshot stores it (no help texts, no defaults)."""
    out = []
    for action in parser._actions:
        out.append(
            {
                "action": type(action).__name__,
                "choices": [str(c) for c in action.choices] if action.choices else None,
                "deprecated": bool(getattr(action, "deprecated", False))
                or "Deprecated" in type(action).__name__,
                "dest": action.dest,
                "flags": list(action.option_strings),
                "nargs": action.nargs if isinstance(action.nargs, int | str) else None,
                "type": _type_name(action),
            }
        )
    return out


def _source(obj: Any) -> str:
    return str(getattr(sys.modules.get(obj.__module__), "__file__", "") or "")


def _attr(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def _vllm_cli_serve() -> Found:
    """vLLM 0.8 and later: the ``vllm serve`` subcommand (the parser class moved in 0.11)."""
    cmd_init = _attr("vllm.entrypoints.cli.serve", "cmd_init")
    try:
        parser_class = _attr("vllm.utils.argparse_utils", "FlexibleArgumentParser")
    except ImportError:
        parser_class = _attr("vllm.utils", "FlexibleArgumentParser")
    command = cmd_init()[0]
    parser = command.subparser_init(parser_class(prog="vllm").add_subparsers())
    return parser, _source(command)


def _vllm_openai() -> Found:
    """vLLM before 0.8: the OpenAI server's own parser (``make_arg_parser``)."""
    make_arg_parser = _attr("vllm.entrypoints.openai.cli_args", "make_arg_parser")
    parser_class = _attr("vllm.utils", "FlexibleArgumentParser")
    return make_arg_parser(parser_class(prog="vllm serve")), _source(make_arg_parser)


def _vllm_registries() -> dict[str, list[str]]:
    regs: dict[str, list[str]] = {}
    for key, module, name in (
        ("tool_call_parsers", "vllm.tool_parsers", "ToolParserManager"),
        ("reasoning_parsers", "vllm.reasoning", "ReasoningParserManager"),
    ):
        try:
            manager = getattr(importlib.import_module(module), name)
            regs[key] = sorted(str(n) for n in manager.list_registered())
        except Exception as exc:
            print(f"note: {key} not listed: {exc}", file=sys.stderr)
    return regs


def vllm() -> tuple[Found, list[str], dict[str, list[str]]]:
    # Without a GPU, vLLM's platform detection finds nothing unless told "cpu"; the parser and
    # its defaults do not depend on the device otherwise.
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    found = _first(_vllm_cli_serve, _vllm_openai)
    envs = importlib.import_module("vllm.envs")
    env_vars = sorted(str(n) for n in getattr(envs, "environment_variables", {}))
    return found, env_vars, _vllm_registries()


def sglang() -> tuple[Found, list[str], dict[str, list[str]]]:
    server_args = _attr("sglang.srt.server_args", "ServerArgs")
    parser = argparse.ArgumentParser(prog="sglang serve")
    server_args.add_cli_args(parser)
    env_vars: list[str] = []
    try:
        environ = importlib.import_module("sglang.srt.environ")
        env_vars = sorted(n for n in dir(environ.envs) if n.isupper())
    except Exception as exc:
        print(f"note: environment variables not listed: {exc}", file=sys.stderr)
    names = {
        "tool_call_parser": "tool_call_parsers",
        "reasoning_parser": "reasoning_parsers",
        "speculative_algorithm": "speculative_algorithms",
    }
    regs = {
        names[a.dest]: sorted(str(c) for c in a.choices)
        for a in parser._actions
        if a.choices and a.dest in names
    }
    return (parser, _source(server_args)), env_vars, regs


def _first(*ways: Callable[[], Found]) -> Found:
    """The first way of reaching the parser this engine version has; the last error otherwise."""
    error: Exception | None = None
    for way in ways:
        try:
            return way()
        except ImportError as exc:
            error = exc
    raise error or ImportError("no parser")


def main(argv: list[str]) -> int:
    engine, root, result = argv[1], argv[2], argv[3]
    sys.path.insert(0, root)
    stubbed = _stub(STUBS[engine])
    (parser, source), env_vars, regs = vllm() if engine == "vllm" else sglang()
    real_root = os.path.realpath(root)
    real_source = os.path.realpath(source) if source else ""
    inside = real_source.startswith(real_root + os.sep)
    out = {
        "options": describe(parser),
        "env_vars": env_vars,
        "registries": regs,
        "stubbed": stubbed,
        "parser_source": os.path.relpath(real_source, real_root) if inside else "",
        "python": sys.version.split()[0],
    }
    with open(result, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
