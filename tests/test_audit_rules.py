"""Single rules on hand-made variations of a consistent receipt (audited in memory)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from k3kit.audit import AuditReport
from k3kit.models import KitInfo, load
from tests.auditkit import audit_in_memory
from tests.benchgen import GPUS, Claims, GenRun, make_claims, q2, standard_runs
from tests.conftest import GoldenKit


@pytest.fixture(scope="module")
def runs() -> list[GenRun]:
    return standard_runs(save_detailed=False)


@pytest.fixture
def claims(runs: list[GenRun]) -> Claims:
    return make_claims(runs, input_len=2048, output_len=128)


def _audit(golden: GoldenKit, claims: Claims, runs: list[GenRun]) -> AuditReport:
    info = load(KitInfo, json.loads((golden.kit / "kit.json").read_text()), source="kit.json")
    return audit_in_memory(claims, runs, info)


def _found(report: AuditReport, rule: str) -> list[tuple[str, str | None]]:
    return [(f.severity, f.run) for f in report.findings if f.rule == rule]


def test_negative_control_that_fails_leaves_the_claim_unsupported(
    golden: GoldenKit, claims: Claims, runs: list[GenRun]
) -> None:
    claims.controls[0].update(agree=950, agreement_percent=Decimal("95.00"), passed=False)
    report = _audit(golden, claims, runs)
    assert ("warning", "controls") in _found(report, "R28")
    assert ("info", "aa") in _found(report, "R28")


def test_control_marked_passed_against_its_numbers(
    golden: GoldenKit, claims: Claims, runs: list[GenRun]
) -> None:
    claims.controls[0].update(agree=950, agreement_percent=Decimal("95.00"), passed=True)
    report = _audit(golden, claims, runs)
    assert ("error", "aa") in _found(report, "R28")


def test_negative_control_passing_only_by_point_estimate(
    golden: GoldenKit, claims: Claims, runs: list[GenRun]
) -> None:
    claims.controls[0].update(agree=995, agreement_percent=Decimal("99.50"))
    report = _audit(golden, claims, runs)
    assert ("warning", "aa") in _found(report, "R28")
    assert ("error", "controls") not in _found(report, "R28")


def test_percentage_that_is_not_its_k_over_n(
    golden: GoldenKit, claims: Claims, runs: list[GenRun]
) -> None:
    claims.controls[1]["agreement_percent"] = Decimal("93.10")  # 930/1000 is 93.00%
    report = _audit(golden, claims, runs)
    assert _found(report, "R29") == [("pass", "aa"), ("error", "known-diff")]


def test_comparison_across_concurrencies_is_not_like_for_like(
    golden: GoldenKit, claims: Claims, runs: list[GenRun]
) -> None:
    point = claims.comparisons[0]["points"][0]
    point["baseline_run"] = "batch-c32"
    s = runs[0].result["output_throughput"] / GPUS
    b = runs[3].result["output_throughput"] / GPUS
    point["stated_percent"] = q2((s - b) / b * 100)
    report = _audit(golden, claims, runs)
    assert ("error", "interactive-vs-batch@c8") in _found(report, "R27")
    assert ("pass", "interactive-vs-batch@c8") in _found(report, "R25")


def test_evidence_at_another_concurrency(
    golden: GoldenKit, claims: Claims, runs: list[GenRun]
) -> None:
    claims.runs[0]["concurrency"] = 16
    report = _audit(golden, claims, runs)
    assert ("error", "interactive-c8") in _found(report, "R30")


def test_per_gpu_semantics_inferred_or_not(
    golden: GoldenKit, claims: Claims, runs: list[GenRun]
) -> None:
    claims.definitions = None
    report = _audit(golden, claims, runs)
    assert _found(report, "R37") == [("warning", "per-gpu")]
    assert "equal output tok/s" in next(f.message for f in report.findings if f.rule == "R37")
    assert _found(report, "R05") == [("warning", "definitions")]
    for row in claims.runs:
        metrics = row["metrics"]
        assert isinstance(metrics, dict)
        metrics["output_tok_s_per_gpu"] = metrics["output_tok_s_per_gpu"] * 2
    report = _audit(golden, claims, runs)
    assert ("error", "per-gpu") in _found(report, "R37")


def test_output_length_against_ignore_eos(
    golden: GoldenKit, claims: Claims, runs: list[GenRun]
) -> None:
    claims.workload["output_tokens"] = 120  # the runs generated 128 tokens each
    report = _audit(golden, claims, runs)
    assert {s for s, _ in _found(report, "R09")} == {"error"}


def test_ordering_violation(golden: GoldenKit, claims: Claims, runs: list[GenRun]) -> None:
    metrics = claims.runs[0]["metrics"]
    assert isinstance(metrics, dict)
    ttft = metrics["ttft_ms"]
    ttft["p90"] = ttft["p50"] - Decimal("1.00")
    report = _audit(golden, claims, runs)
    assert ("error", "interactive-c8") in _found(report, "R18")


def test_a_rule_that_cannot_compute_reports_not_checkable(
    golden: GoldenKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bounds at load keep absurd numbers out of receipts; if a rule still overflows, the auditor
    # must say "not checkable" for that rule, never crash and never pass it.
    from dataclasses import replace

    from k3kit.audit import audit_path
    from k3kit.audit.findings import RULES
    from k3kit.signing.keys import load_public

    def overflow(ctx: object, out: object) -> None:
        raise OverflowError("integer division result too large for a float")

    monkeypatch.setitem(RULES, "R16", replace(RULES["R16"], check=overflow))
    report = audit_path(golden.kit, [load_public(golden.key.public)])
    r16 = [f for f in report.findings if f.rule == "R16"]
    assert [(f.severity, "too large" in f.message) for f in r16] == [("not-checkable", True)]
    assert any(f.rule == "R20" and f.severity == "warning" for f in report.findings)


def _idle_slots(claims: Claims, runs: list[GenRun]) -> list[GenRun]:
    """Every run offered 4x the slots it filled: evidence and claims agree on the cap."""
    idle = []
    for run in runs:
        result = type(run.result)(run.result)
        result.itl_samples = run.result.itl_samples
        result["max_concurrency"] = run.concurrency * 4
        idle.append(
            GenRun(
                run.id, run.profile, run.concurrency * 4, run.num_prompts, result, run.percentiles
            )
        )
    for row in claims.runs:
        row["concurrency"] = row["concurrency"] * 4
    return idle


def test_low_occupancy_is_blamed_on_ramp_or_client_only_outside_multi_turn(
    golden: GoldenKit, claims: Claims, runs: list[GenRun]
) -> None:
    """A multi-turn workload's clients idle between turns by design: low occupancy is context
    there (info), and a warning that names ramp-up/down or a client-bound run elsewhere."""
    idle = _idle_slots(claims, runs)
    single = [f for f in _audit(golden, claims, idle).findings if f.rule == "R15"]
    assert single and all(f.severity == "warning" for f in single)
    assert "ramp-up/down, a client-bound run, or think time" in single[0].message
    claims.workload["multi_turn"] = True
    multi = [f for f in _audit(golden, claims, idle).findings if f.rule == "R15"]
    assert multi and all(f.severity == "info" for f in multi)
    assert "idle between turns" in multi[0].message and "ramp" not in multi[0].message
