"""R30's workload-length checks on real files: the receipt's length distribution against what the
tool that wrote the evidence drew, by that tool's own convention (k3kit.evidence.lengths).

The SGLang lines (tests/data/real/sglang-llama70b-online.jsonl, SOURCES.md) were run with
``--random-input-len 1024 --random-output-len 1024 --random-range-ratio 0.0``: by SGLang's rule
every prompt is uniform in [1, 1024] (the file's own total is 508.7 tokens per prompt), not
1024 long. Each fabrication is a receipt a publisher would write to make that run look like
longer prompts."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from k3kit.audit import AuditReport
from tests.conftest import GoldenKit
from tests.realcorpus import RealKits, audit_cases, case

SGLANG = "sglang-llama70b-online.jsonl"


@pytest.fixture(scope="module")
def kits(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> RealKits:
    return RealKits(golden, tmp_path_factory.mktemp("length-kits"))


def _audit(kits: RealKits, name: str, record: int | None, **workload: Any) -> AuditReport:
    wl, row, data = case(name, record)
    for key, value in workload.items():
        if value is None:
            wl.pop(key, None)
        else:
            wl[key] = value
    return audit_cases([(wl, row, data)], kits)


def _r30(report: AuditReport, severity: str) -> list[str]:
    return [f.message for f in report.findings if f.rule == "R30" and f.severity == severity]


def test_honest_sglang_receipt_states_sglangs_range(kits: RealKits) -> None:
    report = _audit(kits, SGLANG, 0)
    assert not [m for m in _r30(report, "error") if "lengths" in m or "convention" in m]


def test_sglang_run_claimed_as_fixed_1024_token_prompts(kits: RealKits) -> None:
    """The attacker drops the ratio: "1024-token prompts" over prompts of 1..1024 tokens."""
    report = _audit(
        kits, SGLANG, 0, lengths="fixed", range_ratio=None, range_convention=None, ignore_eos=True
    )
    errors = _r30(report, "error")
    assert any(
        "declares input lengths in [1024, 1024]" in m and "asked the tool for [1, 1024]" in m
        for m in errors
    ), errors


def test_sglang_ratio_read_by_vllms_convention(kits: RealKits) -> None:
    """Same ratio, vLLM's meaning: r = 0 would be exactly L there."""
    report = _audit(kits, SGLANG, 0, range_convention="vllm")
    errors = _r30(report, "error")
    assert any("reads its range ratio by vllm's convention" in m for m in errors), errors
    assert any("asked the tool for [1, 1024]" in m for m in errors), errors


def test_sglang_ratio_misstated(kits: RealKits) -> None:
    """A ratio of 0.8 narrows the claimed range to [819, 1024] (mean 921 instead of 512)."""
    report = _audit(kits, SGLANG, 0, range_ratio=Decimal("0.8"))
    errors = _r30(report, "error")
    assert any("declares output lengths in [819, 1024]" in m for m in errors), errors


def test_llmperf_has_no_range_ratio(kits: RealKits) -> None:
    """llmperf spreads lengths by a standard deviation; a ranged workload misdescribes it."""
    report = _audit(
        kits,
        "llmperf-groq_70b.json",
        None,
        lengths="ranged",
        range_ratio=Decimal("0.1"),
        input_tokens=550,
        output_tokens=150,
    )
    assert any("llmperf has no range ratio" in m for m in _r30(report, "warning"))


@pytest.mark.parametrize("ratio", [1e-30, -0.5, 7.0])
def test_hostile_range_ratio_in_the_evidence_is_no_verdict_and_no_crash(
    kits: RealKits, ratio: float
) -> None:
    """A file whose recorded ratio no SGLang run could write (a denormal-small, negative or
    above-one ratio) gives no range to compare with: no length finding, and the audit completes."""
    wl, row, data = case(SGLANG, 0)
    line = json.loads(data.splitlines()[0])
    line["random_range_ratio"] = ratio
    edited = json.dumps(line).encode() + b"\n"
    report = audit_cases([(wl, row, edited)], kits, evidence={row["id"]: edited})
    assert not [m for m in _r30(report, "error") if "asked the tool for" in m]
    assert any(f.rule == "R30" for f in report.findings)
