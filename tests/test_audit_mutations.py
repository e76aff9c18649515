"""Each publisher mistake is caught by its rule, and by no other rule at error level.

A consistent receipt (synthetic vLLM results with --save-detailed, published carefully) is signed
into a real kit and audited: no error. Each mutation changes one published fact the way a real
publisher gets it wrong; the set of error-level rules must become exactly {its rule}.
"""

from __future__ import annotations

import copy
import re
import shutil
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.auditkit import audit_kit, errors, sign_generated
from tests.benchgen import GPUS, Claims, GenRun, make_claims, q2, simulate, standard_runs
from tests.conftest import GoldenKit

INPUT, OUTPUT = 2048, 128


def _runs(*, detailed: bool = True, c4: dict[str, Any] | None = None) -> list[GenRun]:
    """The standard four runs plus a 40-request run at concurrency 4 (no comparison uses it)."""
    runs = standard_runs(save_detailed=detailed, input_len=INPUT, output_len=OUTPUT)
    result = simulate(
        99,
        concurrency=4,
        num_prompts=40,
        input_len=INPUT,
        output_len=OUTPUT,
        save_detailed=detailed,
        **(c4 or {}),
    )
    return [*runs, GenRun("interactive-c4", "interactive", 4, 40, result)]


def _claims(runs: list[GenRun]) -> Claims:
    return make_claims(runs, input_len=INPUT, output_len=OUTPUT)


def _row(claims: Claims, run_id: str) -> dict[str, object]:
    return next(r for r in claims.runs if r["id"] == run_id)


# -- mutations: each returns (claims, runs) with one fact broken --------------------------------


def per_gpu_off_by_one() -> tuple[Claims, list[GenRun]]:
    runs = _runs()
    claims = _claims(runs)
    metrics = _row(claims, "interactive-c32")["metrics"]
    assert isinstance(metrics, dict)
    true = Decimal(repr(runs[2].result["output_throughput"] / GPUS))
    published = metrics["output_tok_s_per_gpu"]
    metrics["output_tok_s_per_gpu"] = published + (
        Decimal("0.01") if published >= true else Decimal("-0.01")
    )
    return claims, runs


def tpot_from_itl() -> tuple[Claims, list[GenRun]]:
    runs = _runs()
    claims = _claims(runs)
    metrics = _row(claims, "interactive-c8")["metrics"]
    assert isinstance(metrics, dict)
    metrics["tpot_ms"] = dict(metrics["itl_ms"])  # the whole TPOT column copied from ITL
    return claims, runs


def tpot_from_itl_in_the_tool_file() -> tuple[Claims, list[GenRun]]:
    runs = _runs()
    result = runs[0].result  # interactive-c8: speculative decoding, ~2 tokens per chunk
    for key in [k for k in result if k.endswith("_tpot_ms")]:
        result[key] = result[key.replace("_tpot_", "_itl_")]
    return _claims(runs), runs


def tpot_from_itl_summary_level() -> tuple[Claims, list[GenRun]]:
    runs = _runs(detailed=False)
    claims = _claims(runs)
    metrics = _row(claims, "interactive-c8")["metrics"]
    assert isinstance(metrics, dict)
    metrics["tpot_ms"] = dict(metrics["itl_ms"])
    return claims, runs


def p99_from_40_samples() -> tuple[Claims, list[GenRun]]:
    runs = _runs()
    claims = _claims(runs)
    metrics = _row(claims, "interactive-c4")["metrics"]
    assert isinstance(metrics, dict)
    metrics["ttft_ms"] = {**metrics["ttft_ms"], "p99": q2(runs[4].result["p99_ttft_ms"])}
    return claims, runs


def percentage_against_wrong_baseline() -> tuple[Claims, list[GenRun]]:
    runs = _runs()
    claims = _claims(runs)
    point = claims.comparisons[0]["points"][0]
    s = runs[0].result["output_throughput"] / GPUS
    b = runs[1].result["output_throughput"] / GPUS
    point["stated_percent"] = q2((s - b) / s * 100)  # divided by the subject, not the baseline
    return claims, runs


