"""Every real file of the corpus, honest and fabricated as a publisher would fabricate it.

Each fabrication edits the tool's own file (the figure and nothing else, the way a publisher who
wants better numbers would) and publishes claims read from the edited file, so the receipt agrees
with its evidence: only what the file itself implies can give the lie away. The rule for each:

* where the evidence can rule the edit out (per-request data for a latency statistic; token
  totals and a duration for a throughput), an error of a rule that names the edited figure;
* where it cannot (a summary line with nothing to recompute the statistic from), no error, and
  no pass that claims a recomputation: the audit says what it could not check, it never vouches.

Honest files, tools and engine versions are counted (``test_corpus_breadth``) so the report to
the lead can say how far the corpus reaches.
"""

from __future__ import annotations

import json
import lzma
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from k3kit.audit import AuditReport
from k3kit.evidence import parse_evidence
from tests.conftest import GoldenKit
from tests.realcorpus import ALL, RealKits, audit_cases, case, read

Edit = Callable[[dict[str, Any]], bool]  # edits the record in place; False: figure not in file


def _scale(obj: dict[str, Any], path: tuple[str, ...], factor: float) -> bool:
    node: Any = obj
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict) or not isinstance(node.get(path[-1]), int | float):
        return False
    node[path[-1]] = node[path[-1]] * factor
    return True


def _guidellm_median(metric: str, factor: float) -> Edit:
    def edit(bench: dict[str, Any]) -> bool:
        dist = bench["metrics"][metric]["successful"]
        dist["percentiles"]["p50"] = dist["median"] = dist["median"] * factor
        return True

    return edit


# figure -> tool -> edit of one record (a vLLM/AIPerf/llmperf file, a SGLang line, a benchmark)
FABRICATIONS: dict[str, dict[str, Edit]] = {
    "output throughput x1.3": {
        "vllm bench serve": lambda o: _scale(o, ("output_throughput",), 1.3),
        "sglang bench_serving": lambda o: _scale(o, ("output_throughput",), 1.3),
        "llmperf": lambda o: _scale(o, ("results_mean_output_throughput_token_per_s",), 1.3),
        "aiperf": lambda o: _scale(o, ("output_token_throughput", "avg"), 1.3),
    },
    "median TPOT x0.8": {
        "vllm bench serve": lambda o: _scale(o, ("median_tpot_ms",), 0.8),
        "sglang bench_serving": lambda o: _scale(o, ("median_tpot_ms",), 0.8),
        "aiperf": lambda o: _scale(o, ("inter_token_latency", "p50"), 0.8),
        "guidellm": _guidellm_median("inter_token_latency_ms", 0.8),
    },
    "median TTFT x0.8": {
        "vllm bench serve": lambda o: _scale(o, ("median_ttft_ms",), 0.8),
        "sglang bench_serving": lambda o: _scale(o, ("median_ttft_ms",), 0.8),
        "llmperf": lambda o: _scale(o, ("results_ttft_s_quantiles_p50",), 0.8),
        "aiperf": lambda o: _scale(o, ("time_to_first_token", "p50"), 0.8),
        "guidellm": _guidellm_median("time_to_first_token_ms", 0.8),
    },
}
# The words an error must use to name the figure it caught.
NAMES = {
    "output throughput x1.3": ("output_tok_s", "output_throughput", "output tok"),
    "median TPOT x0.8": ("TPOT",),
    "median TTFT x0.8": ("TTFT",),
}


