"""R30-R37: what the receipt covers, what it cannot show, and whether it says so."""

from __future__ import annotations

import re
from decimal import Decimal

from k3kit.audit.context import PUBLISHED_PCTS, Context, RunView
from k3kit.audit.findings import Out, rule
from k3kit.audit.lengths import length_checks
from k3kit.audit.numbers import Interval
from k3kit.audit.stats import mlperf_min_samples
from k3kit.audit.topology import disaggregated, environment_gpus, pool_checks
from k3kit.models import KitInfo
from k3kit.models.claims import Environment
from k3kit.models.package import HardwareTarget


@rule("R30", "Scope", "MLPerf closed division: declared scope; k3kit kit binding")
def scope(ctx: Context, out: Out) -> None:
    """What each run measured against what it claims, then what the kit promises against
    what was measured. Each step is its own helper, called in the order findings are listed."""
    _shared_evidence(ctx, out)
    for rv in ctx.runs:
        _run_scope(out, rv, ctx.predicate.environment)
    pool_checks(ctx, out)
    length_checks(ctx, out)
    _kit_scope(ctx, out)


def _shared_evidence(ctx: Context, out: Out) -> None:
    """One evidence file claimed by several runs: one measurement counted as several."""
    by_digest: dict[str, list[str]] = {}
    for rv in ctx.runs:
        if rv.run.evidence_sha256 is not None:
            by_digest.setdefault(rv.run.evidence_sha256, []).append(rv.id)
    for ids in by_digest.values():
        if len(ids) > 1:
            out.error(
                ids[0],
                f"runs {', '.join(ids)} carry the same evidence file: one measurement claimed "
                "as several",
                "one evidence file per measured run",
                f"{len(ids)} runs, one file",
            )


def _run_scope(out: Out, rv: RunView, env: Environment) -> None:
    """One run against its environment and its evidence: GPUs, concurrency, offered rate."""
    if rv.gpus > environment_gpus(env):
        out.error(
            rv.id,
            "run uses more GPUs than the environment has",
            f"<= {environment_gpus(env)}",
            str(rv.gpus),
        )
    _concurrency(out, rv)
    _offered(out, rv)


def _concurrency(out: Out, rv: RunView) -> None:
    """The concurrency the evidence ran at against the one the run claims (no evidence: no
    finding; evidence without a cap: the claim is not evidenced)."""
    s = rv.summary
    if s is None:
        return
    if s.max_concurrency is not None and s.max_concurrency != rv.run.concurrency:
        out.error(
            rv.id,
            "the evidence ran at another concurrency than the run claims",
            f"max_concurrency {rv.run.concurrency}",
            f"max_concurrency {s.max_concurrency}",
        )
    elif s.max_concurrency is None and rv.run.concurrency is not None:
        out.warning(
            rv.id,
            "the evidence has no max_concurrency: the claimed concurrency is not evidenced",
            f"max_concurrency {rv.run.concurrency}",
            "none",
        )
    else:
        out.passed(rv.id, f"evidence ran at concurrency {s.max_concurrency or 'uncapped'}")


def _kit_scope(ctx: Context, out: Out) -> None:
    """What the kit promises (hardware, profiles, context length) against what was measured;
    without kit.json none of it can be compared, and the audit says so."""
    if ctx.kit is None or ctx.kit.info is None:
        out.not_checkable(
            "kit",
            "kit.json not available: the kit's hardware, profiles and "
            "context length cannot be compared with what was measured",
        )
        return
    info = ctx.kit.info
    if not disaggregated(ctx):  # pools were compared one by one (pool_checks)
        _hardware(info.hardware, ctx.predicate.environment, out)
    _unmeasured_profiles(ctx, info, out)
    _context_length(ctx, info, out)


def _unmeasured_profiles(ctx: Context, info: KitInfo, out: Out) -> None:
    """A profile the kit ships that no run measured is sold without evidence."""
    measured = {rv.run.profile for rv in ctx.runs}
    for profile in info.profiles:
        if profile.name not in measured:
            out.warning(
                "kit",
                f"kit profile {profile.name!r} has no measured run",
                "a run per profile",
                "none",
            )


def _context_length(ctx: Context, info: KitInfo, out: Out) -> None:
    """A model that serves more context than any measured request must say so in limitations:
    the receipt shows nothing about the lengths beyond the longest one."""
    longest, what = _longest_request(ctx)
    if info.model.max_context_tokens <= longest:
        return
    stated = _mentions(ctx, r"context")
    message = (
        f"the model serves up to {info.model.max_context_tokens} tokens of context; "
        + what.format(n=longest)
    )
    if stated:
        out.info("kit", f"{message}; stated in limitations: {stated!r}")
    else:
        out.error(
            "kit",
            message + ", and no limitation says so",
            "a limitation on untested context lengths",
            "none",
        )


