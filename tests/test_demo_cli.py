"""The main job end to end (`k3kit demo`) and the CLI contract: help, exit codes, no tracebacks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import DemoRun, GoldenKit, run_k3kit


def test_demo_runs_end_to_end_and_shows_both_tamper_rejections(
    demo_run: DemoRun, tmp_path: Path
) -> None:
    out, work = demo_run.stdout, tmp_path / "demo"
    shutil.copytree(demo_run.folder, work, symlinks=True)  # the refusal below runs on a copy
    assert "STAND-IN" in out and "1.56 TB" in out
    assert "kit+weights            VERIFIED" in out
    assert "archive+weights        VERIFIED" in out
    assert "tampered kit file      REJECTED (kit_files:KIT_FILE_CHANGED)" in out
    assert "tampered weight shard  REJECTED (weights:WEIGHTS_DIGEST_MISMATCH)" in out
    assert (work / "kimi-k3-b300x8-1.0.0.kit.tar.gz").is_file()
    # the maintenance channel: a second folder updated from 1.0.0 to 1.1.0 over a loopback server
    assert "update   kimi-k3-b300x8 1.0.0 -> " in out and "update   kimi-k3-b300x8 1.1.0 -> " in out
    fleet = sorted(p.name for p in (work / "fleet").iterdir())
    assert fleet == ["kimi-k3-b300x8-1.0.0", "kimi-k3-b300x8-1.1.0"]
    notes = (work / "release-notes-1.1.0.md").read_text()
    assert "max-num-seqs: 256 → 512" in notes
    card = (work / "kimi-k3-b300x8-1.1.0.card.html").read_text()  # the update's own card
    assert '<td data-fact="version">1.1.0</td>' in card
    assert "k3kit install kimi-k3-b300x8-1.1.0.kit.tar.gz" in card
    again = run_k3kit("demo", "--workdir", work)
    assert again.returncode == 3 and "--force" in again.stderr


@pytest.mark.parametrize("verb", ["keygen", "pin", "build", "sign", "pack", "verify", "demo"])
def test_every_verb_has_help_stating_exit_codes(verb: str) -> None:
    proc = run_k3kit(verb, "--help")
    assert proc.returncode == 0
    assert "Exit codes: 0 ok; 1 a check failed" in proc.stdout


def test_usage_error_is_exit_2() -> None:
    assert run_k3kit("verify").returncode == 2


def test_missing_kit_is_bad_input_not_a_traceback(tmp_path: Path, golden: GoldenKit) -> None:
    proc = run_k3kit("verify", tmp_path / "nope", "--trust", golden.key.public)
    assert proc.returncode == 3
    assert "kit not found" in proc.stderr and "Traceback" not in proc.stderr
