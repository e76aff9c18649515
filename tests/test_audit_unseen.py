"""The audit on an independent corpus: real files nobody here wrote rules against.

tests/data/unseen holds result files of four tools (vllm bench serve, SGLang bench_serving,
llmperf, AIPerf 0.11) from public repositories that the first corpus (tests/data/real) does not
use; their provenance is in tests/data/unseen/SOURCES.md. Each is wrapped in an honest receipt
(its own figures, rounded as a publisher would) and must:

* audit with no error under the default policy;
* be accepted by ``k3kit sign`` as evidence;
* when a cheater edits a figure the file itself can rule out (a better p99 TTFT, a higher
  throughput), give an error of a rule that names that figure;
* when the edit touches a figure nothing in the file can recompute (a summary-only latency
  percentile), stay unchecked: no error, and no pass that claims it was recomputed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from k3kit.audit import AuditReport
from tests.conftest import GoldenKit, run_k3kit
from tests.realcorpus import RealKits, audit_cases
from tests.unseencorpus import FILES, UNSEEN, edited, engine_version, read, unseen_case


@pytest.fixture(scope="module")
def kits(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> RealKits:
    return RealKits(golden, tmp_path_factory.mktemp("unseen-kits"))


def _audit(name: str, record: int | None, kits: RealKits, data: bytes | None = None) -> AuditReport:
    wl, row, body = unseen_case(name, record, data)
    evidence = {row["id"]: body}
    return audit_cases([(wl, row, body)], kits, evidence, version=engine_version(name))


def _errors(report: AuditReport) -> list[tuple[str, str]]:
    return [(f.rule, f.message) for f in report.findings if f.severity == "error"]


@pytest.mark.parametrize(("name", "record"), FILES, ids=[n for n, _ in FILES])
def test_honest_unseen_file_audits_clean(name: str, record: int | None, kits: RealKits) -> None:
    assert _errors(_audit(name, record, kits)) == []


def test_corpus_is_independent_and_broad() -> None:
    """At least 12 files of at least 4 tools, none of them a file of the first corpus."""
    from k3kit.evidence import parse_evidence
    from tests.realcorpus import REAL

    tools = {parse_evidence(read(n), source=n, record=r).tool for n, r in FILES}
    assert len(FILES) >= 12 and len(tools) >= 4, (len(FILES), tools)
    on_disk = {p.name for p in UNSEEN.iterdir() if p.name != "SOURCES.md"}
    assert on_disk == {n for n, _ in FILES}
    first = {p.read_bytes() for p in REAL.iterdir() if p.suffix != ".md"}
    assert not any(read(n) in first for n, _ in FILES)


# A cheater's edit of the tool's own file: (file, record, path of the figure, factor, words the
# error must use to name the figure). Each file holds what rules the edit out: token totals and a
# duration for a throughput; the order of its own quantiles for a tail latency.
THROUGHPUT = "output_throughput"
FABRICATIONS = [
    ("vllm-gemma4-31b-gpu-medium-rate4.json", None, ("output_throughput",), 1.3, THROUGHPUT),
    ("vllm-gemma4-31b-gpu-medium-rate4.json", None, ("p99_ttft_ms",), 0.5, "TTFT"),
    (
        "sglang-qwen25-3b-agg-n100-in512-out128-c32.jsonl",
        0,
        ("output_throughput",),
        1.3,
        THROUGHPUT,
    ),
    ("aiperf-qwen3-4b-g7-c16.json", None, ("output_token_throughput", "avg"), 1.3, THROUGHPUT),
    (
        "llmperf-gpt41nano-550-150-c10.json",
        None,
        ("results_mean_output_throughput_token_per_s",),
        1.3,
        THROUGHPUT,
    ),
]


@pytest.mark.parametrize(
    ("name", "record", "path", "factor", "word"),
    FABRICATIONS,
    ids=[f"{n}:{'.'.join(p)}x{f}" for n, _, p, f, _ in FABRICATIONS],
)
def test_fabricated_figure_is_caught_by_a_rule_naming_it(
    name: str, record: int | None, path: tuple[str, ...], factor: float, word: str, kits: RealKits
) -> None:
    report = _audit(name, record, kits, edited(name, record, path, factor))
    named = [(r, m) for r, m in _errors(report) if word.lower() in m.lower()]
    assert named, _errors(report)


def test_summary_only_fabrication_stays_unchecked(kits: RealKits) -> None:
    """A better p90 TTFT (x0.9) in an AIPerf summary: no per-request data to recompute it from, and
    the quantiles stay in order, so the audit cannot rule it out. It must say so, never pass it."""
    name = "aiperf-qwen3-4b-g7-c16.json"
    report = _audit(name, None, kits, edited(name, None, ("time_to_first_token", "p90"), 0.9))
    assert _errors(report) == []
    vouched = [
        f
        for f in report.findings
        if f.severity == "pass" and f.rule in ("R16", "R19") and "per-request" in f.message
    ]
    assert vouched == []
    assert any(f.severity == "not-checkable" for f in report.findings)


def test_sign_accepts_every_unseen_file_and_audit_finds_no_error(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The way a user would: every file in results/, one claims file citing them, `k3kit sign`
    (exit 0), then `k3kit audit` of the signed kit reading the evidence back (no error)."""
    from tests.test_audit_real_corpus import _claims_toml

    cases = [unseen_case(name, record) for name, record in FILES]
    (tmp_path / "results").mkdir()
    for _, row, data in cases:
        (tmp_path / row["evidence"]).write_bytes(data)
    claims = tmp_path / "claims.toml"
    claims.write_text(_claims_toml(cases, "numpy-linear"))
    proc = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", claims, "--force")
    assert proc.returncode == 0, proc.stderr
    proc = run_k3kit("audit", kit, "--trust", golden.key.public, "--json")
    report = json.loads(proc.stdout)
    errors = [(f["rule"], f["message"]) for f in report["findings"] if f["severity"] == "error"]
    assert proc.returncode == 0 and errors == [], errors
    evidence = [f for f in report["findings"] if f["rule"] == "R03" and f["severity"] == "pass"]
    assert len(evidence) >= len(FILES), [
        f["message"] for f in report["findings"] if f["rule"] == "R03"
    ]


