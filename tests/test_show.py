"""`k3kit show`: the signed content, readable, from a kit that verifies; nothing from one that
does not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.cardkit import signed_statement
from tests.conftest import GoldenKit, KeyFiles, run_k3kit

SERVE = "profiles/interactive/single-node-8gpu/serve.yaml"


def test_show_prints_signed_content(golden: GoldenKit) -> None:
    result = run_k3kit("show", golden.kit, "--trust", golden.key.public)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    statement = signed_statement(golden.kit)
    pred = statement["predicate"]
    lock = json.loads((golden.kit / "weights.lock.json").read_bytes())
    for needle in (
        "kimi-k3-b300x8",
        "1.0.0",
        "stable",
        "2300 USD",
        lock["commit"],
        f"sha256:{pred['kit']['kit_sha256']}",
        f"sha256:{pred['weights']['lock_sha256']}",
        "NVIDIA B300",
        "vllm 0.33.0",
        "interactive-vs-batch",
        "identical-instances",
    ):
        assert needle in out, needle
    for run in pred["runs"]:
        assert run["id"] in out
        for name in ("output_tok_s_per_gpu", "output_tok_s"):
            if name in run.get("metrics", {}):
                assert run["metrics"][name] in out
    for item in pred["limitations"]:
        assert item in out
    assert "audit:" in out and "error(s)" in out


def test_show_json_is_the_signed_statement(golden: GoldenKit) -> None:
    result = run_k3kit("show", golden.kit, "--trust", golden.key.public, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["ok"] is True
    assert doc["statement"] == signed_statement(golden.kit)


def test_show_from_archive(golden: GoldenKit, tmp_path: Path) -> None:
    archive = tmp_path / "kit.tar.gz"
    assert run_k3kit("pack", golden.kit, "-o", archive).returncode == 0
    result = run_k3kit("show", archive, "--trust", golden.key.public)
    assert result.returncode == 0, result.stderr
    assert "archive checksum" in result.stdout


def test_show_tampered_kit_exits_1(golden: GoldenKit, tmp_path: Path) -> None:
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    path = kit / SERVE
    path.write_bytes(path.read_bytes().replace(b"max-num-seqs: 32", b"max-num-seqs: 64"))
    result = run_k3kit("show", kit, "--trust", golden.key.public, "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["error"]["code"] == "KIT_FILE_CHANGED"
    assert "max-num-seqs" not in result.stdout


def test_show_untrusted_key_exits_1(golden: GoldenKit, other_key: KeyFiles) -> None:
    result = run_k3kit("show", golden.kit, "--trust", other_key.public, "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["error"]["code"] == "RECEIPT_UNTRUSTED_KEY"
