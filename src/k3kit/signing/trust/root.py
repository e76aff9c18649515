"""Verifying roots of trust and walking a chain of them, in the manner of TUF's root update.

The node pins one root (``--root ROOT.json``). A kit carries the chain ``root/<N>.root.json`` so
an offline node can move forward from the kit alone; the node also keeps every root it accepted
under its state folder, so once it has seen root N+1 a kit that carries only root N cannot take it
back. Root N+1 is accepted only if it is exactly version N+1 and is signed by the root-role
threshold of **both** N and N+1 (distinct keys; revoked keys never count): the old keys vouch for
the change, the new keys prove they exist and agree. A forged root in a kit is therefore useless,
and a root signed only by new keys is refused. Only the final root must be unexpired: a node may
walk through roots that expired long ago to reach the current one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from k3kit._canonical import require_canonical, strict_loads
from k3kit._fs import atomic_write, read_capped, walk
from k3kit._values import parse_timestamp
from k3kit.errors import InputError, VerificationError
from k3kit.signing.keys import keyid, public_from_hex
from k3kit.signing.sign import verify_envelope
from k3kit.signing.trust import rollback
from k3kit.signing.trust.policy import Revoked, Trust, TrustedKey

if TYPE_CHECKING:  # root.json's models: imported where a root is parsed (--root), not by --trust
    from k3kit.signing.trust.model import RootBody

# root.json's payload type; model.py re-exports it beside the models
ROOT_PAYLOAD_TYPE = "application/vnd.k3kit.root+json"

MAX_ROOT_BYTES = 64 * 1024
MAX_ROOTS = 64
ROOT_DIR = "root"
_NAME = re.compile(r"^([1-9][0-9]{0,8})\.root\.json$")


@dataclass(frozen=True)
class VerifiedRoot:
    body: RootBody
    data: bytes
    keys: dict[str, Ed25519PublicKey]


def _public_keys(body: RootBody, source: str) -> dict[str, Ed25519PublicKey]:
    """Key objects by key id, each id recomputed from key material (a root cannot list one key
    under two ids to inflate a threshold)."""
    out = {}
    for kid, obj in body.keys.items():
        pub = public_from_hex(obj.keyval.public, source=f"{source}: key {kid[:16]}")
        if keyid(pub) != kid:
            raise VerificationError(
                f"{source}: key id {kid[:16]} is not the sha256 of its key", code="ROOT_MALFORMED"
            )
        out[kid] = pub
    return out


def unverified_body(data: bytes, source: str) -> RootBody:
    """Parse the payload before its signatures are checked: needed once, to learn a root's own
    keys; nothing from it is used until :func:`_threshold` has passed."""
    from k3kit.models import DsseEnvelope, load  # pydantic, as RootBody: only --root parses one
    from k3kit.signing.trust.model import RootBody  # its 7 pydantic models cost ~5 ms to create

    obj = strict_loads(data, source=source, max_bytes=MAX_ROOT_BYTES, code="ROOT_MALFORMED")
    env = load(DsseEnvelope, obj, source=source, error=VerificationError, code="ROOT_MALFORMED")
    if env.payload_type != ROOT_PAYLOAD_TYPE:
        raise VerificationError(
            f"{source}: payloadType {env.payload_type!r} is not a k3kit root",
            code="ROOT_WRONG_TYPE",
        )
    try:
        payload = base64.b64decode(env.payload.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise VerificationError(f"{source}: payload is not base64", code="ROOT_MALFORMED") from exc
    body_obj = strict_loads(payload, source=source, max_bytes=MAX_ROOT_BYTES, code="ROOT_MALFORMED")
    require_canonical(payload, body_obj, source=source)
    return load(RootBody, body_obj, source=source, error=VerificationError, code="ROOT_MALFORMED")


def _threshold(
    data: bytes,
    signer: VerifiedRoot | RootBody,
    keys: dict[str, Ed25519PublicKey],
    source: str,
    whose: str,
) -> None:
    body = signer.body if isinstance(signer, VerifiedRoot) else signer
    role = body.roles.root
    usable = [keys[k] for k in role.keyids if k not in body.revoked]
    try:
        verified = verify_envelope(
            data, usable, expected_type=ROOT_PAYLOAD_TYPE, source=source, kind="ROOT"
        )
        count = len(set(verified.signer_keyids) & set(role.keyids))
    except VerificationError as exc:
        if exc.code != "ROOT_UNTRUSTED_KEY":
            raise
        count = 0
    if count < role.threshold:
        raise VerificationError(
            f"{source}: signed by {count} distinct key(s) of the root role of {whose} "
            f"(version {body.version}); it needs {role.threshold}",
            code="ROOT_UNTRUSTED",
        )


def verify_root(data: bytes, *, trusted: VerifiedRoot | None, source: str) -> VerifiedRoot:
    """Verify a root envelope: alone (the pinned root, self-signed) or as the successor of
    ``trusted`` (exactly the next version, signed by both root-role thresholds)."""
    body = unverified_body(data, source)
    keys = _public_keys(body, source)
    if trusted is not None:
        if body.version != trusted.body.version + 1:
            raise VerificationError(
                f"{source}: version {body.version} does not follow {trusted.body.version}",
                code="ROOT_VERSION",
            )
        _threshold(data, trusted, trusted.keys, source, "the root it replaces")
    _threshold(data, body, keys, source, "itself")
    return VerifiedRoot(body, data, keys)


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
    """

    pinned: bytes
    source: str
    state_dir: Path | None
    now: str

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
        first = unverified_body(self.pinned, self.source).version + 1
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
        offered = dict(offered or {})
        current, new = _walk(current, known, offered)
        if accepted is not None and current.body.version < accepted:
            raise VerificationError(
                f"this node accepted root version {accepted}, but only version "
                f"{current.body.version} can be reached: accepted roots were removed from "
                f"{folder}",
                code="STATE_LOST",
                hint="restore the state folder from a backup (or use a kit that carries the "
                f"root chain up to version {accepted})",
            )
        if parse_timestamp(current.body.expires) <= self._now():
            raise VerificationError(
                f"root version {current.body.version} expired at {current.body.expires}",
                code="ROOT_EXPIRED",
                hint="get a newer root (or a kit that carries one) from the publisher",
            )
        if folder is not None and self.state_dir is not None:
            for v in new:
                atomic_write(folder / f"{v}.root.json", offered[v], mode=0o600)
            rollback.note_root(self.state_dir, self._pin_id(), current.body.version)
        return trust_of(current), new


