"""The publisher's channel repository: TUF metadata written with python-tuf's Metadata API.

Layout of ``REPO`` (servable as it is from any static HTTP host; ``consistent_snapshot`` is on,
so a client reading while a publish runs never mixes two views)::

    metadata/N.root.json            every root version, kept (clients walk the chain)
    metadata/root.json              a copy of the newest root (for people and mirrors)
    metadata/N.targets.json         targets role: one entry per kit version
    metadata/N.snapshot.json        snapshot role: the version, length and hash of targets
    metadata/timestamp.json         timestamp role: the snapshot's version, length and hash
    targets/CHANNEL/PACKAGE/<sha256>.VERSION.kit.tar.gz

Each target (``CHANNEL/PACKAGE/VERSION.kit.tar.gz``) carries ``custom`` fields the buyer's
update reads once the targets role verified: ``package``, ``version``, ``sequence``,
``kit_sha256`` and ``released_at`` (the kit receipt's ``issued_at``). The timestamp is written
last, so the files it names are in place before any client is told about them.
"""

from __future__ import annotations

import copy
import fcntl
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from tuf.api.metadata import (
    Metadata,
    MetaFile,
    Role,
    Root,
    Signed,
    Snapshot,
    TargetFile,
    Targets,
    Timestamp,
)
from tuf.api.serialization.json import JSONSerializer

from k3kit._fs import atomic_write, open_nofollow, read_capped
from k3kit.channel.tufsigner import K3kitTufSigner, tuf_key
from k3kit.errors import InputError
from k3kit.signing.keys import PublicKey
from k3kit.signing.signers import Signer

ROLES = ("root", "targets", "snapshot", "timestamp")
_S = TypeVar("_S", bound=Signed)
MAX_METADATA_BYTES = 5_000_000  # python-tuf's own cap on targets metadata
_SERIALIZER = JSONSerializer(compact=False)


@dataclass(frozen=True)
class Expiries:
    """How long each role's signature stays valid. The timestamp is short on purpose: a client
    refuses a channel whose timestamp has expired, so a server that keeps serving an old view
    (a freeze) is found out within this time. Renew it with ``k3kit channel timestamp``."""

    root: timedelta = timedelta(days=365)
    targets: timedelta = timedelta(days=90)
    snapshot: timedelta = timedelta(days=7)
    timestamp: timedelta = timedelta(days=1)


#: The timestamp lifetimes a publisher may choose (``--timestamp-hours`` 1 to 744): a longer one
#: would let a mirror that stopped following (a freeze) go unnoticed for that long.
TIMESTAMP_LIFETIME_RANGE = (timedelta(hours=1), timedelta(days=31))


def timestamp_expiries(lifetime: timedelta) -> Expiries:
    """The expiries with the timestamp valid for ``lifetime``, refused outside
    :data:`TIMESTAMP_LIFETIME_RANGE` (``BAD_INPUT``): one rule for the CLI and the API."""
    shortest, longest = TIMESTAMP_LIFETIME_RANGE
    if not shortest <= lifetime <= longest:
        raise InputError(
            f"a timestamp valid for {lifetime} is outside {shortest} to {longest}",
            code="BAD_INPUT",
            hint="a buyer finds a frozen channel out only when the timestamp expires: keep it "
            "short and renew it from cron (`k3kit channel timestamp`)",
        )
    return Expiries(timestamp=lifetime)


@dataclass(frozen=True)
class Release:
    """What the channel says about one kit version (the target's ``custom`` fields)."""

    path: str
    package: str
    version: str
    sequence: int
    kit_sha256: str
    released_at: str

    def custom(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "version": self.version,
            "sequence": self.sequence,
            "kit_sha256": self.kit_sha256,
            "released_at": self.released_at,
        }


def _metadata_dir(repo: Path) -> Path:
    return repo / "metadata"


def _repo_problem(repo: Path, why: str) -> InputError:
    return InputError(
        f"{repo}: {why}",
        code="CHANNEL_REPO_INVALID",
        hint="create the channel first with `k3kit channel init --repo DIR ...`",
    )


