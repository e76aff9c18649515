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

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from k3kit._fs import atomic_write, read_capped, walk
from k3kit._values import format_timestamp, parse_timestamp
from k3kit.errors import InputError, VerificationError
from k3kit.signing.trust import rollback
from k3kit.signing.trust.policy import Revoked, Trust, TrustedKey

if TYPE_CHECKING:  # python-tuf and the custom fields' model: imported where a root is parsed
    from tuf.api.metadata import Root

    from k3kit.signing.trust.model import RootRules

MAX_ROOT_BYTES = 64 * 1024
MAX_ROOTS = 64
ROOT_DIR = "root"
_NAME = re.compile(r"^([1-9][0-9]{0,8})\.root\.json$")


@dataclass(frozen=True)
class VerifiedRoot:
    """A root read by :func:`k3kit.signing.trust.tufroot.parse`: python-tuf's metadata, the k3kit
    custom fields, the exact bytes, and the public keys by recomputed key id."""

    md: Any  # tuf.api.metadata.Metadata[Root]; Any keeps python-tuf off this module's import
    rules: RootRules
    data: bytes
    keys: dict[str, Ed25519PublicKey]

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


def kit_roots(kit_dir: Path) -> dict[int, bytes]:
    """The root chain a kit carries: only regular files named ``<N>.root.json`` under ``root/``."""
    return read_roots(kit_dir / ROOT_DIR)


def read_roots(folder: Path) -> dict[int, bytes]:
    """Root files by version from ``folder`` (absent: none); anything else there is refused."""
    if not folder.exists() and not folder.is_symlink():
        return {}
    if folder.is_symlink() or not folder.is_dir():
        raise VerificationError(f"{ROOT_DIR}/ is not a directory", code="ROOT_CHAIN_MALFORMED")
    out: dict[int, bytes] = {}
    for entry in walk(folder):
        m = _NAME.match(entry.rel)
        if entry.kind != "file" or not m:
            raise VerificationError(
                f"{ROOT_DIR}/{entry.rel}: only regular files named <N>.root.json belong there",
                code="ROOT_CHAIN_MALFORMED",
            )
        if len(out) >= MAX_ROOTS:
            raise VerificationError(f"more than {MAX_ROOTS} roots", code="ROOT_CHAIN_MALFORMED")
        out[int(m.group(1))] = read_capped(
            folder / entry.rel,
            MAX_ROOT_BYTES,
            what=f"{ROOT_DIR}/{entry.rel}",
            error=VerificationError,
            code="ROOT_CHAIN_MALFORMED",
        )
    return out


@dataclass(frozen=True)
class RootAnchor:
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
    also: Mapping[int, bytes] = field(default_factory=dict)

    def _pin_id(self) -> str:
        return hashlib.sha256(self.pinned).hexdigest()[:32]

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
        offered = {**self.also, **(offered or {})}
        current, new = _walk(current, known, offered)
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
                atomic_write(folder / f"{v}.root.json", offered[v], mode=0o600)
            rollback.note_root(self.state_dir, self._pin_id(), current.version)
        return trust_of(current), new


_T = TypeVar("_T")


def with_channel_roots(trusted: _T, pinned: bytes, folder: Path) -> _T:
    """``trusted`` with the roots the channel's updater accepted (``folder/<N>.root.json``,
    python-tuf's ``root_history/``) offered to the walk, when ``trusted`` is a root anchor on
    the very root that pins the channel: one root, so a release key the channel rotated in
    verifies the kit it lists. Anything else is returned unchanged. The roots are read only
    consecutively from the pinned version on, capped, and verified by the walk like a kit's."""
    if not isinstance(trusted, RootAnchor) or trusted.pinned != pinned:
        return trusted
    roots: dict[int, bytes] = {}
    for v in trusted.reachable_versions():
        path = folder / f"{v}.root.json"
        if not path.is_file():
            break
        roots[v] = read_capped(
            path, MAX_ROOT_BYTES, what=str(path), error=VerificationError, code="ROOT_MALFORMED"
        )
    return replace(trusted, also=roots)


def _walk(
    current: VerifiedRoot, known: dict[int, bytes], offered: dict[int, bytes]
) -> tuple[VerifiedRoot, list[int]]:
    """Follow the chain from ``current`` through the node's roots, then the kit's; returns the
    last root reached and the versions that came from the kit."""
    new: list[int] = []
    for _ in range(MAX_ROOTS):
        v = current.version + 1
        data = known.get(v, offered.get(v))
        if data is None:
            break
        where = "state" if v in known else "kit"
        current = verify_root(data, trusted=current, source=f"{where} root {v}.root.json")
        if v not in known:
            new.append(v)
    beyond = sorted(v for v in (*known, *offered) if v > current.version)
    if beyond:
        raise VerificationError(
            f"root {beyond[0]}.root.json cannot be reached from version "
            f"{current.version}: the chain has a gap",
            code="ROOT_CHAIN_GAP",
        )
    return current, new


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
