"""The rendered run.sh: it verifies kit, receipt and weights before it starts the engine, and it
reads site.env as data. A stand-in `vllm` on PATH records how it was called; k3kit is the real one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GoldenKit

RUN_SH = "profiles/interactive/single-node-8gpu/run.sh"
FAKE_VLLM = """#!/usr/bin/env bash
if [ "$1" = "--version" ]; then echo 0.33.0; exit 0; fi
{ echo "args: $*"; echo "HF_HUB_OFFLINE=$HF_HUB_OFFLINE"; } > "$FAKE_VLLM_LOG"
"""


@pytest.fixture
def fake_path(tmp_path: Path) -> tuple[str, Path]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    vllm = bindir / "vllm"
    vllm.write_text(FAKE_VLLM)
    vllm.chmod(0o755)
    k3kit = bindir / "k3kit"
    k3kit.write_text(f'#!/usr/bin/env bash\nexec {sys.executable} -m k3kit "$@"\n')
    k3kit.chmod(0o755)
    return f"{bindir}:/usr/bin:/bin", tmp_path / "vllm.log"


def _run(kit: Path, site: Path, fake: tuple[str, Path]) -> subprocess.CompletedProcess[str]:
    path, log = fake
    env = {"PATH": path, "SITE_ENV": str(site), "FAKE_VLLM_LOG": str(log),
           "HOME": os.environ.get("HOME", "/tmp"), "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(["bash", str(kit / RUN_SH)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_run_sh_verifies_then_starts_the_engine_with_the_signed_config(
        kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path,
        fake_path: tuple[str, Path]) -> None:
    site = tmp_path / "site.env"
    site.write_text(f"# site values\nMODEL_DIR={weights}\nK3KIT_TRUST_KEY={golden.key.public}\n"
                    "PORT=8123\n")
    proc = _run(kit, site, fake_path)
    assert proc.returncode == 0, proc.stderr
    assert "VERIFIED" in proc.stderr
    log = fake_path[1].read_text().splitlines()
    config = kit / "profiles/interactive/single-node-8gpu/serve.yaml"
    assert log[0] == f"args: serve {weights} --config {config} --host 127.0.0.1 --port 8123"
    assert log[1] == "HF_HUB_OFFLINE=1"


def test_run_sh_does_not_start_the_engine_when_weights_fail(
        kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path,
        fake_path: tuple[str, Path]) -> None:
    (weights / "config.json").write_text('{"model_type": "something_else"}\n')
    site = tmp_path / "site.env"
    site.write_text(f"MODEL_DIR={weights}\nK3KIT_TRUST_KEY={golden.key.public}\n")
    proc = _run(kit, site, fake_path)
    assert proc.returncode == 1
    assert "NOT VERIFIED" in proc.stderr
    assert not fake_path[1].exists()


def test_run_sh_refuses_site_settings_beyond_its_four_keys(
        kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path,
        fake_path: tuple[str, Path]) -> None:
    site = tmp_path / "site.env"
    site.write_text(f"MODEL_DIR={weights}\nK3KIT_TRUST_KEY={golden.key.public}\n"
                    f"PATH={tmp_path}/evil:/usr/bin\n")
    proc = _run(kit, site, fake_path)
    assert proc.returncode == 3
    assert "'PATH' is not a site setting" in proc.stderr
    assert not fake_path[1].exists()


@pytest.mark.parametrize(("line", "why"), [
    ("MODEL_DIR", "is not KEY=value"),
    ("PORT=-rf", "must not start with '-'"),
])
def test_run_sh_refuses_malformed_site_lines(kit: Path, golden: GoldenKit, tmp_path: Path,
                                             fake_path: tuple[str, Path], line: str,
                                             why: str) -> None:
    site = tmp_path / "site.env"
    site.write_text(f"K3KIT_TRUST_KEY={golden.key.public}\r\n{line}\r\n")
    proc = _run(kit, site, fake_path)
    assert proc.returncode == 3, proc.stderr
    assert why in proc.stderr
    assert not fake_path[1].exists()


def test_run_sh_accepts_crlf_site_files(kit: Path, weights: Path, golden: GoldenKit,
                                        tmp_path: Path, fake_path: tuple[str, Path]) -> None:
    site = tmp_path / "site.env"
    site.write_text(f"MODEL_DIR={weights}\r\nK3KIT_TRUST_KEY={golden.key.public}\r\n\r\n")
    proc = _run(kit, site, fake_path)
    assert proc.returncode == 0, proc.stderr
    assert fake_path[1].read_text().startswith(f"args: serve {weights} --config")