def _read(path: Path) -> Metadata[Any]:
    data = read_capped(
        path,
        MAX_METADATA_BYTES,
        what="channel metadata",
        error=InputError,
        code="CHANNEL_REPO_INVALID",
    )
    try:
        return Metadata.from_bytes(data)
    except Exception as exc:  # python-tuf's DeserializationError and friends
        raise _repo_problem(path.parent.parent, f"{path.name} is not TUF metadata: {exc}") from exc


def _role_signers(role: str, root: Root, signers: Sequence[Signer]) -> list[K3kitTufSigner]:
    """The given signers the root names for ``role``, one per key; fewer than the role's
    threshold is ``CHANNEL_KEYS_MISSING``. Checked for every role a publish signs before
    anything is written, so a missing key leaves the channel as it was."""
    wanted = root.roles[role]
    chosen: dict[str, K3kitTufSigner] = {}
    for signer in signers:
        adapter = K3kitTufSigner(signer)
        if adapter.keyid in wanted.keyids:
            chosen.setdefault(adapter.keyid, adapter)
    if len(chosen) < wanted.threshold:
        raise InputError(
            f"the {role} role of root version {root.version} needs {wanted.threshold} of its "
            f"{len(wanted.keyids)} keys; the --key signers given hold {len(chosen)}",
            code="CHANNEL_KEYS_MISSING",
            hint=f"give --key for the {role} keys of the channel's root (key ids: "
            f"{', '.join(sorted(wanted.keyids))})",
        )
    return list(chosen.values())


def _sign(md: Metadata[Any], role: str, root: Root, signers: Sequence[Signer]) -> None:
    """Sign ``md`` with every given signer the root names for ``role`` (at least its threshold)."""
    md.signatures.clear()
    for adapter in _role_signers(role, root, signers):
        md.sign(adapter, append=True)


def init_channel(
    repo: Path,
    keys: dict[str, list[PublicKey]],
    thresholds: dict[str, int],
    root_signers: Sequence[Signer],
    *,
    now: datetime,
    expires: Expiries = Expiries(),
) -> Path:
    """Create ``repo/metadata/1.root.json``: the four roles' keys and thresholds, signed by the
    root keys given. Returns the root file, which buyers pin (``update --channel-root``)."""
    meta = _new_channel(repo)
    root = Root(expires=now + expires.root, consistent_snapshot=True)
    for role in ROLES:
        given = keys.get(role) or []
        threshold = thresholds.get(role, 1)
        if not 1 <= threshold <= len(given):
            raise InputError(
                f"the {role} role has {len(given)} keys and a threshold of {threshold}",
                code="CHANNEL_REPO_INVALID",
                hint=f"give at least {threshold} --{role}-key public keys",
            )
        root.roles[role] = Role([], threshold)
        for public in given:
            root.add_key(tuf_key(public), role)
    md = Metadata(root)
    _sign(md, "root", root, root_signers)
    data = md.to_bytes(_SERIALIZER)
    _as_trust_root(data, "the new channel root", "CHANNEL_REPO_INVALID")
    first = meta / "1.root.json"
    atomic_write(first, data)
    atomic_write(meta / "root.json", data)
    return first


def _new_channel(repo: Path) -> Path:
    """``repo``'s metadata folder, refused when it is a channel already."""
    meta = _metadata_dir(repo)
    if meta.exists() or meta.is_symlink():
        raise InputError(
            f"{meta} exists: this is a channel already",
            code="CHANNEL_REPO_INVALID",
            hint="publish to it, or choose an empty folder for a new channel",
        )
    return meta


def _as_trust_root(data: bytes, source: str, code: str) -> None:
    """Refuse a channel root k3kit's own reader would refuse (the one root format: a buyer pins
    the channel's ``1.root.json`` for ``verify --root`` and ``install --root`` too)."""
    from k3kit.signing.trust import tufroot

    tufroot.parse(data, source, error=InputError, code=code)


