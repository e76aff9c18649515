"""The buyer's signed acceptance report: what their node measured against what the receipt claims.

It is a DSSE envelope of its own ``payloadType`` (so a receipt verifier can never mistake one for
the other) around an in-toto Statement whose subjects are the kit checksum, the weight checksum and
the publisher's receipt. The measured runs are a complete :class:`ReceiptPredicate`, evidence
digests included, so ``k3kit audit`` reads an acceptance report with the same rules as a receipt;
the verdicts sit beside it. ``partial`` is true when the run was interrupted: a report that says
less than it set out to must say so in its signed bytes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from k3kit.models._base import Frozen, Measured, Name, NonNegInt, Sha256Hex
from k3kit.models.receipt import ReceiptPredicate, Subject

ACCEPTANCE_PAYLOAD_TYPE = "application/vnd.k3kit.acceptance.v1+json"
ACCEPTANCE_PREDICATE_TYPE = "https://k3kit.dev/acceptance/v1"
RECEIPT_SUBJECT = "receipt:receipt.dsse.json"

VerdictKind = Literal["reproduced", "not reproduced", "inconclusive"]


class ReceiptRef(Frozen):
    """Which signed receipt the buyer tested against, and who signed it."""

    receipt_sha256: Sha256Hex
    publisher_keyid: str = Field(max_length=128)
    kit_sha256: Sha256Hex
    weights_lock_sha256: Sha256Hex


class Verdict(Frozen):
    """One signed claim (or functional promise) and what the buyer's node showed.

    Numbers are decimal strings (9 significant digits): signed k3kit JSON carries no floats.

    ``ratio`` and ``interval`` are measured / claimed; ``interval`` is the confidence interval of
    that ratio (``confidence``), ``None`` when the sample is too small to have one.
    """

    run: str = Field(max_length=128)
    claim: str = Field(max_length=128, description='e.g. "ttft_ms.p50", "tool_calls"')
    verdict: VerdictKind
    claimed: Measured | None = None
    measured: Measured | None = None
    ratio: Measured | None = None
    interval: tuple[Measured, Measured] | None = None
    confidence: Measured | None = None
    n: NonNegInt | None = None
    method: str = Field(default="", max_length=200)
    reason: str = Field(default="", max_length=1000)


class PointOutcome(Frozen):
    """Requests of one measured point: how many were sent, completed, failed, and why."""

    run: str = Field(max_length=128)
    concurrency: int = Field(ge=1)
    requests: NonNegInt
    completed: NonNegInt
    failed: NonNegInt
    errors: dict[str, NonNegInt] = Field(default_factory=dict, description="error text: count")
    interrupted: bool = False


class AcceptancePredicate(Frozen):
    schema_: Literal["k3kit.acceptance/v1"] = Field(alias="schema", default="k3kit.acceptance/v1")
    partial: bool = Field(description="interrupted: fewer points or requests than planned")
    profile: Name
    url: str = Field(max_length=2000)
    tolerance_percent: Measured = Field(ge=0, le=1000)
    confidence: Measured = Field(gt=0, lt=1)
    receipt: ReceiptRef
    node: dict[str, str] = Field(default_factory=dict, description="node facts, as found")
    points: list[PointOutcome]
    verdicts: list[Verdict]
    functional: list[Verdict]
    measured: ReceiptPredicate | None = Field(
        default=None, description="the measured runs as a receipt predicate; None if none finished"
    )


class AcceptanceStatement(Frozen):
    """in-toto Statement v1 around the acceptance predicate; unknown fields ignored (the spec)."""

    model_config = Frozen.model_config | {"extra": "ignore"}

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: list[Subject] = Field(min_length=1, max_length=16)
    predicate_type: Literal["https://k3kit.dev/acceptance/v1"] = Field(alias="predicateType")
    predicate: AcceptancePredicate
