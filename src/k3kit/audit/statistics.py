"""R19-R24: are the statistics reproducible, and does the sample support what they claim?"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from k3kit.audit.context import (
    LABELS,
    METRICS,
    PUBLISHED_PCTS,
    Bounds,
    Context,
    RunView,
    close,
    statistic,
    tool_keys,
)
from k3kit.audit.findings import Out, rule
from k3kit.audit.numbers import Interval, num, pct
from k3kit.audit.stats import (
    PERCENTILE_METHODS,
    interpolates_top_two,
    median_ci_ranks,
    minmax_coverage,
    mlperf_min_samples,
)

RECOMPUTED = ("ttft", "itl", "e2el")  # TPOT is recomputed by R16 from its own definition


def _methods_matching(
    ordered: list[float], key: str, claimed: Interval, bounds: Bounds | None = None
) -> list[str]:
    if bounds is not None:
        return [m for m in PERCENTILE_METHODS if claimed.overlaps(bounds.range_ms(key, m))]
    return [m for m in PERCENTILE_METHODS if claimed.contains(Fraction(statistic(ordered, key, m)))]


Tally = tuple[int, int]  # (statistics checked, statistics that failed)


def _add(a: Tally, b: Tally) -> Tally:
    return a[0] + b[0], a[1] + b[1]


@rule("R19", "Percentile recomputation", "numpy.percentile (vLLM); Hyndman & Fan (1996)")
def recompute(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        if rv.no_success():
            out.not_checkable(rv.id, "no request completed: no statistic to recompute")
            continue
        tally: Tally = (0, 0)
        for metric in RECOMPUTED:
            tally = _add(tally, _recompute_metric(ctx, rv, metric, out))
        _recompute_verdict(rv, tally, out)


def _recompute_metric(ctx: Context, rv: RunView, metric: str, out: Out) -> Tally:
    """One metric's three checks, in the order its findings are reported: the published figures
    against the tool's, the tool's against the samples, then the published figures the tool
    does not report against the samples (the last two need per-request samples)."""
    tally = _published_vs_tool(rv, metric, out)
    samples = rv.samples_s(metric)
    if not samples:
        return tally
    tally = _add(tally, _tool_vs_samples(rv, metric, len(samples), out))
    return _add(tally, _published_vs_samples(ctx, rv, metric, out))


def _published_vs_tool(rv: RunView, metric: str, out: Out) -> Tally:
    """A published statistic must be the tool's own figure, within its printed rounding."""
    checked, bad = 0, 0
    label = LABELS[metric]
    for key in rv.published_keys(metric):
        published, tool = rv.published(metric, key), rv.tool(metric, key)
        if published is None or tool is None:
            continue
        checked += 1
        if not Interval.published(published).overlaps(Interval.measured(tool)):
            bad += 1
            out.error(
                rv.id,
                f"published {label} {key} is not the evidence's {key}",
                f"{num(tool, 9)} ms (evidence)",
                f"{published} ms",
            )
    return checked, bad


def _tool_vs_samples(rv: RunView, metric: str, n: int, out: Out) -> Tally:
    """The tool's own statistics must follow from its ``n`` samples (numpy-linear, as vLLM
    computes them; within the rebuilt bounds when the samples were rounded)."""
    checked, bad = 0, 0
    ordered = rv.ordered_s(metric) or []
    bounds = rv.rebuilt_bounds(metric)
    for key in tool_keys(rv, metric):
        tool = rv.tool(metric, key)
        assert tool is not None
        checked += 1
        recomputed = statistic(ordered, key)
        scale = statistic(ordered, "mean") if key == "std" else None
        ok = (
            bounds.admits(float(tool), key)
            if bounds is not None
            else close(float(tool), recomputed, scale)
        )
        if not ok:
            bad += 1
            _tool_mismatch(rv, metric, key, (n, ordered, recomputed), tool, out)
    return checked, bad


def _tool_mismatch(
    rv: RunView,
    metric: str,
    key: str,
    sample: tuple[int, list[float], float],
    tool: Decimal,
    out: Out,
) -> None:
    """Report a tool statistic its samples do not give, naming any other percentile method that
    does (a tool that interpolates differently is a different finding from a wrong number)."""
    n, ordered, recomputed = sample
    others = [
        m
        for m in PERCENTILE_METHODS
        if key not in ("mean", "std") and close(float(tool), statistic(ordered, key, m))
    ]
    out.error(
        rv.id,
        f"evidence {LABELS[metric]} {key} does not match its {n} samples "
        f"(numpy-linear, as vLLM computes it)"
        + (f"; it matches {', '.join(others)}" if others else ""),
        f"{num(recomputed, 9)} ms",
        f"{num(tool, 9)} ms",
    )


