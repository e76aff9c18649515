"""Engine flag snapshots and validation of a profile's engine settings.

vLLM's own parser accepts unambiguous flag prefixes (``--max-num-seq``) and only warns about
unknown ``VLLM_*`` variables, so a typo in a deploy file can silently change nothing. k3kit checks
every setting against the flag list extracted from the pinned engine version's parser (shipped under
``k3kit/data/`` with its provenance) and demands exact long names, correct types and known choices.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any

from k3kit.errors import InputError
from k3kit.models.package import EngineSetting, Profile

_BOOL_ACTIONS = {"EnableDisableAction", "_StoreTrueAction"}
_INT_TYPES = {"int", "human_readable_int", "human_readable_int_or_auto"}
# Flags k3kit renders itself (model path, network binding) or that would defeat verification.
_RESERVED = {"model", "config", "host", "port", "download-dir", "revision", "load-format", "help"}


@dataclass(frozen=True)
class Option:
    flag: str
    action: str
    type: str | None
    choices: tuple[str, ...] | None
    deprecated: bool


@dataclass(frozen=True)
class EngineSnapshot:
    engine: str
    version: str
    provenance: str
    options: dict[str, Option]
    env_vars: frozenset[str]
    registries: dict[str, tuple[str, ...]]


def _read(name: str) -> Any:
    return json.loads(resources.files("k3kit.data").joinpath(name).read_text("utf-8"))


@cache
def snapshot(engine: str, version: str) -> EngineSnapshot:
    """The flag snapshot for ``engine==version``; only versions k3kit ships data for are known."""
    prefix = f"{engine}-{version}"
    try:
        flags = _read(f"{prefix}-serve-flags.json")
        env = _read(f"{prefix}-env-vars.json")
        registries = _read(f"{prefix}-registries.json")
    except FileNotFoundError as exc:
        raise InputError(
            f"no flag snapshot for {engine} {version}",
            code="ENGINE_UNKNOWN",
            hint="k3kit ships snapshots for vllm 0.33.0",
        ) from exc
    options: dict[str, Option] = {}
    for opt in flags["options"]:
        longs = [f for f in opt["flags"] if f.startswith("--")]
        for flag in longs:
            choices = tuple(opt["choices"]) if opt["choices"] else None
            options[flag[2:]] = Option(flag, opt["action"], opt["type"], choices, opt["deprecated"])
    regs = {k: tuple(v) for k, v in registries.items() if isinstance(v, list)}
    return EngineSnapshot(
        engine, version, flags["provenance"], options, frozenset(env["env_vars"]), regs
    )


_REGISTRY_FOR = {
    "tool-call-parser": "tool_call_parsers",
    "reasoning-parser": "reasoning_parsers",
    "kv-cache-dtype": "kv_cache_dtype",
    "distributed-executor-backend": "distributed_executor_backend",
    "data-parallel-backend": "data_parallel_backend",
}


def _check_value(key: str, opt: Option, value: EngineSetting, snap: EngineSnapshot) -> str | None:
    if opt.action in _BOOL_ACTIONS:
        return None if isinstance(value, bool) else "expects true or false"
    if isinstance(value, bool):
        return f"is not a switch ({opt.action}); give a value"
    if opt.type in _INT_TYPES:
        # Plain integers only: vLLM reads "1M" as 1,048,576 but "1m" as 1,000,000.
        return None if isinstance(value, int) else "expects a plain integer"
    if opt.type == "float":
        return None if isinstance(value, int | Decimal) else "expects a number"
    allowed = opt.choices or snap.registries.get(_REGISTRY_FOR.get(key, ""))
    if allowed is not None and (not isinstance(value, str) or value not in allowed):
        return f"must be one of {', '.join(allowed)}"
    return None


def validate_profile(name: str, profile: Profile, engine: str, version: str) -> list[str]:
    """Every problem with one profile's engine settings; empty when it is clean."""
    snap = snapshot(engine, version)
    problems = []
    for raw_key, value in profile.serve.items():
        key = raw_key.replace("_", "-")
        where = f"profiles.{name}.serve.{raw_key}"
        if key in _RESERVED:
            problems.append(f"{where}: is set by k3kit's launcher, not by a profile")
            continue
        opt = snap.options.get(key)
        if opt is None:
            problems.append(
                f"{where}: `--{key}` is not a {engine} {version} serve flag "
                "(exact names only; prefixes are not accepted)"
            )
            continue
        if opt.deprecated:
            problems.append(f"{where}: `--{key}` is deprecated in {engine} {version}")
            continue
        why = _check_value(key, opt, value, snap)
        if why:
            problems.append(f"{where}: {why} (got {value!r})")
    for var in profile.env:
        if var.startswith("VLLM_") and var not in snap.env_vars:
            problems.append(
                f"profiles.{name}.env.{var}: not an environment variable {engine} "
                f"{version} knows (it would be ignored)"
            )
    return problems
