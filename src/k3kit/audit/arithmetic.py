"""R11-R15: do the published figures add up with each other and with the evidence?

Every identity is checked on intervals: a published figure covers half a unit in its last printed
digit, a tool float is exact up to the tool's own float rounding. Two sides agree when their
intervals overlap; the message gives both sides and the tolerance that follows from the decimals.
"""

from __future__ import annotations

from decimal import Decimal

from k3kit.audit.context import Context, RunView
from k3kit.audit.findings import Out, rule
from k3kit.audit.numbers import Interval, num


def _compare(
    out: Out,
    rv: RunView,
    what: str,
    left: Interval,
    left_text: str,
    right: Interval,
    right_text: str,
) -> bool:
    """Report whether two intervals for the same quantity overlap; True when they do."""
    if left.overlaps(right):
        return True
    out.error(
        rv.id,
        f"{what}: {left_text} does not equal {right_text}",
        f"{right_text} = {right.text()} (range {right.range_text()})",
        f"{left_text} = {left.text()}",
    )
    return False


@rule("R11", "Per-GPU arithmetic", "k3kit definitions; InferenceX tok/s/GPU convention")
def per_gpu(ctx: Context, out: Out) -> None:
    basis = ctx.predicate.definitions.per_gpu_throughput
    any_published = False
    for rv in ctx.runs:
        m = rv.run.metrics
        if m.output_tok_s_per_gpu is None:
            continue
        any_published = True
        claimed = Interval.published(m.output_tok_s_per_gpu)
        agg = m.output_tok_s if basis == "output" else m.total_tok_s
        key = "output_throughput" if basis == "output" else "total_token_throughput"
        tool = None if rv.summary is None else getattr(rv.summary, key)
        if agg is None and tool is None:
            out.not_checkable(rv.id, f"no {basis} throughput to divide by {rv.gpus} GPUs")
            continue
        ok = True
        label = f"per-GPU {m.output_tok_s_per_gpu}"
        if agg is not None:
            ok &= _compare(
                out,
                rv,
                "per-GPU vs aggregate",
                claimed,
                label,
                Interval.published(agg) / Interval.exact(rv.gpus),
                f"{agg}/{rv.gpus}",
            )
        if tool is not None:
            ok &= _compare(
                out,
                rv,
                "per-GPU vs evidence",
                claimed,
                label,
                Interval.measured(tool) / Interval.exact(rv.gpus),
                f"evidence {key} {num(tool, 9)}/{rv.gpus}",
            )
        if ok:
            out.passed(rv.id, f"{label} = {basis} throughput / {rv.gpus} within rounding")
    if not any_published:
        out.info("per-gpu", "no per-GPU figures published")


def _tool_identities(rv: RunView) -> list[tuple[str, Decimal | None, Interval, str]]:
    s = rv.summary
    if s is None or s.duration_s is None or s.duration_s <= 0:
        return []
    dur = Interval.measured(s.duration_s)
    rows: list[tuple[str, Decimal | None, Interval, str]] = []
    if s.total_output_tokens is not None:
        rows.append(
            (
                "output_throughput",
                s.output_throughput,
                Interval.exact(s.total_output_tokens) / dur,
                "total_output_tokens / duration",
            )
        )
    if s.completed is not None:
        rows.append(
            (
                "request_throughput",
                s.request_throughput,
                Interval.exact(s.completed) / dur,
                "completed / duration",
            )
        )
    if s.total_output_tokens is not None and s.total_input_tokens is not None:
        rows.append(
            (
                "total_token_throughput",
                s.total_token_throughput,
                Interval.exact(s.total_input_tokens + s.total_output_tokens) / dur,
                "(total_input_tokens + total_output_tokens) / duration",
            )
        )
    return rows