def warmup_counted() -> tuple[Claims, list[GenRun]]:
    runs = _runs(c4={"count_warmup": True})
    claims = _claims(runs)
    _row(claims, "interactive-c4")["completed"] = 40  # the publisher believes 40 were timed
    return claims, runs


def failed_request_hidden() -> tuple[Claims, list[GenRun]]:
    runs = _runs(c4={"fail": frozenset({5})})
    claims = _claims(runs)
    _row(claims, "interactive-c4")["completed"] = 40  # 39 completed; the claims say 40
    return claims, runs


def limitation_removed() -> tuple[Claims, list[GenRun]]:
    runs = _runs()
    claims = _claims(runs)
    claims.limitations = [t for t in claims.limitations if "ccuracy" not in t]
    return claims, runs


def tool_percentile_edited() -> tuple[Claims, list[GenRun]]:
    runs = _runs()
    runs[3].result["p99_ttft_ms"] *= 1 + 1e-6  # a hand-edited summary in the result file
    return _claims(runs), runs


def _ms(seconds: list[float], p: float, method: str) -> Decimal:
    from k3kit.audit.stats import percentile

    return q2(percentile(sorted(seconds), p, method) * 1000)


def published_max_rounded_up() -> tuple[Claims, list[GenRun]]:
    """A published maximum E2E latency that no request reached (rounded up to look tidy)."""
    runs = _runs()
    claims = _claims(runs)
    metrics = _row(claims, "batch-c8")["metrics"]
    assert isinstance(metrics, dict)
    true_max = max(runs[1].result["latencies"]) * 1000
    metrics["e2el_ms"]["max"] = Decimal(int(true_max) + 50)
    return claims, runs


def published_p95_by_another_method() -> tuple[Claims, list[GenRun]]:
    """The claims declare numpy-linear percentiles; the p95 was computed by nearest rank."""
    runs = _runs()
    claims = _claims(runs)
    metrics = _row(claims, "interactive-c32")["metrics"]
    assert isinstance(metrics, dict)
    ttfts = runs[2].result["ttfts"]
    assert _ms(ttfts, 95, "nearest-rank") != _ms(ttfts, 95, "numpy-linear")
    metrics["ttft_ms"]["p95"] = _ms(ttfts, 95, "nearest-rank")
    return claims, runs


def published_p95_from_nowhere() -> tuple[Claims, list[GenRun]]:
    """No definitions declared, and a p95 that no percentile method gives from the samples."""
    runs = _runs()
    claims = _claims(runs)
    claims.definitions = None
    metrics = _row(claims, "interactive-c32")["metrics"]
    assert isinstance(metrics, dict)
    metrics["ttft_ms"]["p95"] = q2(max(runs[2].result["ttfts"]) * 1000 * 1.5)
    return claims, runs


MUTATIONS: list[tuple[Callable[[], tuple[Claims, list[GenRun]]], str, str | None]] = [
    (per_gpu_off_by_one, "R11", "interactive-c32"),
    (tpot_from_itl, "R16", "interactive-c8"),
    (tpot_from_itl_in_the_tool_file, "R16", "interactive-c8"),
    (tpot_from_itl_summary_level, "R16", "interactive-c8"),
    (percentage_against_wrong_baseline, "R25", "interactive-vs-batch@c8"),
    (warmup_counted, "R07", "interactive-c4"),
    (failed_request_hidden, "R06", "interactive-c4"),
    (limitation_removed, "R36", "limitations"),
    (tool_percentile_edited, "R19", "batch-c32"),
    (published_max_rounded_up, "R19", "batch-c8"),
    (published_p95_by_another_method, "R19", "interactive-c32"),
    (published_p95_from_nowhere, "R19", "interactive-c32"),
]


def _sign_copy(golden: GoldenKit, root: Path, claims: Claims, runs: list[GenRun]) -> Path:
    """A copy of the golden kit under ``root`` whose receipt is signed with these figures."""
    kit = root / "kit"
    if kit.exists():
        shutil.rmtree(kit)
    shutil.copytree(golden.kit, kit)
    sign_generated(kit, golden.key, root / "publisher", claims, copy.deepcopy(runs))
    return kit


