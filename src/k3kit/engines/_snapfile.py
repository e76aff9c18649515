"""A publisher-supplied engine snapshot: one JSON file (``k3kit engine snapshot`` writes it) that
lets ``build`` check a package for an engine version k3kit does not ship data for.

For the buyer the file is the publisher's word, not k3kit's: it travels inside the signed kit, so
it cannot be swapped, but whoever signed it chose its content. So it is parsed strictly (bounded
size and counts, names as argparse and the engines spell them, no unknown keys) and it decides
only which flags EXIST and their value shapes. What a flag LOADS is never read from it: the
loads table of a supplied snapshot is derived by :func:`derived_loads` from the tables k3kit's
reviewers wrote for the shipped versions of the same engine, and any flag of the new version
whose name suggests loading code or files (:data:`k3kit.engines._loads.SUSPECT`) and that no
review marked inert in every shipped version is treated as loading files. A setting that loads
anything must then be declared under ``[engine.loads]`` (shown to the buyer before launch),
whatever the snapshot says.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from typing import Literal

from pydantic import Field, field_validator

from k3kit._canonical import model_bytes, strict_loads
from k3kit.engines._loads import LoadsTable, suspect
from k3kit.engines._snapshot import KIT_SNAPSHOT_NAME as KIT_SNAPSHOT_NAME  # re-exported
from k3kit.engines._snapshot import (
    MAX_SNAPSHOT_BYTES,
    EngineSnapshot,
    Option,
    shipped_versions,
    snapshot,
)
from k3kit.errors import K3kitError
from k3kit.models import load
from k3kit.models._base import Frozen
from k3kit.models.engine_version import MAX_VERSION_CHARS, parse_engine_version, release_of

SNAPSHOT_SCHEMA = "k3kit.engine-snapshot/v1"

_FLAG = r"^-{1,2}[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
_NAME = r"^[A-Za-z_<>][A-Za-z0-9_<>.]{0,127}$"
_ENV = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_SHA256 = r"^[0-9a-f]{64}$"
Nargs = Literal["?", "*", "+", "...", "A..."] | int | None


def _printable(text: str, limit: int = 256) -> str:
    if not text or len(text) > limit or not text.isprintable():
        raise ValueError(f"must be 1-{limit} printable characters")
    return text


class SnapshotOption(Frozen):
    """One argparse option as the engine's parser declares it (no help text, no default)."""

    flags: list[str] = Field(max_length=8)
    dest: str = Field(pattern=_NAME)
    action: str = Field(pattern=_NAME)
    type: str | None = Field(default=None, pattern=_NAME)
    choices: list[str] | None = Field(default=None, max_length=1024)
    nargs: Nargs = None
    deprecated: bool = False

    @field_validator("flags")
    @classmethod
    def _flags(cls, flags: list[str]) -> list[str]:
        for flag in flags:
            if not re.fullmatch(_FLAG, flag):
                raise ValueError(f"{flag[:80]!r} is not an option name")
        return flags

    @field_validator("choices")
    @classmethod
    def _choices(cls, choices: list[str] | None) -> list[str] | None:
        return [_printable(c) for c in choices] if choices is not None else None

    @field_validator("nargs")
    @classmethod
    def _nargs(cls, nargs: Nargs) -> Nargs:
        if isinstance(nargs, int) and not 0 <= nargs <= 64:
            raise ValueError("a count of values is 0-64")
        return nargs


