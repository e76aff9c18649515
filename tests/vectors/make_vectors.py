"""Regenerate the golden test vectors: a lock, a kit manifest, a signed receipt and an archive
digest, made from fixed inputs with a fixed, test-only Ed25519 key.

Ed25519 signatures and k3kit's outputs are deterministic, so the same inputs must give the same
bytes; ``tests/test_vectors.py`` regenerates into a temporary folder and compares byte for byte.
Run ``python -m tests.vectors.make_vectors`` from the repository root after an intended format
change.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from k3kit._canonical import model_bytes
from k3kit._fs import atomic_write
from k3kit.archive import pack
from k3kit.demo import stand_in_files, write_hf_cache
from k3kit.publish.kit import build, sign
from k3kit.weights.pin import pin_local

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "examples" / "kimi-k3-b300x8"
# TEST-ONLY key: derived from a public seed, it signs nothing but these vectors.
TEST_SEED = hashlib.sha256(b"k3kit test vectors - never use this key").digest()
FIXED_TIME = "2026-11-01T00:00:00Z"
OUTPUTS = ("weights.lock.json", "MANIFEST.json", "kit.json", "receipt.dsse.json", "archive.sha256")


def generate(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        snapshot = write_hf_cache(work / "cache", "moonshotai/Kimi-K3", stand_in_files(2, 4096))
        lock = pin_local(
            snapshot, repo="moonshotai/Kimi-K3", revision=snapshot.name, pinned_at=FIXED_TIME
        )
        atomic_write(work / "weights.lock.json", model_bytes(lock))
        kit = work / "kit"
        build(EXAMPLE / "package.toml", work / "weights.lock.json", kit)
        sign(
            kit,
            Ed25519PrivateKey.from_private_bytes(TEST_SEED),
            EXAMPLE / "claims.toml",
            issued_at=FIXED_TIME,
        )
        digest, _ = pack(kit, work / "kit.tar.gz")
        out.mkdir(parents=True, exist_ok=True)
        for name in OUTPUTS[:-1]:
            atomic_write(out / name, (kit / name).read_bytes(), force=True)
        atomic_write(out / "archive.sha256", (digest + "\n").encode(), force=True)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "golden")
