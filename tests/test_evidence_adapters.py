"""GuideLLM and AIPerf/GenAI-Perf adapters: units, unmapped keys, and coded refusals.

No small real ``benchmarks.json`` or ``profile_export*.json`` was found in a public repository in
the time given, so the files below are built from the documented formats (GuideLLM's
``GenerativeBenchmarksReport``: status distributions with nearest-rank ``percentiles``; AIPerf's
nested ``{unit, avg, pNN, std}`` metric objects) and kept minimal.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from k3kit.errors import K3kitError
from k3kit.evidence import parse_evidence, summarize


def _dist(mean: float, pcts: dict[str, float]) -> dict[str, Any]:
    ok = {"mean": mean, "median": pcts["p50"], "std_dev": 0.5, "count": 10, "percentiles": pcts}
    return {"successful": ok, "errored": {"mean": 999.0}, "incomplete": None, "total": ok}


def _guidellm() -> dict[str, Any]:
    pcts = {"p001": 10.0, "p01": 11.0, "p50": 20.0, "p99": 30.0, "p999": 31.0}
    return {
        "metadata": {"version": 1},
        "args": {"profile": "sweep"},
        "benchmarks": [
            {
                "metrics": {
                    "time_to_first_token_ms": _dist(21.0, pcts),
                    "inter_token_latency_ms": _dist(5.0, {"p50": 4.0, "p99": 9.0}),
                    "request_latency": _dist(1.5, {"p50": 1.25, "p99": 2.5}),  # seconds
                    "requests_per_second": _dist(3.5, {"p50": 3.0}),
                    "output_tokens_per_second": _dist(420.0, {"p50": 400.0}),
                    "prompt_token_count": _dist(128.0, {"p50": 128.0}),
                },
                "scheduler_metrics": {
                    "measure_start_time": 1000.0,
                    "measure_end_time": 1012.5,
                    "requests_made": {"successful": 10, "errored": 1, "incomplete": 0, "total": 11},
                },
            },
            {"metrics": {"time_to_first_token_ms": _dist(7.0, {"p50": 7.0})}},
        ],
    }


def _aiperf(nested: bool = False) -> dict[str, Any]:
    metrics = {
        "time_to_first_token": {"unit": "ms", "avg": 195.5, "p50": 175.0, "p99.9": 260.0, "std": 4},
        "inter_token_latency": {"unit": "us", "avg": 35000.0, "p90": 36000.0, "min": 1.0},
        "request_latency": {"unit": "s", "avg": 2.5, "p99": 3.0},
        "request_throughput": {"unit": "requests/sec", "avg": 4.0},
        "output_token_throughput": {"unit": "tokens/sec", "avg": 52.69},
        "request_count": {"unit": "requests", "avg": 10.0},
        "output_sequence_length": {"unit": "tokens", "avg": 128.0},
    }
    if nested:
        return {"records": metrics, "input_config": {"model": "m"}}
    return metrics


def _parse(obj: Any, tool: str | None = None, record: int | None = None) -> Any:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return parse_evidence(data, source="f.json", tool=tool, record=record)


def test_guidellm_maps_units_and_reports_unmapped() -> None:
    run = _parse(_guidellm(), record=0)
    assert run.tool == "guidellm" and run.level == "summary" and run.record == 0
    assert run.stats["ttft"] == {
        "mean": 21.0, "median": 20.0, "std": 0.5,
        "p0.1": 10.0, "p1": 11.0, "p50": 20.0, "p99": 30.0, "p99.9": 31.0,
    }  # fmt: skip
    assert run.stats["tpot"]["p99"] == 9.0  # inter_token_latency_ms filed as TPOT, ms kept
    assert run.stats["e2el"] == {  # request_latency is in seconds: scaled to ms
        "mean": 1500.0, "median": 1250.0, "std": 500.0, "p50": 1250.0, "p99": 2500.0,
    }  # fmt: skip
    # GuideLLM's rates are means of a rate time series, not completed / duration: not filed
    # under vLLM's names (real reports: 19 requests in 720 s reported as 0.025 req/s).
    assert "request_throughput" not in run.values and "output_throughput" not in run.values
    assert (run.values["completed"], run.values["failed"], run.values["num_prompts"]) == (10, 1, 11)
    assert run.values["duration"] == 12.5
    assert run.unmapped == ["requests_per_second", "output_tokens_per_second", "prompt_token_count"]
    assert any("nearest-rank" in n for n in run.notes)
    summary = summarize(run)
    assert summary.ttft_ms is not None and float(summary.ttft_ms.percentiles["99"] or 0) == 30.0


def test_guidellm_second_benchmark_and_record_required() -> None:
    assert _parse(_guidellm(), record=1).stats == {
        "ttft": {"mean": 7.0, "median": 7.0, "std": 0.5, "p50": 7.0}
    }
    with pytest.raises(K3kitError, match="name one with evidence_record") as info:
        _parse(_guidellm())
    assert info.value.code == "EVIDENCE_MALFORMED"


def test_guidellm_unknown_percentile_key_is_not_misread() -> None:
    """p100 once parsed as three-digit tenths, i.e. p10, and overwrote the real p10."""
    report = _guidellm()
    ttft = report["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]
    ttft["percentiles"] = {"p10": 12.0, "p100": 9e9}
    run = _parse(report, record=0)
    assert run.stats["ttft"]["p10"] == 12.0 and "p100" not in run.stats["ttft"]


def test_aiperf_reads_each_unit_flat_and_nested() -> None:
    for obj in (_aiperf(), _aiperf(nested=True)):
        run = _parse(obj)
        assert run.tool == "aiperf" and run.level == "summary"
        assert run.stats["ttft"] == {"mean": 195.5, "p50": 175.0, "p99.9": 260.0, "std": 4.0}
        assert run.stats["tpot"] == pytest.approx({"mean": 35.0, "p90": 36.0})  # us -> ms
        assert run.stats["e2el"] == {"mean": 2500.0, "p99": 3000.0}  # s -> ms
        assert run.values == {
            "request_throughput": 4.0,
            "output_throughput": 52.69,
            "completed": 10,
        }
        assert "output_sequence_length" in run.unmapped
    assert _parse(_aiperf(nested=True)).unmapped == ["output_sequence_length", "input_config"]
    ns = {"time_to_first_token": {"unit": "ns", "avg": 2_000_000}}
    assert _parse(ns).stats["ttft"]["mean"] == pytest.approx(2.0)


def _guidellm_with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    report = copy.deepcopy(_guidellm())
    node: Any = report
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return report


_M = ("benchmarks", 0, "metrics")
_TTFT = (*_M, "time_to_first_token_ms", "successful")
_SCHED = ("benchmarks", 0, "scheduler_metrics")


@pytest.mark.parametrize(
    ("report", "why"),
    [
        (_guidellm_with(("benchmarks",), {"a": 1}), "expected an array of objects"),
        (_guidellm_with(("benchmarks", 0), 5), "expected an array of objects"),
        (_guidellm_with(("benchmarks", 0, "metrics"), None), "metrics: expected an object"),
        (_guidellm_with(("benchmarks", 0), {"metrics": {"x": {}}}), "no metric k3kit reads"),
        (_guidellm_with((*_TTFT, "mean"), "21"), "expected a number"),
        (_guidellm_with((*_TTFT, "mean"), True), "expected a number"),
        (_guidellm_with((*_TTFT, "mean"), 1e300), "outside"),
        (_guidellm_with((*_TTFT, "percentiles"), [1, 2]), "percentiles: expected an object"),
        (_guidellm_with((*_TTFT, "percentiles", "p99"), "x"), "expected a number"),
        (_guidellm_with((*_SCHED, "requests_made", "successful"), -1), "non-negative integer"),
        (_guidellm_with((*_SCHED, "requests_made", "errored"), 1.5), "non-negative integer"),
        (_guidellm_with((*_SCHED, "measure_end_time"), 1e20), "outside"),
        (_guidellm_with((*_SCHED, "measure_start_time"), "0"), "expected a number"),
        (_guidellm_with((*_M, "request_totals"), {"successful": -1}), "non-negative integer"),
        (_guidellm_with(("benchmarks", 0, "duration"), "720"), "expected a number"),
    ],
)
def test_guidellm_malformed_is_coded(report: dict[str, Any], why: str) -> None:
    with pytest.raises(K3kitError, match=why) as info:
        _parse(report, tool="guidellm", record=0)
    assert info.value.code == "EVIDENCE_MALFORMED" and info.value.exit_code == 3


def _aiperf_with(name: str, key: str, value: Any) -> dict[str, Any]:
    obj = _aiperf()
    obj[name][key] = value
    return obj


@pytest.mark.parametrize(
    ("obj", "tool", "why"),
    [
        (_aiperf_with("time_to_first_token", "unit", "minutes"), None, "unknown unit"),
        (_aiperf_with("time_to_first_token", "unit", 5), None, "expected a string"),
        (_aiperf_with("request_latency", "avg", "2.5"), None, "expected a number"),
        (_aiperf_with("request_latency", "p99", 1e16), None, "outside"),
        (_aiperf_with("request_count", "avg", 9.5), None, "non-negative integer"),
        (_aiperf_with("request_throughput", "unit", "requests/min"), None, "per-second unit"),
        (_aiperf_with("output_token_throughput", "avg", False), None, "expected a number"),
        ({"request_count": {"unit": "requests"}}, "aiperf", "no metric k3kit reads"),
        ({"benchmarks": 1, "metadata": {}}, "guidellm", "expected an array of objects"),
        ({"benchmarks": [], "metadata": {}}, None, "0 benchmarks"),
    ],
)
def test_aiperf_and_named_tool_malformed_is_coded(obj: Any, tool: str | None, why: str) -> None:
    with pytest.raises(K3kitError, match=why) as info:
        _parse(obj, tool=tool)
    assert info.value.code == "EVIDENCE_MALFORMED" and info.value.exit_code == 3


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (b'{"time_to_first_token": {"unit": "ms", "avg": NaN}}', "not strict JSON"),
        (b'{"time_to_first_token": {"unit": "ms", "avg": Infinity}}\n', "outside"),
        (b'{"time_to_first_token": {"unit": "ms", "avg": 1e999}}', "does not fit"),
        (
            b'{"metadata": {}, "benchmarks": [{"metrics": {}, "scheduler_metrics": '
            b'{"measure_start_time": 0, "measure_end_time": Infinity, "requests_made": {}}}]}\n',
            "outside",
        ),
    ],
)
def test_non_finite_numbers_are_refused(text: bytes, why: str) -> None:
    """SGLang's JSON Lines path lets ``Infinity`` through; the adapters must still refuse it."""
    with pytest.raises(K3kitError, match=why) as info:
        _parse(text)
    assert info.value.code == "EVIDENCE_MALFORMED"