def test_llmperf_counts_are_disclosed_as_llama_tokens_not_called_false(kits: RealKits) -> None:
    """The false error this corpus found: llmperf asked gpt-4.1-nano for ~150 tokens (in the
    model's tokens) and counted 171.1 per request with its Llama tokenizer. R09 says so as a
    warning naming the tokenizer; the same receipt from a tool that counts in the model's own
    tokens (no token_counter) would still be an error."""
    name = "llmperf-gpt41nano-550-150-c10.json"
    report = _audit(name, None, kits)
    r09 = [f for f in report.findings if f.rule == "R09"]
    assert [f.severity for f in r09] == ["warning"], r09
    assert "llama-tokenizer" in r09[0].message and "171.1" in r09[0].message


def test_llmperf_summary_implies_its_duration_and_totals() -> None:
    """llmperf: output_throughput = sum(tokens) / (end - start), completed per minute =
    completed / (end - start) * 60, and number_output_tokens_mean is over the same requests."""
    from k3kit.errors import K3kitError
    from k3kit.evidence import parse_evidence

    name = "llmperf-gpt41nano-550-150-c10.json"
    v = parse_evidence(read(name), source=name).values
    assert v["total_output_tokens"] == 1711 and v["completed"] == 10
    duration = float(v["duration"] or 0)
    assert v["total_output_tokens"] / duration == pytest.approx(v["output_throughput"], rel=1e-12)
    obj = json.loads(read(name))
    obj["results_number_output_tokens_mean"] = 1e15  # within the number bound; x10 is no count
    with pytest.raises(K3kitError) as caught:
        parse_evidence(json.dumps(obj).encode(), source=name)
    assert caught.value.code == "EVIDENCE_MALFORMED"


def test_aiperf_receipt_signs_for_the_vllm_version_that_ran(
    kits: RealKits, golden: GoldenKit, tmp_path: Path
) -> None:
    """The AIPerf files were served by vLLM 0.29.0 (the study's StatefulSet image): a kit built
    for 0.29.0 from its snapshot signs a receipt stating 0.29.0, and its audit finds no error."""
    import shutil

    from tests.test_audit_real_corpus import _claims_toml

    names = [n for n, _ in FILES if engine_version(n) == "0.29.0"]
    assert names
    kits.info("0.29.0")  # builds the kit as a publisher would (engine snapshot, build)
    kit = tmp_path / "kit"
    shutil.copytree(kits.root / "0.29.0" / "kit", kit)
    cases = [unseen_case(name) for name in names]
    (tmp_path / "results").mkdir()
    for _, row, data in cases:
        (tmp_path / row["evidence"]).write_bytes(data)
    toml = _claims_toml(cases, "numpy-linear")
    assert 'engine_version = "0.33.0"' in toml
    claims = tmp_path / "claims.toml"
    claims.write_text(toml.replace('engine_version = "0.33.0"', 'engine_version = "0.29.0"'))
    proc = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", claims, "--force")
    assert proc.returncode == 0, proc.stderr
    proc = run_k3kit("audit", kit, "--trust", golden.key.public, "--json")
    report = json.loads(proc.stdout)
    errors = [(f["rule"], f["message"]) for f in report["findings"] if f["severity"] == "error"]
    assert proc.returncode == 0 and errors == [], errors


def test_a_mean_of_random_lengths_gets_its_sampling_error(kits: RealKits) -> None:
    """The false error this corpus found: 50 SGLang prompts drawn from [1, 512] (range ratio 0)
    measured a mean of 283.1 against a middle of 256.5, 10.4% off but 1.3 standard errors
    ((512 - 1) / sqrt(12 x 50) = 20.9). R10 now allows 4 standard errors beyond ±10%: the honest
    file passes, while the same prompts claimed as draws from [1, 2048] are still an error."""
    name = "sglang-qwen25-3b-pd-intra-n50-in512-out64-c32.jsonl"
    wl, row, data = unseen_case(name, 0)
    assert wl["input_tokens"] == 512 and wl["range_convention"] == "sglang"
    honest = audit_cases([(wl, row, data)], kits, {row["id"]: data})
    r10 = [f for f in honest.findings if f.rule == "R10"]
    assert [f.severity for f in r10] == ["pass"], r10
    inflated = {**wl, "input_tokens": 2048}
    report = audit_cases([(inflated, row, data)], kits, {row["id"]: data})
    r10 = [f for f in report.findings if f.rule == "R10"]
    assert [f.severity for f in r10] == ["error"], r10
    assert "for a mean of random lengths" in r10[0].message


def test_sources_list_every_unseen_file_with_its_sha256() -> None:
    import hashlib
    import re

    text = (UNSEEN / "SOURCES.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{64})` \| (\d+) \|$", text, flags=re.M)
    assert {name for name, _, _ in rows} == {n for n, _ in FILES}
    for name, sha, size in rows:
        data = read(name)
        assert hashlib.sha256(data).hexdigest() == sha and len(data) == int(size), name
