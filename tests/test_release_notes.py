"""`k3kit release-notes`: a changed setting, a changed pin, and a claim not carried over."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cardkit import build_v110, signed_statement
from tests.conftest import GoldenKit, run_k3kit


@pytest.fixture(scope="module")
def v110(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_v110(tmp_path_factory.mktemp("v110"), golden.key)


def test_release_notes_show_changes_and_claims_not_carried_over(
    golden: GoldenKit, v110: Path
) -> None:
    result = run_k3kit("release-notes", golden.kit, v110, "--trust", golden.key.public, "--json")
    assert result.returncode == 0, result.stderr
    notes = json.loads(result.stdout)
    changes = {(c["section"], c["item"]): (c["old"], c["new"]) for c in notes["changes"]}
    # a changed setting, read from each kit's signed serve.yaml
    assert changes[("settings:batch:serve.yaml", "max-num-seqs")] == ("256", "512")
    # a changed pin: the weight commit and the weight checksum
    old_pred, new_pred = (
        signed_statement(golden.kit)["predicate"],
        signed_statement(v110)["predicate"],
    )
    assert changes[("weights", "commit")] == (
        old_pred["weights"]["commit"],
        new_pred["weights"]["commit"],
    )
    assert ("weights", "weight checksum") in changes
    assert changes[("price", "GPU-hour reference (USD)")] == ("—", "6.50")
    added = [k for k, (o, n) in changes.items() if k[0] == "limitations" and o is None]
    assert added == [
        ("limitations", "The batch profile (max-num-seqs 512) was not measured in this version.")
    ]
    # claims of 1.0.0 that 1.1.0 does not re-measure
    gone = {(i["kind"], i["run"], i["metric"]) for i in notes["not_carried_over"]}
    assert ("run", "interactive-c32", "output_tok_s_per_gpu") in gone
    assert ("run", "batch-c32", "output_tok_s") in gone
    assert ("comparison", "interactive-vs-batch", "output_tok_s_per_gpu") in gone
    assert not any(run == "interactive-c1" for _, run, _ in gone)
    # each version's measurements from its own receipt, nothing inherited
    new_runs = {r["run"] for r in notes["measurements"]["new"]}
    assert new_runs == {r["id"] for r in new_pred["runs"]}
    assert "interactive-c32" not in new_runs
    assert notes["new"]["version"] == "1.1.0" and notes["old"]["version"] == "1.0.0"


def test_release_notes_markdown(golden: GoldenKit, v110: Path, tmp_path: Path) -> None:
    out = tmp_path / "notes.md"
    result = run_k3kit("release-notes", golden.kit, v110, "--trust", golden.key.public, "-o", out)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert text.strip() == result.stdout.strip()
    assert "max-num-seqs: 256 → 512" in text
    assert "interactive-c32" in text and "**not carried over**" in text
    assert "### Measured for 1.1.0 (its own receipt" in text


def test_release_notes_refuse_a_tampered_version(
    golden: GoldenKit, v110: Path, tmp_path: Path
) -> None:
    kit = tmp_path / "kit"
    shutil.copytree(v110, kit)
    (kit / "README.md").write_text("edited\n")
    result = run_k3kit("release-notes", golden.kit, kit, "--trust", golden.key.public, "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["error"]["code"] == "KIT_FILE_CHANGED"
