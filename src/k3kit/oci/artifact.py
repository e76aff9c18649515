"""The shape of a kit in a registry: media types, manifests and the referrers index.

Why these shapes (docs/oci.md): the OCI 1.1 artifact guidance says an artifact that is not a
container image has an image manifest with its own ``artifactType`` and the empty config
(``application/vnd.oci.empty.v1+json``, the two bytes ``{}``); what belongs to a kit (its receipt,
card, acceptance reports) is an artifact of its own whose ``subject`` is the kit's manifest, and a
registry without the referrers API finds them through the tag ``sha256-<hex>`` (the tag-schema
fallback), an image index that lists them. Manifests are written in one canonical form, so a kit
pushed twice gets the same digest.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from k3kit.errors import VerificationError
from k3kit.formats.documents import MAX_DOCUMENT_BYTES
from k3kit.oci.ref import DIGEST

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_BLOB = b"{}"
KIT_ARTIFACT = "application/vnd.k3kit.kit.v1"
KIT_LAYER = "application/vnd.k3kit.kit.v1+tar+gzip"
RECEIPT_ARTIFACT = "application/vnd.k3kit.receipt.v1"
RECEIPT_LAYER = "application/vnd.k3kit.receipt.v1+dsse+json"
CARD_ARTIFACT = "application/vnd.k3kit.card.v1"
ATTACHMENT_ARTIFACT = "application/vnd.k3kit.attachment.v1"
ATTACHMENT_LAYER = "application/octet-stream"
TITLE = "org.opencontainers.image.title"
MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # distribution's own limit on a manifest
MAX_REFERRER_BYTES = MAX_DOCUMENT_BYTES  # a receipt, card or report attached to a kit
ACCEPT_MANIFEST = MANIFEST_TYPE
ACCEPT_INDEX = INDEX_TYPE


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    annotations: dict[str, str] | None = None
    artifact_type: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": self.size,
        }
        if self.artifact_type:
            out["artifactType"] = self.artifact_type
        if self.annotations:
            out["annotations"] = dict(sorted(self.annotations.items()))
        return out


def describe(media_type: str, data: bytes, *, title: str | None = None) -> Descriptor:
    """The descriptor of ``data`` (its sha256 and length, computed here)."""
    return Descriptor(media_type, digest_of(data), len(data), {TITLE: title} if title else None)


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_bytes(
    artifact_type: str,
    layers: list[Descriptor],
    *,
    subject: Descriptor | None = None,
    annotations: dict[str, str] | None = None,
) -> bytes:
    """An OCI 1.1 artifact manifest, in one canonical byte form (sorted keys, no spaces)."""
    doc: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": artifact_type,
        "config": describe(EMPTY_TYPE, EMPTY_BLOB).as_json(),
        "layers": [layer.as_json() for layer in layers],
    }
    if subject is not None:
        doc["subject"] = subject.as_json()
    if annotations:
        doc["annotations"] = dict(sorted(annotations.items()))
    return _canonical(doc)


def index_bytes(manifests: list[Descriptor]) -> bytes:
    """The referrers index (the tag-schema fallback's content): one entry per referrer."""
    entries = sorted((m.as_json() for m in manifests), key=lambda d: str(d["digest"]))
    doc = {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": entries}
    return _canonical(doc)


def fallback_tag(digest: str) -> str:
    """``sha256:HEX`` -> ``sha256-HEX``: the tag a referrers index lives under without the API."""
    return digest.replace(":", "-", 1)


@dataclass(frozen=True)
class Artifact:
    """A manifest read back, checked against what k3kit writes."""

    artifact_type: str
    layers: list[Descriptor]
    subject: str | None
    annotations: dict[str, str]


def parse_manifest(data: bytes, *, label: str) -> Artifact:
    """Read an artifact manifest whose digest the caller has already checked; anything not of
    the shape k3kit writes is ``OCI_MANIFEST_INVALID`` (never a KeyError: these are the
    registry's bytes)."""
    doc = _json_object(data, label)
    if doc.get("mediaType") != MANIFEST_TYPE or doc.get("schemaVersion") != 2:
        raise _invalid(label, f"not an OCI image manifest ({doc.get('mediaType')!r})")
    layers = doc.get("layers")
    if not isinstance(layers, list) or not layers:
        raise _invalid(label, "no layers")
    subject = doc.get("subject")
    return Artifact(
        artifact_type=_text(doc.get("artifactType"), label, "artifactType"),
        layers=[_descriptor(item, label) for item in layers],
        subject=_descriptor(subject, label).digest if subject is not None else None,
        annotations=_annotations(doc.get("annotations"), label),
    )


def parse_index(data: bytes, *, label: str) -> list[Descriptor]:
    """The referrers listed by an image index (the referrers API's answer or the fallback tag)."""
    doc = _json_object(data, label)
    manifests = doc.get("manifests")
    if doc.get("schemaVersion") != 2 or not isinstance(manifests, list):
        raise _invalid(label, "not an OCI image index")
    return [_descriptor(item, label) for item in manifests]


def _descriptor(item: object, label: str) -> Descriptor:
    if not isinstance(item, dict):
        raise _invalid(label, "a descriptor is not an object")
    digest, size = item.get("digest"), item.get("size")
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        raise _invalid(label, f"a descriptor's digest is not sha256:HEX ({digest!r:.80})")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _invalid(label, f"a descriptor's size is not a whole number ({size!r:.40})")
    artifact_type = item.get("artifactType")
    return Descriptor(
        _text(item.get("mediaType"), label, "mediaType"),
        digest,
        size,
        _annotations(item.get("annotations"), label) or None,
        artifact_type if isinstance(artifact_type, str) else None,
    )


def _annotations(value: object, label: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _invalid(label, "annotations are not a map of strings")
    return dict(value)


def _text(value: object, label: str, field: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 255:
        raise _invalid(label, f"{field} is missing or not a short string")
    return value


def _json_object(data: bytes, label: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise _invalid(label, f"not JSON ({exc.__class__.__name__})") from exc
    if not isinstance(doc, dict):
        raise _invalid(label, "not a JSON object")
    return doc


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _invalid(label: str, why: str) -> VerificationError:
    return VerificationError(
        f"{label}: {why}; this is not an artifact k3kit pushed",
        code="OCI_MANIFEST_INVALID",
        hint="push the kit with `k3kit push`, or check the reference",
    )
