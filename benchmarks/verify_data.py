"""Test material for bench_verify.py: synthetic weights, signed kits over them, a stand-in hub.

* Weights are laid out as huggingface_hub's cache does (``blobs/<sha256>`` plus snapshot
  symlinks), so ``k3kit verify`` and ``hf cache verify`` read the very same bytes. Content is a
  seeded BLAKE3 stream: incompressible, reproducible, and cheap to make.
* The kits are real: a fresh Ed25519 key, ``pin_local`` over the files, the built-in example
  package, a signed receipt. One extra kit's lock carries a wrong digest for the first file hashed,
  to time the early exit.
* ``hf cache verify`` always lists the repo tree online; :class:`StandInHub` answers exactly that
  one request (``GET /api/models/<repo>/tree/<rev>``) on 127.0.0.1 with the LFS sha256 of every
  file, which is all huggingface_hub 2.4.0 asks for before hashing.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import blake3

from k3kit._canonical import model_bytes
from k3kit._fs import atomic_write
from k3kit.models import WeightsLock
from k3kit.publish.kit import build, sign
from k3kit.signing.keys import load_private, write_keypair
from k3kit.weights.pin import pin_local

REPO = "moonshotai/Kimi-K3"  # the built-in example package pins this repo name
ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kimi-k3-b300x8"
PIECE = 8 * 1024 * 1024
PINNED_AT = "2026-11-01T00:00:00Z"


def _write_stream(path: Path, seed: str, size: int) -> str:
    """Write ``size`` bytes of a seeded BLAKE3 stream; returns their sha256."""
    xof = blake3.blake3(seed.encode())
    sha = hashlib.sha256()
    with path.open("wb") as handle:
        for offset in range(0, size, PIECE):
            piece = xof.digest(length=min(PIECE, size - offset), seek=offset)
            sha.update(piece)
            handle.write(piece)
    return sha.hexdigest()


def make_hf_cache(cache: Path, sizes: dict[str, int], tag: str) -> Path:
    """An HF cache holding REPO at one synthetic commit; returns the snapshot folder."""
    repo_dir = cache / ("models--" + REPO.replace("/", "--"))
    blobs = repo_dir / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    digests = {}
    for name, size in sorted(sizes.items()):
        tmp = blobs / f".incoming-{name}"
        digest = _write_stream(tmp, f"{tag}:{name}", size)
        tmp.rename(blobs / digest)
        digests[name] = digest
    listing = "".join(f"{n}\0{d}\n" for n, d in sorted(digests.items()))
    commit = hashlib.sha1(listing.encode(), usedforsecurity=False).hexdigest()
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name, digest in digests.items():
        (snapshot / name).symlink_to(Path("../..") / "blobs" / digest)
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / "main").write_text(commit)
    return snapshot


def shard_sizes(shards: int, shard_bytes: int) -> dict[str, int]:
    sizes = {
        f"model-{i:05d}-of-{shards:05d}.safetensors": shard_bytes for i in range(1, shards + 1)
    }
    sizes["config.json"] = 1234
    return sizes


@dataclass(frozen=True)
class Kit:
    kit: Path
    lock: WeightsLock
    snapshot: Path


def make_kit(work: Path, name: str, snapshot: Path, key: Path, *, wrong_first: bool = False) -> Kit:
    """Pin ``snapshot``, build the example kit over it and sign it with ``key``."""
    lock = pin_local(snapshot, repo=REPO, revision=snapshot.name, pinned_at=PINNED_AT)
    if wrong_first:
        first = min(lock.files, key=lambda f: (-f.size, f.path))  # the first file k3kit hashes
        wrong = {"sha256": hashlib.sha256(b"x").hexdigest(), "blake3": blake3.blake3().hexdigest()}
        bad = first.model_copy(update=wrong)
        lock = lock.model_copy(update={"files": [bad if f is first else f for f in lock.files]})
        lock = WeightsLock.model_validate(lock.model_dump(by_alias=True))
    lock_path = work / f"{name}.lock.json"
    atomic_write(lock_path, model_bytes(lock), force=True)
    kit_dir = work / f"{name}-kit"
    build(EXAMPLE / "package.toml", lock_path, kit_dir, force=True)
    sign(kit_dir, load_private(key, None), EXAMPLE / "claims.toml", issued_at=PINNED_AT, force=True)
    return Kit(kit_dir, lock, snapshot)


def make_key(work: Path) -> tuple[Path, Path]:
    private, public = work / "bench.key", work / "bench.pub"
    if not private.exists():
        write_keypair(work / "bench", None)
    return private, public


def dataset_marker(work: Path) -> Path:
    return work / "dataset.json"


def load_or_make(work: Path, params: dict[str, Any], make: Any) -> dict[str, Any]:
    """Reuse a dataset made with the same parameters; otherwise make it afresh."""
    marker = dataset_marker(work)
    if marker.exists():
        saved = json.loads(marker.read_text())
        if saved.get("params") == params:
            return saved  # type: ignore[no-any-return]
    info = {"params": params, **make()}
    marker.write_text(json.dumps(info, indent=2))
    return info


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


class StandInHub:
    """Answers huggingface_hub's recursive tree listing for one repo revision, nothing else."""

    def __init__(self, lock: WeightsLock) -> None:
        entries = []
        for f in lock.files:
            pointer = (
                f"version https://git-lfs.github.com/spec/v1\noid sha256:{f.sha256}\n"
                f"size {f.size}\n"
            ).encode()
            entries.append(
                {
                    "type": "file",
                    "oid": git_blob_sha1(pointer),
                    "size": f.size,
                    "path": f.path,
                    "lfs": {"oid": f.sha256, "size": f.size, "pointerSize": len(pointer)},
                }
            )
        body = json.dumps(entries).encode()
        prefix = f"/api/models/{lock.repo}/tree/{lock.commit}"

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                ok = self.path.split("?")[0].rstrip("/") == prefix
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/json")
                payload = body if ok else b'{"error": "not found"}'
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StandInHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def hf_env(endpoint: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(
        {
            "HF_ENDPOINT": endpoint,
            "HF_HOME": str(home),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
            "HF_HUB_DISABLE_XET": "1",
        }
    )
    return env
