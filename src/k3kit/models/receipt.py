"""The signed receipt: DSSE envelope, in-toto Statement v1, and k3kit's predicate.

Field names of the envelope and the Statement are fixed by their specs (DSSE v1.0.2, in-toto
attestation v1); k3kit's own predicate uses snake_case like every other k3kit document.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from k3kit.models._base import CommitSha, Frozen, Name, RepoId, Sha256Hex
from k3kit.models.claims import ClaimsBody

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://k3kit.dev/receipt/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
KIT_SUBJECT = "kit:MANIFEST.json"
WEIGHTS_SUBJECT = "weights:weights.lock.json"


class DsseSignature(Frozen):
    keyid: str = Field(default="", max_length=128)
    sig: str = Field(min_length=1, max_length=512)


class DsseEnvelope(Frozen):
    payload: str = Field(min_length=1)
    payload_type: str = Field(alias="payloadType")
    signatures: list[DsseSignature] = Field(min_length=1, max_length=16)


class ReceiptKit(Frozen):
    name: Name
    version: str
    sequence: int
    channel: Name
    kit_sha256: Sha256Hex


class ReceiptWeights(Frozen):
    repo: RepoId
    commit: CommitSha
    lock_sha256: Sha256Hex


class ReceiptPredicate(ClaimsBody):
    schema_: Literal["k3kit.receipt/v1"] = Field(alias="schema", default="k3kit.receipt/v1")
    kit: ReceiptKit
    weights: ReceiptWeights
    issued_at: str = Field(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


class Subject(Frozen):
    name: str
    digest: dict[str, str]


class Statement(Frozen):
    """in-toto Statement v1. Unknown fields are ignored here, as the spec requires."""

    model_config = Frozen.model_config | {"extra": "ignore"}

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: list[Subject] = Field(min_length=1, max_length=16)
    predicate_type: Literal["https://k3kit.dev/receipt/v1"] = Field(alias="predicateType")
    predicate: ReceiptPredicate