def _hardware(hw: HardwareTarget, env: Environment, out: Out) -> None:
    if hw.gpu != env.gpu or hw.gpus_per_node * hw.nodes != env.gpu_count * env.nodes:
        out.error(
            "kit",
            "the kit targets other hardware than was measured",
            f"{hw.nodes} x {hw.gpus_per_node}x {hw.gpu}",
            f"{env.nodes} x {env.gpu_count}x {env.gpu}",
        )
    else:
        out.passed(
            "kit", f"measured on the kit's target: {hw.nodes} x {hw.gpus_per_node}x {hw.gpu}"
        )


def _longest_request(ctx: Context) -> tuple[int, str]:
    """The longest request (input + output tokens) the receipt shows, and what that number is.

    Per-request evidence gives the longest measured request itself. Otherwise the workloads
    say: a fixed length is every request's; a ranged one reaches L(1 + r); a variable-length
    dataset states only its *mean*, which is not the longest request and is named as such.
    """
    measured = [
        (r.input_len or 0) + r.output_len
        for rv in ctx.runs
        for r in rv.successes or []
        if r.input_len is not None
    ]
    if measured:
        return max(measured), "the longest measured request is {n} tokens (per-request evidence)"
    sizes: list[tuple[int, str]] = []
    for wl in ctx.predicate.workloads.values():
        spans = [wl.length_range(what) for what in ("input", "output")]
        if all(span is not None for span in spans):
            total = int(sum(span[1] for span in spans if span is not None))
            kinds = {wl.length_kind("input"), wl.length_kind("output")}
            what = (
                "the longest measured request is {n} tokens (fixed lengths)"
                if kinds == {"fixed"}
                else "the longest request the ranged workload allows is {n} tokens "
                f"({wl.range_convention}'s range)"
            )
            sizes.append((total, what))
        else:
            total = (wl.input_tokens or 0) + (wl.output_tokens or 0)
            sizes.append(
                (
                    total,
                    "a variable-length workload declares a mean request of {n} tokens (a mean: "
                    "its longest request was longer, and is not in the receipt)",
                )
            )
    return max(sizes, key=lambda item: item[0], default=(0, "no request length is declared"))


def _offered(out: Out, rv: RunView) -> None:
    """An open-loop run's offered rate against the rate the tool was given."""
    s, offered = rv.summary, rv.run.offered_rate
    if s is None or s.request_rate is None:
        return
    if offered is None:
        if rv.open_loop and s.request_rate != "inf":
            out.warning(
                rv.id,
                "open-loop run without offered_rate; the evidence was offered "
                f"{s.request_rate} req/s",
                f"offered_rate = {s.request_rate}",
                "none",
            )
        return
    tool = None if s.request_rate == "inf" else Decimal(s.request_rate)
    if tool is None or not Interval.published(offered).contains(tool):
        out.error(
            rv.id,
            "the evidence was offered another request rate than the run claims",
            f"offered_rate {offered}",
            f"request_rate {s.request_rate}",
        )


def _mentions(ctx: Context, pattern: str) -> str | None:
    for text in ctx.predicate.limitations:
        if re.search(pattern, text, flags=re.IGNORECASE):
            return text
    return None


@rule("R31", "Sampling parameters", "vLLM bench serve: temperature is not sent unless given")
def sampling(ctx: Context, out: Out) -> None:
    for name, wl in sorted(ctx.predicate.workloads.items()):
        where = f"workload:{name}"
        if wl.temperature is None:
            out.warning(
                where,
                "temperature not declared (vllm bench serve no longer defaults to greedy; "
                "the server decides)",
                "workloads.temperature",
                "not declared",
            )
        else:
            out.not_checkable(
                where,
                f"declared temperature {wl.temperature} cannot be confirmed: the receipt holds "
                "no client command line or request payload",
            )


def _recomputable(rv: RunView, metric: str) -> bool:
    return bool(rv.samples_s(metric))


@rule("R32", "Metric availability", "vLLM --percentile-metrics / --metric-percentiles")
def availability(ctx: Context, out: Out) -> None:
    evidenced = [rv for rv in ctx.runs if rv.summary is not None]
    if not evidenced:
        out.not_checkable("evidence", "no evidence files: no published statistic can be traced")
        return
    for rv in evidenced:
        absent = []
        for metric in ("ttft", "tpot", "itl", "e2el"):
            for key in rv.published_keys(metric):
                if rv.tool(metric, key) is None and not _recomputable(rv, metric):
                    absent.append(f"{metric} {key}")
        if absent:
            out.error(
                rv.id,
                "claimed statistics are neither in the evidence file nor recomputable from it: "
                + ", ".join(absent)
                + " (select them with --percentile-metrics / --metric-percentiles, or attach "
                "--save-detailed data)",
                "present in the evidence",
                "absent",
            )
        else:
            out.passed(rv.id, "every claimed statistic is in the evidence or recomputable")