@pytest.fixture
def signed(golden: GoldenKit, tmp_path: Path) -> Callable[[Claims, list[GenRun]], Path]:
    def make(claims: Claims, runs: list[GenRun]) -> Path:
        return _sign_copy(golden, tmp_path, claims, runs)

    return make


@pytest.fixture(scope="module")
def unmutated(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> dict[bool, set[str]]:
    """The error rules of the unmutated receipt, with per-request files (True) and summary-level
    only (False), signed and audited once per module: each mutation below is compared with it.
    It was simulated, signed and audited again for every mutation, the same bytes each time
    (fixed seeds, fixed key and time), for half of each test's time."""
    out = {}
    for detailed in (True, False):
        runs = _runs(detailed=detailed)
        kit = _sign_copy(golden, tmp_path_factory.mktemp("unmutated"), _claims(runs), runs)
        out[detailed] = errors(audit_kit(kit, golden.key))
    return out


@pytest.mark.parametrize("detailed", [True, False], ids=["raw", "summary"])
def test_consistent_receipt_has_no_error(
    detailed: bool, signed: Callable[[Claims, list[GenRun]], Path], golden: GoldenKit
) -> None:
    runs = _runs(detailed=detailed)
    report = audit_kit(signed(_claims(runs), runs), golden.key)
    assert report.facts["verified"] is True
    assert errors(report) == set(), [f for f in report.findings if f.severity == "error"]
    passed = {f.rule for f in report.findings if f.severity == "pass"}
    # the checks that carry the weight actually ran and passed
    assert {"R02", "R03", "R06", "R07", "R11", "R12", "R16", "R19", "R20", "R25", "R28"} <= passed


@pytest.mark.parametrize(
    ("mutate", "rule", "run"), MUTATIONS, ids=[m[0].__name__ for m in MUTATIONS]
)
def test_mutation_flips_exactly_its_rule(
    mutate: Callable[[], tuple[Claims, list[GenRun]]],
    rule: str,
    run: str | None,
    signed: Callable[[Claims, list[GenRun]], Path],
    golden: GoldenKit,
    unmutated: dict[bool, set[str]],
) -> None:
    before = unmutated["summary_level" not in mutate.__name__]
    claims, mutated = mutate()
    report = audit_kit(signed(claims, mutated), golden.key)
    after = errors(report)
    assert before == set()
    assert after == {rule}, [f for f in report.findings if f.severity == "error"]
    found = [f for f in report.findings if f.severity == "error"]
    assert all(f.run == run for f in found)
    assert all(f.expected and f.actual for f in found)


def test_small_sample_percentile_is_a_warning_unless_policy_is_strict(
    signed: Callable[[Claims, list[GenRun]], Path], golden: GoldenKit
) -> None:
    """A p99 from 40 samples is weakly supported, not false: a warning by default; the strict
    policy (MLPerf's minimum samples as a requirement) makes it an error."""
    from k3kit.audit import Policy, audit_path
    from k3kit.signing.keys import load_public

    claims, mutated = p99_from_40_samples()
    kit = signed(claims, mutated)
    report = audit_kit(kit, golden.key)
    assert errors(report) == set()
    r20 = [f for f in report.findings if f.rule == "R20" and f.run == "interactive-c4"]
    assert [f.severity for f in r20] == ["warning"] and "n=40" in r20[0].message
    strict = audit_path(kit, [load_public(golden.key.public)], Policy(strict=True))
    assert errors(strict) == {"R20", "R24"}  # both policy thresholds become errors


def test_raw_evidence_every_statistic_recomputed(
    signed: Callable[[Claims, list[GenRun]], Path], golden: GoldenKit
) -> None:
    """With --save-detailed data, every statistic the tool reported and every published one is
    recomputed from the requests (the generator computed them with ``statistics``, the auditor
    with its own code) and matches."""
    runs = _runs()
    claims = _claims(runs)
    report = audit_kit(signed(claims, runs), golden.key)
    passes = {(f.rule, f.run): f.message for f in report.findings if f.severity == "pass"}
    for run, row in zip(runs, claims.runs, strict=True):
        metrics = row["metrics"]
        assert isinstance(metrics, dict)

        def reported(metric: str, result: dict[str, object] = run.result) -> int:
            pattern = re.compile(rf"^(mean|median|std|p[\d.]+)_{metric}_ms$")
            return sum(1 for key in result if pattern.match(key))

        stats = sum(reported(m) + len(metrics[f"{m}_ms"]) for m in ("ttft", "itl", "e2el"))
        assert passes[("R19", run.id)].startswith(
            f"{stats} TTFT/ITL/E2E statistics match per-request data"
        )
        tpot = reported("tpot") + len(metrics["tpot_ms"])
        assert passes[("R16", run.id)] == f"{tpot} TPOT check(s) hold"
        # 3 tool identities (output, request, total throughput vs totals / duration) and
        # 3 published figures vs the tool (output tok/s, request rate, duration)
        assert passes[("R12", run.id)] == "6 throughput identities hold"
        assert passes[("R13", run.id)].startswith("4 totals match")
        assert ("R14", run.id) in passes and ("R17", run.id) in passes


def test_summary_evidence_leaves_raw_rules_not_checkable(
    signed: Callable[[Claims, list[GenRun]], Path], golden: GoldenKit
) -> None:
    runs = _runs(detailed=False)
    report = audit_kit(signed(_claims(runs), runs), golden.key)
    for rule in ("R13", "R14"):
        found = [f for f in report.findings if f.rule == rule]
        assert {f.severity for f in found} == {"not-checkable"}
        assert all("summary-level evidence" in f.message for f in found)


def test_changed_or_extra_evidence_is_r03_and_not_used(
    signed: Callable[[Claims, list[GenRun]], Path], golden: GoldenKit
) -> None:
    runs = _runs()
    kit = signed(_claims(runs), runs)
    target = kit / "evidence" / "batch-c8.json"
    target.write_bytes(target.read_bytes().replace(b'"completed": 64', b'"completed": 63'))
    (kit / "evidence" / "notes.txt").write_text("unsigned")
    report = audit_kit(kit, golden.key)
    r03 = [(f.severity, f.run) for f in report.findings if f.rule == "R03"]
    assert ("error", "batch-c8") in r03 and ("error", "evidence") in r03
    r13 = next(f for f in report.findings if f.rule == "R13" and f.run == "batch-c8")
    assert r13.severity == "not-checkable" and "evidence unusable: changed" in r13.message


def test_one_file_claimed_for_two_runs(
    signed: Callable[[Claims, list[GenRun]], Path], golden: GoldenKit
) -> None:
    runs = _runs()
    claims = _claims(runs)
    runs[1].result = copy.deepcopy(runs[0].result)  # batch-c8 reuses interactive-c8's result
    report = audit_kit(signed(claims, runs), golden.key)
    assert any(
        f.rule == "R30" and f.severity == "error" and f.run == "interactive-c8"
        for f in report.findings
    )


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (published_max_rounded_up, "published E2E latency max does not match the samples"),
        (
            published_p95_by_another_method,
            "published TTFT p95 is not the numpy-linear percentile of the samples; it matches "
            "nearest-rank",
        ),
        (published_p95_from_nowhere, "no percentile method reproduces the published TTFT p95"),
    ],
    ids=["max", "declared method", "no method"],
)
def test_a_published_statistic_the_tool_did_not_report_is_recomputed(
    mutate: Callable[[], tuple[Claims, list[GenRun]]],
    words: str,
    signed: Callable[[Claims, list[GenRun]], Path],
    golden: GoldenKit,
) -> None:
    """A figure only the publisher printed (a max, a p95) has no tool value to compare with:
    R19 recomputes it from the per-request samples and names what went wrong."""
    claims, mutated = mutate()
    report = audit_kit(signed(claims, mutated), golden.key)
    found = [f.message for f in report.findings if f.rule == "R19" and f.severity == "error"]
    assert len(found) == 1 and found[0].startswith(words), found