def _published_vs_samples(ctx: Context, rv: RunView, metric: str, out: Out) -> Tally:
    """A published statistic the tool does not report must follow from the samples: the mean
    and maximum exactly, a percentile by the declared method (or, undeclared, by some method)."""
    checked, bad = 0, 0
    ordered = rv.ordered_s(metric) or []
    bounds = rv.rebuilt_bounds(metric)
    for key in rv.published_keys(metric):
        published = rv.published(metric, key)
        if published is None or rv.tool(metric, key) is not None:
            continue
        checked += 1
        check = _published_moment if key in ("mean", "max") else _published_percentile
        bad += not check(ctx, rv, (metric, key, published), (ordered, bounds), out)
    return checked, bad


Claim = tuple[str, str, Decimal]  # (metric, key, the published figure)
Sample = tuple[list[float], Bounds | None]  # (ordered samples, rebuilt bounds if rounded)


def _published_moment(ctx: Context, rv: RunView, claim: Claim, sample: Sample, out: Out) -> bool:
    """A published mean or maximum against the samples (or their rebuilt bounds)."""
    metric, key, published = claim
    ordered, bounds = sample
    claimed = Interval.published(published)
    value = statistic(ordered, key)
    if (
        claimed.overlaps(bounds.range_ms(key))
        if bounds is not None
        else claimed.contains(Fraction(value))
    ):
        return True
    out.error(
        rv.id,
        f"published {LABELS[metric]} {key} does not match the samples",
        f"{num(value, 9)} ms",
        f"{published} ms",
    )
    return False


def _published_percentile(
    ctx: Context, rv: RunView, claim: Claim, sample: Sample, out: Out
) -> bool:
    """A published percentile must be the declared method's; undeclared, any method's will do,
    and the error names the methods that would have produced it."""
    metric, key, published = claim
    ordered, bounds = sample
    declared = ctx.predicate.definitions.percentile_method
    label = LABELS[metric]
    matching = _methods_matching(ordered, key, Interval.published(published), bounds)
    if ctx.predicate.definitions_declared and declared not in matching:
        out.error(
            rv.id,
            f"published {label} {key} is not the {declared} percentile of the "
            f"samples" + (f"; it matches {', '.join(matching)}" if matching else ""),
            f"{num(statistic(ordered, key, declared), 9)} ms ({declared})",
            f"{published} ms",
        )
        return False
    if not matching:
        out.error(
            rv.id,
            f"no percentile method reproduces the published {label} {key}",
            f"{num(statistic(ordered, key, declared), 9)} ms ({declared})",
            f"{published} ms",
        )
        return False
    return True


def _recompute_verdict(rv: RunView, tally: Tally, out: Out) -> None:
    """Nothing comparable is not checkable; all comparable and none wrong is a pass."""
    checked, bad = tally
    if not checked:
        out.not_checkable(
            rv.id, rv.raw_note or "no TTFT/ITL/E2E statistics in both claims and evidence"
        )
    elif not bad:
        source = "per-request data" if rv.successes is not None else "the evidence summary"
        out.passed(rv.id, f"{checked} TTFT/ITL/E2E statistics match {source}")


def _claimed_percentiles(rv: RunView) -> list[tuple[str, str, float]]:
    return [
        (metric, key, PUBLISHED_PCTS[key])
        for metric in METRICS
        for key in rv.published_keys(metric)
        if key in PUBLISHED_PCTS
    ]


