"""Attacks on the receipt: its envelope, its signature and its parser, without the key."""

from __future__ import annotations

import base64
import json
import os
import shutil
from typing import Any

from tests.adversarial.corpus import Argv, Workbench, attack
from tests.conftest import make_kit, make_snapshot

RECEIPT = "receipt.dsse.json"


def _envelope(w: Workbench) -> dict[str, Any]:
    envelope: dict[str, Any] = json.loads((w.kit() / RECEIPT).read_text())
    return envelope


def _write(w: Workbench, env: dict) -> None:  # type: ignore[type-arg]
    (w.kit() / RECEIPT).write_text(json.dumps(env))


@attack("RECEIPT_KIT_MISMATCH")
def receipt_swapped_between_kits(w: Workbench) -> Argv:
    """A genuine receipt of another kit by the same publisher."""
    other = make_kit(
        w.root / "other",
        w.golden.key,
        make_snapshot(w.root / "other-cache", shards=2, shard_bytes=1024),
    )
    shutil.copy(other.kit / RECEIPT, w.kit() / RECEIPT)
    return ["verify", w.kit(), "--trust", w.trust]


@attack("RECEIPT_UNTRUSTED_KEY")
def receipt_payload_type_changed(w: Workbench) -> Argv:
    env = _envelope(w)
    env["payloadType"] = "application/json"  # PAE binds it: no signature verifies
    _write(w, env)
    return ["verify", w.kit(), "--trust", w.trust]


@attack("RECEIPT_UNTRUSTED_KEY")
def receipt_signature_bit_flip(w: Workbench) -> Argv:
    env = _envelope(w)
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[5] ^= 1
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    _write(w, env)
    return ["verify", w.kit(), "--trust", w.trust]


@attack("RECEIPT_MALFORMED")
def receipt_duplicate_keys_in_envelope(w: Workbench) -> Argv:
    raw = (w.kit() / RECEIPT).read_text()
    (w.kit() / RECEIPT).write_text(raw.replace('{"payload":', '{"payload":"e30=","payload":', 1))
    return ["verify", w.kit(), "--trust", w.trust]


@attack("RECEIPT_MISSING")
def receipt_missing(w: Workbench) -> Argv:
    (w.kit() / RECEIPT).unlink()
    return ["verify", w.kit(), "--trust", w.trust]


@attack("RECEIPT_MISSING", timeout=30)
def receipt_replaced_by_a_fifo(w: Workbench) -> Argv:
    """A FIFO where the receipt belongs must not hang the verifier (opened non-blocking)."""
    (w.kit() / RECEIPT).unlink()
    os.mkfifo(w.kit() / RECEIPT)
    return ["verify", w.kit(), "--trust", w.trust]


@attack("RECEIPT_MALFORMED")
def receipt_integer_of_5000_digits(w: Workbench) -> Argv:
    """Python's int() refuses more than 4,300 digits with a bare ValueError (it was exit 70)."""
    raw = (w.kit() / RECEIPT).read_bytes()
    (w.kit() / RECEIPT).write_bytes(b'{"n":' + b"7" * 5000 + b"," + raw[1:])
    return ["verify", w.kit(), "--trust", w.trust]


@attack("RECEIPT_MALFORMED")
def receipt_payload_type_lone_surrogate(w: Workbench) -> Argv:
    """A lone surrogate decodes from JSON but cannot be encoded for the PAE (it was exit 70)."""
    raw = (w.kit() / RECEIPT).read_text()
    env = json.loads(raw)
    evil = raw.replace(json.dumps(env["payloadType"]), '"application/vnd.in-toto+json\\ud800"')
    assert evil != raw
    (w.kit() / RECEIPT).write_text(evil)
    return ["verify", w.kit(), "--trust", w.trust]


@attack("RECEIPT_MALFORMED")
def receipt_deeply_nested_envelope(w: Workbench) -> Argv:
    (w.kit() / RECEIPT).write_text("[" * 100_000 + "]" * 100_000)
    return ["verify", w.kit(), "--trust", w.trust]


@attack("TRUST_DUPLICATE_KEY", exit_code=3)
def trust_same_key_given_twice(w: Workbench) -> Argv:
    return ["verify", w.kit(), "--trust", w.trust, "--trust", w.trust]


# The envelope is read before any signature is checked, by verify's pydantic-free reader
# (k3kit.models.lite): each shape the DSSE model refuses must be refused there too, with the
# receipt's code and never an internal error.


@attack("RECEIPT_MALFORMED")
def receipt_signatures_as_an_object(w: Workbench) -> Argv:
    env = _envelope(w)
    env["signatures"] = {"0": env["signatures"][0]}
    _write(w, env)
    return ["verify", w.kit(), "--trust", w.trust]


@attack("RECEIPT_MALFORMED")
def receipt_signature_as_a_number(w: Workbench) -> Argv:
    env = _envelope(w)
    env["signatures"][0]["sig"] = 12345
    _write(w, env)
    return ["verify", w.kit(), "--trust", w.trust]


@attack("RECEIPT_MALFORMED")
def receipt_seventeen_signatures(w: Workbench) -> Argv:
    env = _envelope(w)
    env["signatures"] = env["signatures"] * 17  # the model allows 16: a bound on the work
    _write(w, env)
    return ["verify", w.kit(), "--trust", w.trust]


@attack("RECEIPT_MALFORMED")
def receipt_payload_type_true(w: Workbench) -> Argv:
    env = _envelope(w)
    env["payloadType"] = True
    _write(w, env)
    return ["verify", w.kit(), "--trust", w.trust]
