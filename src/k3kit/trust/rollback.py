"""Rollback and equivocation protection: the node's high-water mark per package and channel.

A genuine old kit verifies forever (its signature does not expire), so "is this kit genuine?" is
not enough: the node must also ask "is it older than what I already accepted?". The state file
``<state dir>/rollback.json`` records, per ``<package>/<channel>``, the highest signed ``sequence``
this node accepted and the kit checksum it had. A lower sequence is ``ROLLBACK``; the same sequence
with another kit is ``EQUIVOCATION`` (someone holding a release key published two different kits
under one number). The same holds per ``<package>@<version>``: a version number names one kit, so
a second kit under a version this node accepted is ``EQUIVOCATION`` too, whatever its sequence. A
root-signed ``min_sequence`` is a floor even for a node with no state. The only other way down is
the operator's explicit ``allow_rollback`` (the CLI's loud flag), recorded in the entry.

The file also remembers, per pinned root, the highest root version this node accepted, so that
losing the accepted roots under ``roots/`` (which carry revocations) is noticed rather than
silently undoing a revocation (:func:`accepted_root`, :func:`note_root`).

The state folder passes :func:`k3kit._fs.private_dir` (this user's, 0700, nothing above it that
another user can write) before anything in it is read. A fresh folder gets ``rollback.json`` and
``roots/`` together, so one of them missing while the other is there means state was lost, and is
refused (``STATE_LOST``) rather than taken for a first run. The state is written atomically, mode
0600, under an exclusive ``flock`` so two runs cannot both read the old mark and both record. A
state file that is not a regular file owned by this user, or is writable by others, or does not
parse, is refused (``ROLLBACK_STATE_INVALID``) rather than ignored: ignoring it would silently reset
the protection. Whoever owns this folder (and root) can still reset it by removing the whole
folder; docs/trust.md says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k3kit._canonical import dumps, strict_loads
from k3kit._fs import atomic_write, private_dir
from k3kit.errors import EnvironmentProblem, VerificationError
from k3kit.models import Statement

STATE_NAME = "rollback.json"
ROOTS_NAME = "roots"
SCHEMA_V1 = "k3kit.rollback-state/v1"
SCHEMA = "k3kit.rollback-state/v2"
MAX_STATE_BYTES = 4 * 1024 * 1024
_FIELDS = {"sequence", "kit_sha256", "accepted_at", "override"}
#: How long to wait for the state lock. An honest holder keeps it for milliseconds (one read and
#: one write); anyone who can write the state folder can replace the lock file with one they hold
#: forever, which must be an error, not a hang.
LOCK_WAIT_S = 10.0


@dataclass(frozen=True)
class Decision:
    key: str
    sequence: int
    kit_sha256: str
    previous: int | None
    override: bool
    detail: str
    version_key: str | None = None


@dataclass(frozen=True)
class RollbackPolicy:
    """How ``verify`` applies the check: where the state is, and the operator's override."""

    state_dir: Path
    allow_rollback: bool = False
    now: str | None = None