@pytest.fixture(scope="module")
def info(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> RealKits:
    """A kit for each engine version the corpus ran on (the golden kit for vLLM 0.33.0)."""
    return RealKits(golden, tmp_path_factory.mktemp("real-kits"))


def _edited(name: str, record: int | None, edit: Edit) -> bytes | None:
    """The file with one record edited, bytes as the tool would write them; None if n/a."""
    data = read(name)
    if name.endswith(".jsonl"):
        lines = data.splitlines()
        obj = json.loads(lines[record or 0].replace(b"Infinity", b"1e999"))
        if not edit(obj):
            return None
        lines[record or 0] = json.dumps(obj).replace("1e999", "Infinity").encode()
        return b"\n".join(lines) + b"\n"
    obj = json.loads(data)
    target = obj["benchmarks"][record or 0] if "benchmarks" in obj else obj
    if not edit(target):
        return None
    return json.dumps(obj).encode()


def _audit(name: str, record: int | None, data: bytes, info: RealKits) -> AuditReport:
    wl, row, _ = case(name, record, data)
    return audit_cases([(wl, row, data)], info, evidence={row["id"]: data})


def _tool(name: str, record: int | None) -> str:
    return parse_evidence(read(name), source=name, record=record).tool


def _recomputable(name: str, record: int | None, figure: str) -> bool:
    """Can the evidence itself rule the edit out? Said from what the file holds, not outcomes."""
    run = parse_evidence(read(name), source=name, record=record)
    if figure.startswith("output throughput"):
        return all(run.values.get(k) is not None for k in ("total_output_tokens", "duration"))
    return run.requests is not None  # a latency statistic: only per-request data recomputes it


CASES = [
    (name, record, figure)
    for name, record in ALL
    for figure in FABRICATIONS
    if _tool(name, record) in FABRICATIONS[figure]
]


@pytest.mark.parametrize(
    ("name", "record", "figure"), CASES, ids=[f"{n}#{r}:{f}" for n, r, f in CASES]
)
def test_fabricated_real_file_is_caught_or_left_unvouched(
    name: str, record: int | None, figure: str, info: RealKits
) -> None:
    data = _edited(name, record, FABRICATIONS[figure][_tool(name, record)])
    if data is None:
        pytest.skip(f"{name} has no such figure")
    report = _audit(name, record, data, info)
    errors = [f for f in report.findings if f.severity == "error"]
    named = [f for f in errors if any(w.lower() in f.message.lower() for w in NAMES[figure])]
    if _recomputable(name, record, figure):
        assert named, (figure, [(f.rule, f.message) for f in errors])
        return
    if named:
        return  # caught from what the summary implies (R16 proxy, R18 order statistics)
    assert errors == [], [(f.rule, f.message) for f in errors]
    vouched = [
        f
        for f in report.findings
        if f.severity == "pass" and "per-request" in f.message and f.rule in ("R16", "R19")
    ]
    assert vouched == []


def test_corpus_breadth() -> None:
    """How far the honest corpus reaches (the issue asks for 30 files, 4 tools, 5 versions)."""
    files = {name for name, _ in ALL}
    runs = len(ALL)
    tools = {_tool(name, record) for name, record in ALL}
    assert len(files) >= 30 and runs >= 40 and len(tools) >= 5, (len(files), runs, tools)


def _tpot_file(median: float, p99: float, mean: float, n: int = 8) -> bytes:
    """A vLLM summary of n fixed-length requests: the issue's fabricated median."""
    return json.dumps(
        {
            "backend": "vllm",
            "completed": n,
            "num_prompts": n,
            "duration": 10.0,
            "total_input_tokens": n * 1024,
            "total_output_tokens": n * 1024,
            "request_throughput": n / 10.0,
            "output_throughput": n * 1024 / 10.0,
            "total_token_throughput": n * 2048 / 10.0,
            "max_concurrency": 8,
            "mean_tpot_ms": mean,
            "median_tpot_ms": median,
            "p99_tpot_ms": p99,
        }
    ).encode()


def test_shrunk_median_tpot_is_impossible_with_its_mean_and_p99(info: RealKits) -> None:
    """Issue 22 item 4: n = 8, median 6.66, p99 9.39: the samples sum to at most 61.47 ms, the
    published mean 8.2046 needs 65.64. The median's own band no longer hides it."""
    from decimal import Decimal

    data = _tpot_file(6.66, 9.39, 8.2046)
    wl = {
        "description": "fixed 1024/1024",
        "dataset": "random",
        "lengths": "fixed",
        "input_tokens": 1024,
        "output_tokens": 1024,
        "ignore_eos": True,
    }
    row: dict[str, Any] = {
        "id": "c8",
        "profile": "interactive",
        "workload": "w",
        "concurrency": 8,
        "requests": 8,
        "completed": 8,
        "evidence": "results/c8.json",
        "metrics": {
            "tpot_ms": {"mean": Decimal("8.2046"), "p50": Decimal("6.66"), "p99": Decimal("9.39")}
        },
    }
    report = audit_cases([({**wl}, {**row, "workload": "w"}, data)], info, evidence={"c8": data})
    r18 = [f for f in report.findings if f.rule == "R18" and f.severity == "error"]
    assert r18 and "TPOT mean" in r18[0].message and "at most 61.47 ms" in r18[0].message
    honest = _tpot_file(8.1, 9.39, 8.2046)
    row["metrics"]["tpot_ms"]["p50"] = Decimal("8.1")
    report = audit_cases([(wl, {**row, "workload": "w"}, honest)], info, evidence={"c8": honest})
    assert not [f for f in report.findings if f.rule == "R18" and f.severity == "error"]


def test_rebuilt_e2e_with_a_usage_chunk_tail_is_honest(info: RealKits) -> None:
    """vLLM's newer client stops the clock at the trailing usage chunk, after the last text
    chunk: its TPOT and E2E statistics exceed those rebuilt from TTFT + sum(ITL) by up to one
    chunk's delay per request. The real raw file is restated as such a client would have written
    it (each request's clock stopped one median chunk gap later): no error; the same file with
    median TPOT x0.8 still errors (R16)."""
    import statistics

    name = "vllm-llama70b-tp8-sharegpt-qps4.json.xz"
    obj = json.loads(read(name))
    ok = [i for i, e in enumerate(obj["errors"]) if e == ""]
    tails = {i: statistics.median(obj["itls"][i]) if obj["itls"][i] else 0.0 for i in ok}
    tpot = [
        (sum(obj["itls"][i]) + tails[i]) / (obj["output_lens"][i] - 1)
        for i in ok
        if obj["output_lens"][i] > 1
    ]
    e2e = [obj["ttfts"][i] + sum(obj["itls"][i]) + tails[i] for i in ok]
    for key, values in (("tpot", tpot), ("e2el", e2e)):
        if f"mean_{key}_ms" in obj:
            obj[f"mean_{key}_ms"] = statistics.fmean(values) * 1000
            obj[f"median_{key}_ms"] = statistics.median(values) * 1000
            obj[f"std_{key}_ms"] = statistics.pstdev(values) * 1000
            ordered = sorted(values)
            h = (len(ordered) - 1) * 0.99
            lo = int(h)
            obj[f"p99_{key}_ms"] = (
                ordered[lo] + (h - lo) * (ordered[min(lo + 1, len(ordered) - 1)] - ordered[lo])
            ) * 1000
    rel = abs(obj["mean_tpot_ms"] - 27.083319078977674) / 27.083319078977674
    assert 2e-4 < rel < 0.1  # the size of the differences the issue saw on real files
    data = json.dumps(obj).encode()
    report = _audit(name, None, data, info)
    assert [f for f in report.findings if f.severity == "error"] == []
    obj["median_tpot_ms"] *= 0.8
    data = json.dumps(obj).encode()
    report = _audit(name, None, data, info)
    assert any(f.rule == "R16" and f.severity == "error" for f in report.findings)


def test_xz_fixtures_are_small() -> None:
    from tests.realcorpus import REAL

    for path in REAL.iterdir():
        assert path.stat().st_size < 400_000, path.name
        if path.suffix == ".xz":
            lzma.decompress(path.read_bytes())


def _r09_r10(report: AuditReport) -> dict[str, tuple[str, str]]:
    return {f.rule: (f.severity, f.message) for f in report.findings if f.rule in ("R09", "R10")}


def test_sglang_range_ratio_is_sglangs_range_not_vllms(info: RealKits) -> None:
    """SGLang's --random-range-ratio 0 draws each length from [1, L] (mean about L/2): the real
    online run of 1024/1024 measured mean prompts of 508.7 tokens. Declared with SGLang's
    meaning the run is honest; read with vLLM's ([L(1 - r), L(1 + r)] = exactly 1024 at r = 0)
    the same numbers would be a false claim, so the convention is part of the workload."""
    name = "sglang-llama70b-online.jsonl"
    wl, row, data = case(name, 0)
    assert wl["range_convention"] == "sglang" and wl["lengths"] == "ranged"
    honest = _r09_r10(audit_cases([(wl, row, data)], info))
    assert honest["R09"][0] == "pass" and honest["R10"][0] == "pass", honest
    assert "middle of SGLang's [1, 1024]" in honest["R10"][1]
    misread = _r09_r10(audit_cases([({**wl, "range_convention": "vllm"}, row, data)], info))
    assert misread["R10"][0] == "error" and "outside ±10% of the declared 1024" in misread["R10"][1]


def test_input_and_output_lengths_are_declared_separately(info: RealKits) -> None:
    """Fixed prompts with outputs of a dataset: one ``lengths`` could only say 'variable' for
    both. The SGLang run restated as fixed 1024-token-ish prompts is refused by R10 for what the
    prompts were, while its outputs stay a declared mean."""
    from k3kit.models import Workload

    w = Workload(
        description="fixed prompts, ranged outputs",
        input_tokens=1024,
        output_tokens=1024,
        lengths="fixed",
        output_lengths="ranged",
        output_range_ratio=Decimal("0.5"),
        range_convention="sglang",
    )
    assert w.length_range("input") == (Fraction(1024), Fraction(1024))
    assert (
        w.length_range("output") == (Fraction(512), Fraction(1024))
        and w.mean_length("output") == 768
    )
    v = w.model_copy(update={"range_convention": "vllm"})
    assert (
        v.length_range("output") == (Fraction(512), Fraction(1536))
        and v.mean_length("output") == 1024
    )
    with pytest.raises(ValueError, match="ranged output lengths need"):
        Workload(description="x", input_tokens=1, output_tokens=1, output_lengths="ranged")
    with pytest.raises(ValueError, match="input_range_ratio is given only"):
        Workload(description="x", input_tokens=1, output_tokens=1, input_range_ratio=Decimal("1"))
    name = "sglang-llama70b-online.jsonl"
    wl, row, data = case(name, 0)
    wl = {**wl, "input_lengths": "fixed"}
    findings = _r09_r10(audit_cases([(wl, row, data)], info))
    assert findings["R09"][0] == "pass" and findings["R10"][0] == "error", findings


def _toml_table(name: str, body: dict[str, Any]) -> list[str]:
    from tests.benchgen import _toml_value

    return [name] + [f"{k} = {_toml_value(v)}" for k, v in body.items() if not isinstance(v, dict)]


def _claims_toml(cases: list[tuple[dict[str, Any], dict[str, Any], bytes]], method: str) -> str:
    from tests.benchgen import _toml_value
    from tests.realcorpus import LIMITS

    limits = [*LIMITS, "Contexts longer than the measured requests were not measured."]
    lines = ['schema = "k3kit.claims/v1"', f"limitations = {_toml_value(limits)}"]
    lines += ["[definitions]", f'percentile_method = "{method}"', 'per_gpu_throughput = "output"']
    lines += ["[environment]", 'gpu = "NVIDIA B300"', "gpu_count = 8", "nodes = 1"]
    lines += ['engine = "vllm"', 'engine_version = "0.33.0"']
    for wl, row, _ in cases:
        lines += _toml_table(f"[workloads.{row['workload']}]", {**wl, "temperature": 0})
    for _, row, _ in cases:
        lines += _toml_table("[[runs]]", row)
        for metric, stats in row["metrics"].items():
            if isinstance(stats, dict):
                lines += _toml_table(f"[runs.metrics.{metric}]", stats)
        scalars = {k: v for k, v in row["metrics"].items() if not isinstance(v, dict)}
        if scalars:
            lines += _toml_table("[runs.metrics]", scalars)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("name", "record", "method"),
    [
        ("guidellm-qwen3-30b-a3b-tp4-sync.json.xz", 0, "nearest-rank"),
        ("aiperf-qwen36-nvfp4-chatbot-c8.json.xz", None, "numpy-linear"),
    ],
)
def test_sign_and_audit_a_real_report_through_the_cli(
    name: str, record: int | None, method: str, kit: Any, golden: GoldenKit, tmp_path: Any
) -> None:
    """`k3kit sign` takes the real GuideLLM report (it nests 10 levels; the old bound of 8
    refused it, exit 3) and the real AIPerf export; `k3kit audit` on the signed kit then finds
    no error (exit 0), with the evidence read back from the kit."""
    from tests.conftest import run_k3kit

    wl, row, data = case(name, record)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / f"{row['id']}.json").write_bytes(data)
    claims = tmp_path / "claims.toml"
    claims.write_text(_claims_toml([(wl, row, data)], method))
    proc = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", claims, "--force")
    assert proc.returncode == 0, proc.stderr
    proc = run_k3kit("audit", kit, "--trust", golden.key.public, "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["counts"].get("error", 0) == 0, [
        (f["rule"], f["message"]) for f in report["findings"] if f["severity"] == "error"
    ]
    assert any(f["rule"] == "R03" and f["severity"] == "pass" for f in report["findings"])


