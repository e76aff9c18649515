"""The root of trust document (``k3kit.root/v1``): keys, roles, windows, revocations, floors.

Modelled on TUF's root role, trimmed to what one publisher of deploy kits needs: a ``root`` role
that signs the next root and a ``release`` role that signs receipts. Everything here is structure;
the rules that need key material or a clock (key ids recomputed, signatures, thresholds, expiry)
live in :mod:`k3kit.signing.trust.root`, so a document that parses is not yet a document that is
trusted.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from k3kit._values import parse_timestamp
from k3kit.models._base import Frozen, NonNegInt, Sha256Hex, Timestamp
from k3kit.signing.trust.root import ROOT_PAYLOAD_TYPE as ROOT_PAYLOAD_TYPE  # its home

ROOT_SCHEMA = "k3kit.root/v1"
MAX_KEYS = 64
# "<package>/<channel>", both k3kit names (see models._base.Name).
SequenceKey = Annotated[
    str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}/[a-z0-9][a-z0-9._-]{0,63}$")
]
ROLES = ("root", "release")


class KeyValue(Frozen):
    public: str = Field(pattern=r"^[0-9a-f]{64}$")


class RootKey(Frozen):
    """A TUF/securesystemslib key object; its key id is sha256 of its canonical bytes."""

    keytype: Literal["ed25519"]
    scheme: Literal["ed25519"]
    keyval: KeyValue


class Role(Frozen):
    keyids: list[Sha256Hex] = Field(min_length=1, max_length=MAX_KEYS)
    threshold: int = Field(ge=1, le=MAX_KEYS)


class Roles(Frozen):
    root: Role
    release: Role


class Window(Frozen):
    """When a release key may sign: a receipt's ``issued_at`` must fall inside (inclusive)."""

    not_before: Timestamp | None = None
    not_after: Timestamp | None = None


class Revocation(Frozen):
    reason: str = Field(min_length=1, max_length=200, pattern=r"^[ -~]+$")
    since: Timestamp


class RootBody(Frozen):
    schema_: Literal["k3kit.root/v1"] = Field(alias="schema", default="k3kit.root/v1")
    version: int = Field(ge=1, le=2**31 - 1)
    expires: Timestamp
    keys: dict[Sha256Hex, RootKey] = Field(max_length=MAX_KEYS)
    roles: Roles
    key_validity: dict[Sha256Hex, Window] = Field(default_factory=dict, max_length=MAX_KEYS)
    revoked: dict[Sha256Hex, Revocation] = Field(default_factory=dict, max_length=MAX_KEYS)
    min_sequence: dict[SequenceKey, NonNegInt] = Field(default_factory=dict, max_length=1024)

    @model_validator(mode="after")
    def _consistent(self) -> RootBody:
        """Refuse a root whose parts disagree: a threshold no listed keys can meet, a role naming
        a key the root does not carry, a revoked key still in a role, one key listed twice."""
        for name in ROLES:
            role: Role = getattr(self.roles, name)
            if len(set(role.keyids)) != len(role.keyids):
                raise ValueError(f"role {name!r} lists a key id twice")
            unknown = [k for k in role.keyids if k not in self.keys]
            if unknown:
                raise ValueError(f"role {name!r} names keys not in 'keys': {unknown[0][:16]}")
            if role.threshold > len(role.keyids):
                raise ValueError(f"role {name!r}: threshold {role.threshold} > its key count")
            revoked = [k for k in role.keyids if k in self.revoked]
            if revoked:
                raise ValueError(f"role {name!r} still lists revoked key {revoked[0][:16]}")
        for field in ("key_validity", "revoked"):
            for kid in getattr(self, field):
                if kid not in self.keys:
                    raise ValueError(f"{field} names a key not in 'keys': {kid[:16]}")
        for kid, window in self.key_validity.items():
            if (
                window.not_before
                and window.not_after
                and parse_timestamp(window.not_before) > parse_timestamp(window.not_after)
            ):
                raise ValueError(f"key_validity of {kid[:16]}: not_before is after not_after")
        return self
