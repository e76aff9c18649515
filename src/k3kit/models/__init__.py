"""Pydantic models of every k3kit document (level 1: imports only ``errors`` and pydantic)."""

from k3kit.models._base import describe_validation_error, load
from k3kit.models.claims import Claims, ClaimsBody
from k3kit.models.kit import KitInfo, KitProfile, KitWeights, Manifest, ManifestEntry
from k3kit.models.lock import LockedFile, PinSource, WeightsLock
from k3kit.models.package import PackageDef, Profile
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
    "KIT_SUBJECT",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "WEIGHTS_SUBJECT",
    "Claims",
    "ClaimsBody",
    "DsseEnvelope",
    "DsseSignature",
    "KitInfo",
    "KitProfile",
    "KitWeights",
    "LockedFile",
    "Manifest",
    "ManifestEntry",
    "PackageDef",
    "PinSource",
    "Profile",
    "ReceiptKit",
    "ReceiptPredicate",
    "ReceiptWeights",
    "Statement",
    "Subject",
    "WeightsLock",
    "describe_validation_error",
    "load",
]
