"""What the rules see: the verified receipt, per-run views of published and evidence numbers.

Three layers of numbers exist for a run, and rules compare them: the *published* figures
(``run.metrics``, Decimals with their printed precision), the *tool summary* of the evidence file
(``run.evidence_summary``, exact floats), and the *per-request data* of a raw evidence file, which
is only available when an evidence folder was read (a kit's, or the one beside an acceptance
report) and the file matched its signed sha256. :class:`EvidenceFacts` is the one record of which
files were read and what became of each; every rule asks it, never whether a kit is present.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from functools import cached_property

from k3kit.audit.numbers import Interval
from k3kit.audit.stats import Ordered, mean, percentile, pstdev
from k3kit.evidence import Request, RunData
from k3kit.models import (
    EvidenceSummary,
    KitInfo,
    LatencyStats,
    Percentiles,
    ReceiptPredicate,
    Workload,
)
from k3kit.models import Run as ClaimedRun

METRICS = ("ttft", "tpot", "itl", "e2el")
LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2E latency"}
# Published percentile keys of ``Percentiles`` and the percentile each stands for.
PUBLISHED_PCTS = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99.9": 99.9}
_ATTR = {"p99.9": "p99_9"}


@dataclass
class KitFacts:
    """What an audit of a kit directory adds to the receipt alone (its evidence aside)."""

    manifest_sha256: str | None
    lock_sha256: str | None
    info: KitInfo | None


@dataclass
class EvidenceFacts:
    """The evidence folder the audit read: a kit's, or the one beside an acceptance report.

    Kept apart from :class:`KitFacts` because evidence can be present without a kit (a buyer's
    acceptance report carries its own): whether a rule may use a run's evidence depends on this
    record alone. ``Context.evidence is None`` means no folder was read (a lone receipt).
    """

    status: dict[str, str] = field(default_factory=dict)  # run id -> "ok" or the problem
    extra: list[str] = field(default_factory=list)  # files in the folder the receipt does not list


@dataclass
class RunView:
    run: ClaimedRun
    workload: Workload
    gpus: int
    result: RunData | None = None
    raw_note: str = ""

    @property
    def id(self) -> str:
        return self.run.id

    @property
    def summary(self) -> EvidenceSummary | None:
        return self.run.evidence_summary

    @property
    def requests(self) -> list[Request] | None:
        return None if self.result is None else self.result.requests

    @cached_property
    def successes(self) -> list[Request] | None:
        reqs = self.requests
        return None if reqs is None else [r for r in reqs if r.success]

    def published(self, metric: str, key: str) -> Decimal | None:
        """A published latency statistic: ``published("ttft", "p50")``."""
        stats: Percentiles | None = getattr(self.run.metrics, f"{metric}_ms")
        if stats is None:
            return None
        value: Decimal | None = getattr(stats, _ATTR.get(key, key))
        return value

    def published_keys(self, metric: str) -> list[str]:
        return [
            k for k in ("mean", *PUBLISHED_PCTS, "max") if self.published(metric, k) is not None
        ]

    def tool(self, metric: str, key: str) -> Decimal | None:
        """A statistic the tool reported: key mean/std/p50 (= median)/p90/p99/p99.9."""
        if self.summary is None:
            return None
        stats: LatencyStats | None = getattr(self.summary, f"{metric}_ms")
        if stats is None:
            return None
        if key in ("mean", "std", "median"):
            value: Decimal | None = getattr(stats, key)
            return value
        if key == "p50" and stats.median is not None:
            return stats.median
        return stats.percentiles.get(key[1:]) if key.startswith("p") else None

    def samples_s(self, metric: str) -> list[float] | None:
        """Per-request samples in seconds as vLLM computes them (successful requests only)."""
        cache = self.__dict__.setdefault("_sample_cache", {})
        if metric not in cache:
            cache[metric] = self._samples(metric)
        value: list[float] | None = cache[metric]
        return value

    def ordered_s(self, metric: str) -> list[float] | None:
        """:meth:`samples_s` sorted, once per run and metric: R16, R19 and R20 each need the
        order statistics, and 10,000 requests carry over a million ITL samples."""
        cache = self.__dict__.setdefault("_ordered_cache", {})
        if metric not in cache:
            samples = self.samples_s(metric)
            cache[metric] = Ordered(sorted(samples)) if samples is not None else None
        value: list[float] | None = cache[metric]
        return value

    def _samples(self, metric: str) -> list[float] | None:
        ok = self.successes
        if ok is None:
            return None
        if metric == "ttft":
            return [r.ttft_s for r in ok]
        if metric == "itl":
            return list(itertools.chain.from_iterable(r.itl_s for r in ok))  # C-speed flatten
        # Without ``latencies`` (older vLLM), E2E is rebuilt as TTFT + sum(ITL): the same
        # timestamps vLLM subtracted, so TPOT = sum(ITL) / (N - 1) is still its own number.
        if metric == "e2el":
            return [r.e2e_s for r in ok]
        return [(r.e2e_s - r.ttft_s) / (r.output_len - 1) for r in ok if r.output_len > 1]

    def rebuilt_e2e(self) -> bool:
        """True when some successful request's E2E comes from TTFT + sum(ITL)."""
        return any(r.latency_s is None for r in self.successes or [])

    def rebuilt_bounds(self, metric: str) -> Bounds | None:
        """Per-request lower and upper bounds (s) of a TPOT or E2E the tool measured.

        Only for files without ``latencies``: each rebuilt E2E is TTFT + sum(ITL) plus an unknown
        tail in [0, ``tail_s``] (see :func:`tail_s`); TPOT is that E2E minus TTFT over N - 1.
        """
        cache = self.__dict__.setdefault("_bounds_cache", {})
        if metric not in cache:
            cache[metric] = self._rebuilt_bounds(metric)
        value: Bounds | None = cache[metric]
        return value

    def _rebuilt_bounds(self, metric: str) -> Bounds | None:
        ok = self.successes
        if ok is None or metric not in ("tpot", "e2el") or not self.rebuilt_e2e():
            return None
        lo: list[float] = []
        hi: list[float] = []
        for r in ok:
            gaps, tail = sum(r.itl_s), tail_s(r)
            early = 0.0 if r.latency_s is not None else TTFT_LAG_S
            if metric == "e2el":
                lo.append(r.ttft_s + gaps - early)
                hi.append(r.ttft_s + gaps + tail)
            elif r.output_len > 1:
                lo.append((gaps - early) / (r.output_len - 1))
                hi.append((gaps + tail) / (r.output_len - 1))
        shift = max((h - low for low, h in zip(lo, hi, strict=True)), default=0.0)
        return Bounds(sorted(lo), sorted(hi), shift)

    def n_requests(self) -> tuple[int | None, str]:
        """Successful requests behind the statistics, and where that count comes from."""
        if self.successes is not None:
            return len(self.successes), "per-request evidence"
        if self.summary is not None and self.summary.completed is not None:
            return self.summary.completed, "evidence summary"
        if self.run.completed is not None:
            return self.run.completed, "published"
        return None, ""

    def n_samples(self, metric: str) -> tuple[int | None, str]:
        if metric == "itl":
            samples = self.samples_s("itl")
            return (None, "") if samples is None else (len(samples), "per-request evidence")
        if metric == "tpot" and self.successes is not None:
            return sum(1 for r in self.successes if r.output_len > 1), "per-request evidence"
        return self.n_requests()

    def requested(self) -> int | None:
        if self.run.requests is not None:
            return self.run.requests
        return None if self.summary is None else self.summary.num_prompts

    def duration(self) -> tuple[Interval | None, str]:
        """The run's duration in seconds: measured, published, or derived from published rates."""
        if self.summary is not None and self.summary.duration_s is not None:
            return Interval.measured(self.summary.duration_s), "evidence duration"
        m = self.run.metrics
        if m.duration_s is not None:
            return Interval.published(m.duration_s), "published duration"
        count = self.run.completed if self.run.completed is not None else self.run.requests
        if count and m.request_rate is not None and m.request_rate > 0:
            rate = Interval.published(m.request_rate)
            return Interval.exact(count) / rate, f"{count} requests / {m.request_rate} req/s"
        out_len = self.workload.output_tokens
        if count and m.output_tok_s is not None and m.output_tok_s > 0 and self.fixed_length():
            assert out_len is not None
            tokens = count * out_len
            return (
                Interval.exact(tokens) / Interval.published(m.output_tok_s),
                f"{count} x {self.workload.output_tokens} tokens / {m.output_tok_s} tok/s",
            )
        return None, ""

    def fixed_length(self) -> bool:
        """Every request generates the workload's output_tokens (unless declared otherwise)."""
        wl = self.workload
        return (
            wl.length_kind("output") == "fixed"
            and wl.ignore_eos is not False
            and wl.output_tokens is not None
        )

    @property
    def open_loop(self) -> bool:
        return self.workload.load == "open-loop"

    def no_success(self) -> bool:
        """Nothing completed: every statistic of the run is empty, whatever it says."""
        n, _ = self.n_requests()
        return n == 0

    def mean_latency_s(self) -> float | None:
        samples = self.samples_s("e2el")
        return None if not samples else mean(samples)


