"""Publisher operations on roots of trust: create version 1, derive version N+1, sign.

Every edit returns a new :class:`RootBody` with the version bumped by one and is validated by the
same model the verifier uses, so a publisher cannot write a root that a node would refuse for its
structure (a threshold no keys can meet, a revoked key still in a role). Signatures are added one
signer at a time (:func:`add_root_signature`): root keys are meant to live on separate offline
machines, and N+1 needs the root-role threshold of N *and* of N+1.
"""

from __future__ import annotations

from collections.abc import Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from k3kit._canonical import model_bytes
from k3kit.errors import InputError, K3kitError
from k3kit.models import load
from k3kit.signing.keys import key_object, keyid
from k3kit.signing.sign import add_signature, sign_envelope
from k3kit.signing.signers import Signer
from k3kit.signing.trust.model import ROLES, ROOT_PAYLOAD_TYPE, RootBody
from k3kit.signing.trust.root import MAX_ROOT_BYTES, unverified_body


def _body(obj: dict[str, object], source: str) -> RootBody:
    return load(RootBody, obj, source=source, code="ROOT_INVALID")


def create(
    *,
    root_keys: Sequence[Ed25519PublicKey],
    root_threshold: int,
    release_keys: Sequence[Ed25519PublicKey],
    release_threshold: int,
    expires: str,
) -> RootBody:
    """Root version 1."""
    keys = {keyid(k): key_object(k) for k in [*root_keys, *release_keys]}
    return _body(
        {
            "version": 1,
            "expires": expires,
            "keys": keys,
            "roles": {
                "root": {"keyids": [keyid(k) for k in root_keys], "threshold": root_threshold},
                "release": {
                    "keyids": [keyid(k) for k in release_keys],
                    "threshold": release_threshold,
                },
            },
        },
        "new root",
    )


def _dump(body: RootBody) -> dict[str, object]:
    out: dict[str, object] = body.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


def _next(prev: RootBody, changes: dict[str, object]) -> RootBody:
    obj = _dump(prev)
    obj.update(changes)
    obj["version"] = prev.version + 1
    return _body(obj, f"root version {prev.version + 1}")


def _role(obj: dict[str, object], role: str) -> dict[str, object]:
    if role not in ROLES:
        raise InputError(f"unknown role {role!r} (root or release)", code="ROOT_INVALID")
    roles = obj["roles"]
    assert isinstance(roles, dict)
    out: dict[str, object] = roles[role]
    return out


def add_key(
    prev: RootBody,
    role: str,
    pub: Ed25519PublicKey,
    *,
    expires: str,
    not_before: str | None = None,
    not_after: str | None = None,
    threshold: int | None = None,
) -> RootBody:
    """N+1 with ``pub`` added to ``role`` (and, for release keys, an optional validity window)."""
    obj = _dump(prev)
    kid = keyid(pub)
    keys = obj["keys"]
    assert isinstance(keys, dict)
    keys[kid] = key_object(pub)
    entry = _role(obj, role)
    ids = entry["keyids"]
    assert isinstance(ids, list)
    if kid in ids:
        raise InputError(f"key {kid[:16]} is already in role {role}", code="ROOT_INVALID")
    ids.append(kid)
    if threshold is not None:
        entry["threshold"] = threshold
    if not_before or not_after:
        validity = obj.setdefault("key_validity", {})
        assert isinstance(validity, dict)
        validity[kid] = {
            k: v for k, v in (("not_before", not_before), ("not_after", not_after)) if v
        }
    return _next(prev, {**obj, "expires": expires})


def revoke(prev: RootBody, kid: str, *, reason: str, since: str, expires: str) -> RootBody:
    """N+1 with ``kid`` removed from every role and listed as revoked (it stays in ``keys`` so
    verifiers can say *revoked* rather than *unknown*)."""
    if kid not in prev.keys:
        raise InputError(
            f"key {kid[:16]} is not in root version {prev.version}", code="ROOT_INVALID"
        )
    obj = _dump(prev)
    for role in ROLES:
        entry = _role(obj, role)
        ids = entry["keyids"]
        assert isinstance(ids, list)
        entry["keyids"] = [i for i in ids if i != kid]
    revoked = obj.setdefault("revoked", {})
    assert isinstance(revoked, dict)
    revoked[kid] = {"reason": reason, "since": since}
    return _next(prev, {**obj, "expires": expires})


def rotate(
    prev: RootBody, role: str, keys: Sequence[Ed25519PublicKey], threshold: int, *, expires: str
) -> RootBody:
    """N+1 whose ``role`` is exactly ``keys`` with ``threshold`` (old keys stay known, unlisted)."""
    obj = _dump(prev)
    all_keys = obj["keys"]
    assert isinstance(all_keys, dict)
    for k in keys:
        all_keys[keyid(k)] = key_object(k)
    entry = _role(obj, role)
    entry["keyids"] = [keyid(k) for k in keys]
    entry["threshold"] = threshold
    return _next(prev, {**obj, "expires": expires})


def set_floor(prev: RootBody, floors: dict[str, int], *, expires: str) -> RootBody:
    """N+1 with ``min_sequence`` entries set (a floor for fresh nodes; retires old kits)."""
    obj = _dump(prev)
    current = obj.setdefault("min_sequence", {})
    assert isinstance(current, dict)
    current.update(floors)
    return _next(prev, {**obj, "expires": expires})


def sign_root(body: RootBody, signers: Sequence[Signer]) -> bytes:
    return sign_envelope(model_bytes(body), ROOT_PAYLOAD_TYPE, signers)


def add_root_signature(envelope: bytes, signer: Signer, *, source: str) -> bytes:
    read_root(envelope, source=source)
    return add_signature(envelope, signer, source=source)


def read_root(data: bytes, *, source: str) -> RootBody:
    """A root envelope's body, parsed strictly but **not** verified: for the publisher's edits."""
    if len(data) > MAX_ROOT_BYTES:
        raise InputError(f"{source}: larger than {MAX_ROOT_BYTES} bytes", code="ROOT_INVALID")
    try:
        return unverified_body(data, source)
    except K3kitError as exc:
        raise InputError(exc.message, code="ROOT_INVALID") from exc
