"""Pydantic models of every k3kit document, one module per family of documents.

Near the bottom of the layers: imports only ``errors``, ``_values``, ``_policy``, pydantic and
``packaging.version``,
so every folder above (formats, signing, weights, node, publish, commerce, the tools) can use them.

A name imported from here loads its own module on first use (PEP 562 ``__getattr__``), not every
family: building the 46 classes of claims, evidence, packages and acceptance was a third of
`k3kit verify`'s start-up, and verify needs only the receipt, kit and lock models
(docs/performance.md). Each model is also built on first validation (``defer_build``).

``verify`` goes further and imports no pydantic at all: :mod:`k3kit.models.lite` holds records of
the documents it reads, generated from these models (``scripts/gen_lite_models.py``) and checked
by :mod:`k3kit.models._lite` with the same rules (:mod:`k3kit.models._rules`). ``launch``,
``preflight`` and the hashing engine use those records too; the methods they call are defined
once, in mixins both the model and its record inherit (:mod:`k3kit.models._methods`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k3kit.models._base import REPO_ID_PATTERN, describe_validation_error, load
    from k3kit.models.claims import (
        EVIDENCE_IN_KIT,
        Claims,
        ClaimsBody,
        Comparison,
        ComparisonPoint,
        Control,
        Environment,
        Percentiles,
        Run,
        RunMetrics,
        Workload,
    )
    from k3kit.models.evidence import Definitions, EvidenceLevel, EvidenceSummary, LatencyStats
    from k3kit.models.kit import KitInfo, KitProfile, KitWeights, Manifest, ManifestEntry
    from k3kit.models.lock import LockedFile, PinSource, WeightsLock
    from k3kit.models.package import EnginePin, PackageDef, Profile
    from k3kit.models.receipt import (
        KIT_SUBJECT,
        PAYLOAD_TYPE,
        PREDICATE_TYPE,
        STATEMENT_TYPE,
        WEIGHTS_SUBJECT,
        DsseEnvelope,
        DsseSignature,
        ReceiptKit,
        ReceiptPredicate,
        ReceiptWeights,
        Statement,
        Subject,
    )

# Where each public name lives; ``__getattr__`` imports that module only.
_HOMES: dict[str, str] = {
    "Claims": "k3kit.models.claims",
    "ClaimsBody": "k3kit.models.claims",
    "Comparison": "k3kit.models.claims",
    "ComparisonPoint": "k3kit.models.claims",
    "Control": "k3kit.models.claims",
    "Definitions": "k3kit.models.evidence",
    "DsseEnvelope": "k3kit.models.receipt",
    "DsseSignature": "k3kit.models.receipt",
    "EVIDENCE_IN_KIT": "k3kit.models._rules",
    "EnginePin": "k3kit.models.package",
    "Environment": "k3kit.models.claims",
    "EvidenceLevel": "k3kit.models.evidence",
    "EvidenceSummary": "k3kit.models.evidence",
    "KIT_SUBJECT": "k3kit.models.receipt_names",
    "KitInfo": "k3kit.models.kit",
    "KitProfile": "k3kit.models.kit",
    "KitWeights": "k3kit.models.kit",
    "LatencyStats": "k3kit.models.evidence",
    "LockedFile": "k3kit.models.lock",
    "Manifest": "k3kit.models.kit",
    "ManifestEntry": "k3kit.models.kit",
    "PAYLOAD_TYPE": "k3kit.models.receipt_names",
    "PREDICATE_TYPE": "k3kit.models.receipt_names",
    "PackageDef": "k3kit.models.package",
    "Percentiles": "k3kit.models.claims",
    "PinSource": "k3kit.models.lock",
    "REPO_ID_PATTERN": "k3kit.models._base",
    "Profile": "k3kit.models.package",
    "ReceiptKit": "k3kit.models.receipt",
    "ReceiptPredicate": "k3kit.models.receipt",
    "ReceiptWeights": "k3kit.models.receipt",
    "Run": "k3kit.models.claims",
    "RunMetrics": "k3kit.models.claims",
    "STATEMENT_TYPE": "k3kit.models.receipt_names",
    "Statement": "k3kit.models.receipt",
    "Subject": "k3kit.models.receipt",
    "WEIGHTS_SUBJECT": "k3kit.models.receipt_names",
    "WeightsLock": "k3kit.models.lock",
    "Workload": "k3kit.models.claims",
    "describe_validation_error": "k3kit.models._base",
    "load": "k3kit.models._base",
}


def __getattr__(name: str) -> Any:
    """Import the one module that defines ``name`` (PEP 562), then cache the name here."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "EVIDENCE_IN_KIT",
    "KIT_SUBJECT",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "REPO_ID_PATTERN",
    "STATEMENT_TYPE",
    "WEIGHTS_SUBJECT",
    "Claims",
    "ClaimsBody",
    "Comparison",
    "ComparisonPoint",
    "Control",
    "Definitions",
    "DsseEnvelope",
    "DsseSignature",
    "EnginePin",
    "Environment",
    "EvidenceLevel",
    "EvidenceSummary",
    "KitInfo",
    "KitProfile",
    "KitWeights",
    "LatencyStats",
    "LockedFile",
    "Manifest",
    "ManifestEntry",
    "PackageDef",
    "Percentiles",
    "PinSource",
    "Profile",
    "ReceiptKit",
    "ReceiptPredicate",
    "ReceiptWeights",
    "Run",
    "RunMetrics",
    "Statement",
    "Subject",
    "WeightsLock",
    "Workload",
    "describe_validation_error",
    "load",
]
