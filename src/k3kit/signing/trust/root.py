"""Verifying roots of trust and walking a chain of them: TUF's root update, on a kit.

The root of trust is TUF root metadata (:mod:`k3kit.signing.trust.tufroot` reads and verifies
one with python-tuf). The node pins one root (``--root 1.root.json``). A kit carries the chain
``root/<N>.root.json`` so an offline node can move forward from the kit alone; the node also keeps
every root it accepted under its state folder, so once it has seen root N+1 a kit that carries
only root N cannot take it back. Root N+1 is accepted only if it is exactly version N+1 and is
signed by the root-role threshold of **both** N and N+1 (distinct keys; a revoked key is in no
role, so it never counts): the old keys vouch for the change, the new keys prove they exist and
agree. A forged root in a kit is therefore useless, and a root signed only by new keys is refused.
Only the final root must be unexpired, judged at the run's start: a node may walk through roots
that expired long ago to reach the current one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from k3kit._digest import sha256_hex  # not hashlib: see k3kit._digest.SMALL_BYTES
from k3kit._fs import MAX_ROOT_BYTES as MAX_ROOT_BYTES  # the root-chain rule's home; re-exported
from k3kit._fs import MAX_ROOTS as MAX_ROOTS
from k3kit._fs import ROOT_DIR as ROOT_DIR
from k3kit._fs import (
    atomic_write,
    is_root_entry,
    read_capped,
    root_chain_names,
    walk,
)
from k3kit._immutable import EMPTY_MAPPING, NamedTuple
from k3kit._values import format_timestamp, parse_timestamp
from k3kit.errors import InputError, VerificationError
from k3kit.signing.keys import PublicKey
from k3kit.signing.trust import rollback
from k3kit.signing.trust.policy import Revoked, Trust, TrustedKey

if TYPE_CHECKING:  # python-tuf and the custom fields' model: imported where a root is parsed
    from tuf.api.metadata import Root

    from k3kit.signing.trust.model import RootRules


# VerifiedRoot and RootAnchor are NamedTuples, not frozen dataclasses: immutable records all the
# same, and every verify (a node's start-up) imports this module, where creating the two frozen
# dataclasses cost ~1.5 ms of CPU and the NamedTuples ~0.3 ms (docs/performance.md, "Start-up").
class VerifiedRoot(NamedTuple):
    """A root read by :func:`k3kit.signing.trust.tufroot.parse`: python-tuf's metadata, the k3kit
    custom fields, the exact bytes, and the public keys by recomputed key id."""

    md: Any  # tuf.api.metadata.Metadata[Root]; Any keeps python-tuf off this module's import
    rules: RootRules
    data: bytes
    keys: dict[str, PublicKey]

    @property
    def root(self) -> Root:
        out: Root = self.md.signed
        return out

    @property
    def version(self) -> int:
        return self.root.version

    @property
    def expires(self) -> str:
        return format_timestamp(self.root.expires)


def verify_root(data: bytes, *, trusted: VerifiedRoot | None, source: str) -> VerifiedRoot:
    """Verify a root: alone (the pinned root, self-signed) or as the successor of ``trusted``
    (exactly the next version, signed by both root-role thresholds)."""
    from k3kit.signing.trust import tufroot  # python-tuf: only where a root is read

    return tufroot.verify(data, trusted=trusted, source=source)


def unverified_version(data: bytes, source: str) -> int:
    """A root's version before its signatures are checked: only to bound which of a kit's
    ``root/<N>.root.json`` can matter."""
    from k3kit.signing.trust import tufroot

    return tufroot.parse(data, source).version


def kit_roots(kit_dir: Path) -> CarriedRoots:
    """The root chain a kit folder carries (``root/<N>.root.json``), by the one rule."""
    return read_roots(kit_dir / ROOT_DIR)


def read_roots(folder: Path) -> CarriedRoots:
    """Root files by version from ``folder`` (absent: none), read when the walk asks for them;
    anything but regular ``<N>.root.json`` files there is ``ROOT_CHAIN_MALFORMED``."""
    if not folder.exists() and not folder.is_symlink():
        return CarriedRoots({}, _no_read)
    kind = "symlink" if folder.is_symlink() else "dir" if folder.is_dir() else "file"
    walked = walk(folder) if kind == "dir" else iter(())
    inside = ((f"{ROOT_DIR}/{e.rel}", e.kind, e.size) for e in walked)
    # a generator: the rule stops the walk at the first entry it refuses (a root/ of a million
    # files costs MAX_ROOTS + 1 of them)
    names = root_chain_names(itertools.chain([(ROOT_DIR, kind, 0)], inside))

    def read(rel: str) -> bytes:
        return read_capped(
            folder / rel.removeprefix(ROOT_DIR + "/"),
            MAX_ROOT_BYTES,
            what=rel,
            error=VerificationError,
            code="ROOT_CHAIN_MALFORMED",
        )

    return CarriedRoots(names, read)


def indexed_roots(
    members: Iterable[tuple[str, str, int]], kept: Mapping[str, bytes]
) -> CarriedRoots:
    """The root chain of an archive, from its tar index before extraction, by the same rule as
    a folder's (:func:`k3kit._fs.root_chain_names`): every version its ``root/`` holds, so a
    root beyond the walk's reach is a ``ROOT_CHAIN_GAP`` here as in the folder. ``kept`` holds
    the bytes of the versions a walk can reach (the only ones it reads)."""
    names = root_chain_names(m for m in members if is_root_entry(m[0]))

    def read(rel: str) -> bytes:
        if rel not in kept:  # never asked: the walk reads only the versions it can reach
            raise VerificationError(f"{rel} was not read from the archive", code="ROOT_CHAIN_GAP")
        return kept[rel]

    return CarriedRoots(names, read)


class CarriedRoots(Mapping[int, bytes]):
    """The roots a kit (or the node's state folder) carries, by version: every version present,
    each read on first use, so a folder and an archive hand the walk the same versions."""

    def __init__(self, names: Mapping[int, str], read: Callable[[str], bytes]) -> None:
        self._names, self._read = dict(names), read

    def __getitem__(self, version: int) -> bytes:
        return self._read(self._names[version])

    def __contains__(self, version: object) -> bool:  # by name: Mapping's would read the file
        return version in self._names

    def __iter__(self) -> Iterator[int]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _no_read(rel: str) -> bytes:
    raise KeyError(rel)


class RootAnchor(NamedTuple):
    """A pinned root plus where this node keeps the roots it has accepted since.

    ``now`` is taken once by the caller (the start of the run) and is the only clock expiry is
    judged by; ``state_dir`` None means nothing is remembered (and nothing persists).
    ``also`` holds roots by version from another carrier of the same chain (the maintenance
    channel's, :func:`with_channel_roots`): offered like a kit's, and verified the same way.
    """

    pinned: bytes
    source: str
    state_dir: Path | None
    now: str
    # read-only empty default: a NamedTuple's default is shared by every instance
    also: Mapping[int, bytes] = EMPTY_MAPPING

    def _pin_id(self) -> str:
        return sha256_hex(self.pinned)[:32]

    def _now(self) -> datetime:
        try:
            return parse_timestamp(self.now)
        except ValueError as exc:
            raise InputError(f"the current time: {exc}", code="BAD_INPUT") from None

    def reachable_versions(self) -> range:
        """The root versions a kit can contribute: the walk goes at most ``MAX_ROOTS`` steps past
        the pinned root, so only these of a kit's ``root/<N>.root.json`` can ever be read."""
        first = unverified_version(self.pinned, self.source) + 1
        return range(first, first + MAX_ROOTS)

    def resolve(
        self, kit_dir: Path | None, *, offered: Mapping[int, bytes] | None = None
    ) -> tuple[Trust, list[int]]:
        """Walk pinned -> state -> kit roots; returns the trust of the final root and the
        versions newly accepted (persisted under the state folder before returning).

        The kit's roots are read from ``kit_dir``, or given as ``offered`` (by version) when they
        are still members of an archive that is checked before it is extracted.

        The roots this node accepted carry its revocation memory, so they sit in the private state
        folder, and the highest version accepted is also written in ``rollback.json``: a root
        folder that lost versions (deleted, renamed) is ``STATE_LOST``, not a way back to a root
        that still trusts a revoked key."""
        current = verify_root(self.pinned, trusted=None, source=self.source)
        folder, accepted = (
            rollback.accepted_root(self.state_dir, self._pin_id())
            if self.state_dir is not None
            else (None, None)
        )
        known = read_roots(folder) if folder is not None else {}
        if kit_dir is not None:
            offered = kit_roots(kit_dir)
        sources = (("state", known), ("channel", self.also), ("kit", offered or {}))
        current, walked = _walk(current, sources)
        new = [v for v in walked if v not in known]
        if accepted is not None and current.version < accepted:
            raise VerificationError(
                f"this node accepted root version {accepted}, but only version "
                f"{current.version} can be reached: accepted roots were removed from "
                f"{folder}",
                code="STATE_LOST",
                hint="restore the state folder from a backup (or use a kit that carries the "
                f"root chain up to version {accepted})",
            )
        if current.root.is_expired(self._now()):
            raise VerificationError(
                f"root version {current.version} expired at {current.expires}",
                code="ROOT_EXPIRED",
                hint="get a newer root (or a kit that carries one) from the publisher",
            )
        if folder is not None and self.state_dir is not None:
            for v in new:
                atomic_write(folder / f"{v}.root.json", walked[v].data, mode=0o600)
            rollback.note_root(self.state_dir, self._pin_id(), current.version)
        return trust_of(current), new


_T = TypeVar("_T")


def with_channel_roots(trusted: _T, pinned: bytes, folder: Path) -> _T:
    """``trusted`` with the roots the channel's updater accepted (``folder/<N>.root.json``,
    python-tuf's ``root_history/``) offered to the walk, when ``trusted`` is a root anchor on
    the very root that pins the channel: one root, so a release key the channel rotated in
    verifies the kit it lists. Anything else is returned unchanged. The roots are read only
    consecutively from the pinned version on, capped, and verified by the walk like a kit's.

    With a state folder they are also walked and recorded **now**, among the roots this node
    accepted, before anything else the update does can fail: a root the channel moved the node
    to is then the node's, so a kit offering another root of that version later (a thief of a
    rotated-out root key) is ``ROOT_FORK``, not silently preferred. And a server that stands on
    an older root than the node holds (from a kit) is ``CHANNEL_ROLLBACK``: python-tuf starts
    from the pin and follows only what the server serves, so a mirror withholding the root that
    removed a leaked timestamp key had the node accept the thief's timestamps."""
    if not isinstance(trusted, RootAnchor) or trusted.pinned != pinned:
        return trusted
    roots: dict[int, bytes] = {}
    reachable = trusted.reachable_versions()
    # One version past the walk's reach is read too: a channel that moved further must stop
    # the walk (ROOT_CHAIN_GAP), not be followed half-way while python-tuf stands further on.
    for v in range(reachable.start, reachable.stop + 1):
        path = folder / f"{v}.root.json"
        if not path.is_file():
            break
        roots[v] = read_capped(
            path, MAX_ROOT_BYTES, what=str(path), error=VerificationError, code="ROOT_MALFORMED"
        )
    anchor = trusted._replace(also=roots)
    if anchor.state_dir is not None:
        held = anchor.resolve(None)[0].root_version
        served = max(roots, default=reachable.start - 1)
        if held is not None and held > served:
            raise VerificationError(
                f"the channel's server stands on root version {served}, but this node holds "
                f"root version {held} of the same pin: the server withholds a root rotation "
                "(its metadata would be judged by keys the newer root may have removed)",
                code="CHANNEL_ROLLBACK",
                hint="use another mirror of the channel, or ask its operator to copy it again",
            )
    return anchor


Sources = Sequence[tuple[str, Mapping[int, bytes]]]
"""Carriers of roots by version, first wins: the node's accepted roots, the channel's, a kit's."""


def _walk(current: VerifiedRoot, sources: Sources) -> tuple[VerifiedRoot, dict[int, VerifiedRoot]]:
    """Follow the chain from ``current``, version N+1 taken from the first source that has it;
    returns the last root reached and every root walked past ``current``, by version. Then no
    source may hold another root of a version walked (:func:`_one_lineage`)."""
    walked: dict[int, VerifiedRoot] = {}
    start = current
    for _ in range(MAX_ROOTS):
        v = current.version + 1
        found = next(((where, roots[v]) for where, roots in sources if v in roots), None)
        if found is None:
            break
        where, data = found
        current = verify_root(data, trusted=current, source=f"{where} root {v}.root.json")
        walked[v] = current
    beyond = sorted(v for _, roots in sources for v in roots if v > current.version)
    if beyond and len(walked) == MAX_ROOTS:
        raise VerificationError(
            f"root {beyond[0]}.root.json is more than {MAX_ROOTS} versions past the pinned "
            f"root (version {start.version}): the walk stops at version {current.version}",
            code="ROOT_CHAIN_GAP",
            hint=f"pin a newer root (version {current.version} or later, checked out of band)",
        )
    if beyond:
        raise VerificationError(
            f"root {beyond[0]}.root.json cannot be reached from version "
            f"{current.version}: the chain has a gap",
            code="ROOT_CHAIN_GAP",
        )
    _one_lineage(start, walked, sources)
    return current, walked


def _one_lineage(start: VerifiedRoot, walked: Mapping[int, VerifiedRoot], sources: Sources) -> None:
    """Refuse a second root of a version the walk accepted. It is verified as that version's
    successor like any root (so a kit's verdict does not depend on which roots the node already
    holds: an unsigned one fails as it would on a fresh node); one that verifies and differs in
    its signed part (more signatures on the same part are the same root) is ``ROOT_FORK``: two
    version-N+1 roots signed by N's root keys mean a root key was stolen or misused. Without
    this the first source silently won, so a thief of a rotated-out root key could hand a node
    that had already walked the channel to the real root 2 a kit carrying their own root 2."""
    for where, roots in sources:
        for v in roots:  # only the versions walked are read (a kit's roots are read on use)
            chosen = walked.get(v)
            if chosen is None or (data := roots[v]) == chosen.data:
                continue
            source = f"{where} root {v}.root.json"
            other = verify_root(data, trusted=walked.get(v - 1, start), source=source)
            if other.md.signed_bytes != chosen.md.signed_bytes:
                raise VerificationError(
                    f"{source} is another root version {v} than the one this node accepted: "
                    f"the root keys of version {v - 1} signed two different successors",
                    code="ROOT_FORK",
                    hint="do not use these roots and tell the publisher (a root key was stolen "
                    "or misused); the node keeps the root it accepted",
                )


def trust_of(root: VerifiedRoot) -> Trust:
    """The release rules of a verified root: the TUF ``targets`` role's keys and threshold sign
    receipts, with the k3kit windows, revocations and floors."""
    rules = root.rules
    release = root.root.roles["targets"]
    keys = tuple(
        TrustedKey(
            kid,
            root.keys[kid],
            rules.key_validity[kid].not_before if kid in rules.key_validity else None,
            rules.key_validity[kid].not_after if kid in rules.key_validity else None,
        )
        for kid in release.keyids
    )
    revoked = {kid: Revoked(root.keys[kid], r.reason, r.since) for kid, r in rules.revoked.items()}
    return Trust(
        keys,
        release.threshold,
        revoked,
        dict(rules.min_sequence),
        root.version,
        f"root version {root.version} (expires {root.expires}): release (targets) role "
        f"{release.threshold} of {len(keys)} key(s), {len(revoked)} revoked",
    )
