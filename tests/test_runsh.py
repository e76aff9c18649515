"""The rendered run.sh: a thin wrapper around `k3kit launch` (which does every check).

A stand-in engine on PATH records how it was started; k3kit is the real one.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GoldenKit
from tests.launchkit import FakeEngine, make_fake_engine

PROFILE_DIR = "profiles/interactive/single-node-8gpu"
RUN_SH = f"{PROFILE_DIR}/run.sh"


@pytest.fixture
def fake(tmp_path: Path) -> FakeEngine:
    return make_fake_engine(tmp_path / "engine")


def _run(
    kit: Path, site: Path, fake: FakeEngine, tmp_path: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{fake.bindir}:/usr/bin:/bin",
        "SITE_ENV": str(site),
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        # Without it, launch's runtime folder is /var/lib/k3kit for root (as CI runs): the test
        # would write outside its tmp folder and share that folder with every other run.
        "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    # No GPU here: the node check is skipped through run.sh's pass-through arguments.
    return subprocess.run(
        ["bash", str(kit / RUN_SH), "--no-preflight", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_run_sh_launches_the_engine_with_the_signed_config(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path, fake: FakeEngine
) -> None:
    site = tmp_path / "site.env"
    site.write_text(
        f"# site values\nMODEL_DIR={weights}\nK3KIT_TRUST_KEY={golden.key.public}\nPORT=8123\n"
    )
    proc = _run(kit, site, fake, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "verdict: VERIFIED" in proc.stderr
    record = fake.record()
    assert record["argv"][1:3] == ["serve", os.path.realpath(weights)]
    assert record["argv"][-4:] == ["--host", "127.0.0.1", "--port", "8123"]
    signed = hashlib.sha256((kit / PROFILE_DIR / "serve.yaml").read_bytes()).hexdigest()
    assert record["config"] == [signed]
    assert fake.env()["HF_HUB_OFFLINE"] == "1"
    assert "SITE_ENV" not in fake.env()  # the engine's environment is built from scratch


def test_run_sh_passes_extra_arguments_to_launch(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path, fake: FakeEngine
) -> None:
    site = tmp_path / "site.env"
    site.write_text(f"MODEL_DIR={weights}\nK3KIT_TRUST_KEY={golden.key.public}\n")
    proc = _run(kit, site, fake, tmp_path, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "argv: " in proc.stdout and not fake.log.exists()


def test_run_sh_does_not_start_the_engine_when_weights_fail(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path, fake: FakeEngine
) -> None:
    (weights / "config.json").write_text('{"model_type": "something_else"}\n')
    site = tmp_path / "site.env"
    site.write_text(f"MODEL_DIR={weights}\nK3KIT_TRUST_KEY={golden.key.public}\n")
    proc = _run(kit, site, fake, tmp_path)
    assert proc.returncode == 1
    assert "NOT VERIFIED" in proc.stderr
    assert not fake.log.exists()


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("PATH=/tmp/evil:/usr/bin", "site.env:2: 'PATH' is not a site key"),
        ("MODEL_DIR", "site.env:2: not a KEY=value line"),
        ("PORT=-rf", "site.env:2: PORT='-rf' is not valid"),
    ],
)
def test_run_sh_refuses_what_is_not_a_site_setting(
    kit: Path, golden: GoldenKit, tmp_path: Path, fake: FakeEngine, line: str, why: str
) -> None:
    site = tmp_path / "site.env"
    site.write_text(f"K3KIT_TRUST_KEY={golden.key.public}\r\n{line}\r\n")
    proc = _run(kit, site, fake, tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert why in proc.stderr
    assert not fake.log.exists()


def test_run_sh_accepts_crlf_site_files(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path, fake: FakeEngine
) -> None:
    site = tmp_path / "site.env"
    site.write_text(f"MODEL_DIR={weights}\r\nK3KIT_TRUST_KEY={golden.key.public}\r\n\r\n")
    proc = _run(kit, site, fake, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert fake.record()["argv"][2] == os.path.realpath(weights)
