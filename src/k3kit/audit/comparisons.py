"""R25-R29: comparisons between runs, and the control experiments behind any equivalence claim."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from k3kit.audit.context import Context, RunView
from k3kit.audit.findings import Out, rule
from k3kit.audit.numbers import Interval, num, pct
from k3kit.audit.stats import clopper_pearson, smallest_fraction
from k3kit.models import Comparison, ComparisonPoint, Control

HUNDRED = Interval.exact(100)
# Inputs a stated percentage may have been computed from, per compared metric.
INPUTS = {
    "output_tok_s_per_gpu": ("output_tok_s_per_gpu", "output_tok_s"),
    "output_tok_s": ("output_tok_s", "output_tok_s_per_gpu"),
    "request_rate": ("request_rate",),
}


def _metric(rv: RunView, name: str) -> Interval | None:
    published: Decimal | None = getattr(rv.run.metrics, name)
    if published is not None:
        return Interval.published(published)
    s = rv.summary
    if s is None:
        return None
    if name == "request_rate" and s.request_throughput is not None:
        return Interval.measured(s.request_throughput)
    if s.output_throughput is None:
        return None
    tool = Interval.measured(s.output_throughput)
    return tool if name == "output_tok_s" else tool / Interval.exact(rv.gpus)


def resolve(
    ctx: Context, comp: Comparison, point: ComparisonPoint
) -> tuple[RunView | None, RunView | None]:
    """The runs a comparison point cites: named, else the unique run of that profile/concurrency
    that carries the compared metric."""

    def pick(name: str | None, profile: str) -> RunView | None:
        if name is not None:
            return ctx.run(name)
        found = [
            rv
            for rv in ctx.runs
            if rv.run.profile == profile
            and rv.run.concurrency == point.concurrency
            and _metric(rv, comp.metric) is not None
        ]
        return found[0] if len(found) == 1 else None

    return pick(point.subject_run, comp.subject_profile), pick(
        point.baseline_run, comp.baseline_profile
    )


def _where(comp: Comparison, point: ComparisonPoint) -> str:
    return f"{comp.id}@c{point.concurrency}"


@rule("R25", "Comparison recomputation", "arithmetic of relative change; cited inputs")
def comparison_values(ctx: Context, out: Out) -> None:
    if not ctx.predicate.comparisons:
        out.info("comparisons", "no comparisons stated")
    for comp in ctx.predicate.comparisons:
        for point in comp.points:
            stated = Interval.published(point.stated_percent)  # first: it may defeat arithmetic
            subject, baseline = resolve(ctx, comp, point)
            if subject is None or baseline is None:
                _arm_missing(out, comp, point, subject, baseline)
            else:
                _recompute_change(out, (comp, point, stated), (subject, baseline))


def _arm_missing(
    out: Out,
    comp: Comparison,
    point: ComparisonPoint,
    subject: RunView | None,
    baseline: RunView | None,
) -> None:
    """The percentage is published, its inputs are not: a missing disclosure (a warning),
    naming the baseline value the percentage implies when only the baseline is absent."""
    missing = comp.baseline_profile if baseline is None else comp.subject_profile
    implied = ""
    value = None if subject is None else _metric(subject, comp.metric)
    factor = 1 + Fraction(point.stated_percent) / 100
    if baseline is None and value is not None and factor > 0:
        base = value.mid / factor
        implied = f" (it implies a {missing} value of {num(base, 4)})"
    out.warning(
        _where(comp, point),
        f"no {missing} run at concurrency {point.concurrency} carries "
        f"{comp.metric}: the stated {point.stated_percent}% cites figures the "
        f"receipt does not contain{implied}",
        f"both arms' {comp.metric} in the receipt",
        f"no {missing} run",
    )


Change = tuple[str, Interval, bool]  # (input metric, relative change %, reproduces the stated)


def _changes(comp: Comparison, arms: tuple[RunView, RunView], stated: Interval) -> list[Change]:
    """(subject - baseline)/baseline over every input the percentage may have been computed
    from, the cited metric first (:data:`INPUTS`)."""
    subject, baseline = arms
    results = []
    for name in INPUTS[comp.metric]:
        s, b = _metric(subject, name), _metric(baseline, name)
        if s is None or b is None or b.lo <= 0:
            continue
        change = (s - b) / b * HUNDRED
        results.append((name, change, stated.overlaps(change)))
    return results


def _recompute_change(
    out: Out,
    claim: tuple[Comparison, ComparisonPoint, Interval],
    arms: tuple[RunView, RunView],
) -> None:
    """The stated percentage (``claim``: comparison, point, stated interval) must follow from
    the cited metric; from another input only is a warning, from none an error."""
    comp, point, stated = claim
    where = _where(comp, point)
    results = _changes(comp, arms, stated)
    if not results:
        out.not_checkable(where, "the compared runs lack the compared figures")
        return
    shown = "; ".join(f"{n} give {c.text(5)}%" for n, c, _ in results)
    declared_ok = results[0][0] == comp.metric and results[0][2]
    if declared_ok:
        out.passed(where, f"stated {point.stated_percent}% reproduced: {shown}")
    elif any(ok for _, _, ok in results):
        out.warning(
            where,
            f"stated {point.stated_percent}% is reproduced only by other inputs than "
            f"the {comp.metric} it cites: {shown}",
            f"{comp.metric} reproduces it",
            shown,
        )
    else:
        subject, baseline = arms
        out.error(
            where,
            f"stated {point.stated_percent}% not reproducible from "
            f"{subject.id} vs {baseline.id}{_inverted(comp, arms, stated)}",
            f"(subject - baseline)/baseline: {shown}",
            f"{point.stated_percent}% (±{num(stated.radius, 3)})",
        )


def _inverted(comp: Comparison, arms: tuple[RunView, RunView], stated: Interval) -> str:
    """A diagnosis when the percentage was computed with the subject as the base ((s - b)/s),
    the commonest way a true difference is misstated; else empty."""
    s, b = _metric(arms[0], comp.metric), _metric(arms[1], comp.metric)
    if s is not None and b is not None and s.lo > 0 and stated.overlaps((s - b) / s * HUNDRED):
        return "; it is reproduced with the subject as the baseline ((s - b)/s)"
    return ""


@rule("R26", "Comparison evidence", "experimental design: repeats, A/A controls, ordering")
def comparison_evidence(ctx: Context, out: Out) -> None:
    if not ctx.predicate.comparisons:
        out.info("comparisons", "no comparisons stated")
    for comp in ctx.predicate.comparisons:
        if comp.repeats is not None and comp.repeats >= 3:
            out.passed(comp.id, f"{comp.repeats} repeats per arm")
        elif comp.order in ("interleaved", "randomized") and comp.aa_control is not None:
            out.passed(comp.id, f"{comp.order} order with A/A control {comp.aa_control}")
        else:
            out.warning(
                comp.id,
                "each arm measured "
                + (f"{comp.repeats} time(s)" if comp.repeats else "an unstated number of times")
                + f", order {comp.order or 'not stated'}, no A/A control: the effect cannot "
                "be separated from run-to-run drift",
                ">= 3 repeats per arm, or interleaved/randomized order with an A/A control",
                f"repeats {comp.repeats}, order {comp.order}, aa_control {comp.aa_control}",
            )


def _describe(rv: RunView) -> dict[str, object]:
    s = rv.summary
    facts: dict[str, object] = {
        "workload": rv.run.workload,
        "concurrency": rv.run.concurrency,
        "gpus": rv.gpus,
    }
    if s is not None:
        facts.update(
            num_prompts=s.num_prompts,
            request_rate=s.request_rate,
            burstiness=s.burstiness,
            model_id=s.model_id,
        )
    return facts


@rule("R27", "Like-for-like", "experimental design: one factor varied")
def like_for_like(ctx: Context, out: Out) -> None:
    if not ctx.predicate.comparisons:
        out.info("comparisons", "no comparisons stated")
    for comp in ctx.predicate.comparisons:
        for point in comp.points:
            where = _where(comp, point)
            subject, baseline = resolve(ctx, comp, point)
            if subject is None or baseline is None:
                out.not_checkable(where, "the compared runs are not both in the receipt")
                continue
            a, b = _describe(subject), _describe(baseline)
            differ = [
                k for k in a if k in b and a[k] is not None and b[k] is not None and a[k] != b[k]
            ]
            if differ:
                out.error(
                    where,
                    f"{subject.id} vs {baseline.id} differ in {', '.join(differ)}, but the "
                    "comparison names only the profile",
                    "only the profile differs",
                    ", ".join(f"{k}: {a[k]} vs {b[k]}" for k in differ),
                )
            else:
                out.passed(
                    where,
                    f"{subject.id} vs {baseline.id}: same kit, weights, "
                    + ", ".join(k for k in a if a[k] is not None)
                    + "; only the profile differs",
                )


def _rate(agree: int | None, total: int | None, percent: Decimal | None) -> str:
    if agree is not None and total:
        lo, hi = clopper_pearson(agree, total)
        return (
            f"{agree}/{total} = {pct(Fraction(agree, total))} "
            f"(95% Clopper-Pearson [{pct(lo, 4)}, {pct(hi, 4)}])"
        )
    return f"{percent}% (k/n not published, so no interval)"


@rule("R28", "Control experiments", "experimental design: negative and positive controls")
def controls(ctx: Context, out: Out) -> None:
    ctrls = ctx.predicate.controls
    if not ctrls:
        out.info("controls", "no control experiments (the receipt makes no equivalence claim)")
        return
    good = {"negative": 0, "positive": 0}
    for c in ctrls:
        if _control(out, c):
            good[c.kind] += 1
    missing = [kind for kind, count in good.items() if count == 0]
    if missing:
        # A missing control leaves an equivalence claim unsupported, not false.
        out.warning(
            "controls",
            "a fidelity or equivalence method needs a negative (A/A) control that passes and a "
            f"positive control that fails; missing: {' and '.join(missing)}",
            "one passing negative and one failing positive control",
            ", ".join(f"{k} controls that behave: {v}" for k, v in good.items()),
        )


def _control_outcome(c: Control) -> bool | None:
    """Whether the control behaves as its kind must, by its own figures and threshold (a
    negative control agrees at or above it, a positive one below); None without both."""
    value = (
        Fraction(c.agree, c.total) * 100
        if c.agree is not None and c.total
        else None
        if c.agreement_percent is None
        else Fraction(c.agreement_percent)
    )
    if value is None or c.threshold_percent is None:
        return None
    above = value >= Fraction(c.threshold_percent)
    return above if c.kind == "negative" else not above


def _control(out: Out, c: Control) -> bool:
    """One control: its ``passed`` must agree with its figures; True when it behaves as a
    control must (it then counts towards the pair an equivalence claim needs)."""
    rate = _rate(c.agree, c.total, c.agreement_percent)
    outcome = _control_outcome(c)
    if c.passed is not None and outcome is not None and c.passed != outcome:
        out.error(
            c.id,
            f"{c.kind} control marked passed={c.passed}, but {rate} vs threshold "
            f"{c.threshold_percent}% says otherwise",
            str(outcome),
            str(c.passed),
        )
        return False
    verdict = outcome if outcome is not None else c.passed
    if verdict:
        _control_margin(out, c, rate)
        out.passed(c.id, f"{c.kind} control behaves as it must: {rate}")
        return True
    why = "no threshold declared, so it cannot be shown to " + (
        "pass" if c.kind == "negative" else "fail"
    )
    if verdict is False:
        why = "it does not behave as a control must"
    out.info(c.id, f"{c.kind} control {c.description!r}: {rate}; {why}")
    return False


def _control_margin(out: Out, c: Control, rate: str) -> None:
    """A control that behaves only by its point estimate, its 95% interval crossing the
    threshold, is a warning: another run of the same size could say the opposite."""
    if c.agree is None or not c.total or c.threshold_percent is None:
        return
    lo, hi = clopper_pearson(c.agree, c.total)
    bound = Fraction(c.threshold_percent) / 100
    if (c.kind == "negative" and lo < bound) or (c.kind == "positive" and hi >= bound):
        out.warning(
            c.id,
            f"{c.kind} control {rate} is on the right side of the "
            f"{c.threshold_percent}% threshold only by its point estimate; its 95% "
            "interval crosses it",
            f"95% interval {'above' if c.kind == 'negative' else 'below'} {c.threshold_percent}%",
            f"[{pct(lo, 4)}, {pct(hi, 4)}]",
        )


@rule("R29", "Fraction granularity", "a percentage of counts is some k/n")
def granularity(ctx: Context, out: Out) -> None:
    checked = False
    for c in ctx.predicate.controls:
        if c.agreement_percent is None:
            continue
        checked = True
        stated = Interval.published(c.agreement_percent) / HUNDRED
        if c.agree is not None and c.total:
            k_n = Fraction(c.agree, c.total)
            if stated.contains(k_n):
                out.passed(c.id, f"{c.agreement_percent}% = {c.agree}/{c.total}")
            else:
                out.error(
                    c.id,
                    f"{c.agreement_percent}% is not {c.agree}/{c.total}",
                    pct(k_n, 6),
                    f"{c.agreement_percent}%",
                )
            continue
        smallest = smallest_fraction(stated.lo, stated.hi)
        found = (
            ""
            if smallest is None
            else f"; the smallest k/n it can be is {smallest[0]}/{smallest[1]}"
        )
        out.info(c.id, f"{c.agreement_percent}% without k/n{found}")
    if not checked:
        out.info("controls", "no agreement percentages stated")
