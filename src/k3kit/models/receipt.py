"""The signed receipt: DSSE envelope, in-toto Statement v1, and k3kit's predicate.

Field names of the envelope and the Statement are fixed by their specs (DSSE v1.0.2, in-toto
attestation v1); k3kit's own predicate uses snake_case like every other k3kit document.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from k3kit.models import _rules as rules
from k3kit.models._base import CommitSha, Frozen, KitVersion, Name, RepoId, Sha256Hex, Timestamp
from k3kit.models.claims import ClaimsBody
from k3kit.models.evidence import Definitions
from k3kit.models.receipt_names import KIT_SUBJECT as KIT_SUBJECT  # their home; re-exported
from k3kit.models.receipt_names import PAYLOAD_TYPE as PAYLOAD_TYPE
from k3kit.models.receipt_names import PREDICATE_TYPE as PREDICATE_TYPE
from k3kit.models.receipt_names import STATEMENT_TYPE as STATEMENT_TYPE
from k3kit.models.receipt_names import WEIGHTS_SUBJECT as WEIGHTS_SUBJECT


class DsseSignature(Frozen):
    keyid: str = Field(default="", max_length=128)
    sig: str = Field(min_length=1, max_length=512)


class DsseEnvelope(Frozen):
    payload: str = Field(min_length=1)
    payload_type: str = Field(alias="payloadType")
    signatures: list[DsseSignature] = Field(min_length=1, max_length=16)


class ReceiptKit(Frozen):
    name: Name
    version: KitVersion
    sequence: int
    channel: Name
    kit_sha256: Sha256Hex


class ReceiptWeights(Frozen):
    repo: RepoId
    commit: CommitSha
    lock_sha256: Sha256Hex


class ReceiptPredicate(ClaimsBody):
    """The signed body: the claims as published, plus what ``k3kit sign`` computed.

    Every run states its evidence level; a run with an evidence file names its copy in the kit,
    its sha256 and size, and the tool's summary of it. ``definitions`` are always present:
    the publisher's when the claims declared them (``definitions_declared``), else vLLM's, which
    the auditor then assumes and says so.
    """

    schema_: Literal["k3kit.receipt/v1"] = Field(alias="schema", default="k3kit.receipt/v1")
    kit: ReceiptKit
    weights: ReceiptWeights
    issued_at: Timestamp
    definitions: Definitions
    definitions_declared: bool

    _evidence_complete = model_validator(mode="after")(rules.receipt_evidence_complete)


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
