"""The real corpus: honest files audit with zero errors, fabrications of them are caught.

Every file in ``tests/data/real`` is byte-identical to the published one (sha256 in SOURCES.md).
Each finding the auditor makes on the honest files that carries a number is recomputed here
independently (``statistics`` and plain arithmetic, not the auditor's code).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import statistics
from typing import Any

import pytest

from k3kit.audit import AuditReport
from tests.conftest import GoldenKit
from tests.realcorpus import (
    ALL,
    ENGINE_VERSIONS,
    REAL,
    SHIPPED,
    RealKits,
    audit_cases,
    case,
    claims_for,
    engine_version,
    read,
)

VLLM = "vllm-llama70b-tp8-sharegpt-qps4.json.xz"


@pytest.fixture(scope="module")
def info(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> RealKits:
    """A kit for each engine version the corpus ran on (the golden kit for vLLM 0.33.0)."""
    return RealKits(golden, tmp_path_factory.mktemp("real-kits"))


def _errors(report: AuditReport) -> list[tuple[str, str | None, str]]:
    return [(f.rule, f.run, f.message) for f in report.findings if f.severity == "error"]


def test_sources_list_every_fixture_with_its_sha256() -> None:
    text = (REAL / "SOURCES.md").read_text()
    rows = re.findall(
        r"^\| `([^`]+)` \| ([^|]+) \| ([^|]+) \| `([^`]+)` \| `([0-9a-f]{40})` "
        r"\| `([0-9a-f]{64})` \| (\d+) \|$",
        text,
        flags=re.M,
    )
    named = {row[0] for row in rows}
    assert named == {p.name for p in REAL.iterdir() if p.name != "SOURCES.md"}
    assert len(named) >= 12 and len({row[1].split(" (")[0] for row in rows}) >= 3
    for name, *_, sha, size in rows:
        data = read(name)
        assert hashlib.sha256(data).hexdigest() == sha and len(data) == int(size), name


def test_sources_say_which_engine_ran_each_file_as_the_receipts_state_it() -> None:
    """SOURCES.md's "Which engine ran" table and ENGINE_VERSIONS say the same thing."""
    text = (REAL / "SOURCES.md").read_text().split("## Which engine ran", 1)[1]
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| ([^|]+?) \|", text, flags=re.M))
    assert rows.keys() == ENGINE_VERSIONS.keys()
    for prefix, version in ENGINE_VERSIONS.items():
        if version is None:
            assert "unknown" in rows[prefix], prefix
        else:
            assert rows[prefix].split(" (")[0] == f"vLLM {version}", prefix


def test_each_honest_receipt_states_the_engine_version_that_ran(info: RealKits) -> None:
    # Issue 22 item 5: every receipt used to claim vLLM 0.33.0. Now each states the version its
    # source records, and is bound to a kit built (with an engine snapshot) for that version.
    stated: set[str] = set()
    for name, record in ALL:
        version = claims_for([case(name, record)]).environment.engine_version
        assert version == (engine_version(name) or SHIPPED), name
        assert info.info(version).engine.version == version
        stated |= {version} if engine_version(name) else set()
    assert stated == {"0.8.3", "0.24.0", "0.25.1", "0.1.dev12986+gfa99ccebd"}


@pytest.mark.parametrize(("name", "record"), ALL, ids=[f"{n}#{r}" for n, r in ALL])
def test_honest_real_file_audits_with_zero_errors(
    name: str, record: int | None, info: RealKits
) -> None:
    report = audit_cases([case(name, record)], info)
    assert _errors(report) == []
    passed = {f.rule for f in report.findings if f.severity == "pass"}
    assert {"R12", "R18"} & passed  # arithmetic was actually checked, not skipped


def test_vllm_findings_recomputed_independently(info: RealKits) -> None:
    """The auditor's passes on the raw vLLM file, redone with ``statistics``."""
    obj = json.loads(read(VLLM))
    ok = [i for i, e in enumerate(obj["errors"]) if e == ""]
    assert obj["completed"] == len(ok) == 200
    assert obj["total_output_tokens"] == sum(obj["output_lens"])  # R13
    assert abs(obj["output_throughput"] - obj["total_output_tokens"] / obj["duration"]) < 1e-9
    tpot = [
        sum(obj["itls"][i]) / (obj["output_lens"][i] - 1) for i in ok if obj["output_lens"][i] > 1
    ]
    assert len(tpot) == 186
    for key, value in (("median", statistics.median(tpot)), ("mean", statistics.fmean(tpot))):
        assert abs(value * 1000 - obj[f"{key}_tpot_ms"]) / obj[f"{key}_tpot_ms"] < 1e-4  # R16
    tokens = sum(obj["output_lens"][i] for i in ok)
    chunks = sum(len(obj["itls"][i]) + 1 for i in ok if obj["output_lens"][i] > 0)
    assert abs(tokens - chunks) / tokens < 0.01  # R17: re-tokenization within 1%
    report = audit_cases([case(VLLM)], info)
    r17 = next(f for f in report.findings if f.rule == "R17")
    assert r17.severity == "pass" and f"{tokens} tokens in {chunks} chunks" in r17.message
    r15 = next(f for f in report.findings if f.rule == "R15")
    little = obj["request_throughput"] * statistics.fmean(
        obj["ttfts"][i] + sum(obj["itls"][i]) for i in ok
    )
    assert r15.severity == "info" and f"{little:.4g}"[:3] in r15.message  # open loop: no cap


