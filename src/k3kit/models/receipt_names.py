"""The receipt's fixed type names and subject names (DSSE, in-toto Statement v1, k3kit's
predicate), in a module of their own so that a reader can name them without importing the
pydantic models (``verify``'s start-up: docs/performance.md)."""

from __future__ import annotations

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://k3kit.dev/receipt/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
KIT_SUBJECT = "kit:MANIFEST.json"
WEIGHTS_SUBJECT = "weights:weights.lock.json"