def adopt_roots(repo: Path, chain: Sequence[tuple[bytes, str]]) -> Path:
    """Start a channel from the publisher's root of trust (``k3kit root create``, and any later
    versions made with the ``root`` verbs): the chain, oldest first from version 1, is verified
    as a node verifies it and copied byte for byte to ``metadata/N.root.json``. Returns
    ``1.root.json``, which buyers pin for ``update`` and ``verify``/``install`` alike."""
    from k3kit.signing.trust.root import VerifiedRoot, verify_root

    meta = _new_channel(repo)
    verified: list[VerifiedRoot] = []
    for data, source in chain:
        verified.append(
            verify_root(data, trusted=verified[-1] if verified else None, source=source)
        )
    if not verified or verified[0].version != 1:
        raise InputError(
            "a channel's root chain starts at version 1",
            code="CHANNEL_REPO_INVALID",
            hint="give --root 1.root.json first, then each later version in order",
        )
    newest = verified[-1]
    if newest.root.is_expired(utc_now()):
        raise InputError(
            f"root version {newest.version} expired at {newest.expires}: every buyer would "
            "refuse the channel (CHANNEL_FROZEN)",
            code="CHANNEL_REPO_INVALID",
            hint="give a later root too (`k3kit root floor` or `rotate` with a later --expires, "
            "signed by the root keys)",
        )
    if not verified[-1].root.consistent_snapshot:
        raise InputError(
            f"root version {verified[-1].version} has consistent_snapshot off",
            code="CHANNEL_REPO_INVALID",
            hint="`k3kit root create` turns it on; a channel is served with versioned files",
        )
    for entry in verified:
        atomic_write(meta / f"{entry.version}.root.json", entry.data)
    atomic_write(meta / "root.json", verified[-1].data)
    return meta / "1.root.json"


def latest_root(repo: Path) -> tuple[int, Metadata[Root]]:
    """The newest ``N.root.json`` of ``repo`` (the chain has no gaps: each is kept)."""
    meta = _metadata_dir(repo)
    version = 0
    while (meta / f"{version + 1}.root.json").is_file():
        version += 1
    if version == 0:
        raise _repo_problem(repo, "no metadata/1.root.json")
    md = _read(meta / f"{version}.root.json")
    if not isinstance(md.signed, Root):
        raise _repo_problem(repo, f"{version}.root.json is not root metadata")
    return version, md


def _current(repo: Path) -> tuple[Metadata[Targets], Metadata[Snapshot], Metadata[Timestamp]]:
    """The channel's current targets, snapshot and timestamp (new, empty ones before the first
    publish), found the way a client finds them: timestamp, then snapshot, then targets."""
    meta = _metadata_dir(repo)
    if not (meta / "timestamp.json").is_file():
        return (
            Metadata(_unpublished(Targets())),
            Metadata(_unpublished(Snapshot())),
            Metadata(_unpublished(Timestamp())),
        )
    timestamp = _read(meta / "timestamp.json")
    snapshot = _read(meta / f"{timestamp.signed.snapshot_meta.version}.snapshot.json")
    targets_version = snapshot.signed.meta["targets.json"].version
    targets = _read(meta / f"{targets_version}.targets.json")
    return targets, snapshot, timestamp


def _unpublished(signed: _S) -> _S:
    """A role before its first version (python-tuf refuses to construct version 0)."""
    signed.version = 0
    return signed


def _bump(signed: Signed, now: datetime, lifetime: timedelta) -> None:
    signed.version += 1
    signed.expires = now + lifetime


def _commit(
    repo: Path,
    targets: Metadata[Targets] | None,
    snapshot: Metadata[Snapshot],
    timestamp: Metadata[Timestamp],
    signers: Sequence[Signer],
    *,
    now: datetime,
    expires: Expiries,
) -> None:
    """Sign and write a new view: targets (when changed), then snapshot, then timestamp."""
    _, root_md = latest_root(repo)
    resign = frozenset({"targets", "snapshot"}) if targets is not None else frozenset()
    view = (targets or Metadata(_unpublished(Targets())), snapshot, timestamp)
    files, stamp = _next_view(repo, root_md.signed, view, signers, resign, now=now, expires=expires)
    _write_view(repo, files, stamp)