@dataclass(frozen=True)
class Policy:
    """How thresholds that are conventions, not truths, are reported.

    MLPerf's minimum samples per percentile and its 600 s minimum duration say a figure is weakly
    supported, not that it is false: warnings by default, errors under ``strict``.
    """

    strict: bool = False


@dataclass
class Context:
    predicate: ReceiptPredicate
    runs: list[RunView]
    signer_keyid: str
    kit: KitFacts | None = None
    subjects: dict[str, str] = field(default_factory=dict)  # Statement subject -> sha256
    policy: Policy = field(default_factory=Policy)
    evidence: EvidenceFacts | None = None  # None: no evidence folder was read

    def run(self, run_id: str) -> RunView:
        return next(rv for rv in self.runs if rv.id == run_id)


def build_context(
    predicate: ReceiptPredicate,
    *,
    signer_keyid: str,
    kit: KitFacts | None,
    evidence: EvidenceFacts | None,
    results: dict[str, RunData],
    subjects: dict[str, str],
    policy: Policy | None = None,
) -> Context:
    """Views of every run; ``results`` holds the parsed evidence files that passed their hash
    (those ``evidence`` marks "ok")."""
    admitted = {} if evidence is None else evidence.status
    assert all(admitted.get(rid) == "ok" for rid in results), "evidence used without its binding"
    views = []
    for run in predicate.runs:
        view = RunView(
            run,
            predicate.workloads[run.workload],
            run.gpus_in(predicate.environment),
            results.get(run.id),
        )
        if run.evidence is None:
            view.raw_note = "no evidence file (summary-level run)"
        elif run.evidence_level == "summary":
            view.raw_note = "summary-level evidence (no per-request data)"
        elif evidence is None:
            view.raw_note = "per-request evidence not available (receipt audited without its kit)"
        elif view.result is None:
            view.raw_note = f"evidence unusable: {evidence.status.get(run.id, 'not read')}"
        views.append(view)
    return Context(predicate, views, signer_keyid, kit, subjects, policy or Policy(), evidence)