def _walk(
    current: VerifiedRoot, known: dict[int, bytes], offered: dict[int, bytes]
) -> tuple[VerifiedRoot, list[int]]:
    """Follow the chain from ``current`` through the node's roots, then the kit's; returns the
    last root reached and the versions that came from the kit."""
    new: list[int] = []
    for _ in range(MAX_ROOTS):
        v = current.body.version + 1
        data = known.get(v, offered.get(v))
        if data is None:
            break
        where = "state" if v in known else "kit"
        current = verify_root(data, trusted=current, source=f"{where} root {v}.root.json")
        if v not in known:
            new.append(v)
    beyond = sorted(v for v in (*known, *offered) if v > current.body.version)
    if beyond:
        raise VerificationError(
            f"root {beyond[0]}.root.json cannot be reached from version "
            f"{current.body.version}: the chain has a gap",
            code="ROOT_CHAIN_GAP",
        )
    return current, new


def trust_of(root: VerifiedRoot) -> Trust:
    body = root.body
    release = body.roles.release
    keys = tuple(
        TrustedKey(
            kid,
            root.keys[kid],
            body.key_validity[kid].not_before if kid in body.key_validity else None,
            body.key_validity[kid].not_after if kid in body.key_validity else None,
        )
        for kid in release.keyids
    )
    revoked = {kid: Revoked(root.keys[kid], r.reason, r.since) for kid, r in body.revoked.items()}
    return Trust(
        keys,
        release.threshold,
        revoked,
        dict(body.min_sequence),
        body.version,
        f"root version {body.version} (expires {body.expires}): release role "
        f"{release.threshold} of {len(keys)} key(s), {len(revoked)} revoked",
    )
