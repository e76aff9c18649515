"""The README's buyer flow end to end: install -> pull -> launch, with the real huggingface_hub
client against the local test hub and a stand-in engine that records how it was started."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from k3kit.archive import pack
from k3kit.weights.layouts import repo_folder_name
from tests.conftest import KeyFiles, run_k3kit
from tests.hubkit import REPO, ServedKit, make_served_kit, serve
from tests.launchkit import engine_env, make_fake_engine
from tests.testhub.server import TestHub


@pytest.fixture
def hub() -> Iterator[TestHub]:
    yield from serve()


@pytest.fixture
def served(hub: TestHub, tmp_path: Path, signing_key: KeyFiles) -> ServedKit:
    return make_served_kit(hub, tmp_path, signing_key)


def test_install_pull_launch(served: ServedKit, tmp_path: Path) -> None:
    archive = tmp_path / "kimi-k3-b300x8-1.0.0.kit.tar.gz"
    pack(served.kit, archive)
    trust = served.key.public
    proc = run_k3kit("install", archive, "--trust", trust, "--into", tmp_path / "kits", "--json")
    assert proc.returncode == 0, proc.stderr
    installed = Path(json.loads(proc.stdout)["installed"])

    models = tmp_path / "models"
    proc = run_k3kit("pull", installed, "--trust", trust, "--dir", models, "--json")
    assert proc.returncode == 0, proc.stderr
    snapshot = models / repo_folder_name(REPO) / "snapshots" / served.commit

    fake = make_fake_engine(tmp_path / "engine")
    proc = run_k3kit(
        "launch",
        installed,
        "--no-preflight",
        "--profile",
        "interactive",
        "--trust",
        trust,
        "--weights",
        models,
        "--state-dir",
        tmp_path / "state",
        env=engine_env(fake),
    )
    assert proc.returncode == 0, proc.stderr
    record = fake.record()
    assert record["argv"][1:3] == ["serve", os.path.realpath(snapshot)]
    serve_yaml = installed / "profiles/interactive/single-node-8gpu/serve.yaml"
    assert record["config"] == [hashlib.sha256(serve_yaml.read_bytes()).hexdigest()]

    # A shard changed after the pull: the next launch refuses and the engine is not started.
    fake.log.unlink()
    shard = snapshot / "model-00001-of-00002.safetensors"
    blob = Path(os.path.realpath(shard))
    data = bytearray(blob.read_bytes())
    data[0] ^= 0xFF
    blob.write_bytes(bytes(data))
    proc = run_k3kit(
        "launch",
        installed,
        "--no-preflight",
        "--profile",
        "interactive",
        "--trust",
        trust,
        "--weights",
        models,
        "--state-dir",
        tmp_path / "state",
        env=engine_env(fake),
    )
    assert proc.returncode == 1
    assert "NOT VERIFIED" in proc.stderr
    assert not fake.log.exists()
