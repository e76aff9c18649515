"""Pydantic models of every k3kit document, one module per family of documents.

Near the bottom of the layers: imports only ``errors``, ``_values``, ``_pathpolicy``, pydantic and
``packaging.version``,
so every folder above (formats, signing, weights, node, publish, commerce, the tools) can use them.
"""

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
