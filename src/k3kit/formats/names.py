"""The one home of a kit's file names: every module that writes, lists or reads one imports it.

A name spelt in two places is a name that can drift: a publisher writing ``kit.json`` and a
verifier reading a renamed constant would each pass their own tests and fail together. These are
part of the kit format (docs/formats.md); changing one is a format change.
"""

from __future__ import annotations

MANIFEST_NAME = "MANIFEST.json"
RECEIPT_NAME = "receipt.dsse.json"
MANIFEST_SIG_NAME = "MANIFEST.json.sig"  # the optional SSH signature over MANIFEST.json
KIT_INFO_NAME = "kit.json"
LOCK_NAME = "weights.lock.json"