@rule("R20", "Support per percentile", "MLPerf LoadGen early stopping (min query counts)")
def support(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        claimed = _claimed_percentiles(rv)
        if not claimed:
            continue
        short, unknown, fine = [], [], 0
        for metric, key, p in claimed:
            n, _ = rv.n_samples(metric)
            need = mlperf_min_samples(p)
            if n is None:
                unknown.append(f"{LABELS[metric]} {key}")
            elif n < need:
                short.append((f"{LABELS[metric]} {key}", n, need))
            else:
                fine += 1
        if short:
            report = out.error if ctx.policy.strict else out.warning
            report(
                rv.id,
                "percentiles from too few samples are descriptive only, not supported claims: "
                + ", ".join(f"{what} from n={n}" for what, n, _ in short),
                ", ".join(sorted({f"n >= {need} for {w.split()[-1]}" for w, _, need in short})),
                ", ".join(sorted({f"n = {n}" for _, n, _ in short})),
            )
        if unknown:
            out.not_checkable(rv.id, f"sample size unknown for {', '.join(unknown)}")
        if fine and not short:
            out.passed(rv.id, f"{fine} published percentile(s) have MLPerf's minimum samples")
    if not any(_claimed_percentiles(rv) for rv in ctx.runs):
        out.info("percentiles", "no percentiles published")


@rule("R21", "Interpolation-only tail", "numpy linear percentile; MLPerf LoadGen")
def interpolation(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        flagged, fine = [], 0
        for metric, key, p in _claimed_percentiles(rv):
            n, _ = rv.n_samples(metric)
            if n is None or n < 2:
                continue
            if p > 50 and interpolates_top_two(n, p):
                position = num((n - 1) * p / 100, 4)
                flagged.append(
                    f"{LABELS[metric]} {key} at n={n} (position {position} of 0..{n - 1})"
                )
            else:
                fine += 1
        if flagged:
            out.warning(
                rv.id,
                "only interpolates between the two largest samples: " + "; ".join(flagged),
                "a sample with values above the percentile",
                "the tail is the sample maximum, blurred",
            )
        elif fine:
            out.passed(rv.id, f"{fine} published percentile(s) lie inside the sample")


@rule("R22", "Median CI", "order statistics of Binomial(n, 1/2) (distribution-free)")
def median_ci(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        for metric in METRICS:
            if rv.published(metric, "p50") is None:
                continue
            n, _ = rv.n_samples(metric)
            label = f"median {LABELS[metric]}"
            if n is None or n == 0:
                why = "sample size unknown" if n is None else "no completed request"
                out.not_checkable(rv.id, f"{label}: {why}")
                continue
            ranks = median_ci_ranks(n)
            if ranks is None:
                out.warning(
                    rv.id,
                    f"{label} (n={n}) has no distribution-free 95% CI; [min, max] covers only "
                    f"{pct(minmax_coverage(n), 4)}",
                    "n >= 6",
                    f"n = {n}",
                )
                continue
            lo, hi, coverage = ranks
            samples = rv.samples_s(metric)
            if samples and len(samples) == n:
                ordered = rv.ordered_s(metric) or []
                values = f"[{num(ordered[lo - 1] * 1000)}, {num(ordered[hi - 1] * 1000)}] ms"
            else:
                values = "(values need per-request evidence)"
            out.info(
                rv.id,
                f"{label}: 95% CI = [x({lo}), x({hi})] of n={n} {values}, "
                f"coverage {pct(coverage, 4)}",
            )


@rule("R23", "Steady state", "InferenceX sweep practice (>= 10 waves); MLPerf")
def steady_state(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        requested = rv.requested()
        if requested is None:
            out.not_checkable(rv.id, "number of requests not published")
            continue
        c = rv.run.concurrency
        warmups = rv.workload.warmups_per_point
        if rv.open_loop:
            # Waves of a client pool mean nothing when arrivals follow a clock.
            rate = rv.run.offered_rate
            out.info(
                rv.id,
                f"open loop at {rate if rate is not None else 'an unstated'} req/s"
                + (f", capped at {c}" if c else "")
                + f": {requested} requests, {warmups} warmup(s); waves do not apply",
            )
            continue
        assert c is not None  # the claims model requires it for closed loops
        waves = Fraction(requested, c)
        problems = []
        if waves < 5:
            problems.append(f"{num(waves, 3)} waves of {c} ({requested} requests)")
        if c > 1 and warmups < c:
            problems.append(f"{warmups} warmup(s) for {c} concurrent slots")
        if problems:
            out.warning(
                rv.id,
                "ramp-dominated: " + "; ".join(problems),
                ">= 5 waves and >= concurrency warmups",
                "; ".join(problems),
            )
        else:
            out.passed(rv.id, f"{num(waves, 3)} waves, {warmups} warmups")


@rule("R24", "Minimum duration", "MLPerf: >= 600 s per performance run")
def min_duration(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        duration, source = rv.duration()
        if duration is None:
            out.not_checkable(rv.id, "duration neither published nor derivable")
        elif duration.hi < 600:
            (out.error if ctx.policy.strict else out.warning)(
                rv.id,
                f"run of {duration.text(4)} s ({source}) is shorter than MLPerf's 600 s",
                ">= 600 s",
                f"{duration.text(4)} s",
            )
        else:
            out.passed(rv.id, f"{duration.text(4)} s ({source})")