def _fabricate(name: str, edit: Any) -> tuple[Any, bytes]:
    """The file edited, and claims published from the edited file (as a fabricator would)."""
    obj = json.loads(read(name))
    edit(obj, None)
    data = json.dumps(obj).encode()
    return case(name, None, data), data


def _scale(obj: dict[str, Any], key: str, factor: float) -> None:
    obj[key] = obj[key] * factor


def _quarter_duration(obj: dict[str, Any]) -> None:
    _scale(obj, "duration", 0.25)
    for key in ("output_throughput", "request_throughput", "total_token_throughput"):
        _scale(obj, key, 4)


FABRICATIONS = [
    ("throughput_inflated", lambda o, r: _scale(o, "output_throughput", 1.2), "R12"),
    ("median_tpot_shrunk", lambda o, r: _scale(o, "median_tpot_ms", 0.8), "R16"),
    ("p99_ttft_cut", lambda o, r: _scale(o, "p99_ttft_ms", 0.8), "R19"),
    (
        "duration_and_throughputs_quartered",
        lambda o, r: _quarter_duration(o),
        "R14",
    ),
    (
        "output_lengths_inflated",
        lambda o, r: o.update(
            output_lens=[round(x * 1.2) for x in o["output_lens"]],
            total_output_tokens=sum(round(x * 1.2) for x in o["output_lens"]),
            output_throughput=sum(round(x * 1.2) for x in o["output_lens"]) / o["duration"],
            total_token_throughput=(
                o["total_input_tokens"] + sum(round(x * 1.2) for x in o["output_lens"])
            )
            / o["duration"],
        ),
        "R17",
    ),
    (
        "spec_decode_totals_invented",
        lambda o, r: o.update(
            spec_decode_num_drafts=10_000,
            spec_decode_accepted_tokens=20_000,
            spec_decode_draft_tokens=30_000,
            spec_decode_acceptance_length=3.0,
            spec_decode_acceptance_rate=20_000 / 30_000 * 100,
        ),
        "R17",
    ),
]


@pytest.mark.parametrize(("what", "edit", "rule"), FABRICATIONS, ids=[f[0] for f in FABRICATIONS])
def test_fabrication_of_the_raw_vllm_file_is_an_error_of_its_rule(
    what: str, edit: Any, rule: str, info: RealKits
) -> None:
    honest, data = _fabricate(VLLM, edit)
    (wl, row, _) = honest
    row = copy.deepcopy(row)
    report = audit_cases([(wl, row, data)], info, evidence={row["id"]: data})
    rules = {r for r, _, _ in _errors(report)}
    assert rule in rules, (what, _errors(report))


def test_summary_only_fabrication_is_not_checkable_never_passed(info: RealKits) -> None:
    """SGLang summary line with its median ITL and TTFT shrunk: nothing left to recompute them
    from, so no error, and no pass either: the rule says not-checkable."""
    name = "sglang-llama70b-online.jsonl"
    lines = read(name).splitlines()
    obj = json.loads(lines[0])
    obj["median_ttft_ms"] *= 0.8
    obj["median_itl_ms"] *= 0.8
    lines[0] = json.dumps(obj).encode()
    wl, row, _ = case(name, 0)
    row["metrics"]["ttft_ms"]["p50"] = row["metrics"]["ttft_ms"]["p50"] * 0 + __import__(
        "decimal"
    ).Decimal(repr(round(obj["median_ttft_ms"], 2)))
    row["metrics"]["itl_ms"]["p50"] = __import__("decimal").Decimal(
        repr(round(obj["median_itl_ms"], 2))
    )
    data = b"\n".join(lines) + b"\n"
    report = audit_cases([(wl, row, data)], info, evidence={row["id"]: data})
    assert _errors(report) == []
    # what passes is only "claims = file", never a recomputation from per-request data
    r19 = [f for f in report.findings if f.rule == "R19"]
    assert r19 and all("per-request" not in f.message for f in r19)
    assert [f.severity for f in report.findings if f.rule in ("R13", "R14")] == [
        "not-checkable",
        "not-checkable",
    ]