@rule("R12", "Throughput recomputation", "vLLM serve.py calculate_metrics")
def throughput(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        checked, ok = 0, True
        for name, value, expected, formula in _tool_identities(rv):
            if value is None:
                continue
            checked += 1
            ok &= _compare(
                out,
                rv,
                f"evidence {name}",
                Interval.measured(value),
                f"{name} {num(value, 9)}",
                expected,
                formula,
            )
        m, s = rv.run.metrics, rv.summary
        if s is not None:
            pairs = (
                ("output_tok_s", m.output_tok_s, s.output_throughput),
                ("total_tok_s", m.total_tok_s, s.total_token_throughput),
                ("request_rate", m.request_rate, s.request_throughput),
                ("duration_s", m.duration_s, s.duration_s),
            )
            for name, published, tool in pairs:
                if published is None or tool is None:
                    continue
                checked += 1
                ok &= _compare(
                    out,
                    rv,
                    f"published {name}",
                    Interval.published(published),
                    f"{name} {published}",
                    Interval.measured(tool),
                    f"evidence {num(tool, 9)}",
                )
        elif (
            m.request_rate is not None
            and m.duration_s is not None
            and m.duration_s > 0
            and rv.run.completed
        ):
            checked += 1
            ok &= _compare(
                out,
                rv,
                "published request rate",
                Interval.published(m.request_rate),
                f"request_rate {m.request_rate}",
                Interval.exact(rv.run.completed) / Interval.published(m.duration_s),
                f"{rv.run.completed}/{m.duration_s}",
            )
        if not checked:
            out.not_checkable(rv.id, "no token totals and duration to recompute throughput from")
        elif ok:
            out.passed(rv.id, f"{checked} throughput identities hold")


@rule("R13", "Totals recomputation", "vLLM serve.py calculate_metrics")
def totals(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        reqs, ok_reqs, s = rv.requests, rv.successes, rv.summary
        if reqs is None or ok_reqs is None or s is None:
            out.not_checkable(rv.id, rv.raw_note or "needs per-request evidence")
            continue
        rows = [
            ("completed", s.completed, len(ok_reqs), "successful records"),
            ("failed", s.failed, len(reqs) - len(ok_reqs), "failed records"),
            (
                "total_output_tokens",
                s.total_output_tokens,
                sum(r.output_len for r in reqs),
                "sum of output_lens",
            ),
        ]
        if all(r.input_len is not None for r in ok_reqs):
            rows.append(
                (
                    "total_input_tokens",
                    s.total_input_tokens,
                    sum(r.input_len or 0 for r in ok_reqs),
                    "sum of input_lens of successes",
                )
            )
        bad = [(n, v, e, how) for n, v, e, how in rows if v is not None and v != e]
        for name, value, expected, how in bad:
            out.error(
                rv.id,
                f"{name} does not match the per-request data",
                f"{expected} ({how})",
                str(value),
            )
        if not bad:
            out.passed(rv.id, f"{len(rows)} totals match {len(reqs)} per-request records")


def _duration_floor(rv: RunView) -> tuple[Interval, str] | None:
    """What the per-request data says the duration must at least be."""
    ok = rv.successes
    if not ok:
        return None
    starts = [r.start_s for r in ok]
    if all(a is not None for a in starts):
        first = min(a for a in starts if a is not None)
        last = max(a + r.e2e_s for a, r in zip(starts, ok, strict=True) if a is not None)
        return Interval.measured(last - first), "last end - first send"
    longest = max(r.e2e_s for r in ok)
    c = rv.run.concurrency
    if c is not None and rv.summary is not None and rv.summary.max_concurrency == c:
        # At most c requests in flight: the busy time of c slots covers every request's E2E.
        total = sum(r.e2e_s for r in ok) / c
        if total > longest:
            return Interval.measured(total), f"sum of E2E / {c} slots"
    return Interval.measured(longest), "the longest request's E2E"


@rule("R14", "Duration bounds", "vLLM serve.py benchmark(): duration spans every timed request")
def duration_bounds(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        s = rv.summary
        floor = _duration_floor(rv)
        if floor is None or s is None or s.duration_s is None:
            out.not_checkable(rv.id, rv.raw_note or "needs per-request evidence and a duration")
            continue
        span, how = floor
        duration = Interval.measured(s.duration_s)
        if duration.hi < span.lo:
            out.error(
                rv.id,
                f"duration is shorter than its own requests allow ({how})",
                f">= {span.text()} s ({how})",
                f"{num(s.duration_s)} s",
            )
        elif (
            s.request_rate == "inf" and how == "last end - first send" and duration.lo > span.hi + 2
        ):
            out.warning(
                rv.id,
                f"duration exceeds the request span by {num(duration.mid - span.mid)} s "
                "with all requests released at t=0",
                f"<= {span.text()} + 2 s",
                f"{num(s.duration_s)} s",
            )
        else:
            out.passed(rv.id, f"duration {num(s.duration_s)} s >= {span.text()} s ({how})")


def _rate(rv: RunView) -> tuple[Interval | None, str, bool]:
    """Completed requests per second: (interval, source, exact source?)."""
    m, s = rv.run.metrics, rv.summary
    if s is not None and s.request_throughput is not None:
        return Interval.measured(s.request_throughput), "evidence request_throughput", True
    if m.request_rate is not None:
        return Interval.published(m.request_rate), f"published {m.request_rate} req/s", True
    n = rv.workload.output_tokens
    if m.output_tok_s is not None and rv.fixed_length() and n:
        derived = Interval.published(m.output_tok_s) / Interval.exact(n)
        source = f"{m.output_tok_s} tok/s / {n} tokens"
        return derived, source, rv.workload.ignore_eos is True
    return None, "", False


def _latency(rv: RunView) -> tuple[Interval | None, str, bool]:
    """Mean E2E latency in seconds; a median is only a proxy for it."""
    raw = rv.mean_latency_s()
    if raw is not None:
        return Interval.measured(raw), "mean E2E from per-request data", True
    tool = rv.tool("e2el", "mean")
    if tool is not None:
        return Interval.measured(tool) / Interval.exact(1000), "evidence mean E2E", True
    for key, exact in (("mean", True), ("p50", False)):
        value = rv.published("e2el", key)
        if value is not None:
            return Interval.published(value) / Interval.exact(1000), f"published {key} E2E", exact
    return None, "", False


@rule("R15", "Little's law", "Little (1961): L = lambda W; closed-loop concurrency bound")
def littles_law(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        if rv.no_success():
            out.not_checkable(rv.id, "no request completed: no rate or latency to relate")
            continue
        rate, rate_src, rate_exact = _rate(rv)
        latency, lat_src, lat_exact = _latency(rv)
        exact = rate_exact and lat_exact
        if rate is None or latency is None:
            out.not_checkable(rv.id, "needs a request rate (or throughput) and a mean E2E latency")
            continue
        occupancy = rate * latency
        c = rv.run.concurrency
        detail = f"lambda ({rate_src}) x W ({lat_src}) = {occupancy.text(4)}"
        if c is None:
            # Open loop without a cap: L = lambda W is what was in flight; nothing bounds it.
            out.info(rv.id, f"{detail} requests in flight on average (open loop, no cap)")
        elif occupancy.lo > c:
            report = out.error if exact else out.warning
            report(
                rv.id,
                f"{detail} requests in flight exceeds the concurrency limit"
                + ("" if exact else " (a median or an assumed output length used as a proxy)"),
                f"<= {c}",
                occupancy.text(4),
            )
        elif occupancy.hi < c * 0.8 and not rv.open_loop and rv.workload.multi_turn:
            # Each client of a multi-turn run waits between its turns: slots idle by design.
            out.info(
                rv.id,
                f"{detail}: {num(occupancy.mid / c, 3)} of concurrency {c} in use on average; "
                "a multi-turn workload's clients idle between turns, so low occupancy is "
                "expected",
            )
        elif occupancy.hi < c * 0.8 and not rv.open_loop:
            out.warning(
                rv.id,
                f"{detail}: only {num(occupancy.mid / c, 3)} of concurrency {c} was in use on "
                "average (ramp-up/down, a client-bound run, or think time between requests)",
                f">= {num(c * 0.8)}",
                occupancy.text(4),
            )
        else:
            out.passed(rv.id, f"{detail} of concurrency {c}")
