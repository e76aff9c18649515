"""The Slurm deploy target: one module (k3kit.publish.deploy.slurm) and one template, opted into by
``[deploy] targets``. The rendered batch scripts pass ``shellcheck``, their ``#SBATCH``
directives follow the topology, and they are run here by bash against stand-in ``srun`` and
``scontrol`` commands (Slurm's own job environment: SLURM_JOB_NODELIST, SLURM_NODEID) to show
the ``k3kit launch`` each node would run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, GoldenKit, run_k3kit

SINGLE = "profiles/interactive/single-node-8gpu/slurm.sbatch"
MULTI = "profiles/batch/multi-node-8x8gpu/slurm.sbatch"
HOSTS = [f"gpu-{i:02d}" for i in range(8)]

# Stand-ins for Slurm's commands: scontrol expands the node list, srun runs the step once per
# node with that node's SLURM_NODEID (as Slurm does with --ntasks-per-node=1), stopping at the
# first task that fails; k3kit records its argv.
SCONTROL = f"""#!/bin/sh
[ "$1 $2" = "show hostnames" ] || exit 2
printf '%s\\n' {" ".join(HOSTS)}
"""
SRUN = """#!/bin/bash
printf '%s\\n' "$*" >> "$RECORD.srun"
nodes=1
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes=*) nodes="${1#--nodes=}"; shift ;;
    --*) shift ;;
    *) break ;;
  esac
done
for ((i = 0; i < nodes; i++)); do SLURM_NODEID=$i "$@" || exit $?; done
"""
K3KIT = """#!/usr/bin/python3
import json, os, sys
with open(os.environ["RECORD"], "a") as f:
    f.write(json.dumps({"node": os.environ.get("SLURM_NODEID"), "argv": sys.argv[1:]}) + "\\n")
"""


@pytest.fixture(scope="module")
def kit(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("slurm")
    package = root / "package.toml"
    package.write_text(
        (EXAMPLE / "package.toml").read_text() + '\n[deploy]\ntargets = ["shell", "slurm"]\n'
    )
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", root / "kit")
    assert proc.returncode == 0, proc.stderr
    return root / "kit"


def _run(
    script: Path, tmp_path: Path, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("scontrol", SCONTROL), ("srun", SRUN), ("k3kit", K3KIT)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    record = tmp_path / "record.jsonl"
    base = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "RECORD": str(record),
        "SITE_ENV": str(tmp_path / "no-site.env"),
    }
    proc = subprocess.run(
        ["bash", str(script), *args],
        env={**base, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return proc, record


def _records(record: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def test_the_kit_lists_a_batch_script_per_profile_and_topology(kit: Path) -> None:
    info = json.loads((kit / "kit.json").read_text())
    assert len(info["profiles"]) == 4
    for prof in info["profiles"]:
        assert {f.split("/", 3)[3] for f in prof["files"]} == {
            "serve.yaml",
            "engine.env",
            "run.sh",
            "slurm.sbatch",
        }
    manifest = json.loads((kit / "MANIFEST.json").read_text())
    assert {SINGLE, MULTI} <= {f["path"] for f in manifest["files"]}
    assert os.stat(kit / MULTI).st_mode & 0o777 == 0o755


def test_sbatch_directives_follow_the_topology(kit: Path) -> None:
    def directives(rel: str) -> list[str]:
        lines = (kit / rel).read_text().splitlines()
        return [line.removeprefix("#SBATCH ") for line in lines if line.startswith("#SBATCH ")]

    assert directives(MULTI) == [
        "--job-name=k3kit-kimi-k3-b300x8-batch",
        "--nodes=8",
        "--ntasks-per-node=1",
        "--gpus-per-node=8",
        "--exclusive",
    ]
    assert directives(SINGLE)[1:4] == ["--nodes=1", "--ntasks-per-node=1", "--gpus-per-node=8"]
    # sbatch stops reading directives at the first command: they must come before `set`.
    text = (kit / MULTI).read_text()
    assert text.rindex("#SBATCH") < text.index("set -euo pipefail")


def test_batch_scripts_pass_shellcheck(kit: Path) -> None:
    tool = shutil.which("shellcheck")
    if tool is None:
        pytest.skip("shellcheck is not installed (scripts/ensure-tools.sh installs it)")
    scripts = sorted(kit.rglob("slurm.sbatch"))
    assert len(scripts) == 4
    proc = subprocess.run(
        [tool, "--severity=style", *map(str, scripts)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_multi_node_job_starts_one_launch_per_node_with_its_rank(kit: Path, tmp_path: Path) -> None:
    proc, record = _run(
        kit / MULTI,
        tmp_path,
        KIT_DIR="/opt/k3kit/kits/kimi",
        MODEL_DIR="/srv/models/kimi",
        K3KIT_TRUST_KEY="/etc/k3kit/publisher.pub",
        SLURM_JOB_NODELIST="gpu-[00-07]",
    )
    assert proc.returncode == 0, proc.stderr
    runs = _records(record)
    assert [r["node"] for r in runs] == [str(i) for i in range(8)]
    for i, run in enumerate(runs):
        assert run["argv"] == [
            "launch",
            "/opt/k3kit/kits/kimi",
            "--node-rank",
            str(i),
            "--profile",
            "batch",
            "--topology",
            "multi-node-8x8gpu",
            "--weights",
            "/srv/models/kimi",
            "--trust",
            "/etc/k3kit/publisher.pub",
            "--leader",
            "gpu-00",
        ]
    step = (tmp_path / "record.jsonl.srun").read_text()
    assert step.startswith("--nodes=8 --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c")


def test_single_node_job_starts_one_launch_and_passes_extra_arguments(
    kit: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site.env"
    site.write_text("MODEL_DIR=/srv/models/kimi\n")
    script = kit / SINGLE
    proc, record = _run(script, tmp_path, "--dry-run", KIT_DIR="/opt/kit", SITE_ENV=str(site))
    assert proc.returncode == 0, proc.stderr
    assert _records(record) == [
        {
            "node": "0",
            "argv": [
                "launch",
                "/opt/kit",
                "--profile",
                "interactive",
                "--topology",
                "single-node-8gpu",
                "--site",
                str(site),
                "--dry-run",
            ],
        }
    ]


def test_a_job_without_kit_dir_stops_before_any_step(kit: Path, tmp_path: Path) -> None:
    proc, record = _run(kit / MULTI, tmp_path, SLURM_JOB_NODELIST="gpu-[00-07]")
    assert proc.returncode != 0
    assert "set KIT_DIR to the installed kit folder" in proc.stderr
    assert not record.exists() and not (tmp_path / "record.jsonl.srun").exists()


def test_a_multi_node_script_run_outside_sbatch_stops_before_any_step(
    kit: Path, tmp_path: Path
) -> None:
    proc, record = _run(kit / MULTI, tmp_path, KIT_DIR="/opt/kit")
    assert proc.returncode != 0 and "submit this script with sbatch" in proc.stderr
    assert not record.exists() and not (tmp_path / "record.jsonl.srun").exists()