def _next_view(
    repo: Path,
    root: Root,
    view: tuple[Metadata[Targets], Metadata[Snapshot], Metadata[Timestamp]],
    signers: Sequence[Signer],
    resign: frozenset[str],
    *,
    now: datetime,
    expires: Expiries,
) -> tuple[list[tuple[Path, bytes]], bytes]:
    """Sign, in memory, the next versions of the roles in ``resign`` (targets, snapshot) and
    always the next timestamp, with the keys ``root`` names. Returns the versioned files in the
    order to write them, and the timestamp's bytes (written last). Nothing is written here: a
    missing key (``CHANNEL_KEYS_MISSING``) or a failing signer leaves the channel as it was."""
    targets, snapshot, timestamp = view
    meta = _metadata_dir(repo)
    files: list[tuple[Path, bytes]] = []
    if "targets" in resign:
        _bump(targets.signed, now, expires.targets)
        _sign(targets, "targets", root, signers)
        data = targets.to_bytes(_SERIALIZER)
        snapshot.signed.meta["targets.json"] = MetaFile.from_data(
            targets.signed.version, data, ["sha256"]
        )
        files.append((meta / f"{targets.signed.version}.targets.json", data))
    if "snapshot" in resign:
        _bump(snapshot.signed, now, expires.snapshot)
        _sign(snapshot, "snapshot", root, signers)
    snapshot_bytes = snapshot.to_bytes(_SERIALIZER)
    if "snapshot" in resign:
        files.append((meta / f"{snapshot.signed.version}.snapshot.json", snapshot_bytes))
    _bump(timestamp.signed, now, expires.timestamp)
    timestamp.signed.snapshot_meta = MetaFile.from_data(
        snapshot.signed.version, snapshot_bytes, ["sha256"]
    )
    _sign(timestamp, "timestamp", root, signers)
    return files, timestamp.to_bytes(_SERIALIZER)


def _write_view(repo: Path, files: list[tuple[Path, bytes]], stamp: bytes) -> None:
    """Write the versioned files, then the timestamp that names them.

    ``force`` on the versioned files: a file of a version no timestamp names yet can only be
    what a publish or rotation killed before its timestamp left; no client can have read it as
    part of a view."""
    for path, data in files:
        atomic_write(path, data, force=True)
    atomic_write(_metadata_dir(repo) / "timestamp.json", stamp, force=True)


def publish_release(
    repo: Path,
    archive: Path,
    release: Release,
    signers: Sequence[Signer],
    *,
    now: datetime,
    expires: Expiries = Expiries(),
) -> bool:
    """Add ``archive`` as ``release`` to the channel in ``repo``; False when that exact archive
    is already published there. Another archive under the same path is ``CHANNEL_VERSION_EXISTS``
    (a published version is never replaced: buyers may have installed it)."""
    with _publish_lock(repo):
        return _publish_locked(repo, archive, release, signers, now=now, expires=expires)


@contextmanager
def _publish_lock(repo: Path) -> Iterator[None]:
    """One publish (or timestamp renewal) at a time per repository: two would read the same
    current view and write the same next version numbers."""
    if not (_metadata_dir(repo) / "1.root.json").is_file():
        raise _repo_problem(repo, "no metadata/1.root.json")
    fd = open_nofollow(repo / ".k3kit-publish.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _publish_locked(
    repo: Path,
    archive: Path,
    release: Release,
    signers: Sequence[Signer],
    *,
    now: datetime,
    expires: Expiries,
) -> bool:
    _, root = latest_root(repo)
    for role in ("targets", "snapshot", "timestamp"):
        _role_signers(role, root.signed, signers)
    targets, snapshot, timestamp = _current(repo)
    target = TargetFile.from_file(release.path, str(archive), ["sha256"])
    target.unrecognized_fields["custom"] = release.custom()
    existing = targets.signed.targets.get(release.path)
    if existing is not None:
        if existing.hashes == target.hashes:
            return False
        raise InputError(
            f"{release.path} is already published with other bytes",
            code="CHANNEL_VERSION_EXISTS",
            hint="a released version is never replaced: release the change as a new version",
        )
    digest = target.hashes["sha256"]
    folder, name = release.path.rsplit("/", 1)
    stored = repo / "targets" / folder / f"{digest}.{name}"
    stored.parent.mkdir(parents=True, exist_ok=True)
    staged = stored.with_name(f".{stored.name}.tmp")
    shutil.copyfile(archive, staged)
    staged.replace(stored)
    targets.signed.targets[release.path] = target
    _commit(repo, targets, snapshot, timestamp, signers, now=now, expires=expires)
    return True


