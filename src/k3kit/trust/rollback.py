"""Rollback and equivocation protection: the node's high-water mark per package and channel.

A genuine old kit verifies forever (its signature does not expire), so "is this kit genuine?" is
not enough: the node must also ask "is it older than what I already accepted?". The state file
``<state dir>/rollback.json`` records, per ``<package>/<channel>``, the highest signed ``sequence``
this node accepted and the kit checksum it had. A lower sequence is ``ROLLBACK``; the same sequence
with another kit is ``EQUIVOCATION`` (someone holding a release key published two different kits
under one number). A root-signed ``min_sequence`` is a floor even for a node with no state. The
only other way down is the operator's explicit ``allow_rollback`` (the CLI's loud flag), recorded
in the entry.

The state is written atomically, mode 0600 in a 0700 folder, under an exclusive ``flock`` so two
runs cannot both read the old mark and both record. A state file that is not a regular file owned
by this user, or is writable by others, or does not parse, is refused (``ROLLBACK_STATE_INVALID``)
rather than ignored: ignoring it would silently reset the protection. Whoever controls this file
(root on the node) can still reset it; docs/trust.md says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k3kit._canonical import dumps, strict_loads
from k3kit._fs import atomic_write
from k3kit.errors import EnvironmentProblem, VerificationError
from k3kit.models import Statement

STATE_NAME = "rollback.json"
SCHEMA = "k3kit.rollback-state/v1"
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


@dataclass(frozen=True)
class RollbackPolicy:
    """How ``verify`` applies the check: where the state is, and the operator's override."""

    state_dir: Path
    allow_rollback: bool = False
    now: str | None = None


def _invalid(path: Path, why: str) -> VerificationError:
    return VerificationError(
        f"rollback state {path} cannot be trusted: {why}",
        code="ROLLBACK_STATE_INVALID",
        hint="inspect it; delete it only if you accept losing rollback protection",
    )


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise _invalid(path, exc.strerror or str(exc)) from exc
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise _invalid(path, "not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise _invalid(path, "owned by another user or writable by group/others")
        data = handle.read(MAX_STATE_BYTES + 1)
    obj = strict_loads(
        data,
        source=str(path),
        max_bytes=MAX_STATE_BYTES,
        max_depth=4,
        code="ROLLBACK_STATE_INVALID",
    )
    if (
        not isinstance(obj, dict)
        or obj.get("schema") != SCHEMA
        or set(obj) != {"schema", "entries"}
    ):
        raise _invalid(path, f"not a {SCHEMA} document")
    entries = obj["entries"]
    if not isinstance(entries, dict):
        raise _invalid(path, "entries is not an object")
    for key, entry in entries.items():
        if not isinstance(entry, dict) or set(entry) != _FIELDS:
            raise _invalid(path, f"entry {key!r} has unexpected fields")
        if not isinstance(entry["sequence"], int) or isinstance(entry["sequence"], bool):
            raise _invalid(path, f"entry {key!r}: sequence is not an integer")
        if not isinstance(entry["kit_sha256"], str):
            raise _invalid(path, f"entry {key!r}: kit_sha256 is not a string")
    return entries


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


@contextlib.contextmanager
def _locked(state_dir: Path) -> Iterator[Path]:
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(state_dir / "rollback.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot open the rollback state in {state_dir}: {exc.strerror or exc}",
            code="ROLLBACK_STATE_UNAVAILABLE",
        ) from exc
    try:
        _lock_within(fd, state_dir, LOCK_WAIT_S)
        yield state_dir / STATE_NAME
    finally:
        os.close(fd)


def _decide(
    entries: dict[str, dict[str, Any]],
    key: str,
    sequence: int,
    kit_sha256: str,
    floor: int | None,
    allow_rollback: bool,
) -> Decision:
    entry = entries.get(key)
    previous = entry["sequence"] if entry else None
    if floor is not None and sequence < floor:
        # A root-signed floor retires kits; the operator flag does not lower it.
        raise VerificationError(
            f"{key}: sequence {sequence} is below the root's minimum {floor}",
            code="ROLLBACK",
        )
    problem: tuple[str, str] | None = None
    if entry is not None and previous is not None:
        if sequence < previous:
            problem = (
                "ROLLBACK",
                f"sequence {sequence} is older than the accepted {previous} "
                f"(kit sha256:{entry['kit_sha256'][:16]}…)",
            )
        elif sequence == previous and entry["kit_sha256"] != kit_sha256:
            problem = (
                "EQUIVOCATION",
                f"sequence {sequence} was accepted for kit sha256:"
                f"{entry['kit_sha256']}, this kit is sha256:{kit_sha256}",
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
    return Decision(key, sequence, kit_sha256, previous, problem is not None, detail)


def check(
    state_dir: Path,
    *,
    package: str,
    channel: str,
    sequence: int,
    kit_sha256: str,
    floor: int | None = None,
    allow_rollback: bool = False,
) -> Decision:
    """Decide without recording (raises ``ROLLBACK`` / ``EQUIVOCATION``)."""
    with _locked(state_dir) as path:
        return _decide(
            _read(path), f"{package}/{channel}", sequence, kit_sha256, floor, allow_rollback
        )


def record(state_dir: Path, decision: Decision, *, now: str | None = None) -> Decision:
    """Re-check under the lock and record; only a kit that verified completely gets here."""
    with _locked(state_dir) as path:
        entries = _read(path)
        fresh = _decide(
            entries, decision.key, decision.sequence, decision.kit_sha256, None, decision.override
        )
        old = entries.get(decision.key)
        if old is None or fresh.override or decision.sequence >= old["sequence"]:
            entries[decision.key] = {
                "sequence": decision.sequence,
                "kit_sha256": decision.kit_sha256,
                "accepted_at": now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "override": fresh.override,
            }
            atomic_write(
                path, dumps({"schema": SCHEMA, "entries": entries}), mode=0o600, state=True
            )
    return fresh


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
    equivocation, else record the sequence. ``floor`` is the root's ``min_sequence`` for this
    package and channel (``Trust.floor``), when trust came from a root."""
    kit = statement.predicate.kit
    decision = check(
        state_dir,
        package=kit.name,
        channel=kit.channel,
        sequence=kit.sequence,
        kit_sha256=kit_sha256,
        floor=floor,
        allow_rollback=allow_rollback,
    )
    return record(state_dir, decision, now=now)