def statistic(sorted_s: list[float], key: str, method: str = "numpy-linear") -> float:
    """A summary statistic in ms of samples in seconds, computed as vLLM does (x 1000 last)."""
    if key == "mean":
        return (sorted_s.mean if isinstance(sorted_s, Ordered) else mean(sorted_s)) * 1000
    if key == "std":
        return (sorted_s.std if isinstance(sorted_s, Ordered) else pstdev(sorted_s)) * 1000
    if key == "max":
        return sorted_s[-1] * 1000
    p = 50.0 if key in ("median", "p50") else float(key[1:])
    return percentile(sorted_s, p, method) * 1000


# A text round trip moves a token count by a few tokens either way: vLLM's older clients count
# output tokens by re-tokenizing the generated text, and its random dataset decodes random token
# ids to a prompt the server re-tokenizes (64 declared arrives as 64..66). R10 and R17 allow this
# many tokens per request before relative bounds take over.
RETOKENIZE_ABS = 3

# Older clients (vLLM 0.6's ``backend_request_func.py``) take the first chunk's ``timestamp`` and
# then call ``perf_counter()`` again for TTFT, so TTFT + sum(ITL) exceeds their latency by the time
# between two adjacent clock reads: microseconds (the corpus file: 1.5e-7 relative on mean TPOT).
# 0.1 ms per request covers it a hundredfold and is far below any fabrication a rule must see.
TTFT_LAG_S = 1e-4