def test_an_evidence_file_nested_past_the_bound_is_refused_at_sign(
    kit: Any, golden: GoldenKit, tmp_path: Any
) -> None:
    """The bound was raised for real reports, not removed: a report nested past 32 levels is refused
    at `k3kit sign` (EVIDENCE_MALFORMED, exit 3) before anything is written."""
    from tests.conftest import run_k3kit

    name = "aiperf-qwen36-nvfp4-chatbot-c8.json.xz"
    wl, row, data = case(name, None)
    obj = json.loads(data)
    deep: Any = 1
    for _ in range(32):
        deep = {"x": deep}
    obj["input_config"]["extra"] = deep
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / f"{row['id']}.json").write_bytes(json.dumps(obj).encode())
    claims = tmp_path / "claims.toml"
    claims.write_text(_claims_toml([(wl, row, data)], "numpy-linear"))
    before = sorted(p.name for p in kit.iterdir())
    proc = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", claims, "--force")
    assert proc.returncode == 3 and "nesting deeper than 32" in proc.stderr
    assert sorted(p.name for p in kit.iterdir()) == before


def test_context_finding_says_a_declared_mean_is_a_mean(
    kit: Any, golden: GoldenKit, tmp_path: Any
) -> None:
    """R30 once called a variable workload's declared *mean* length 'the longest measured
    request'. Signed from the real AIPerf export (ShareGPT prompts, mean 467 + 228 tokens,
    longest prompt 1875) without a context limitation, the error says what the number is."""
    from tests.conftest import run_k3kit

    wl, row, data = case("aiperf-qwen36-nvfp4-chatbot-c8.json.xz", None)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / f"{row['id']}.json").write_bytes(data)
    claims = tmp_path / "claims.toml"
    text = _claims_toml([(wl, row, data)], "numpy-linear")
    claims.write_text(
        text.replace(', "Contexts longer than the measured requests were not measured."', "")
    )
    assert (
        run_k3kit(
            "sign", kit, "--key", golden.key.private, "--claims", claims, "--force"
        ).returncode
        == 0
    )
    report = json.loads(run_k3kit("audit", kit, "--trust", golden.key.public, "--json").stdout)
    r30 = [f for f in report["findings"] if f["rule"] == "R30" and f["run"] == "kit"]
    message = next(f["message"] for f in r30 if f["severity"] == "error")
    assert "declares a mean request of 695 tokens (a mean" in message
    assert "longest measured request" not in message


def test_the_issues_median_example_on_its_real_file(info: RealKits) -> None:
    """The issue's numbers come from a real vLLM 0.25.1 run (8 requests, mean TPOT 8.2046, p99
    9.394): its median 8.3235 shrunk to 6.66 asks for a sum of 65.64 ms that a median of 6.66
    and a p99 of 9.39 cannot reach (at most 61.48). R18 says so, naming the TPOT mean."""
    name = "vllm0251-opt125m-seqs4-c2-run0.json"
    obj = json.loads(read(name))
    assert (obj["completed"], round(obj["mean_tpot_ms"], 4)) == (8, 8.2046)
    obj["median_tpot_ms"] *= 0.8
    report = _audit(name, None, json.dumps(obj).encode(), info)
    r18 = [f.message for f in report.findings if f.rule == "R18" and f.severity == "error"]
    assert r18 and "TPOT mean" in r18[0] and "at most 61.4" in r18[0], r18