def renew_timestamp(
    repo: Path, signers: Sequence[Signer], *, now: datetime, expires: Expiries = Expiries()
) -> int:
    """Re-sign the timestamp (run daily, by cron): the channel stays fresh without a release.
    Returns the new timestamp version."""
    with _publish_lock(repo):
        latest_root(repo)
        _, snapshot, timestamp = _current(repo)
        if timestamp.signed.version == 0:
            raise _repo_problem(repo, "nothing is published yet (no timestamp to renew)")
        _commit(repo, None, snapshot, timestamp, signers, now=now, expires=expires)
        return timestamp.signed.version


@dataclass(frozen=True)
class KeyChange:
    """What a rotation changes in one role: keys added, key ids removed (revoked: clients refuse
    what they sign from the new root on), and the threshold (``None``: unchanged)."""

    role: str
    add: tuple[PublicKey, ...] = ()
    remove: tuple[str, ...] = ()
    threshold: int | None = None


@dataclass(frozen=True)
class Rotation:
    """What :func:`rotate_keys` wrote: the new root and the roles re-signed under it."""

    root: Path
    version: int
    keyids: tuple[str, ...]
    threshold: int
    resigned: tuple[str, ...]


#: The roles a key change makes stale: the role itself and every role that names its files
#: (a new targets version needs a new snapshot, which needs a new timestamp). A root change
#: needs none: the current timestamp, snapshot and targets stay valid under the new root.
_DOWNSTREAM = {
    "root": (),
    "targets": ("targets", "snapshot", "timestamp"),
    "snapshot": ("snapshot", "timestamp"),
    "timestamp": ("timestamp",),
}


def _stale(old: Root, new: Root, role: str) -> tuple[str, ...]:
    """The roles to re-sign under ``new``: downstream of ``role`` and of every other role whose
    keys or threshold the rotation changed (a removed key leaves every role it held)."""
    changed = {role} | {
        name
        for name in ROLES
        if (old.roles[name].keyids, old.roles[name].threshold)
        != (new.roles[name].keyids, new.roles[name].threshold)
    }
    stale = {r for name in changed for r in _DOWNSTREAM[name]}
    return tuple(r for r in ROLES if r in stale)


def _rotation_problem(why: str, hint: str) -> InputError:
    return InputError(why, code="CHANNEL_ROTATION_INVALID", hint=hint)


def _changed_root(old: Root, change: KeyChange, *, now: datetime, expires: Expiries) -> Root:
    """Root N+1: ``old`` with ``change`` applied, checked to be a root its own keys can meet
    (every role keeps at least one key and a threshold it can reach)."""
    root = copy.deepcopy(old)  # Root.from_dict(old.to_dict()) would share the keyid lists
    role = root.roles[change.role]
    for keyid in change.remove:
        if keyid not in role.keyids:
            raise _rotation_problem(
                f"key {keyid} is not a key of the {change.role} role",
                f"the {change.role} role's keys are {', '.join(sorted(role.keyids))}",
            )
    for public in change.add:
        key = tuf_key(public)
        if key.keyid in role.keyids:
            raise _rotation_problem(
                f"key {key.keyid} is already a key of the {change.role} role",
                "give --add-key only for a key the role does not have yet",
            )
        root.add_key(key, change.role)
    for keyid in change.remove:  # after the adds: an emptied timestamp takes the new targets
        _remove(root, keyid, change.role)
    if change.threshold is not None:
        role.threshold = change.threshold
    _check_thresholds(root)
    root.version = old.version + 1
    root.expires = now + expires.root
    return root


def _remove(root: Root, keyid: str, role: str) -> None:
    """``keyid`` out of ``role``; a release key out of ``targets`` leaves snapshot and timestamp
    too (:func:`k3kit.signing.trust.edit.drop_key`, ``root revoke``'s rule): ``root create``
    makes the release key the snapshot and timestamp key by default, and removing it from
    targets alone once left its thief signing fresh timestamps buyers accepted. A key moved off
    the timestamp role alone stays a release key (the publisher's choice). A key no role names
    any more leaves ``keys`` and k3kit's windows, as python-tuf's ``revoke_key`` does."""
    from k3kit.signing.trust.edit import drop_key

    root.roles[role].keyids.remove(keyid)
    if role == "targets":
        drop_key(root, keyid, ("snapshot", "timestamp"))
    if not any(keyid in r.keyids for r in root.roles.values()):
        root.keys.pop(keyid, None)
        _forget_window(root, keyid)


