"""Evidence files: parsed tolerantly across vLLM versions, strictly as bytes; signed into the kit;
checked by verify (changed, missing, extra)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from k3kit.errors import InputError
from k3kit.evidence import parse_vllm_result, summarize
from k3kit.node.verify import verify_path
from k3kit.signing.keys import load_public
from k3kit.signing.sign import read_receipt
from tests.auditkit import sign_generated
from tests.benchgen import GenRun, Result, make_claims, simulate, write_bundle
from tests.conftest import EXAMPLE, GoldenKit, run_k3kit


def _result(**kwargs: Any) -> Result:
    return simulate(3, concurrency=4, num_prompts=12, output_len=16, **kwargs)


def test_raw_and_summary_levels() -> None:
    raw = parse_vllm_result(json.dumps(_result()).encode(), source="r.json")
    assert raw.level == "raw" and raw.requests is not None and len(raw.requests) == 12
    short = parse_vllm_result(json.dumps(_result(save_detailed=False)).encode(), source="s.json")
    assert short.level == "summary" and short.requests is None
    assert short.latencies is not None  # vLLM keeps latencies without --save-detailed
    assert "no per-request data (run without --save-detailed)" in short.notes


def test_summary_keeps_the_tools_exact_floats() -> None:
    data = _result()
    summary = summarize(parse_vllm_result(json.dumps(data).encode(), source="r.json"))
    assert summary.ttft_ms is not None and summary.ttft_ms.percentiles["99"] is not None
    assert float(summary.ttft_ms.percentiles["99"]) == data["p99_ttft_ms"]
    assert float(summary.output_throughput or 0) == data["output_throughput"]
    assert summary.records == 12


def test_older_versions_are_read_with_notes() -> None:
    result = _result(legacy=True)
    result["request_goodput:"] = 0.5
    parsed = parse_vllm_result(json.dumps(result).encode(), source="old.json")
    assert parsed.values["request_goodput"] == 0.5
    assert parsed.values["failed"] is None
    assert any("request_goodput:" in n for n in parsed.notes)
    assert any('"failed"' in n for n in parsed.notes)
    assert any('"latencies" missing' in n for n in parsed.notes)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"duration": 1.0, "completed": 1, "completed": 2}', "duplicate key"),
        ('{"duration": NaN, "completed": 1}', "NaN"),
        ('{"duration": 1e999, "completed": 1}', "does not fit"),
        ('{"duration": 1.0, "completed": 1.5}', "non-negative integer"),
        ('{"duration": 1.0, "completed": true}', "non-negative integer"),
        ('{"duration": 1.0}', "not a result of a known benchmark tool"),
        ("[1, 2]", "not a JSON object"),
        (
            '{"duration": 1.0, "completed": 1}\n{"duration": 2.0, "completed": 1}',
            "name one with evidence_record",
        ),
        ('{"completed": 1, "request_rate": Infinity}\n', "Infinity is not valid JSON"),
        ('{"completed": 1, "duration": -Infinity}\n', "not strict JSON"),
        (
            '{"duration": 1.0, "completed": 1, "ttfts": [0.1], "itls": [[]], '
            '"output_lens": [1, 2]}',
            "lengths differ",
        ),
        ('{"duration": "1.0", "completed": 1}', "expected a number"),
    ],
)
def test_bad_evidence_is_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(InputError) as info:
        parse_vllm_result(text.encode(), source="bad.json")
    assert why in info.value.message
    assert "bad.json" in info.value.message
    assert info.value.code == "EVIDENCE_MALFORMED"


def _runs() -> list[GenRun]:
    return [
        GenRun("interactive-c4", "interactive", 4, 12, _result()),
        GenRun("batch-c4", "batch", 4, 12, _result(save_detailed=False)),
    ]


@pytest.fixture
def evidence_kit(kit: Path, golden: GoldenKit, tmp_path: Path) -> Path:
    runs = _runs()
    sign_generated(
        kit, golden.key, tmp_path / "pub", make_claims(runs, input_len=2048, output_len=16), runs
    )
    return kit


def test_sign_copies_evidence_and_records_it(
    evidence_kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    pred = read_receipt(
        evidence_kit / "receipt.dsse.json", [load_public(golden.key.public)]
    ).statement.predicate
    by_id = {r.id: r for r in pred.runs}
    raw, short = by_id["interactive-c4"], by_id["batch-c4"]
    assert (raw.evidence_level, short.evidence_level) == ("raw", "summary")
    assert raw.evidence == "evidence/interactive-c4.json"
    source = (tmp_path / "pub" / "results" / "interactive-c4.json").read_bytes()
    assert (evidence_kit / "evidence" / "interactive-c4.json").read_bytes() == source
    assert raw.evidence_sha256 == hashlib.sha256(source).hexdigest()
    assert raw.evidence_bytes == len(source)
    assert pred.definitions_declared and pred.definitions.percentile_method == "numpy-linear"
    report = verify_path(evidence_kit, [load_public(golden.key.public)])
    kit_files = next(c for c in report.checks if c.id == "kit_files")
    assert kit_files.status == "passed" and "2 evidence files match" in kit_files.detail


@pytest.mark.parametrize("damage", ["changed", "missing", "extra"])
def test_verify_rejects_evidence_that_is_not_the_signed_one(
    evidence_kit: Path, golden: GoldenKit, damage: str
) -> None:
    target = evidence_kit / "evidence" / "batch-c4.json"
    if damage == "changed":
        data = bytearray(target.read_bytes())
        data[20] ^= 1
        target.write_bytes(bytes(data))
    elif damage == "missing":
        target.unlink()
    else:
        (evidence_kit / "evidence" / "smuggled.json").write_text("{}")
    proc = run_k3kit("verify", evidence_kit, "--trust", golden.key.public, "--json")
    assert proc.returncode == 1, proc.stderr
    check = next(c for c in json.loads(proc.stdout)["checks"] if c["id"] == "kit_files")
    code = f"EVIDENCE_FILE_{damage.upper()}"
    assert check["code"] == code
    assert [p["code"] for p in check["problems"]] == [code]


def test_sign_refuses_overwrite_and_level_mismatch(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    runs = _runs()
    claims = make_claims(runs, input_len=2048, output_len=16)
    claims_path = write_bundle(tmp_path / "pub", claims, runs)
    proc = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", claims_path)
    assert proc.returncode == 3 and "exists" in proc.stderr  # the golden kit is signed already
    claims.runs[1]["evidence_level"] = "raw"  # but the batch file has no per-request data
    claims_path = write_bundle(tmp_path / "pub2", claims, runs)
    proc = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", claims_path, "--force")
    assert proc.returncode == 3
    assert "evidence_level is 'raw'" in proc.stderr and "--save-detailed" in proc.stderr
    assert not (kit / "evidence").exists()  # nothing written on bad input


def test_claims_may_not_carry_what_sign_computes(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    runs = _runs()
    claims = make_claims(runs, input_len=2048, output_len=16)
    claims.runs[0]["evidence_sha256"] = "0" * 64
    claims_path = write_bundle(tmp_path / "pub", claims, runs)
    proc = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", claims_path, "--force")
    assert proc.returncode == 3 and "computed by k3kit sign" in proc.stderr


def test_resigning_without_evidence_removes_the_old_folder(
    evidence_kit: Path, golden: GoldenKit
) -> None:
    proc = run_k3kit(
        "sign",
        evidence_kit,
        "--key",
        golden.key.private,
        "--claims",
        EXAMPLE / "claims.toml",
        "--force",
    )
    assert proc.returncode == 0, proc.stderr
    assert not (evidence_kit / "evidence").exists()
    assert verify_path(evidence_kit, [load_public(golden.key.public)]).checks[3].status == "passed"


def test_evidence_missing_at_sign_is_bad_input(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    runs = _runs()
    claims_path = write_bundle(
        tmp_path / "pub", make_claims(runs, input_len=2048, output_len=16), runs
    )
    shutil.rmtree(tmp_path / "pub" / "results")
    proc = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", claims_path, "--force")
    assert proc.returncode == 3 and "runs[0].evidence" in proc.stderr
