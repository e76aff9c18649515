"""A small stand-in for an engine's released wheel, made in the test, offline.

It has the real vLLM wheel's layout where ``k3kit engine snapshot`` looks: ``vllm/entrypoints/cli/
serve.py`` with ``cmd_init()`` returning the ``serve`` subcommand whose ``subparser_init`` adds an
argparse parser, ``vllm/utils/argparse_utils.py`` with ``FlexibleArgumentParser``, ``vllm/envs.py``
with ``environment_variables``, and a ``vllm-VERSION.dist-info/METADATA``. The parser declares the
options vLLM 0.33.0's does (read from k3kit's shipped snapshot, with argparse actions and type
callables of the same names) plus ``extra`` ones, so a kit for the stand-in version can be built
from the example package.
"""

from __future__ import annotations

import json
import zipfile
from importlib import resources
from pathlib import Path

SERVE_PY = '''"""vLLM `serve` subcommand (stand-in)."""
import argparse
import json

SPEC = json.loads(@SPEC@)


class _NoValue(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kw):
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, not (option_string or "").startswith(("--no-", "--disable")))


class _Values(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


ACTIONS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_AppendAction": "append",
    "EnableDisableAction": type("EnableDisableAction", (_NoValue,), {}),
    "LoRAParserAction": type("LoRAParserAction", (_Values,), {}),
    "DeprecatedLogConfigFileAction": type("DeprecatedLogConfigFileAction", (_Values,), {}),
}


def _named(name):
    if name in ("int", "float", "str"):
        return {"int": int, "float": float, "str": str}[name]
    def parse(text):
        return text
    parse.__name__ = name
    return parse


class ServeSubcommand:
    name = "serve"

    def subparser_init(self, subparsers):
        parser = subparsers.add_parser("serve")
        for opt in SPEC:
            if opt["action"] == "_HelpAction":
                continue
            kw = {"dest": opt["dest"], "action": ACTIONS[opt["action"]]}
            if opt["action"] in ("_StoreAction", "_AppendAction", "LoRAParserAction"):
                if opt["type"]:
                    kw["type"] = _named(opt["type"])
                if opt["nargs"] is not None:
                    kw["nargs"] = opt["nargs"]
                if opt["choices"]:
                    kw["choices"] = opt["choices"]
            parser.add_argument(*opt["flags"], **kw)
        return parser


def cmd_init():
    return [ServeSubcommand()]
'''

ARGPARSE_UTILS = """import argparse


class FlexibleArgumentParser(argparse.ArgumentParser):
    pass
"""


def _spec(extra: list[dict[str, object]]) -> list[dict[str, object]]:
    data = resources.files("k3kit.data").joinpath("vllm-0.33.0-serve-flags.json").read_text()
    spec = [
        {k: o[k] for k in ("action", "choices", "dest", "flags", "nargs", "type")}
        for o in json.loads(data)["options"]
    ]
    return spec + extra


def serve_py(extra: list[dict[str, object]]) -> str:
    return SERVE_PY.replace("@SPEC@", repr(json.dumps(_spec(extra))))


def fake_vllm_wheel(
    folder: Path,
    version: str,
    *,
    extra: list[dict[str, object]] | None = None,
    metadata_version: str | None = None,
    members: dict[str, str] | None = None,
) -> Path:
    """Write ``vllm-VERSION-py3-none-any.whl`` into ``folder`` and return its path."""
    env = {"VLLM_HOST_IP": None, "VLLM_USE_V1": None, "VLLM_NEW_IN_THIS_VERSION": None}
    files = {
        "vllm/__init__.py": f'__version__ = "{version}"\n',
        "vllm/envs.py": f"environment_variables = {env!r}\n",
        "vllm/utils/__init__.py": "",
        "vllm/utils/argparse_utils.py": ARGPARSE_UTILS,
        "vllm/entrypoints/__init__.py": "",
        "vllm/entrypoints/cli/__init__.py": "",
        "vllm/entrypoints/cli/serve.py": serve_py(extra or []),
        f"vllm-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: vllm\nVersion: {metadata_version or version}\n"
        ),
        f"vllm-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n",
        **(members or {}),
    }
    path = folder / f"vllm-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            zf.writestr(info, text)
    return path


def snapshot_doc(version: str, extra: list[dict[str, object]] | None = None) -> dict[str, object]:
    """A well-formed snapshot as ``k3kit engine snapshot`` would write it for the stand-in wheel,
    made without running it (what a publisher editing one by hand starts from)."""
    return {
        "schema": "k3kit.engine-snapshot/v1",
        "engine": "vllm",
        "version": version,
        "options": [{**o, "deprecated": False} for o in _spec(extra or [])],
        "env_vars": ["VLLM_HOST_IP", "VLLM_USE_V1"],
        "registries": {},
        "provenance": {
            "wheel": f"vllm-{version}-py3-none-any.whl",
            "wheel_sha256": "0" * 64,
            "wheel_bytes": 1,
            "parser": "the argument parser of `vllm serve`",
            "parser_source": "vllm/entrypoints/cli/serve.py",
            "parser_source_sha256": "1" * 64,
            "python": "3.11.7",
            "stubbed": [],
            "generated_on": "2026-11-01",
            "generated_by": "k3kit 0.1.0",
        },
    }
