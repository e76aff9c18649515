"""Which engine settings make the engine load code, or bytes nothing verified.

A kit's signature covers its files and the weights lock covers the weights; a setting that makes the
engine import a Python file (``tool-parser-plugin``), a class (``middleware``), remote code
(``trust-remote-code``), a template or tokenizer from elsewhere (``chat-template``, ``tokenizer``),
or a shared library (``LD_PRELOAD`` in ``engine.env``) runs things outside both, under a VERIFIED
verdict. Such settings are data here, in one table per engine version (``*-loads.json``, loaded
with the flag snapshot so a new version cannot be used before its flags are classified), and are
refused unless the publisher declares each one in ``package.toml`` (``[engine.loads]``, with a
reason the buyer sees before launch).

Three nets, so a flag the table misses still fails closed: the table's ``code`` and ``path``
entries, the process-level variables below (the dynamic loader's, Python's, the shell's), and any
value that looks like a path, a hub repository or a URL (contains ``/`` or starts with ``.``/``~``)
on a flag or variable the table does not mark inert.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from typing import Any

from k3kit._immutable import NamedTuple

#: Flag names that suggest loading code or files; every one in a snapshot must be classified
#: (``code``, ``path`` or ``inert``) in its ``*-loads.json`` (tests/test_engine_loads.py).
#: Compiled on first use (:func:`suspect`; ``SUSPECT`` is that pattern): only a
#: publisher-supplied snapshot is judged by it, and compiling it was ~0.6 ms of CPU on every
#: launch (docs/performance.md).
SUSPECT_PATTERN = (
    r"plugin|path|file|template|dir|module|remote|middleware|cls|class|tokenizer|lora|adapter|"
    r"draft|spec-model|ssl|cert|loader|url|import|script|location|trust|hf-|overrides|model|"
    r"extension|custom|connector|logits-processor|executor|compilation"
)


@cache
def suspect() -> re.Pattern[str]:
    """:data:`SUSPECT_PATTERN`, compiled once."""
    return re.compile(SUSPECT_PATTERN)


def __getattr__(name: str) -> Any:
    if name == "SUSPECT":
        return suspect()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Variables read by the dynamic loader, the Python interpreter, the shell and the libraries every
#: engine uses, that load code or choose where files are read from. Engine-independent.
PROCESS_ENV: dict[str, str] = {
    "LD_PRELOAD": "loads shared libraries into every process",
    "LD_LIBRARY_PATH": "chooses where shared libraries are loaded from",
    "LD_AUDIT": "loads shared libraries into every process",
    "PATH": "chooses which programs run (the launcher fixes it)",
    "PYTHONPATH": "chooses where Python modules are imported from",
    "PYTHONHOME": "chooses the Python standard library",
    "PYTHONSTARTUP": "runs a Python file",
    "PYTHONUSERBASE": "chooses where user site-packages are imported from",
    "PYTHONPYCACHEPREFIX": "chooses where compiled Python files are read from",
    "PYTHONBREAKPOINT": "imports a Python callable",
    "PYTHONWARNINGS": "can import Python modules (warning categories)",
    "PYTHONINSPECT": "opens an interactive interpreter",
    "PYTHONEXECUTABLE": "changes the interpreter path Python reports",
    "BASH_ENV": "makes bash run a file first",
    "ENV": "makes sh run a file first",
    "TMPDIR": "chooses the temporary folder (the launcher fixes it)",
    "HOME": "chooses where caches and configs are read from",
    "XDG_CACHE_HOME": "chooses where caches (compiled kernels among them) are read from",
    "HF_HOME": "chooses where hub files and cached remote code are read from",
    "HF_HUB_CACHE": "chooses where hub files are read from",
    "HF_MODULES_CACHE": "chooses where cached remote code is imported from",
    "HF_ENDPOINT": "chooses which hub files are downloaded from",
    "TRANSFORMERS_CACHE": "chooses where hub files are read from",
    "TORCH_HOME": "chooses where torch hub files are read from",
    "TRITON_CACHE_DIR": "chooses where compiled kernels are loaded from",
    "TORCHINDUCTOR_CACHE_DIR": "chooses where compiled kernels are loaded from",
    "CUDA_CACHE_PATH": "chooses where compiled kernels are loaded from",
    "NCCL_NET_PLUGIN": "loads a shared library by name",
    "NCCL_TUNER_PLUGIN": "loads a shared library by name",
    "NCCL_PROFILER_PLUGIN": "loads a shared library by name",
    "NCCL_CONF_FILE": "reads NCCL settings from a file",
}

_PATH_LIKE = re.compile(r"^[.~]|/")


class LoadsTable(NamedTuple):
    """One engine version's reviewed classification (``ENGINE-VERSION-loads.json``).

    A NamedTuple, not a frozen dataclass: immutable all the same, read by attribute, and ~0.4 ms
    less CPU to create on every launch's import (docs/performance.md)."""

    code: dict[str, str]
    path: dict[str, str]
    inert: frozenset[str]
    env: dict[str, str]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LoadsTable:
        return cls(
            dict(data["code"]),
            dict(data["path"]),
            frozenset(data["inert"]),
            dict(data.get("env", {})),
        )


def _decoded(value: object) -> object:
    """A string the engine would parse as JSON, parsed: vLLM and SGLang read their JSON-valued
    flags (``kv-transfer-config``, ``speculative-config``, ...) from a JSON *string* as readily as
    from a mapping, so ``'{"kv_connector_module_path": "evil.mod"}'`` must be looked into the same
    way as the table form. Anything that does not parse stays the string it is."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        if isinstance(parsed, dict | list):
            return parsed
    return value


def _strings(value: object) -> Iterator[str]:
    value = _decoded(value)
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _is_off(value: object) -> bool:
    return value is None or value is False or value in ("", [], {})


def setting_loads(
    table: LoadsTable, key: str, value: object, aliases: Iterable[str] = ()
) -> dict[str, str]:
    """What one ``serve`` setting makes the engine load: name -> why (empty when nothing).

    ``aliases`` are the other names of the same option (``speculative-draft-model`` for
    ``speculative-draft-model-path``): the table names one, any of them matches.
    ``trust-remote-code: false`` loads nothing; a JSON-valued flag is looked into for the dotted
    names the table lists (``speculative-config.model``)."""
    value = _decoded(value)
    if _is_off(value):
        return {}
    names = [key, *aliases]
    for kind in (table.code, table.path):
        for name in names:
            if name in kind:
                return {key: kind[name]}
    found: dict[str, str] = {}
    if isinstance(value, dict):
        for inner in value:
            for name in names:
                why = table.code.get(f"{name}.{inner}") or table.path.get(f"{name}.{inner}")
                if why:
                    found[f"{key}.{inner}"] = why
    if not any(name in table.inert for name in names):
        for text in _strings(value):
            if _PATH_LIKE.search(text):
                found.setdefault(key, f"takes a path, hub repository or URL ({text[:80]!r})")
    return found


def env_loads(table: LoadsTable, var: str, value: str) -> dict[str, str]:
    """What one ``engine.env`` variable makes the engine load: name -> why (empty when nothing)."""
    why = PROCESS_ENV.get(var) or table.env.get(var)
    if why:
        return {var: why}
    if _PATH_LIKE.search(value):
        return {var: f"takes a path, hub repository or URL ({value[:80]!r})"}
    return {}
