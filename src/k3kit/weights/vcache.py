"""The verification cache: skip re-reading weight files that provably did not change.

One JSON file per weight lock, ``<state dir>/verify/<lock sha256>.json``, maps the *resolved* path
of each file that verified OK to the digest it matched, the algorithm, and the file's stamp
``device:inode:size:mtime_ns:ctime_ns`` taken with ``fstat`` on the descriptor that was hashed. A
later run trusts a record only if the lock checksum, the algorithm, the expected digest and every
stamp field are equal; anything else, or ``--full``, re-hashes the file. What that does and does not
protect against is spelled out in docs/verification-cache.md.

A record is written only for a file read under an unbroken read lease (:mod:`k3kit.weights._lease`):
no process had it open for writing while it was read, so any later change must move its timestamps.

The file is state, not evidence: it is never trusted blindly. Its folder must pass
:func:`k3kit._fs.private_dir` (this user's, not writable by others, nothing above it that another
user can write), else it is neither read nor written (``STATE_DIR_UNSAFE`` in the report). The
file must be a regular file owned by this user and not writable by group or others; it is parsed
strictly and checked field by field; any doubt discards it whole, which costs a re-hash and
nothing else. Writes go through ``atomic_write`` (mode 0600, directory 0700), so a crash or a
concurrent run leaves either the old file or a complete new one; two concurrent runs merge what
they find on disk just before writing, and the worst a lost update can cost is a re-hash.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from k3kit._canonical import dumps, strict_loads
from k3kit._digest import ALGORITHMS, FileDigest, FileStamp
from k3kit._fs import UntrustedState, atomic_write, private_dir, read_private_state
from k3kit._immutable import NamedTuple
from k3kit._values import is_lower_hex
from k3kit.errors import EnvironmentProblem, K3kitError

SCHEMA = "k3kit.verify-cache/v1"
MAX_BYTES = 64 * 1024 * 1024
MAX_RECORDS = 400_000
# A file is recorded only once its newest timestamp is this much older than the moment hashing
# began: two changes inside one timestamp tick look identical, and a write() that started before
# the read updated the times at its start. Filesystems with whole-second stamps get more margin.
SETTLE_NS = 1_000_000_000
COARSE_SETTLE_NS = 3_000_000_000

_WHAT = "verification cache folder"
_STAMP = re.compile(r"^[0-9]{1,20}:[0-9]{1,20}:[0-9]{1,20}:-?[0-9]{1,20}:-?[0-9]{1,20}$")


# A NamedTuple, not a frozen dataclass: immutable all the same, compared whole, and ~0.4 ms less
# CPU to create on every launch's import (docs/performance.md).
class Record(NamedTuple):
    algorithm: str
    digest: str
    stamp: str


def _parse(data: bytes, lock_sha256: str) -> dict[str, Record]:
    try:
        obj = strict_loads(data, source="verification cache", max_bytes=MAX_BYTES, max_depth=4)
    except K3kitError as exc:
        raise UntrustedState(exc.message) from exc
    if not isinstance(obj, dict) or set(obj) != {"schema", "lock_sha256", "records"}:
        raise UntrustedState("unexpected top-level fields")
    if obj["schema"] != SCHEMA:
        raise UntrustedState(f"schema is not {SCHEMA}")
    if obj["lock_sha256"] != lock_sha256:
        raise UntrustedState("written for another weight lock")
    raw = obj["records"]
    if not isinstance(raw, dict) or len(raw) > MAX_RECORDS:
        raise UntrustedState("records is not a bounded object")
    records: dict[str, Record] = {}
    for key, rec in raw.items():
        if not key.startswith("/") or "\x00" in key:
            raise UntrustedState("a record key is not an absolute path")
        if not isinstance(rec, dict) or set(rec) != {"algorithm", "digest", "stamp"}:
            raise UntrustedState("a record has unexpected fields")
        algorithm, digest, stamp_ = rec["algorithm"], rec["digest"], rec["stamp"]
        if algorithm not in ALGORITHMS:
            raise UntrustedState("a record names an unknown algorithm")
        if not is_lower_hex(digest, 64):
            raise UntrustedState("a record digest is not 64 hex digits")
        if not isinstance(stamp_, str) or not _STAMP.fullmatch(stamp_):
            raise UntrustedState("a record stamp is malformed")
        records[key] = Record(algorithm, digest, stamp_)
    return records


def _read_trusted(path: Path, lock_sha256: str) -> dict[str, Record]:
    """Records from ``path``; FileNotFoundError when absent, UntrustedState when not trusted.
    The state file is state, not evidence: whatever it holds costs a re-hash, never a crash."""
    return read_private_state(path, MAX_BYTES, lambda data: _parse(data, lock_sha256))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a non-UTF-8 file name (surrogate escapes): never cached
        return False
    return True


def settled(stamp: FileStamp, started_ns: int) -> bool:
    """True when the file's last change is old enough that a later change must move its times."""
    newest = max(stamp.mtime_ns, stamp.ctime_ns)
    second = 1_000_000_000
    coarse = stamp.mtime_ns % second == 0 and stamp.ctime_ns % second == 0
    return started_ns - newest >= (COARSE_SETTLE_NS if coarse else SETTLE_NS)


