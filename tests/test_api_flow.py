"""The buyer's whole path through the public API alone: pin from a hub, build and sign, pull at
the pinned commit, install, and plan the launch, with the library's default hub client against
the local test hub and a stand-in engine on a real PATH.

``docs/api.md`` shows the publisher's side on local folders; this is the other half, the one a
deployment tool built on k3kit would call, and it must need nothing but ``import k3kit``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import k3kit
from tests.conftest import EXAMPLE, FIXED_TIME, KeyFiles
from tests.hubkit import REPO, files_v1, serve
from tests.launchkit import make_fake_engine
from tests.testhub.server import TestHub


@pytest.fixture
def hub() -> Iterator[TestHub]:
    yield from serve()


def test_pin_pull_install_and_plan_through_the_public_api(
    hub: TestHub, signing_key: KeyFiles, tmp_path: Path
) -> None:
    files = files_v1()
    commit = hub.commit(REPO, files)
    public = k3kit.load_public(signing_key.public)

    # Publisher: the default client (huggingface_hub) against the hub's endpoint.
    lock = k3kit.pin_hub(REPO, "main", endpoint=hub.url, pinned_at=FIXED_TIME)
    assert lock.commit == commit and lock.source.endpoint == hub.url
    assert {f.path for f in lock.files} == set(files)
    k3kit.write_lock(lock, tmp_path / "weights.lock.json")
    k3kit.build_kit(EXAMPLE / "package.toml", tmp_path / "weights.lock.json", tmp_path / "kit")
    k3kit.sign_kit(
        tmp_path / "kit",
        k3kit.load_private(signing_key.private, None),
        EXAMPLE / "claims.toml",
        issued_at=FIXED_TIME,
    )

    # Buyer: pull with the verified lock's own endpoint (no endpoint given), then install.
    pulled = k3kit.pull_weights(tmp_path / "kit", tmp_path / "hf", trusted=[public], workers=2)
    assert pulled.ok, (pulled.problems, pulled.errors)
    assert pulled.files_downloaded == len(files) and pulled.root.name == commit
    installed = k3kit.install_kit(tmp_path / "kit", [public], tmp_path / "opt")
    assert installed.path.parent == tmp_path / "opt" and not installed.already_installed
    assert installed.report.ok and installed.kit_sha256 == installed.report.facts["kit_sha256"]

    # Launch plan: verified again, engine found on the PATH the caller passes, nothing started.
    engine = make_fake_engine(tmp_path / "engine")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    steps: list[str] = []
    plan = k3kit.plan_launch(
        installed.path,
        [public],
        profile="interactive",
        weights=pulled.root,
        runtime_dir=runtime,
        base_env={"PATH": f"{engine.bindir}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path)},
        on_step=steps.append,
    )
    assert plan.executable == str(engine.bindir / "vllm")
    assert (plan.engine, plan.engine_version, plan.profile) == ("vllm", "0.33.0", "interactive")
    assert plan.kit_sha256 == installed.kit_sha256
    assert plan.weights_root == pulled.root.resolve()
    assert str(plan.config_path) in plan.argv and plan.config_path.parent == runtime
    assert plan.env["HOME"] == str(tmp_path) and "HF_TOKEN" not in plan.env
    assert steps, "the caller is told each step"
    assert not engine.log.exists(), "planning starts nothing"

    # A second install of the same kit is a no-op that says so.
    again = k3kit.install_kit(tmp_path / "kit", [public], tmp_path / "opt")
    assert again.already_installed and again.path == installed.path
