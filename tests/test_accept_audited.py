"""`k3kit accept`'s report is a document `k3kit audit` accepts: zero errors, as a buyer runs both.

The report states the limitations of the run it measured (accuracy was not measured, ...), so the
rule that asks for them (R36) finds them, and every rule that can read its evidence reads it
(R03 does not call available evidence "not available" while R19 reads it). Driven end to end: the
real CLI accepts against the stand-in streaming server, then the real CLI audits the report with
the buyer's key.

One accept run serves the module (it is the slow part, real streaming at real delays): a
module-scoped fixture signs the report once, and every test audits, or tampers with, its own
copy of it, so no test sees another's changes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_k3kit
from tests.test_accept import FASTER_THAN_CLAIMED, _accept, _server
from tests.test_accept import acceptkit as acceptkit  # the shared signed kit (a fixture)


@pytest.fixture(scope="module")
def signed_report(acceptkit: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real acceptance report (the real CLI against the stand-in server), made once."""
    out = tmp_path_factory.mktemp("accepted") / "out"
    with _server(acceptkit, **FASTER_THAN_CLAIMED) as server:
        proc, _ = _accept(acceptkit, server.url, out)
    assert proc.returncode == 0, proc.stderr
    return out


def _copy_of(signed_report: Path, tmp_path: Path) -> Path:
    """This test's own copy of the module's report: what it changes no other test sees."""
    out = tmp_path / "out"
    shutil.copytree(signed_report, out, symlinks=True)
    return out


def test_the_audit_of_an_acceptance_report_has_no_error(
    acceptkit: dict[str, Path], signed_report: Path, tmp_path: Path
) -> None:
    _copy_of(signed_report, tmp_path)
    audit = run_k3kit("audit", tmp_path / "out", "--trust", acceptkit["pub"], "--json")
    doc = json.loads(audit.stdout)
    findings = doc["findings"]
    errors = [f for f in findings if f["severity"] == "error"]
    assert errors == [], errors
    assert audit.returncode == 0, audit.stderr
    assert any(f["rule"] == "R19" and f["severity"] == "pass" for f in findings), findings


def test_the_audit_reads_an_acceptance_reports_evidence_in_every_rule(
    acceptkit: dict[str, Path], signed_report: Path, tmp_path: Path
) -> None:
    _copy_of(signed_report, tmp_path)
    audit = run_k3kit("audit", tmp_path / "out", "--trust", acceptkit["pub"], "--json")
    findings = json.loads(audit.stdout)["findings"]
    r03 = [f for f in findings if f["rule"] == "R03"]
    assert r03 and not any("not available" in f["message"] for f in r03), r03
    runs = {p.stem for p in (tmp_path / "out" / "evidence").glob("*.json")}
    assert runs and {f["run"] for f in r03 if f["severity"] == "pass"} == runs, r03
    r19 = {
        f["run"]
        for f in findings
        if f["rule"] == "R19" and f["severity"] == "pass" and "per-request" in f["message"]
    }
    assert r19 == runs, findings


def _evidence_files(out: Path) -> list[Path]:
    """The report's evidence files (there is at least one)."""
    files = sorted((out / "evidence").glob("*.json"))
    assert files
    return files


def _halve_ttfts(obj: object) -> object:
    """What a seller who wants a faster acceptance would write: every TTFT figure halved."""
    if isinstance(obj, dict):
        return {k: (_scaled(v) if "ttft" in k else _halve_ttfts(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_halve_ttfts(v) for v in obj]
    return obj


def _scaled(value: object) -> object:
    if isinstance(value, list):
        return [_scaled(v) for v in value]
    return value / 2 if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def test_a_faster_evidence_file_swapped_under_a_signed_acceptance_report_is_an_r03_error(
    acceptkit: dict[str, Path], signed_report: Path, tmp_path: Path
) -> None:
    out = _copy_of(signed_report, tmp_path)
    target = _evidence_files(out)[0]
    target.write_text(json.dumps(_halve_ttfts(json.loads(target.read_text()))))
    audit = run_k3kit("audit", out, "--trust", acceptkit["pub"], "--json")
    assert audit.returncode != 0, audit.stdout
    findings = json.loads(audit.stdout)["findings"]
    run = target.stem
    r03 = [f for f in findings if f["rule"] == "R03" and f["run"] == run]
    assert [f["severity"] for f in r03] == ["error"], r03
    assert "changed" in r03[0]["message"], r03
    # The swapped bytes feed no other rule: R19 falls back to the signed tool summary, where the
    # untouched report recomputes every statistic from the per-request data.
    r19 = [f["message"] for f in findings if f["rule"] == "R19" and f["run"] == run]
    assert r19 and not any("per-request" in m for m in r19), r19


def test_a_file_planted_in_an_acceptance_reports_evidence_folder_is_an_r03_error(
    acceptkit: dict[str, Path], signed_report: Path, tmp_path: Path
) -> None:
    out = _copy_of(signed_report, tmp_path)
    genuine = _evidence_files(out)[0]
    (out / "evidence" / "extra-run.json").write_bytes(genuine.read_bytes())
    audit = run_k3kit("audit", out, "--trust", acceptkit["pub"], "--json")
    assert audit.returncode != 0, audit.stdout
    r03 = [f for f in json.loads(audit.stdout)["findings"] if f["rule"] == "R03"]
    planted = [f for f in r03 if "extra-run.json" in f["message"]]
    assert [f["severity"] for f in planted] == ["error"], r03