def test_real_guidellm_report_maps_its_measurement_window() -> None:
    """GuideLLM 0.5 (tests/data/real): 23 requests sent, 19 inside the 720 s window the
    statistics cover; its rates are time-series means and stay unmapped."""
    from tests.realcorpus import read

    run = parse_evidence(read("guidellm-qwen3-30b-a3b-tp4-sync.json.xz"), source="g", record=0)
    v = run.values
    assert (v["completed"], v["failed"], v["num_prompts"], v["duration"]) == (19, 0, 19, 720.0)
    assert (v["total_output_tokens"], v["total_input_tokens"], v["max_concurrency"]) == (
        19456,
        1749,
        1,
    )
    assert "request_throughput" not in v and "requests_per_second" in run.unmapped
    assert run.stats["tpot"]["mean"] == pytest.approx(38.65124784686373)  # equal lengths: TPOT


def test_real_aiperf_exports_map_itl_and_their_own_concurrency() -> None:
    """AIPerf 0.10 (phases) and 0.8 (loadgen): inter_chunk_latency is ITL, the concurrency the
    run was given is evidenced, failures are counted."""
    from tests.realcorpus import read

    new = parse_evidence(read("aiperf-qwen36-nvfp4-chatbot-c8.json.xz"), source="a")
    assert new.stats["itl"]["mean"] == pytest.approx(9.119257582828839)
    assert new.stats["itl"]["p99"] == pytest.approx(109.83235371374994)
    assert (new.values["max_concurrency"], new.values["total_output_tokens"]) == (8, 21911)
    assert new.values["duration"] == pytest.approx(28.472207654)
    old = parse_evidence(read("aiperf-llama32-3b-gguf-c1.json"), source="b")
    assert (old.values["max_concurrency"], old.values["failed"], old.values["completed"]) == (
        1,
        10,
        10,
    )