@dataclass
class _Memory:
    """What ``rollback.json`` holds: high-water marks, kits per version, root versions."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    roots: dict[str, int] = field(default_factory=dict)
    schema: str = SCHEMA

    def document(self) -> bytes:
        return dumps(
            {
                "schema": SCHEMA,
                "entries": self.entries,
                "versions": self.versions,
                "roots": self.roots,
            }
        )


def _invalid(path: Path, why: str) -> VerificationError:
    return VerificationError(
        f"rollback state {path} cannot be trusted: {why}",
        code="ROLLBACK_STATE_INVALID",
        hint="inspect it; delete the whole state folder only if you accept losing rollback "
        "protection",
    )


def _lost(folder: Path, why: str) -> VerificationError:
    return VerificationError(
        f"the state folder {folder} lost part of its memory: {why}",
        code="STATE_LOST",
        hint="restore it from a backup; if you removed it yourself and accept losing rollback "
        "and revocation memory, remove the whole state folder (the next run starts afresh)",
    )


def _open_state(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _invalid(path, exc.strerror or str(exc)) from exc
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise _invalid(path, "not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise _invalid(path, "owned by another user or writable by group/others")
        return handle.read(MAX_STATE_BYTES + 1)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_entries(path: Path, entries: object) -> dict[str, dict[str, Any]]:
    if not isinstance(entries, dict):
        raise _invalid(path, "entries is not an object")
    for key, entry in entries.items():
        if not isinstance(entry, dict) or set(entry) != _FIELDS:
            raise _invalid(path, f"entry {key!r} has unexpected fields")
        if not _is_int(entry["sequence"]):
            raise _invalid(path, f"entry {key!r}: sequence is not an integer")
        if not isinstance(entry["kit_sha256"], str):
            raise _invalid(path, f"entry {key!r}: kit_sha256 is not a string")
    return entries


def _check_map(path: Path, name: str, value: object, kind: type) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(
        isinstance(v, kind) and not isinstance(v, bool) for v in value.values()
    ):
        raise _invalid(path, f"{name} is not an object of {kind.__name__} values")
    return value


def _read(path: Path) -> _Memory | None:
    """The memory in ``path``; None when the file is absent. Version 1 files (entries only) are
    read as they are and written back as version 2."""
    data = _open_state(path)
    if data is None:
        return None
    obj = strict_loads(
        data,
        source=str(path),
        max_bytes=MAX_STATE_BYTES,
        max_depth=4,
        code="ROLLBACK_STATE_INVALID",
    )
    shapes = {SCHEMA_V1: {"schema", "entries"}, SCHEMA: {"schema", "entries", "versions", "roots"}}
    if not isinstance(obj, dict) or shapes.get(obj.get("schema", "")) != set(obj):
        raise _invalid(path, f"not a {SCHEMA} document")
    return _Memory(
        _check_entries(path, obj["entries"]),
        _check_map(path, "versions", obj.get("versions", {}), str),
        _check_map(path, "roots", obj.get("roots", {}), int),
        obj["schema"],
    )


def _lock_within(fd: int, state_dir: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise EnvironmentProblem(
                    f"the rollback state in {state_dir} stayed locked for {seconds:.0f} s",
                    code="ROLLBACK_STATE_UNAVAILABLE",
                    hint="another k3kit is running, or someone else holds rollback.lock",
                ) from None
            time.sleep(0.05)


def _roots_in_use(folder: Path) -> bool:
    """True when ``roots/`` holds anything: an empty one is what an interrupted first run leaves
    (``roots/`` is made before ``rollback.json``)."""
    try:
        with os.scandir(folder / ROOTS_NAME) as entries:
            return any(True for _ in entries)
    except FileNotFoundError:
        return False
    except OSError:  # a file or link where the folder belongs: something is there
        return True


def _memory(folder: Path) -> _Memory:
    """Load the memory, or start it on a fresh folder; refuse a half that vanished."""
    path = folder / STATE_NAME
    memory = _read(path)
    if memory is None:
        if _roots_in_use(folder):
            raise _lost(folder, f"{STATE_NAME} is gone but {ROOTS_NAME}/ still holds roots")
        private_dir(folder / ROOTS_NAME)
        memory = _Memory()
        atomic_write(path, memory.document(), mode=0o600, force=True)
        return memory
    if not os.path.lexists(folder / ROOTS_NAME):
        if memory.schema == SCHEMA:  # version 2 is only ever written beside roots/
            raise _lost(folder, f"{ROOTS_NAME}/ is gone but {STATE_NAME} remains")
        private_dir(folder / ROOTS_NAME)
    return memory


@contextlib.contextmanager
def _locked(state_dir: Path) -> Iterator[tuple[Path, _Memory]]:
    folder = private_dir(state_dir)
    try:
        fd = os.open(folder / "rollback.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot open the rollback state in {state_dir}: {exc.strerror or exc}",
            code="ROLLBACK_STATE_UNAVAILABLE",
        ) from exc
    try:
        _lock_within(fd, state_dir, LOCK_WAIT_S)
        yield folder / STATE_NAME, _memory(folder)
    finally:
        os.close(fd)


def _sequence_problem(
    entry: dict[str, Any] | None, sequence: int, kit_sha256: str
) -> tuple[str, str] | None:
    if entry is None:
        return None
    previous = entry["sequence"]
    if sequence < previous:
        return (
            "ROLLBACK",
            f"sequence {sequence} is older than the accepted {previous} "
            f"(kit sha256:{entry['kit_sha256'][:16]}…)",
        )
    if sequence == previous and entry["kit_sha256"] != kit_sha256:
        return (
            "EQUIVOCATION",
            f"sequence {sequence} was accepted for kit sha256:"
            f"{entry['kit_sha256']}, this kit is sha256:{kit_sha256}",
        )
    return None


def _version_problem(
    versions: dict[str, str], version_key: str | None, kit_sha256: str
) -> tuple[str, str] | None:
    """One version number names one kit: a second kit under an accepted version is equivocation,
    whatever sequence it carries (a release key can sign two kits as "1.5.0")."""
    known = versions.get(version_key) if version_key is not None else None
    if known is None or known == kit_sha256:
        return None
    return (
        "EQUIVOCATION",
        f"{version_key} was accepted as kit sha256:{known}, this kit is sha256:{kit_sha256}",
    )


def _decide(
    memory: _Memory,
    key: str,
    sequence: int,
    kit_sha256: str,
    floor: int | None,
    allow_rollback: bool,
    version_key: str | None = None,
) -> Decision:
    entry = memory.entries.get(key)
    previous = entry["sequence"] if entry else None
    if floor is not None and sequence < floor:
        # A root-signed floor retires kits; the operator flag does not lower it.
        raise VerificationError(
            f"{key}: sequence {sequence} is below the root's minimum {floor}",
            code="ROLLBACK",
        )
    problem = _sequence_problem(entry, sequence, kit_sha256) or _version_problem(
        memory.versions, version_key, kit_sha256
    )
    if problem is not None and not allow_rollback:
        raise VerificationError(
            f"{key}: {problem[1]}",
            code=problem[0],
            hint="only the operator can override this (--allow-rollback), and it is logged",
        )
    if problem is not None:
        detail = f"OVERRIDDEN by the operator: {problem[0]}: {problem[1]}"
    elif previous is None:
        detail = f"{key}: sequence {sequence} (first seen on this node)"
    else:
        detail = f"{key}: sequence {sequence} (accepted before: {previous})"
    if floor is not None:
        detail += f"; root floor {floor}"
    return Decision(key, sequence, kit_sha256, previous, problem is not None, detail, version_key)


def check(
    state_dir: Path,
    *,
    package: str,
    channel: str,
    sequence: int,
    kit_sha256: str,
    floor: int | None = None,
    allow_rollback: bool = False,
    version: str | None = None,
) -> Decision:
    """Decide without recording (raises ``ROLLBACK`` / ``EQUIVOCATION``); ``version`` (the kit's
    signed version) also holds the kit to the one this node accepted under that version."""
    version_key = f"{package}@{version}" if version is not None else None
    with _locked(state_dir) as (_path, memory):
        return _decide(
            memory, f"{package}/{channel}", sequence, kit_sha256, floor, allow_rollback, version_key
        )


def record(state_dir: Path, decision: Decision, *, now: str | None = None) -> Decision:
    """Re-check under the lock and record; only a kit that verified completely gets here."""
    with _locked(state_dir) as (path, memory):
        fresh = _decide(
            memory,
            decision.key,
            decision.sequence,
            decision.kit_sha256,
            None,
            decision.override,
            decision.version_key,
        )
        old = memory.entries.get(decision.key)
        if old is None or fresh.override or decision.sequence >= old["sequence"]:
            memory.entries[decision.key] = {
                "sequence": decision.sequence,
                "kit_sha256": decision.kit_sha256,
                "accepted_at": now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "override": fresh.override,
            }
        if decision.version_key is not None:
            memory.versions[decision.version_key] = decision.kit_sha256
        atomic_write(path, memory.document(), mode=0o600, force=True)
    return fresh


def accepted_root(state_dir: Path, pin_id: str) -> tuple[Path, int | None]:
    """The private folder of the roots accepted under the pinned root ``pin_id``, and the highest
    root version this node recorded accepting under it (None: none beyond what is on disk)."""
    with _locked(state_dir) as (path, memory):
        folder = private_dir(path.parent / ROOTS_NAME / pin_id)
        return folder, memory.roots.get(pin_id)


def note_root(state_dir: Path, pin_id: str, version: int) -> None:
    """Remember that root ``version`` was accepted under ``pin_id`` (never lowers the mark)."""
    with _locked(state_dir) as (path, memory):
        if memory.roots.get(pin_id, 0) < version:
            memory.roots[pin_id] = version
            atomic_write(path, memory.document(), mode=0o600, force=True)


def check_and_record(
    state_dir: Path,
    statement: Statement,
    kit_sha256: str,
    *,
    allow_rollback: bool = False,
    floor: int | None = None,
    now: str | None = None,
) -> Decision:
    """The call ``install`` and ``launch`` make once a kit has verified: refuse a rollback or an
    equivocation, else record the sequence and the kit under its version. ``floor`` is the root's
    ``min_sequence`` for this package and channel (``Trust.floor``), when trust came from a root."""
    kit = statement.predicate.kit
    decision = check(
        state_dir,
        package=kit.name,
        channel=kit.channel,
        sequence=kit.sequence,
        kit_sha256=kit_sha256,
        floor=floor,
        allow_rollback=allow_rollback,
        version=kit.version,
    )
    return record(state_dir, decision, now=now)
