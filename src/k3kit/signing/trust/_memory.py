"""The node's rollback memory on disk: ``<state dir>/rollback.json`` beside ``roots/``, read and
written only under an exclusive lock, in a folder that passed the private-state check.

What the memory means (high-water marks, kits per version, root versions) is decided in
:mod:`k3kit.signing.trust.rollback`; this module only keeps it honest on disk. The state folder
passes
:func:`k3kit._fs.private_dir` (this user's, 0700, nothing above it that another user can write)
before anything in it is read. A fresh folder gets ``roots/`` and then ``rollback.json`` under the
lock, so one of them missing while the other is there means state was lost, and is refused
(``STATE_LOST``) rather than taken for a first run. A state file that is not a regular file owned
by this user, or is writable by others, or does not parse, is refused (``ROLLBACK_STATE_INVALID``)
rather than ignored: ignoring it would silently reset the protection.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from k3kit._canonical import dumps, strict_loads
from k3kit._fs import NotRegularFile, atomic_write, open_nofollow, open_regular, private_dir
from k3kit.errors import EnvironmentProblem, VerificationError

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


class Memory:
    """What ``rollback.json`` holds: high-water marks, kits per version, root versions.

    A plain class, not a dataclass: it is mutated in place under the lock, and verify's start-up
    imports this module (a dataclass costs ~0.8 ms to create; docs/performance.md)."""

    __slots__ = ("entries", "roots", "schema", "versions")

    def __init__(
        self,
        entries: dict[str, dict[str, Any]] | None = None,
        versions: dict[str, str] | None = None,
        roots: dict[str, int] | None = None,
        schema: str = SCHEMA,
    ) -> None:
        self.entries = {} if entries is None else entries
        self.versions = {} if versions is None else versions
        self.roots = {} if roots is None else roots
        self.schema = schema

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
        fd, st = open_regular(path)
    except FileNotFoundError:
        return None
    except NotRegularFile as exc:
        raise _invalid(path, "not a regular file") from exc
    except OSError as exc:
        raise _invalid(path, exc.strerror or str(exc)) from exc
    with os.fdopen(fd, "rb") as handle:
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


def read(path: Path) -> Memory | None:
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
    return Memory(
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


def _memory(folder: Path) -> Memory:
    """Load the memory, or start it on a fresh folder; refuse a half that vanished."""
    path = folder / STATE_NAME
    memory = read(path)
    if memory is None:
        if _roots_in_use(folder):
            raise _lost(folder, f"{STATE_NAME} is gone but {ROOTS_NAME}/ still holds roots")
        private_dir(folder / ROOTS_NAME)
        memory = Memory()
        atomic_write(path, memory.document(), mode=0o600, state=True)
        return memory
    if not os.path.lexists(folder / ROOTS_NAME):
        if memory.schema == SCHEMA:  # version 2 is only ever written beside roots/
            raise _lost(folder, f"{ROOTS_NAME}/ is gone but {STATE_NAME} remains")
        private_dir(folder / ROOTS_NAME)
    return memory


@contextlib.contextmanager
def locked(state_dir: Path) -> Iterator[tuple[Path, Memory]]:
    folder = private_dir(state_dir)
    try:
        fd = open_nofollow(folder / "rollback.lock", os.O_RDWR | os.O_CREAT, 0o600)
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
