"""Publisher operations on roots of trust: create TUF root version 1, derive version N+1, sign.

Every edit returns a new python-tuf ``Root`` with the version bumped by one and is checked by the
same reader the verifier uses (:func:`k3kit.signing.trust.tufroot.parse`), so a publisher cannot
write a root that a node would refuse for its structure (a threshold no keys can meet, a revoked
key still in a role, a window that closes before it opens): ``ROOT_INVALID``. Signatures are
added one signer at a time (:func:`add_root_signature`): root keys are meant to live on separate
offline machines, and N+1 needs the root-role threshold of N *and* of N+1.

Role names: k3kit's ``release`` role is TUF's ``targets`` role (its keys and threshold sign
receipts, and the channel's targets metadata); ``root``, ``snapshot`` and ``timestamp`` are TUF's.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import datetime

from tuf.api.metadata import Metadata, Role, Root

from k3kit._values import parse_timestamp
from k3kit.errors import InputError, K3kitError
from k3kit.signing.keys import PublicKey
from k3kit.signing.signers import Signer
from k3kit.signing.trust import tufroot
from k3kit.signing.trust.model import MIN_SEQUENCE, REVOKED, VALIDITY
from k3kit.signing.trust.root import MAX_ROOT_BYTES

#: k3kit's role names (what the CLI's ``--role`` takes) and the TUF role each one is.
ROLE_NAMES = {
    "root": "root",
    "release": "targets",
    "snapshot": "snapshot",
    "timestamp": "timestamp",
}


def _invalid(why: str) -> InputError:
    return InputError(why, code="ROOT_INVALID")


def _instant(text: str | datetime, what: str) -> datetime:
    """An ASCII RFC 3339 instant, whole seconds (TUF's ``expires`` has no fraction); a datetime
    (another root's ``expires``) is taken as it is."""
    if isinstance(text, datetime):
        return text
    try:
        return parse_timestamp(text).replace(microsecond=0)
    except ValueError as exc:
        raise _invalid(f"{what}: {exc}") from None


def _checked(root: Root, source: str) -> Root:
    """``root`` if the verifier's reader accepts it (signatures aside)."""
    data = Metadata(root).to_bytes(tufroot.SERIALIZER)
    tufroot.parse(data, source, error=InputError, code="ROOT_INVALID")
    return root


def create(
    *,
    root_keys: Sequence[PublicKey],
    root_threshold: int,
    release_keys: Sequence[PublicKey],
    release_threshold: int,
    expires: str | datetime,
    snapshot_keys: Sequence[PublicKey] = (),
    timestamp_keys: Sequence[PublicKey] = (),
) -> Root:
    """Root version 1: all four TUF roles. Snapshot and timestamp default to the release keys
    (threshold 1); a channel wants its own online timestamp key (docs/trust.md)."""
    root = Root(
        version=1,
        expires=_instant(expires, "--expires"),
        consistent_snapshot=True,
        roles={name: Role([], 1) for name in ROLE_NAMES.values()},
    )
    given = {
        "root": (root_keys, root_threshold),
        "targets": (release_keys, release_threshold),
        "snapshot": (snapshot_keys or release_keys, 1),
        "timestamp": (timestamp_keys or release_keys, 1),
    }
    for role, (keys, threshold) in given.items():
        for pub in keys:
            root.add_key(tufroot.tuf_key(pub), role)
        root.roles[role].threshold = threshold
    return _checked(root, "new root")


def _next(prev: Root, expires: str | datetime) -> Root:
    """A copy of ``prev`` as version N+1 (copied deeply: python-tuf's objects share lists)."""
    out = copy.deepcopy(prev)
    out.version = prev.version + 1
    out.expires = _instant(expires, "--expires")
    return out


def _role(root: Root, role: str) -> Role:
    if role not in ROLE_NAMES:
        raise _invalid(f"unknown role {role!r} ({', '.join(ROLE_NAMES)})")
    return root.roles[ROLE_NAMES[role]]


def _custom(root: Root, field: str) -> dict[str, object]:
    out = root.unrecognized_fields.setdefault(field, {})
    assert isinstance(out, dict)
    return out


def add_key(
    prev: Root,
    role: str,
    pub: PublicKey,
    *,
    expires: str | datetime,
    not_before: str | None = None,
    not_after: str | None = None,
    threshold: int | None = None,
) -> Root:
    """N+1 with ``pub`` added to ``role`` (and, for release keys, an optional validity window)."""
    root = _next(prev, expires)
    key = tufroot.tuf_key(pub)
    entry = _role(root, role)
    if key.keyid in entry.keyids:
        raise _invalid(f"key {key.keyid[:16]} is already in role {role}")
    root.add_key(key, ROLE_NAMES[role])
    if threshold is not None:
        entry.threshold = threshold
    if not_before or not_after:
        window = {k: v for k, v in (("not_before", not_before), ("not_after", not_after)) if v}
        _custom(root, VALIDITY)[key.keyid] = window
    return _checked(root, f"root version {root.version}")


def revoke(prev: Root, kid: str, *, reason: str, since: str, expires: str | datetime) -> Root:
    """N+1 with ``kid`` removed from every role and listed as revoked (it stays in ``keys`` so
    verifiers can say *revoked* rather than *unknown*).

    A snapshot or timestamp role the removal leaves empty falls back to the release keys that
    remain, with threshold 1: the default ``create`` gave it, so revoking a release key that also
    served there keeps the root usable rather than refusing the revocation."""
    if kid not in prev.keys:
        raise _invalid(f"key {kid[:16]} is not in root version {prev.version}")
    root = _next(prev, expires)
    drop_key(root, kid)
    _custom(root, REVOKED)[kid] = {"reason": reason, "since": since}
    return _checked(root, f"root version {root.version}")


def drop_key(root: Root, kid: str, roles: Sequence[str] | None = None) -> None:
    """Take ``kid`` out of ``roles`` (TUF names; default every role) of ``root``, in place. A
    snapshot or timestamp role this empties falls back to the release (targets) keys, threshold
    1: where ``create`` put them by default. ``root revoke`` takes a key out of every role;
    ``channel rotate --remove-key`` of a release key takes it out of the online roles too, so
    neither leaves a removed release key signing the timestamp. The key stays in ``keys``."""
    emptied = []
    for name in roles if roles is not None else list(root.roles):
        role = root.roles[name]
        if kid in role.keyids:
            role.keyids = [i for i in role.keyids if i != kid]
            emptied += [name] if not role.keyids else []
    for name in emptied:  # after every removal: the targets keys no longer hold kid
        if name in ("snapshot", "timestamp"):
            root.roles[name] = Role(list(root.roles["targets"].keyids), 1)


def rotate(
    prev: Root,
    role: str,
    keys: Sequence[PublicKey],
    threshold: int,
    *,
    expires: str | datetime,
) -> Root:
    """N+1 whose ``role`` is exactly ``keys`` with ``threshold`` (old keys stay known, unlisted)."""
    root = _next(prev, expires)
    entry = _role(root, role)
    entry.keyids = []
    for pub in keys:
        root.add_key(tufroot.tuf_key(pub), ROLE_NAMES[role])
    entry.threshold = threshold
    return _checked(root, f"root version {root.version}")


def set_floor(prev: Root, floors: dict[str, int], *, expires: str | datetime) -> Root:
    """N+1 with ``x-k3kit-min-sequence`` entries set (a floor for fresh nodes; retires old kits)."""
    root = _next(prev, expires)
    _custom(root, MIN_SEQUENCE).update(floors)
    return _checked(root, f"root version {root.version}")


def sign_root(root: Root, signers: Sequence[Signer]) -> bytes:
    return tufroot.sign(root, signers)


def add_root_signature(data: bytes, signer: Signer, *, source: str) -> bytes:
    return tufroot.add_signature(data, signer, source=source, error=InputError)


def read_root(data: bytes, *, source: str) -> Root:
    """A root's ``signed`` part, read strictly but **not** verified: for the publisher's edits."""
    if len(data) > MAX_ROOT_BYTES:
        raise _invalid(f"{source}: larger than {MAX_ROOT_BYTES} bytes")
    try:
        return tufroot.parse(data, source, error=InputError, code="ROOT_INVALID").root
    except K3kitError as exc:
        raise InputError(exc.message, code="ROOT_INVALID", hint=exc.hint) from exc