def tail_s(r: Request) -> float:
    """How much later than its last text chunk the tool may have stopped a request's clock (s).

    vLLM's client (``backend_request_func.py``, later ``vllm/benchmarks/lib/endpoint_request_func
    .py``) appends an ITL only for a chunk with ``choices`` but moves ``most_recent_timestamp``
    on *every* data chunk, and ``latency = most_recent_timestamp - st``: the clock stops at the
    trailing usage chunk, sent after the last text chunk with no engine step between them, so
    the tail is API-server and event-loop delay. It is bounded by the longest chunk gap the same
    request saw (which is one engine step plus the same kind of delay); the real files of the
    issue show tails of 0.02% to 0.55% of the request. Never negative: the clock cannot stop
    before the last chunk arrived. A request with its own ``latencies`` has no tail to guess.
    """
    if r.latency_s is not None:
        return 0.0
    return max(r.itl_s, default=0.0)


_REL, _ABS = Fraction(1, 10**9), Fraction(1, 10**12)  # float noise of two implementations


@dataclass(frozen=True)
class Bounds:
    """Sorted per-request lower and upper bounds (s), and the largest gap between a pair."""

    lo: list[float]
    hi: list[float]
    shift: float

    def range_ms(self, key: str, method: str = "numpy-linear") -> Interval:
        """Where a published mean, max or percentile of the requests can lie."""
        low, high = statistic(self.lo, key, method), statistic(self.hi, key, method)
        return Interval(Fraction(low) * (1 - _REL) - _ABS, Fraction(high) * (1 + _REL) + _ABS)

    def admits(self, tool_ms: float, key: str) -> bool:
        """Could the tool's statistic come from samples between the bounds?

        Mean, median, every percentile and max are monotone in each sample, so the tool's value
        lies between the statistic of the lower and of the upper bounds. Std is not monotone: it
        moves by at most the std of the per-request shifts, which lie in [0, shift] (Popoviciu:
        at most shift / 2).
        """
        if key == "std":
            base = statistic(self.lo, "std")
            return abs(tool_ms - base) <= self.shift / 2 * 1000 + 1e-9 * max(abs(base), 1.0)
        return self.range_ms(key).contains(Fraction(tool_ms))

    def text(self, key: str) -> str:
        if key == "std":
            return f"{statistic(self.lo, 'std'):.9g} ms ± {self.shift / 2 * 1000:.6g}"
        return f"{statistic(self.lo, key):.9g}..{statistic(self.hi, key):.9g} ms"


def close(a: float, b: float, scale: float | None = None, rel: float = 1e-9) -> bool:
    """Equal up to the float rounding of two implementations (relative 1e-9 by default)."""
    ref = max(abs(a), abs(b), abs(scale or 0.0))
    return abs(a - b) <= rel * ref + 1e-12


def tool_keys(rv: RunView, metric: str) -> list[str]:
    """The statistics the tool reported for a metric: mean, std, median, p90, ..."""
    if rv.summary is None:
        return []
    stats: LatencyStats | None = getattr(rv.summary, f"{metric}_ms")
    if stats is None:
        return []
    keys = [k for k in ("mean", "std", "median") if getattr(stats, k) is not None]
    return keys + [f"p{k}" for k in sorted(stats.percentiles, key=float)]