class SnapshotProvenance(Frozen):
    """Where the flags were read from, so a reviewer can repeat it from the same wheel."""

    wheel: str = Field(pattern=r"^[A-Za-z0-9_.+-]{1,200}\.whl$")
    wheel_sha256: str = Field(pattern=_SHA256)
    wheel_bytes: int = Field(ge=1)
    parser: str = Field(max_length=300)
    parser_source: str = Field(pattern=r"^[A-Za-z0-9_./-]{1,300}$")
    parser_source_sha256: str = Field(pattern=_SHA256)
    python: str = Field(pattern=r"^[0-9][0-9A-Za-z.+]{0,31}$")
    stubbed: list[str] = Field(max_length=64)
    generated_on: str = Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
    generated_by: str = Field(max_length=100)

    @field_validator("parser", "generated_by")
    @classmethod
    def _line(cls, text: str) -> str:
        return _printable(text, 300)

    @field_validator("stubbed")
    @classmethod
    def _modules(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.fullmatch(_NAME, name):
                raise ValueError(f"{name[:80]!r} is not a module name")
        return names


class SnapshotFile(Frozen):
    schema_: Literal["k3kit.engine-snapshot/v1"] = Field(
        alias="schema", default="k3kit.engine-snapshot/v1"
    )
    engine: Literal["vllm", "sglang"]
    version: str = Field(max_length=MAX_VERSION_CHARS)
    options: list[SnapshotOption] = Field(min_length=1, max_length=4000)
    env_vars: list[str] = Field(max_length=8000)
    registries: dict[str, list[str]] = Field(max_length=32)
    provenance: SnapshotProvenance

    @field_validator("version")
    @classmethod
    def _version(cls, version: str) -> str:
        parse_engine_version(version)
        return version

    def is_for(self, engine: str, release: str) -> bool:
        """Whether this snapshot holds the flags of ``engine`` at public version ``release``.

        The verb records the wheel's own version, local label included (``0.10.1.1+cu126``, or a
        source build's ``0.1.dev12986+gfa99ccebd``), while kits key flag data by release, as the
        shipped snapshots are (a ``+cpu`` and a ``+cu129`` build parse the same flags). Comparing
        the full text refused every labelled build with "snapshot of X, but the package pins X"."""
        return self.engine == engine and release_of(self.version) == release

    @field_validator("env_vars")
    @classmethod
    def _env(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.fullmatch(_ENV, name):
                raise ValueError(f"{name[:80]!r} is not an environment variable name")
        return names

    @field_validator("registries")
    @classmethod
    def _registries(cls, regs: dict[str, list[str]]) -> dict[str, list[str]]:
        for key, names in regs.items():
            if not re.fullmatch(r"^[a-z_]{1,64}$", key) or len(names) > 1024:
                raise ValueError(f"registry {key[:80]!r}: a lower-case name and <= 1024 entries")
            for name in names:
                _printable(name)
        return regs

    def summary(self) -> str:
        """One line for messages and the kit's README."""
        p = self.provenance
        return (
            f"supplied by the publisher: read from {p.wheel} (sha256 {p.wheel_sha256[:16]}...) "
            f"by {p.parser} on {p.generated_on}"
        )


def parse_snapshot_file(
    data: bytes, *, source: str, error: type[K3kitError], code: str
) -> SnapshotFile:
    """The strict parse of a snapshot file's bytes; ``error(code)`` naming the field otherwise."""
    obj = strict_loads(data, source=source, max_bytes=MAX_SNAPSHOT_BYTES, error=error, code=code)
    return load(SnapshotFile, obj, source=source, error=error, code=code)


def snapshot_file_bytes(doc: SnapshotFile) -> bytes:
    """The canonical bytes a snapshot is written and signed as."""
    return model_bytes(doc)


def snapshot_sha256(doc: SnapshotFile) -> str:
    return hashlib.sha256(snapshot_file_bytes(doc)).hexdigest()


@cache
def _reviewed(engine: str) -> tuple[LoadsTable, frozenset[str]]:
    """What the shipped versions' reviews say: the union of their code and path entries (and
    engine variables), the names every review marks inert, and every flag name they know."""
    snaps = [snapshot(engine, v) for v in shipped_versions().get(engine, [])]
    code: dict[str, str] = {}
    path: dict[str, str] = {}
    env: dict[str, str] = {}
    known: set[str] = set()
    for snap in snaps:
        code.update(snap.loads.code)
        path.update(snap.loads.path)
        env.update(snap.loads.env)
        known.update(snap.options)
    inert = frozenset.intersection(*(s.loads.inert for s in snaps)) if snaps else frozenset()
    return LoadsTable(code, path, inert - set(code) - set(path), env), frozenset(known)


_NOVEL = (
    "is not a flag of any engine version k3kit's reviewers classified, so what it loads is unknown"
)
_SUSPECT_WHY = (
    "is not classified for this engine version, and its name suggests it loads code or reads files"
)


def derived_loads(engine: str, names: list[str]) -> LoadsTable:
    """The loads table for a supplied snapshot of ``engine`` with long option ``names``.

    The reviewed tables' code and path entries stand; on top, fail closed: a flag no shipped
    version has (nobody reviewed what it does) and a flag whose name SUSPECT matches that no
    review marks inert count as loading files, so setting either needs a declaration."""
    reviewed, known = _reviewed(engine)
    listed = set(reviewed.code) | set(reviewed.path)
    unreviewed = {
        name: _NOVEL if name not in known else _SUSPECT_WHY
        for name in names
        if name not in listed
        and (name not in known or (suspect().search(name) and name not in reviewed.inert))
    }
    return LoadsTable(
        dict(reviewed.code), {**reviewed.path, **unreviewed}, reviewed.inert, dict(reviewed.env)
    )


def to_engine_snapshot(doc: SnapshotFile) -> EngineSnapshot:
    """The :class:`EngineSnapshot` build and launch check settings against."""
    options: dict[str, Option] = {}
    for opt in doc.options:
        for flag in (f for f in opt.flags if f.startswith("--")):
            choices = tuple(opt.choices) if opt.choices else None
            nargs = opt.nargs
            options[flag[2:]] = Option(
                flag, opt.action, opt.type, choices, opt.deprecated, nargs, opt.dest
            )
    return EngineSnapshot(
        doc.engine,
        doc.version,
        doc.summary(),
        options,
        frozenset(doc.env_vars),
        {k: tuple(v) for k, v in doc.registries.items()},
        derived_loads(doc.engine, sorted(options)),
    )