class VerifyCache:
    """The records for one lock, as loaded, plus this run's changes, saved with :meth:`save`."""

    def __init__(self, state_dir: Path, lock_sha256: str) -> None:
        self.path = state_dir / "verify" / f"{lock_sha256}.json"
        self.lock_sha256 = lock_sha256
        self._records: dict[str, Record] = {}
        self._touched: set[str] = set()
        self._dropped: set[str] = set()
        self._changed = False
        self._refused: K3kitError | None = None
        try:
            # The same private-folder check as the rollback state: a cache folder another user
            # can swap would let them choose which records are read. A refused folder is never
            # read nor written (every file is hashed); the report says why and how to fix it.
            self.path = private_dir(self.path.parent, what=_WHAT) / self.path.name
        except K3kitError as exc:  # an OSError of the folder check included (private_dir)
            why = f"{exc.code}: {exc.message}" + (f" (fix: {exc.hint})" if exc.hint else "")
            self._refused = EnvironmentProblem(why, code=exc.code, hint=exc.hint)
            self.status = f"refused ({why})"
            return
        try:
            self._records = _read_trusted(self.path, lock_sha256)
            self.status = "loaded"
        except FileNotFoundError:
            self.status = "empty"
        except UntrustedState as exc:
            self.status = f"ignored ({exc})"

    def lookup(self, real: str, stamp: FileStamp, algorithm: str, expected: str) -> bool:
        """True when a record proves the file at ``real`` still has ``expected`` as its digest."""
        rec = self._records.get(real)
        hit = (
            rec is not None
            and rec.algorithm == algorithm
            and rec.digest == expected
            and rec.stamp == stamp.encode()
        )
        if hit:
            self._touched.add(real)
        return hit

    def remember(
        self, real: str, digest: FileDigest, algorithm: str, expected: str, started_ns: int
    ) -> bool:
        """Record a file that just verified OK, if its stamp can be trusted to reveal a change."""
        if (
            digest.digests.get(algorithm) != expected
            or not digest.stable
            or not settled(digest.before, started_ns)
            or not real.isprintable()
            or not _encodable(real)
        ):
            self.forget(real)
            return False
        record = Record(algorithm, expected, digest.before.encode())
        self._changed |= self._records.get(real) != record
        self._records[real] = record
        self._touched.add(real)
        self._dropped.discard(real)
        return True

    def forget(self, real: str) -> None:
        self._changed |= self._records.pop(real, None) is not None
        self._touched.add(real)
        self._dropped.add(real)

    @property
    def needs_saving(self) -> bool:
        """False when the file on disk already says exactly this (a warm run writes nothing)."""
        return self._changed or self.status != "loaded"

    def _merged(self) -> dict[str, Record]:
        """This run's records over whatever another run saved meanwhile for other files."""
        try:
            on_disk = _read_trusted(self.path, self.lock_sha256)
        except (FileNotFoundError, UntrustedState):
            on_disk = {}
        merged = {k: v for k, v in on_disk.items() if k not in self._touched}
        for key in self._touched - self._dropped:
            if key in self._records:
                merged[key] = self._records[key]
        if len(merged) > MAX_RECORDS:
            merged = {k: merged[k] for k in self._touched if k in merged}
        return merged

    def save(self) -> None:
        """Write the records atomically (0600 in a 0700 directory); raises K3kitError on I/O."""
        if not self.needs_saving:
            return
        records = self._merged()
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "lock_sha256": self.lock_sha256,
            "records": {
                k: {"algorithm": r.algorithm, "digest": r.digest, "stamp": r.stamp}
                for k, r in sorted(records.items())
            },
        }
        if self._refused is not None:
            raise self._refused
        private_dir(self.path.parent, what=_WHAT)
        atomic_write(self.path, dumps(doc), mode=0o600, state=True)
