"""Engine snapshots: an engine version's server flags, environment variables and registries.

A snapshot is data generated from the engine's released wheel by ``scripts/engine_snapshot.py``
(the engine's own argument parser, introspected), shipped under ``k3kit/data/`` with its
provenance, plus one reviewed file, ``ENGINE-VERSION-loads.json``: which flags make the engine load
code or read files (:mod:`k3kit.engines._loads`). A version without that review has no snapshot,
so a new engine version cannot be built for until its new flags are classified. Adding an engine
version is one command, three generated JSON files and one reviewed one, never code.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import k3kit.data
from k3kit._immutable import NamedTuple
from k3kit.engines._loads import LoadsTable
from k3kit.errors import InputError
from k3kit.models.engine_version import release_of

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

#: The kit file a publisher-supplied snapshot is copied to (listed in the manifest, so signed).
#: Here, not in ``_snapfile``, so the launcher names it without importing that file's models.
KIT_SNAPSHOT_NAME = "engine-snapshot.json"
#: vLLM 0.33.0's serve flags are ~100 kB as a snapshot; this leaves room, not a vector.
MAX_SNAPSHOT_BYTES = 2 * 1024 * 1024


# NamedTuples, not frozen dataclasses: immutable records all the same, read by attribute, and every
# launch builds them (a frozen dataclass is ~0.5 ms of CPU to create at import, a NamedTuple
# ~0.1 ms; docs/performance.md).
class Option(NamedTuple):
    flag: str
    action: str
    type: str | None
    choices: tuple[str, ...] | None
    deprecated: bool
    #: argparse's nargs: None (one value), "?", "*", "+", or a count (0 for a switch).
    nargs: str | int | None = None
    #: argparse's dest: the aliases of one option (``--model``/``--model-path``) share it.
    dest: str = ""

    def aliases(self, options: dict[str, Option]) -> list[str]:
        """Every name (without ``--``) that sets this option, ``--no-x`` forms included."""
        return [key for key, opt in options.items() if opt.dest == self.dest]


class EngineSnapshot(NamedTuple):
    engine: str
    version: str
    provenance: str
    options: dict[str, Option]
    env_vars: frozenset[str]
    registries: dict[str, tuple[str, ...]]
    loads: LoadsTable


def _data() -> Traversable:
    """The shipped data folder: the package's own folder when it is one on disk (every wheel
    and source install), read as plain files; else (a zip import) what ``importlib.resources``
    finds. Why not always ``importlib.resources``: it imports itself and zipfile on use, ~3 ms
    of CPU on every launch (docs/performance.md), for the same bytes."""
    init = k3kit.data.__file__
    if init and os.path.isdir(os.path.dirname(init)):
        return Path(init).parent
    from importlib import resources

    return resources.files("k3kit.data")


def _read(name: str) -> Any:
    return json.loads(_data().joinpath(name).read_text("utf-8"))


def shipped_versions() -> dict[str, list[str]]:
    """Every engine version k3kit ships a snapshot for, by engine name."""
    out: dict[str, list[str]] = {}
    for entry in _data().iterdir():
        name = entry.name
        if name.endswith("-serve-flags.json"):
            engine, _, version = name.removesuffix("-serve-flags.json").partition("-")
            out.setdefault(engine, []).append(version)
    return {k: sorted(v) for k, v in sorted(out.items())}


def _invalid_version() -> type[Exception]:
    """packaging's error, imported when an error is being matched: packaging is imported where
    a version is parsed (:func:`k3kit.models.engine_version.release_of`), not with this module."""
    from packaging.version import InvalidVersion

    return InvalidVersion


_NO_DEST = object()  # an option without "dest" is its own (one name): a snapshot older than dest


@cache
def snapshot(engine: str, version: str) -> EngineSnapshot:
    """The snapshot for ``engine==version``; only versions k3kit ships data for are known.

    Looked up by the public version: a local label (``+cpu``, ``+cu129``) names a build of the
    same release, whose server parses the same flags."""
    try:
        prefix = f"{engine}-{release_of(version)}"
        flags = _read(f"{prefix}-serve-flags.json")
        env = _read(f"{prefix}-env-vars.json")
        registries = _read(f"{prefix}-registries.json")
        loads = _read(f"{prefix}-loads.json")
    except (FileNotFoundError, _invalid_version()) as exc:
        known = shipped_versions()
        listing = "; ".join(f"{e} {', '.join(v)}" for e, v in known.items())
        raise InputError(
            f"no flag snapshot for {engine} {version}",
            code="ENGINE_UNKNOWN",
            hint=f"k3kit ships snapshots for {listing}; for another version, make one from the "
            "engine's wheel with `k3kit engine snapshot --engine ENGINE --wheel WHEEL -o FILE` "
            "and pass it to build as --engine-snapshot FILE",
        ) from exc
    # Every launch builds these ~400 records: each option's values are read once for all its
    # names, and _make takes them as one tuple (0.65 -> 0.35 ms for vLLM 0.33.0's on 3.13).
    options: dict[str, Option] = {}
    make = Option._make
    for opt in flags["options"]:
        choices = tuple(map(str, opt["choices"])) if opt["choices"] else None
        action, kind, deprecated = opt["action"], opt["type"], opt["deprecated"]
        nargs, dest = opt.get("nargs"), opt.get("dest", _NO_DEST)
        for flag in opt["flags"]:
            if flag.startswith("--"):
                name = flag[2:]
                options[name] = make(
                    (
                        flag,
                        action,
                        kind,
                        choices,
                        deprecated,
                        nargs,
                        name if dest is _NO_DEST else dest,
                    )
                )
    regs = {k: tuple(v) for k, v in registries.items() if isinstance(v, list)}
    return EngineSnapshot(
        engine,
        version,
        flags["provenance"],
        options,
        frozenset(env["env_vars"]),
        regs,
        LoadsTable.from_json(loads),
    )


def closest(word: str, candidates: list[str] | tuple[str, ...] | frozenset[str]) -> str | None:
    """The most similar valid name, for "did you mean" hints (None when nothing is close)."""
    import difflib  # only a refusal suggests a name: launch's start-up does not pay for it

    found = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return found[0] if found else None
