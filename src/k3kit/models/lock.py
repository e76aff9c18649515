"""``weights.lock.json``: the immutable weight pin.

The lock names a 40-hex commit (never a branch) and every file at it. Its JCS bytes' sha256 is the
*weight checksum* the receipt signs, so everything a verifier relies on must be inside it, including
where the sha256 values came from: declared by the uploader through the hub's LFS metadata, or
computed by hashing a local copy.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from k3kit.models import _rules as rules
from k3kit.models._base import (
    Blake3Hex,
    CommitSha,
    Frozen,
    NonNegInt,
    RelPath,
    RepoId,
    Sha256Hex,
    Timestamp,
)
from k3kit.models._methods import WeightsLockMethods

ENDPOINT_PATTERN = r"^https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~\-/]*)?$"
Sha256Source = Literal["local-hash", "hub-lfs", "hub-lfs+local-hash"]


class LockedFile(Frozen):
    path: RelPath
    size: NonNegInt
    sha256: Sha256Hex
    blake3: Blake3Hex | None = None
    git_blob_sha1: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    xet_hash: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    lfs: bool = False


class PinSource(Frozen):
    """What the pin trusted: where the listing came from, when, and who computed the sha256s.

    ``hub-lfs``: LFS files carry the sha256 the hub lists as their LFS oid (declared by the
    uploader, not checked by the hub); non-LFS files were fetched at pin time, matched against
    the listing's git blob sha1 and hashed. ``+local-hash``: every sha256 was also recomputed
    from a local copy (which added blake3). ``local-hash``: pinned from a local copy only.
    """

    kind: Literal["local", "hub"]
    # An http(s) origin and optional path; no credentials, query or fragment can hide in it.
    endpoint: str | None = Field(default=None, max_length=512, pattern=ENDPOINT_PATTERN)
    requested_revision: str = Field(min_length=1, max_length=256)
    pinned_at: Timestamp
    sha256_source: Sha256Source
    include: list[str] = Field(default_factory=list, max_length=256)
    exclude: list[str] = Field(default_factory=list, max_length=256)

    _consistent = model_validator(mode="after")(rules.pin_source_consistent)


class WeightsLock(WeightsLockMethods, Frozen):
    schema_: Literal["k3kit.weights-lock/v1"] = Field(
        alias="schema", default="k3kit.weights-lock/v1"
    )
    repo: RepoId
    commit: CommitSha
    source: PinSource
    files: list[LockedFile] = Field(min_length=1, max_length=100_000)
    file_count: NonNegInt
    total_bytes: NonNegInt

    # sorted, unique, and the counts it states are the counts it lists (k3kit.models._rules)
    _consistent = model_validator(mode="after")(rules.weights_lock_consistent)

    # has_blake3: k3kit.models._methods, shared with the lite record
