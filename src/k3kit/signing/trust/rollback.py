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

On disk (:mod:`k3kit.signing.trust._memory`) the memory sits in a folder that passed the
private-state check, is read and written under an exclusive ``flock`` (atomically, mode 0600), and a
half of it that vanished is ``STATE_LOST``, never a first run. Whoever owns the state folder (and
root) can still reset it by removing the whole folder; docs/trust.md says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from k3kit._fs import atomic_write, private_dir
from k3kit._immutable import NamedTuple
from k3kit._values import utc_timestamp
from k3kit.errors import VerificationError
from k3kit.signing.trust._memory import ROOTS_NAME, Memory, locked

if TYPE_CHECKING:  # an annotation only: verify's start-up imports no pydantic (performance.md)
    from k3kit.models import Statement


# NamedTuples: immutable records that cost verify's start-up ~0.1 ms each, not a dataclass's ~0.8
class Decision(NamedTuple):
    key: str
    sequence: int
    kit_sha256: str
    previous: int | None
    override: bool
    detail: str
    version_key: str | None = None


class RollbackPolicy(NamedTuple):
    """How ``verify`` applies the check: where the state is, and the operator's override."""

    state_dir: Path
    allow_rollback: bool = False
    now: str | None = None


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
    memory: Memory,
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
    with locked(state_dir) as (_path, memory):
        return _decide(
            memory, f"{package}/{channel}", sequence, kit_sha256, floor, allow_rollback, version_key
        )


def record(state_dir: Path, decision: Decision, *, now: str | None = None) -> Decision:
    """Re-check under the lock and record; only a kit that verified completely gets here."""
    with locked(state_dir) as (path, memory):
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
                "accepted_at": now or utc_timestamp(),
                "override": fresh.override,
            }
        if decision.version_key is not None:
            memory.versions[decision.version_key] = decision.kit_sha256
        atomic_write(path, memory.document(), mode=0o600, state=True)
    return fresh


def accepted_root(state_dir: Path, pin_id: str) -> tuple[Path, int | None]:
    """The private folder of the roots accepted under the pinned root ``pin_id``, and the highest
    root version this node recorded accepting under it (None: none beyond what is on disk)."""
    with locked(state_dir) as (path, memory):
        folder = private_dir(path.parent / ROOTS_NAME / pin_id)
        return folder, memory.roots.get(pin_id)


def note_root(state_dir: Path, pin_id: str, version: int) -> None:
    """Remember that root ``version`` was accepted under ``pin_id`` (never lowers the mark)."""
    with locked(state_dir) as (path, memory):
        if memory.roots.get(pin_id, 0) < version:
            memory.roots[pin_id] = version
            atomic_write(path, memory.document(), mode=0o600, state=True)


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
