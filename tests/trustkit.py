"""Test helpers for roots of trust, threshold receipts and rollback: real keys, real kits."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from securesystemslib.formats import encode_canonical
from tuf.api.metadata import Root

from k3kit._fs import atomic_write
from k3kit.publish.kit import build, sign
from k3kit.signing.keys import keyid, load_private, write_keypair
from k3kit.signing.sign import sign_envelope
from k3kit.signing.signers import PemSigner
from k3kit.signing.trust.edit import create, sign_root
from tests.conftest import EXAMPLE, FIXED_TIME, KeyFiles

FAR = "2099-01-01T00:00:00Z"
PACKAGE = "kimi-k3-b300x8/stable"


def keypair(folder: Path, name: str) -> KeyFiles:
    paths, _ = write_keypair(folder / name, None)
    return KeyFiles(paths.private, paths.public)


def signer(key: KeyFiles) -> PemSigner:
    return PemSigner.from_file(key.private, None)


def pub(key: KeyFiles):  # type: ignore[no-untyped-def]
    return signer(key).public_key()


def kid(key: KeyFiles) -> str:
    return keyid(pub(key))


def root_v1(
    root_keys: Sequence[KeyFiles],
    release: Sequence[KeyFiles],
    *,
    root_threshold: int = 1,
    release_threshold: int = 1,
    expires: str = FAR,
) -> Root:
    return create(
        root_keys=[pub(k) for k in root_keys],
        root_threshold=root_threshold,
        release_keys=[pub(k) for k in release],
        release_threshold=release_threshold,
        expires=expires,
    )


def with_version(body: Root, version: int) -> Root:
    """A copy of ``body`` claiming ``version`` (an attacker's hand-numbered root)."""
    out = copy.deepcopy(body)
    out.version = version
    return out


def write_root(path: Path, body: Root, signers: Sequence[KeyFiles]) -> Path:
    atomic_write(path, sign_root(body, [signer(k) for k in signers]), force=True)
    return path


def canonical(obj: dict[str, Any]) -> bytes:
    """TUF's canonical JSON (securesystemslib's): the bytes a TUF signature covers."""
    text = encode_canonical(obj)
    assert text is not None  # None only when an output function is given
    return text.encode()


def raw_root(signed: dict[str, Any], signers: Sequence[KeyFiles]) -> bytes:
    """TUF root JSON around ``signed`` exactly as given, signed over its canonical JSON by
    ``signers``: what an attacker holding those keys (or a careless publisher) can write, without
    python-tuf's constructor refusing it first."""
    payload = canonical(signed)
    sigs = [{"keyid": kid(k), "sig": signer(k).sign(payload).hex()} for k in signers]
    return json.dumps({"signed": signed, "signatures": sigs}, indent=1).encode()


def build_kit(
    folder: Path, lock: Path, key: KeyFiles, *, sequence: int = 1, version: str = "1.0.0"
) -> Path:
    """A signed kit whose package.toml differs from the example only in sequence/version."""
    text = (EXAMPLE / "package.toml").read_text()
    text = text.replace("sequence = 1", f"sequence = {sequence}")
    text = text.replace('version = "1.0.0"', f'version = "{version}"')
    package = folder / "package.toml"
    folder.mkdir(parents=True, exist_ok=True)
    package.write_text(text)
    kit = folder / "kit"
    build(package, lock, kit)
    sign(kit, load_private(key.private, None), EXAMPLE / "claims.toml", issued_at=FIXED_TIME)
    return kit


def attach(kit: Path, *roots: Path) -> None:
    for r in roots:
        data = r.read_bytes()
        version = json.loads(data)["signed"]["version"]
        atomic_write(kit / "root" / f"{version}.root.json", data, force=True)


def resign_receipt(kit: Path, keys: Sequence[KeyFiles]) -> None:
    """Replace the receipt's signatures by ones from ``keys`` over the same payload."""
    env = json.loads((kit / "receipt.dsse.json").read_bytes())
    payload = base64.b64decode(env["payload"])
    data = sign_envelope(payload, env["payloadType"], [signer(k) for k in keys])
    atomic_write(kit / "receipt.dsse.json", data, force=True)


def duplicate_signature(kit: Path, *, hint: str | None = None) -> None:
    """Repeat the receipt's only signature (optionally under another keyid hint)."""
    path = kit / "receipt.dsse.json"
    env = json.loads(path.read_bytes())
    first = dict(env["signatures"][0])
    if hint is not None:
        first["keyid"] = hint
    env["signatures"].append(first)
    path.write_text(json.dumps(env))
