"""`k3kit accept`'s report is a document `k3kit audit` accepts: zero errors, as a buyer runs both.

The report states the limitations of the run it measured (accuracy was not measured, ...), so the
rule that asks for them (R36) finds them, and every rule that can read its evidence reads it
(R03 does not call available evidence "not available" while R19 reads it). Driven end to end: the
real CLI accepts against the stand-in streaming server, then the real CLI audits the report with
the buyer's key.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_k3kit
from tests.test_accept import FASTER_THAN_CLAIMED, _accept, _server
from tests.test_accept import acceptkit as acceptkit  # the shared signed kit (a fixture)


def test_the_audit_of_an_acceptance_report_has_no_error(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    with _server(acceptkit, **FASTER_THAN_CLAIMED) as server:
        proc, _ = _accept(acceptkit, server.url, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    audit = run_k3kit("audit", tmp_path / "out", "--trust", acceptkit["pub"], "--json")
    doc = json.loads(audit.stdout)
    findings = doc["findings"]
    errors = [f for f in findings if f["severity"] == "error"]
    assert errors == [], errors
    assert audit.returncode == 0, audit.stderr
    assert any(f["rule"] == "R19" and f["severity"] == "pass" for f in findings), findings


def test_the_audit_reads_an_acceptance_reports_evidence_in_every_rule(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    with _server(acceptkit, **FASTER_THAN_CLAIMED) as server:
        proc, _ = _accept(acceptkit, server.url, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    audit = run_k3kit("audit", tmp_path / "out", "--trust", acceptkit["pub"], "--json")
    r03 = [f for f in json.loads(audit.stdout)["findings"] if f["rule"] == "R03"]
    assert r03 and not any("not available" in f["message"] for f in r03), r03
