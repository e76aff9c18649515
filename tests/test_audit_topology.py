"""R30 on prefill/decode-disaggregated receipts: a real PD kit, honest and fabricated claims
signed into it with ``k3kit sign``'s code path, audited from the kit folder.

An honest receipt states both pools and divides per-GPU throughput by every GPU of both (24 on
a 1x8 prefill + 2x8 decode layout). Each fabrication below is what a publisher would do to make
a PD kit look better per GPU, or to pass a PD measurement off as another layout."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from k3kit.audit import AuditReport
from tests.auditkit import audit_kit, sign_generated
from tests.benchgen import Claims, GenRun, standard_runs
from tests.conftest import GoldenKit, run_k3kit
from tests.pdkit import pd_claims, pd_package


@pytest.fixture(scope="module")
def runs() -> list[GenRun]:
    return standard_runs(save_detailed=False)


@pytest.fixture(scope="module")
def pd_kit(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pdkit")
    out = root / "kit"
    proc = run_k3kit("build", pd_package(root), "--lock", golden.lock, "-o", out)
    assert proc.returncode == 0, proc.stderr
    return out


def _audit(
    pd_kit: Path, golden: GoldenKit, tmp_path: Path, runs: list[GenRun], claims: Claims
) -> AuditReport:
    kit = tmp_path / "kit"
    shutil.copytree(pd_kit, kit)
    sign_generated(kit, golden.key, tmp_path / "bundle", claims, runs)
    return audit_kit(kit, golden.key)


def _r30(report: AuditReport, severity: str) -> list[str]:
    return [f.message for f in report.findings if f.rule == "R30" and f.severity == severity]


def test_honest_pd_receipt_passes_its_pools(
    pd_kit: Path, golden: GoldenKit, tmp_path: Path, runs: list[GenRun]
) -> None:
    report = _audit(pd_kit, golden, tmp_path, runs, pd_claims(runs))
    assert _r30(report, "error") == []
    passed = _r30(report, "pass")
    assert "prefill pool measured on the kit's target: 1 x 8x NVIDIA B300" in passed
    assert "decode pool measured on the kit's target: 2 x 8x NVIDIA B300" in passed
    assert not [f for f in report.findings if f.rule in ("R11", "R37") and f.severity == "error"]


Fabrication = Callable[[list[GenRun]], Claims]
FABRICATIONS: dict[str, tuple[Fabrication, str]] = {
    # Per-GPU throughput over the decode GPUs only: 1.5x better per GPU than the truth.
    "per_gpu_over_decode_gpus_only": (
        lambda runs: pd_claims(runs, divisor=16, gpu_count=16),
        "environment.gpu_count is not every GPU of the prefill and decode pools",
    ),
    # Honest environment, but each run says it used only the 16 decode GPUs.
    "runs_claim_decode_gpus_only": (
        lambda runs: _with_run_gpus(pd_claims(runs, divisor=16), 16),
        "a disaggregated run is served by both pools",
    ),
    # The receipt shrinks the decode pool to one node (and its GPU count with it).
    "decode_pool_shrunk": (
        lambda runs: pd_claims(runs, divisor=16, gpu_count=16, nodes=2, decode_nodes=1),
        "the kit's decode pool is not the one the receipt says was measured",
    ),
    # The PD measurement is passed off as one aggregated 24-GPU server: no pools stated.
    "pools_left_out": (
        lambda runs: pd_claims(runs, pools=False),
        "the kit runs prefill and decode pools, but the receipt's environment states none",
    ),
}


def _with_run_gpus(claims: Claims, gpus: int) -> Claims:
    for row in claims.runs:
        row["gpus"] = gpus
    return claims


@pytest.mark.parametrize("name", sorted(FABRICATIONS))
def test_pd_fabrication_is_an_r30_error(
    name: str, pd_kit: Path, golden: GoldenKit, tmp_path: Path, runs: list[GenRun]
) -> None:
    make, message = FABRICATIONS[name]
    report = _audit(pd_kit, golden, tmp_path, runs, make(runs))
    assert any(message in text for text in _r30(report, "error")), _r30(report, "error")


def test_pd_receipt_for_an_aggregated_kit_is_an_error(
    golden: GoldenKit, tmp_path: Path, runs: list[GenRun]
) -> None:
    """A PD measurement signed into the single-node kit: the figures are not that kit's."""
    report = _audit(golden.kit, golden, tmp_path, runs, pd_claims(runs))
    assert any(
        "the receipt states prefill and decode pools, but the kit runs one aggregated server"
        in text
        for text in _r30(report, "error")
    )