@rule("R33", "Accuracy in performance mode", "MLPerf TEST01/TEST07")
def accuracy(ctx: Context, out: Out) -> None:
    out.not_checkable(
        "receipt", "the receipt carries no output-quality evidence from the timed runs"
    )


@rule("R34", "Caching test", "MLPerf TEST04")
def caching(ctx: Context, out: Out) -> None:
    out.not_checkable("receipt", "no repeated-prompt vs unique-prompt runs in the receipt")


@rule("R35", "Reproduction tolerance", "MLPerf TEST01 (±10%)")
def reproduction(ctx: Context, out: Out) -> None:
    out.not_checkable("receipt", "needs an independent re-run of the kit on the same hardware")


def _short_percentiles(ctx: Context) -> list[str]:
    short = []
    for rv in ctx.runs:
        for metric in ("ttft", "tpot", "itl", "e2el"):
            for key in rv.published_keys(metric):
                n, _ = rv.n_samples(metric)
                if (
                    key in PUBLISHED_PCTS
                    and n is not None
                    and n < mlperf_min_samples(PUBLISHED_PCTS[key])
                ):
                    short.append(f"{rv.id} {metric} {key}")
    return short


@rule("R36", "Limitations present", "MLPerf submission rules: declared scope; receipts note")
def limitations(ctx: Context, out: Out) -> None:
    pred = ctx.predicate
    found = _mentions(ctx, r"accura|quality")
    if found:
        out.passed("limitations", f"accuracy not evidenced and stated: {found!r}")
    else:
        out.error(
            "limitations",
            "the receipt holds no accuracy evidence, and no limitation says accuracy was not "
            "measured",
            "a limitation such as 'accuracy was not measured'",
            "none",
        )
    wanted = []
    single = [c.id for c in pred.comparisons if not c.repeats or c.repeats < 2]
    if single and not _mentions(ctx, r"single|repeat|one run|once"):
        wanted.append(f"single runs ({', '.join(single)} without repeats)")
    short = _short_percentiles(ctx)
    if short and not _mentions(ctx, r"sample|descriptive|percentile|tail"):
        wanted.append(f"small samples ({', '.join(short[:3])}{'…' if len(short) > 3 else ''})")
    if pred.environment.modality == "text" and not _mentions(ctx, r"image|multimodal|text-only"):
        wanted.append("text-only measurements")
    if not _mentions(ctx, r"node|hardware|gpu"):
        wanted.append("the single hardware configuration measured")
    if wanted:
        out.warning(
            "limitations",
            "limitations do not state: " + "; ".join(wanted),
            "a limitation for each",
            "missing",
        )
    else:
        out.passed(
            "limitations", f"{len(pred.limitations)} limitations cover what the receipt lacks"
        )


@rule("R37", "Per-GPU semantics", "InferenceX issues #131, #293 (tok/s/GPU ambiguity)")
def per_gpu_semantics(ctx: Context, out: Out) -> None:
    runs = [
        (rv, rv.run.metrics.output_tok_s_per_gpu)
        for rv in ctx.runs
        if rv.run.metrics.output_tok_s_per_gpu is not None
    ]
    if not runs:
        out.info("per-gpu", "no per-GPU figures published")
        return
    defs = ctx.predicate.definitions
    if ctx.predicate.definitions_declared:
        out.passed(
            "per-gpu", f"per-GPU declared: {defs.per_gpu_throughput} throughput, {defs.per_gpu}"
        )
        return
    fits = {}
    for basis, published, tool in (
        ("output", "output_tok_s", "output_throughput"),
        ("total", "total_tok_s", "total_token_throughput"),
    ):
        verdicts = []
        for rv, per_gpu in runs:
            agg = getattr(rv.run.metrics, published)
            measured = None if rv.summary is None else getattr(rv.summary, tool)
            claimed = Interval.published(per_gpu)
            if agg is not None:
                verdicts.append(claimed.overlaps(Interval.published(agg) / Interval.exact(rv.gpus)))
            elif measured is not None:
                verdicts.append(
                    claimed.overlaps(Interval.measured(measured) / Interval.exact(rv.gpus))
                )
        if verdicts:
            fits[basis] = all(verdicts)
    inferred = [basis for basis, ok in fits.items() if ok]
    if inferred:
        out.warning(
            "per-gpu",
            f"per-GPU figures are not defined; they equal {inferred[0]} tok/s / GPUs "
            f"(inferred from {len(runs)} run(s), not declared)",
            "definitions.per_gpu_throughput and divisor declared",
            "not declared",
        )
    elif fits:
        out.error(
            "per-gpu",
            "per-GPU figures are not defined and match neither output nor total throughput "
            "divided by the GPU count",
            "a declared per-GPU definition",
            "none that reproduces the figures",
        )
    else:
        out.not_checkable("per-gpu", "per-GPU figures not defined and no aggregate to infer from")