def _forget_window(root: Root, keyid: str) -> None:
    """Drop ``keyid``'s ``x-k3kit-key-validity`` window (the field too, once empty): a window
    for a key the root no longer carries is a root k3kit's reader refuses."""
    windows = root.unrecognized_fields.get("x-k3kit-key-validity")
    if isinstance(windows, dict):
        windows.pop(keyid, None)
        if not windows:
            del root.unrecognized_fields["x-k3kit-key-validity"]


def _check_thresholds(root: Root) -> None:
    for name in ROLES:
        role = root.roles[name]
        if not role.keyids:
            raise _rotation_problem(
                f"the rotation would leave the {name} role with no keys: nothing could sign it",
                f"add the new {name} key (--add-key) in the same rotation that removes the old",
            )
        if not 1 <= role.threshold <= len(role.keyids):
            raise _rotation_problem(
                f"the new root gives the {name} role a threshold of {role.threshold} with "
                f"{len(role.keyids)} keys: it could never be met",
                f"give --threshold between 1 and {len(role.keyids)}",
            )


def _signed_root(old: Root, root: Root, signers: Sequence[Signer]) -> bytes:
    """Root N+1 signed by the root keys given: they must reach the old root's threshold (so
    clients trusting root N accept it) and the new root's (so it verifies itself): TUF's rule."""
    md = Metadata(root)
    md.signatures.clear()
    for adapter in {**_by_keyid("root", old, signers), **_by_keyid("root", root, signers)}.values():
        md.sign(adapter, append=True)
    data = md.to_bytes(_SERIALIZER)
    _as_trust_root(data, f"root version {root.version}", "CHANNEL_ROTATION_INVALID")
    return data


def _by_keyid(role: str, root: Root, signers: Sequence[Signer]) -> dict[str, K3kitTufSigner]:
    return {adapter.keyid: adapter for adapter in _role_signers(role, root, signers)}


def rotate_keys(
    repo: Path,
    change: KeyChange,
    signers: Sequence[Signer],
    *,
    now: datetime,
    expires: Expiries = Expiries(),
) -> Rotation:
    """Write root N+1 with ``change`` applied, signed by the old root's threshold of root keys
    and the new root's, then re-sign the roles the change made stale (:data:`_DOWNSTREAM`) with
    the keys the NEW root names. Everything is checked and signed in memory first: a rotation
    refused (``CHANNEL_ROTATION_INVALID``, ``CHANNEL_KEYS_MISSING``) writes nothing."""
    with _publish_lock(repo):
        version, old = latest_root(repo)
        root = _changed_root(old.signed, change, now=now, expires=expires)
        root_bytes = _signed_root(old.signed, root, signers)
        targets, snapshot, timestamp = _current(repo)
        resign = _stale(old.signed, root, change.role) if timestamp.signed.version else ()
        files: list[tuple[Path, bytes]] = []
        stamp = b""
        if resign:
            view = (targets, snapshot, timestamp)
            files, stamp = _next_view(
                repo, root, view, signers, frozenset(resign), now=now, expires=expires
            )
        path = _write_root(repo, files, root_bytes, version + 1)
        if resign:
            atomic_write(_metadata_dir(repo) / "timestamp.json", stamp, force=True)
        role = root.roles[change.role]
        return Rotation(path, version + 1, tuple(sorted(role.keyids)), role.threshold, resign)


def _write_root(
    repo: Path, files: list[tuple[Path, bytes]], root_bytes: bytes, version: int
) -> Path:
    """The re-signed versioned files (no timestamp names them yet), then root N+1 and its copy
    ``root.json``; the caller writes the timestamp last."""
    for file, data in files:
        atomic_write(file, data, force=True)
    path = _metadata_dir(repo) / f"{version}.root.json"
    atomic_write(path, root_bytes)
    atomic_write(_metadata_dir(repo) / "root.json", root_bytes, force=True)
    return path


def utc_now() -> datetime:
    """The real clock (TUF expiries are instants, never SOURCE_DATE_EPOCH's build time)."""
    return datetime.now(UTC).replace(microsecond=0)
