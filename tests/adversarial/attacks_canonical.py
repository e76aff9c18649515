"""Signed documents that are not canonical JSON, signed by the genuine publisher key (a hand-made
or hostile kit): since issue 23's seventh pass the stdlib's C encoder writes the canonical bytes
that ``require_canonical`` compares with, so each spelling an encoder could get wrong (``\\/``,
``\\u0061``, an escaped non-ASCII character, a surrogate pair, key order) is signed here and must
still be refused. The hashes and signatures all match: only the canonical-bytes check stands.

Without the key the same respelling is refused earlier (the bytes' sha256 is what MANIFEST.json,
kit.json and the receipt sign); these cases take that check away on purpose."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

from k3kit._canonical import dumps
from k3kit._fs import atomic_write
from k3kit._sha256 import sha256_hex
from k3kit.formats.manifest import RECEIPT_NAME, build_manifest, manifest_bytes
from k3kit.models import PAYLOAD_TYPE
from k3kit.signing.keys import load_private
from k3kit.signing.sign import sign_envelope
from tests.adversarial.corpus import Argv, Workbench, attack

Respell = Callable[[bytes], bytes]


def _first(old: bytes, new: bytes) -> Respell:
    def respell(data: bytes) -> bytes:
        assert old in data, (old, data[:80])
        return data.replace(old, new, 1)

    return respell


def _sealed(w: Workbench, kit: Path, manifest: bytes) -> Path:
    """MANIFEST.json written as ``manifest``, and a receipt signing those very bytes' sha256 and
    the lock's (whatever either's spelling)."""
    from tests.launchkit import sign_receipt  # as attacks_deploy imports the kit helpers

    atomic_write(kit / "MANIFEST.json", manifest, force=True)
    lock = (kit / "weights.lock.json").read_bytes()
    sign_receipt(kit, w.golden.key, kit_sha256=sha256_hex(manifest), lock_sha256=sha256_hex(lock))
    return kit


def _manifest_respelt(w: Workbench, respell: Respell) -> Path:
    """MANIFEST.json written otherwise, and a receipt signing those very bytes' sha256."""
    kit = w.kit()
    return _sealed(w, kit, respell(manifest_bytes(build_manifest(kit))))


def _lock_respelt(w: Workbench, respell: Respell) -> Path:
    """weights.lock.json written otherwise; kit.json, MANIFEST.json and the receipt all name the
    new bytes' sha256 (everything a publisher's tool would sign)."""
    kit = w.kit()
    lock = respell((kit / "weights.lock.json").read_bytes())
    atomic_write(kit / "weights.lock.json", lock, force=True)
    info = json.loads((kit / "kit.json").read_bytes())
    info["weights"]["lock_sha256"] = sha256_hex(lock)
    atomic_write(kit / "kit.json", dumps(info), force=True)
    return _sealed(w, kit, manifest_bytes(build_manifest(kit)))


def _payload_respelt(w: Workbench, respell: Respell) -> Path:
    """The genuine receipt's statement written otherwise and signed again with the genuine key."""
    kit = w.kit()
    envelope = json.loads((kit / RECEIPT_NAME).read_bytes())
    payload = respell(base64.b64decode(envelope["payload"]))
    key = load_private(w.golden.key.private, None)
    atomic_write(kit / RECEIPT_NAME, sign_envelope(payload, PAYLOAD_TYPE, key), force=True)
    return kit


def _verify(w: Workbench, kit: Path) -> Argv:
    return ["verify", kit, "--trust", w.trust]


@attack("JSON_NOT_CANONICAL")
def canonical_receipt_payload_with_an_escaped_solidus_resigned(w: Workbench) -> Argv:
    """``https:\\/\\/in-toto.io``: JSON.parse reads the same URL; the C encoder writes ``/``."""
    return _verify(w, _payload_respelt(w, _first(b"https://", b"https:\\/\\/")))


@attack("JSON_NOT_CANONICAL")
def canonical_receipt_payload_with_an_escaped_letter_resigned(w: Workbench) -> Argv:
    return _verify(w, _payload_respelt(w, _first(b'"_type"', b'"\\u005Ftype"')))


@attack("JSON_NOT_CANONICAL")
def canonical_receipt_payload_with_an_escaped_del_resigned(w: Workbench) -> Argv:
    """DEL is written as itself by RFC 8785; ``\\u007f`` is another spelling of the same text."""
    return _verify(w, _payload_respelt(w, _first(b'"_type":"', b'"_type":"\\u007f')))


@attack("JSON_NOT_CANONICAL")
def canonical_receipt_payload_with_members_swapped_resigned(w: Workbench) -> Argv:
    """The statement's top-level members in reverse order (the values are unchanged)."""

    def swap(data: bytes) -> bytes:
        members = json.loads(data)
        reordered = dict(reversed(list(members.items())))
        return json.dumps(reordered, ensure_ascii=False, separators=(",", ":")).encode()

    return _verify(w, _payload_respelt(w, swap))


@attack("JSON_NOT_CANONICAL")
def canonical_receipt_payload_with_a_line_separator_escaped_resigned(w: Workbench) -> Argv:
    """U+2028 in a value, spelt ``\\u2028`` (JavaScript-safe) where RFC 8785 writes it raw."""
    return _verify(w, _payload_respelt(w, _first(b'"_type":"', b'"_type":"\\u2028')))


@attack("JSON_NOT_CANONICAL")
def canonical_receipt_payload_ascii_only_with_an_emoji_as_a_surrogate_pair(
    w: Workbench,
) -> Argv:
    """An astral character written ``\\uD83D\\uDE00`` (the form ``ensure_ascii`` writes)."""
    return _verify(w, _payload_respelt(w, _first(b'"_type":"', b'"_type":"\\uD83D\\uDE00')))


@attack("JSON_NOT_CANONICAL")
def canonical_manifest_with_an_escaped_solidus_resigned(w: Workbench) -> Argv:
    """A path under profiles/ spelt ``profiles\\/...`` in MANIFEST.json, its exact bytes signed."""
    return _verify(w, _manifest_respelt(w, _first(b"profiles/", b"profiles\\/")))


@attack("JSON_NOT_CANONICAL")
def canonical_manifest_with_a_trailing_newline_resigned(w: Workbench) -> Argv:
    return _verify(w, _manifest_respelt(w, lambda data: data + b"\n"))


@attack("JSON_NOT_CANONICAL")
def canonical_lock_with_an_escaped_letter_resigned(w: Workbench) -> Argv:
    return _verify(w, _lock_respelt(w, _first(b'"repo"', b'"\\u0072epo"')))


@attack("JSON_NOT_CANONICAL")
def canonical_lock_with_an_escaped_letter_resigned_at_launch(w: Workbench) -> Argv:
    """The same lock, given to launch: refused before the weights are hashed or the engine run."""
    _lock_respelt(w, _first(b'"repo"', b'"\\u0072epo"'))
    return w.launch("--dry-run")


@attack("JSON_NOT_CANONICAL")
def canonical_receipt_payload_with_astral_keys_in_code_point_order_resigned(
    w: Workbench,
) -> Argv:
    """Two extra members, U+E000 then U+1F600: code-point order, which the C encoder's sort_keys
    would write; RFC 8785 sorts by UTF-16 units (D83D before E000), so these bytes are not
    canonical. Non-ASCII keys must go to rfc8785 and be refused here, before the model sees them."""

    def add(data: bytes) -> bytes:
        assert data.endswith(b"}")
        return data[:-1] + ',"\ue000":1,"\U0001f600":2}'.encode()

    return _verify(w, _payload_respelt(w, add))
