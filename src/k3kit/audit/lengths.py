"""R30's workload-length checks: the receipt's length distribution against the tool that drew it.

A workload says how its lengths were drawn (``fixed``, ``ranged`` with a ratio and the tool's
``range_convention``, or ``variable``). The same ratio means another range in vLLM and SGLang, and
llmperf and GuideLLM have no ratio at all (:data:`k3kit.evidence.lengths.LENGTH_SPREAD`). Where the
evidence file records what the tool was asked for (SGLang's ``random_input_len``,
``random_output_len``, ``random_range_ratio``), the range it drew is rebuilt by the tool's own rule
and compared with the one the receipt declares: "fixed 1024-token prompts" over an SGLang run at
ratio 0 (prompts anywhere in [1, 1024], mean about 512) is an error that names both ranges.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from pydantic import ValidationError

from k3kit.audit.context import Context, RunView
from k3kit.audit.findings import Out
from k3kit.evidence.lengths import LENGTH_SPREAD
from k3kit.models.claims import Workload

DIRECTIONS = ("input", "output")


def length_checks(ctx: Context, out: Out) -> None:
    for rv in ctx.runs:
        if rv.result is None:
            continue
        spread = LENGTH_SPREAD.get(rv.result.tool)
        ranged = [d for d in DIRECTIONS if rv.workload.length_kind(d) == "ranged"]
        if spread is not None and ranged:
            _convention(rv, ranged, out)
        drawn = _drawn(rv)
        if drawn is not None:
            _against_drawn(rv, drawn, out)


def _convention(rv: RunView, ranged: list[str], out: Out) -> None:
    assert rv.result is not None
    spread = LENGTH_SPREAD[rv.result.tool]
    wl = rv.workload
    if spread.convention is None:
        out.warning(
            rv.id,
            f"the workload declares ranged {' and '.join(ranged)} lengths, but "
            f"{rv.result.tool} has no range ratio ({spread.meaning}): declare them variable "
            "with their means",
            "lengths = variable",
            "lengths = ranged",
        )
    elif spread.convention != wl.range_convention:
        out.error(
            rv.id,
            f"the workload reads its range ratio by {wl.range_convention}'s convention, but the "
            f"evidence is {rv.result.tool}'s: {spread.meaning} ({spread.source})",
            f'range_convention = "{spread.convention}"',
            f'range_convention = "{wl.range_convention}"',
        )


def _drawn(rv: RunView) -> Workload | None:
    """The workload the file says the tool was asked for, or None when it does not say."""
    assert rv.result is not None
    v = rv.result.values
    lengths = (v.get("random_input_len"), v.get("random_output_len"))
    ratio = v.get("random_range_ratio")
    if v.get("dataset_name") != "random" or v.get("range_convention") != "sglang":
        return None
    if not all(isinstance(n, int) and n >= 1 for n in lengths):
        return None
    if not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
        return None  # outside SGLang's own range of the ratio: nothing to rebuild a range from
    fixed = ratio == 1  # SGLang: [L * 1, L]
    try:
        return Workload.model_validate(
            {
                "description": "as the evidence file records it",
                "input_tokens": lengths[0],
                "output_tokens": lengths[1],
                "lengths": "fixed" if fixed else "ranged",
                "range_ratio": None if fixed else Decimal(repr(float(ratio))),
                "range_convention": "sglang",
            }
        )
    except ValidationError:
        return None  # bytes of someone else's file (a ratio of 1e-30): not a range, no verdict


def _span(span: tuple[Fraction, Fraction] | None) -> str:
    if span is None:
        return "variable (no range)"
    lo, hi = span
    return f"[{float(lo):g}, {float(hi):g}]"


def _against_drawn(rv: RunView, drawn: Workload, out: Out) -> None:
    wl = rv.workload
    for what in DIRECTIONS:
        declared = wl.length_range(what)
        if declared is None:
            continue  # a variable workload states means, not a range
        truth = drawn.length_range(what)
        if declared != truth:
            out.error(
                rv.id,
                f"the workload declares {what} lengths in {_span(declared)}, but the evidence "
                f"file asked the tool for {_span(truth)} (random_{what}_len "
                f"{drawn.declared(what)}, random_range_ratio {drawn.ratio(what) or 1}, "
                "SGLang's [L r, L])",
                f"{what} lengths {_span(truth)}",
                f"{what} lengths {_span(declared)}",
            )
