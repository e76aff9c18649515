"""R06-R10: were the requests that were promised measured, only those, and of the declared size?"""

from __future__ import annotations

import math
from fractions import Fraction

from k3kit.audit.context import RETOKENIZE_ABS, Context, RunView
from k3kit.audit.findings import Out, rule
from k3kit.audit.numbers import Interval, num, pct


def _observed(rv: RunView) -> tuple[int | None, int | None, str]:
    """(completed, failed) from the best evidence available, else as published."""
    if rv.requests is not None and rv.successes is not None:
        return len(rv.successes), len(rv.requests) - len(rv.successes), "per-request evidence"
    if rv.summary is not None and rv.summary.completed is not None:
        return rv.summary.completed, rv.summary.failed, "evidence summary"
    return rv.run.completed, rv.run.failed, "published"


@rule("R06", "Completed == requested", "vLLM bench serve completed/failed; MLPerf")
def completed(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        requested = rv.requested()
        done, _, source = _observed(rv)
        if requested is None or done is None:
            out.not_checkable(rv.id, "requested or completed count not published")
            continue
        if done == 0 and requested > 0:
            out.error(
                rv.id,
                f"0/{requested} requests completed ({source}): every figure of this run is "
                "computed from nothing",
                "at least one completed request",
                "none",
            )
            continue
        if done >= requested:
            out.passed(rv.id, f"{done}/{requested} completed ({source})")
            continue
        missing = requested - done
        published = rv.run.completed
        disclosed = (
            published is not None and published <= done and source != "published"
        ) or source == "published"
        if rv.run.failed is not None and rv.run.failed >= missing:
            disclosed = True
        if disclosed:
            out.warning(
                rv.id,
                f"{done}/{requested} completed: {missing} failure(s) disclosed; every figure "
                "of this run is conditional on the completed requests",
            )
        else:
            out.error(
                rv.id,
                f"{done}/{requested} completed in the {source}, {missing} failure(s) not "
                "disclosed in the claims",
                f"completed = {done} or failed = {missing} published",
                f"completed = {published}, failed = {rv.run.failed}",
            )


@rule("R07", "Warmup excluded", "vLLM --num-warmups (sent before the timed run)")
def warmup_excluded(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        requested = rv.run.requests
        counts: list[tuple[str, int]] = []
        s = rv.summary
        if s is not None:
            if s.num_prompts is not None:
                counts.append(("num_prompts", s.num_prompts))
            if s.completed is not None:
                counts.append(("completed + failed", s.completed + (s.failed or 0)))
            if s.records is not None:
                counts.append(("per-request records", s.records))
        if not counts:
            if rv.workload.warmups_per_point and not rv.workload.warmups_excluded:
                out.error(
                    rv.id,
                    "the claims state that warmup requests are included in the timed results",
                    "warmups excluded",
                    f"{rv.workload.warmups_per_point} warmup(s) per point included",
                )
            else:
                out.not_checkable(rv.id, "no evidence file: warmup exclusion cannot be checked")
            continue
        reference = requested if requested is not None else counts[0][1]
        over = [(name, n) for name, n in counts if n > reference]
        shown = ", ".join(f"{name} {n}" for name, n in counts)
        if over:
            out.error(
                rv.id,
                f"the evidence holds more requests than the {reference} timed ones "
                f"({shown}): warmup or extra requests were counted",
                f"{reference} requests",
                shown,
            )
        else:
            out.passed(rv.id, f"{shown}; none beyond the {reference} timed requests")


@rule("R08", "Warmup / prefix-cache hygiene", "vLLM bench serve warmups; prefix caching default")
def cache_hygiene(ctx: Context, out: Out) -> None:
    for name, wl in sorted(ctx.predicate.workloads.items()):
        runs = [rv for rv in ctx.runs if rv.run.workload == name]
        where = f"workload:{name}"
        if wl.prefix_cache_policy in ("reset-before-each-point", "disabled"):
            out.passed(where, f"prefix cache {wl.prefix_cache_policy}")
            continue
        problems = []
        if wl.warmups_per_point:
            smallest = min((rv.requested() or 0 for rv in runs), default=0)
            share = (
                f" ({pct(Fraction(1, smallest), 3)} of a {smallest}-request point)"
                if smallest
                else ""
            )
            problems.append(
                "vLLM's warmup re-sends the first measured prompt, so with prefix caching (on by "
                f"default) measured request #0 hits the cache{share}"
            )
        if wl.fixed_seed and len(runs) > 1:
            problems.append(
                f"{len(runs)} points replay prompts from one fixed seed against the same server"
            )
        if not problems:
            out.passed(where, "no warmups and no repeated prompt sets")
        elif wl.prefix_cache_policy == "warm":
            out.warning(where, "prefix cache declared warm: " + "; ".join(problems))
        else:
            out.warning(
                where,
                "; ".join(problems) + "; no prefix-cache policy declared",
                "prefix_cache_policy = reset-before-each-point or disabled",
                "not declared",
            )


#: How many standard errors of a mean of random draws an honest run may land from the middle of
#: its range: 4 (one honest run in ~16,000 beyond it, by the normal limit of a sum of uniforms).
DRAW_SIGMAS = 4


def _sample_size(rv: RunView, values: list[int] | None) -> int | None:
    """How many requests the measured mean is over: per-request data, the tool's count, or the
    receipt's own count of completed requests."""
    if values:
        return len(values)
    if rv.summary is not None and rv.summary.completed:
        return rv.summary.completed
    return rv.run.completed or None


def _draw_slack(span: tuple[Fraction, Fraction] | None, n: int | None) -> Fraction:
    """The room a mean of ``n`` ranged lengths needs beyond ±10%: each length is one uniform draw
    from the declared range (vLLM's RandomDataset and SGLang's sample_random_requests both use
    ``np.random.randint(low, high + 1)``), so their mean has standard error
    (high - low) / sqrt(12 n). 50 prompts from SGLang's [1, 512] measured a mean of 283.1 against
    a middle of 256.5: 1.3 standard errors, honest, yet 10.4% off. Fixed lengths have none."""
    if span is None or n is None or n < 1 or span[0] == span[1]:
        return Fraction(0)
    se = float(span[1] - span[0]) / math.sqrt(12 * n)
    return Fraction(DRAW_SIGMAS * se).limit_denominator(10**6)


def _length_check(
    out: Out,
    rv: RunView,
    what: str,
    values: list[int] | None,
    mean_iv: Interval | None,
    source: str = "",
) -> bool:
    """R09/R10 for one of input or output: each request's length when there is per-request
    data, then the mean (from the requests, else ``mean_iv``) against the declared length.
    False when there is nothing to check."""
    wl = rv.workload
    exact = what == "output" and wl.ignore_eos is True and wl.length_kind(what) == "fixed"
    if values:
        if _request_lengths(out, rv, what, values, exact):
            return True
        mean_iv = Interval.exact(Fraction(sum(values), len(values)))
    if mean_iv is None:
        return False
    _mean_length(out, rv, what, (values, mean_iv, source), exact)
    return True


def _request_lengths(out: Out, rv: RunView, what: str, values: list[int], exact: bool) -> bool:
    """Per-request lengths: under ignore_eos every output is the declared length; every input
    lies in the declared range up to re-tokenization. True when a finding was reported."""
    declared = rv.workload.declared(what)
    off = [v for v in values if v != declared] if exact else []
    if exact and off:
        out.error(
            rv.id,
            f"ignore_eos declared, but {len(off)}/{len(values)} requests generated "
            f"{min(off)}..{max(off)} tokens",
            f"{declared} {what} tokens each",
            f"{min(values)}..{max(values)}",
        )
        return True
    if declared is not None and what == "input":
        return _input_range(out, rv, what, values, declared)
    return False


def _input_range(out: Out, rv: RunView, what: str, values: list[int], declared: int) -> bool:
    """Tokenizers and chat templates move a prompt by a few tokens: vLLM's random dataset
    decodes random token ids to text and the server re-tokenizes it (64 declared arrives as
    64..66). Beyond max(RETOKENIZE_ABS tokens, 1%) is a warning, beyond max(RETOKENIZE_ABS
    tokens, 10%) outside the declared range a false claim. The range is the tool's own
    (Workload.length_range: vLLM's and SGLang's differ). True when a finding was reported."""
    wl = rv.workload
    span = wl.length_range(what)
    if span is None:
        return False
    lo, hi = span
    # Only the extremes can be furthest outside [lo, hi] (exact, without a Fraction per
    # request: 10,000 requests made this rule the slowest of the audit).
    worst = max(lo - min(values), max(values) - hi, Fraction(0))
    if worst <= max(Fraction(RETOKENIZE_ABS), declared * Fraction(1, 100)):
        return False
    error = worst > max(Fraction(RETOKENIZE_ABS), declared * Fraction(1, 10))
    severity = out.error if error else out.warning
    worst = worst / declared
    severity(
        rv.id,
        f"{what} lengths {min(values)}..{max(values)} vs declared {declared}"
        + (
            f" ({wl.length_kind(what)}, {wl.range_convention}: [{num(lo)}, {num(hi)}])"
            if lo != hi
            else ""
        )
        + f" (worst {pct(worst, 3)} outside)",
        (f"{declared}" if lo == hi else f"[{num(lo)}, {num(hi)}]")
        + f" ± max({RETOKENIZE_ABS} tokens, 1%)",
        f"{min(values)}..{max(values)}",
    )
    return True


MeanOf = tuple[list[int] | None, Interval, str]  # (per-request values, their mean, source)


def _mean_length(out: Out, rv: RunView, what: str, mean_of: MeanOf, exact: bool) -> None:
    """The mean length against ±10% of the declared mean (MLPerf TEST09), widened by the draw
    error of ranged lengths: exact under ignore_eos, short-but-disclosed without it."""
    values, mean_iv, source = mean_of
    wl = rv.workload
    declared, span = wl.declared(what), wl.length_range(what)
    expected = wl.mean_length(what)
    if declared is None or expected is None:
        out.info(
            rv.id,
            f"mean {what} length {mean_iv.text()} tokens ({wl.length_kind(what)} lengths, "
            "no declared mean to compare)",
        )
        return
    # The mean the workload implies: L, except SGLang's one-sided range, whose middle it is.
    slack = _draw_slack(span, _sample_size(rv, values))
    band = Interval(expected * Fraction(9, 10) - slack, expected * Fraction(11, 10) + slack)
    declared_text = _declared_text(declared, expected, span)
    if exact and not mean_iv.contains(declared):
        out.error(
            rv.id,
            f"ignore_eos declared, but the mean {what} length is {mean_iv.text()}",
            str(declared),
            mean_iv.text(),
        )
    elif what == "output" and wl.ignore_eos is not True and mean_iv.hi < band.lo:
        # Without ignore_eos a request may stop early: a short mean is a disclosure, not a lie.
        out.warning(
            rv.id,
            f"mean {what} length {mean_iv.text()} tokens is below the declared {declared_text} "
            "(requests stopped at EOS; ignore_eos not declared)",
            band.range_text(),
            mean_iv.text(),
        )
    elif not mean_iv.overlaps(band):
        _mean_outside(out, rv, what, (mean_iv, source, band, slack), declared_text)
    else:
        out.passed(rv.id, f"mean {what} length {mean_iv.text()} for declared {declared_text}")


def _declared_text(
    declared: int, expected: Fraction, span: tuple[Fraction, Fraction] | None
) -> str:
    """How the declared mean is named in a finding: SGLang's one-sided range says its middle."""
    if expected != declared and span:
        return f"{num(expected)} (the middle of SGLang's [{num(span[0])}, {declared}])"
    return str(declared)


def _mean_outside(
    out: Out,
    rv: RunView,
    what: str,
    measured: tuple[Interval, str, Interval, Fraction],
    declared_text: str,
) -> None:
    """A mean ``(mean, source, band, slack)`` outside its band. A length counted with another
    tokenizer than the model's (llmperf counts every text with a Llama tokenizer) is in other
    units than the declared one: the gap is disclosed, not called false. Throughput and totals
    are still recomputed from the same counts."""
    mean_iv, source, band, slack = measured
    counter = None if rv.result is None else rv.result.token_counter
    severity = out.error if counter is None else out.warning
    severity(
        rv.id,
        f"mean {what} length {mean_iv.text()} tokens"
        + (f" ({source})" if source else "")
        + f" is outside ±10% of the declared {declared_text} (MLPerf TEST09 bound)"
        + (f" ± {num(slack)} for a mean of random lengths" if slack else "")
        + (f"; counted with {counter}, not the model's tokenizer" if counter else ""),
        band.range_text(),
        mean_iv.text(),
    )


@rule("R09", "Output length", "MLPerf TEST06/TEST09; vLLM ignore_eos with the random dataset")
def output_length(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        values = None if rv.successes is None else [r.output_len for r in rv.successes]
        mean_iv = None
        s, m = rv.summary, rv.run.metrics
        source = ""
        if s is not None and s.total_output_tokens is not None and s.completed:
            mean_iv = Interval.exact(Fraction(s.total_output_tokens, s.completed))
        elif m.output_tok_s is not None and m.request_rate is not None and m.request_rate > 0:
            mean_iv = Interval.published(m.output_tok_s) / Interval.published(m.request_rate)
            source = f"published output_tok_s {m.output_tok_s} / request_rate {m.request_rate}"
        if rv.no_success():
            out.not_checkable(rv.id, "no request completed: no output length to check")
        elif not _length_check(out, rv, "output", values, mean_iv, source):
            out.not_checkable(rv.id, "no token counts, and no output and request rate published")


@rule("R10", "Input length", "vLLM usage.prompt_tokens; dataset input_len")
def input_length(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        values = None
        if rv.successes is not None and all(r.input_len is not None for r in rv.successes):
            values = [r.input_len or 0 for r in rv.successes]
        s = rv.summary
        mean_iv = None
        if s is not None and s.total_input_tokens is not None and s.completed:
            mean_iv = Interval.exact(Fraction(s.total_input_tokens, s.completed))
        if rv.no_success():
            out.not_checkable(rv.id, "no request completed: no input length to check")
        elif not _length_check(out, rv, "input", values, mean_iv):
            out.not_checkable(rv.id, "no input token counts (needs an evidence file)")
