"""OPTIONAL: every rendered engine config is accepted, with equal values, by the engine's OWN
parser. Needs an engine venv (git-ignored `.engines/venv`, made by scripts/engine-env.sh: the
engine wheels without GPU dependencies plus the CPU torch 2.13.0); skips with the reason when it
is absent. Runs `scripts/engine_parse.py` in that interpreter (about 20 s per engine here).
"""

from __future__ import annotations

import json
import os
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, ROOT, GoldenKit, run_k3kit

ENGINE_PY = Path(os.environ.get("K3KIT_ENGINE_PYTHON", ROOT / ".engines/venv/bin/python"))


def _engine_version(name: str) -> str | None:
    if not ENGINE_PY.exists():
        return None
    proc = subprocess.run(
        [str(ENGINE_PY), "-c", f"import importlib.metadata as m; print(m.version({name!r}))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def _yaml_values(path: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition(": ")
            out[key] = json.loads(value, parse_float=Decimal)
    return out


def _same(ours: object, theirs: object) -> bool:
    if isinstance(theirs, list) and len(theirs) == 1 and not isinstance(ours, list):
        theirs = theirs[0]  # e.g. --served-model-name is nargs="+"
    if isinstance(ours, Decimal):
        return isinstance(theirs, int | float) and Decimal(str(theirs)) == ours
    return ours == theirs


def _check_kit(engine: str, kit: Path) -> int:
    configs = sorted(kit.rglob("serve.yaml"))
    for config in configs:
        proc = subprocess.run(
            [
                str(ENGINE_PY),
                str(ROOT / "scripts/engine_parse.py"),
                engine,
                "/models/x",
                str(config),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, f"{config}: {proc.stderr[-2000:]}"
        parsed = json.loads(proc.stdout.strip().splitlines()[-1])
        for key, value in _yaml_values(config).items():
            assert _same(value, parsed[key]), (config, key, value, parsed[key])
    return len(configs)


def test_vllm_parses_every_rendered_config(tmp_path: Path, golden: GoldenKit) -> None:
    version = _engine_version("vllm")
    if version is None:
        pytest.skip(f"no vLLM in {ENGINE_PY}: run scripts/engine-env.sh to make one")
    package = tmp_path / "package.toml"
    package.write_text(
        (EXAMPLE / "package.toml")
        .read_text()
        .replace('version = "0.33.0"', f'version = "{version}"', 1)
    )
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", tmp_path / "kit")
    assert proc.returncode == 0, proc.stderr
    assert _check_kit("vllm", tmp_path / "kit") == 4


def test_sglang_parses_every_rendered_config(tmp_path: Path, golden: GoldenKit) -> None:
    version = _engine_version("sglang")
    if version is None:
        pytest.skip(f"no SGLang in {ENGINE_PY}: run scripts/engine-env.sh to make one")
    package = tmp_path / "package.toml"
    text = (EXAMPLE / "package.toml").read_text()
    head = text[: text.index("[profiles.interactive]")]
    package.write_text(
        head.replace(
            'name = "vllm"\nversion = "0.33.0"', f'name = "sglang"\nversion = "{version}"'
        ).replace("serve = { data-parallel-size = 8 }", "serve = { tp-size = 64 }")
        + """
[profiles.interactive]
description = "SGLang, low latency."
served_model_name = "kimi-k3"

[profiles.interactive.serve]
tp-size = 8
context-length = 262144
max-running-requests = 32
mem-fraction-static = 0.88
kv-cache-dtype = "fp8_e4m3"
tool-call-parser = "kimi_k3"
reasoning-parser = "kimi_k3"
"""
    )
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", tmp_path / "kit")
    assert proc.returncode == 0, proc.stderr
    assert _check_kit("sglang", tmp_path / "kit") == 2
