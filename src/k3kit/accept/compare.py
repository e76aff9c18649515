"""Each signed claim against the buyer's measurement, with an interval that fits the sample size.

A claim is one published number (the publisher's median TTFT, say); the buyer has n requests. What
can be said honestly is an interval for the ratio measured / claimed: for a median or percentile,
the distribution-free order-statistic interval (binomial ranks, ``audit.stats``), exact at any n;
for a mean or a throughput, a seeded percentile bootstrap over requests (throughput through
Little's law, ``concurrency x sum(output tokens) / sum(E2E)``, since a closed loop at steady state
delivers exactly that). Then, with a tolerance t:

* lower is better (latencies): *reproduced* when the whole interval is at or below 1 + t; *not
  reproduced* when the whole interval is above it; *inconclusive* otherwise;
* higher is better (throughputs): mirrored around 1 - t;
* fewer than :data:`MIN_SAMPLES` samples: *inconclusive*, because no 95% interval exists (the
  median's [min, max] covers only 1 - 2/2^n of the time: 75% at n = 3);
* a per-token time (TPOT, ITL) whose judged statistic is below a physical floor (``floor_ms``,
  :data:`k3kit.accept.tokens.MIN_TOKEN_TIME_MS`): *not reproduced*, whatever the interval says:
  a TPOT of 0 is a stream written at once, which measures no decoding and cannot reproduce a
  claim about it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from k3kit.audit.stats import binom_sf, mean, median_ci_ranks, percentile
from k3kit.models.acceptance import Verdict, VerdictKind

MIN_SAMPLES = 6
BOOTSTRAP_RESAMPLES = 2000
PCTS = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}


@dataclass(frozen=True)
class Policy:
    tolerance: float = 0.10
    confidence: float = 0.95
    seed: int = 0


def quantile_ci_ranks(n: int, q: float, confidence: float) -> tuple[int, int] | None:
    """1-based ranks (l, u) with P(x(l) <= xi_q <= x(u)) >= confidence; the median uses
    :func:`median_ci_ranks` (exact in integers). None when the sample cannot reach it."""
    if q == 0.5:
        ranks = median_ci_ranks(n, confidence)
        return None if ranks is None else (ranks[0], ranks[1])
    alpha = (1 - confidence) / 2
    lo = 0
    for k in range(1, n + 1):  # largest l with P(B < l) <= alpha, B ~ Bin(n, q)
        if 1.0 - binom_sf(k, n, q) <= alpha:
            lo = k
        else:
            break
    hi = n + 1
    for k in range(n, 0, -1):  # smallest u with P(B >= u) <= alpha
        if binom_sf(k, n, q) <= alpha:
            hi = k
        else:
            break
    if lo < 1 or hi > n or lo > hi:
        return None
    return lo, hi


def bootstrap(
    values: Sequence[tuple[float, ...]],
    statistic: Callable[[Sequence[tuple[float, ...]]], float],
    policy: Policy,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over rows of ``values`` (seeded)."""
    rng = random.Random(policy.seed)  # noqa: S311 (a reproducible resample)
    n = len(values)
    stats = sorted(
        statistic([values[rng.randrange(n)] for _ in range(n)]) for _ in range(BOOTSTRAP_RESAMPLES)
    )
    alpha = (1 - policy.confidence) / 2
    lo = stats[int(alpha * BOOTSTRAP_RESAMPLES)]
    hi = stats[min(BOOTSTRAP_RESAMPLES - 1, int((1 - alpha) * BOOTSTRAP_RESAMPLES))]
    return lo, hi


def dec(value: float) -> Decimal:
    """A measured float as the decimal string signed JSON carries (9 significant digits).

    Rounding noise (below 1e-12, e.g. a difference of equal gaps) is 0: the signed model keeps
    magnitudes within 1e-18..1e18 and refused 5e-19 with a crash after the measurement.
    """
    return Decimal(f"{0.0 if abs(value) < 1e-12 else value:.9g}")


def decide(ratio_lo: float, ratio_hi: float, lower_is_better: bool, tol: float) -> VerdictKind:
    if lower_is_better:
        if ratio_hi <= 1 + tol:
            return "reproduced"
        return "not reproduced" if ratio_lo > 1 + tol else "inconclusive"
    if ratio_lo >= 1 - tol:
        return "reproduced"
    return "not reproduced" if ratio_hi < 1 - tol else "inconclusive"


def _point(kind: str, ordered: list[float]) -> float | None:
    if not ordered:
        return None
    if kind == "mean":
        return mean(ordered)
    return percentile(ordered, PCTS[kind] * 100) if kind in PCTS else None


def judge_latency(
    run: str,
    claim: str,
    claimed: Decimal,
    samples_ms: list[float],
    policy: Policy,
    floor_ms: float = 0.0,
) -> Verdict:
    """A latency claim (``ttft_ms.p50``, ``tpot_ms.mean``, ...) against per-request samples;
    a statistic below ``floor_ms`` is *not reproduced* (see the module's docstring)."""
    kind = claim.split(".", 1)[1]
    n = len(samples_ms)
    base: dict[str, Any] = {"run": run, "claim": claim, "claimed": claimed, "n": n}
    point = _point(kind, sorted(samples_ms))
    if point is not None and point < floor_ms:
        return Verdict(
            **base,
            verdict="not reproduced",
            measured=dec(point),
            reason=(
                f"measured {point:.6g} ms per token, below the {floor_ms:g} ms no decoding "
                "reaches: the tokens arrived at once, so nothing about decoding was measured"
            ),
        )
    if n < MIN_SAMPLES or claimed <= 0:
        return _too_few(base, policy)
    ordered = sorted(samples_ms)
    c = float(claimed)
    if kind == "mean":
        point = mean(ordered)
        lo, hi = bootstrap([(x,) for x in ordered], lambda rows: mean([r[0] for r in rows]), policy)
        method = f"percentile bootstrap of the mean ({BOOTSTRAP_RESAMPLES} resamples)"
    elif kind in PCTS:
        ranks = quantile_ci_ranks(n, PCTS[kind], policy.confidence)
        if ranks is None:
            return Verdict(
                **base,
                verdict="inconclusive",
                reason=f"n={n} has no distribution-free interval for {kind}",
            )
        point = percentile(ordered, PCTS[kind] * 100)
        lo, hi = ordered[ranks[0] - 1], ordered[ranks[1] - 1]
        method = f"order statistics x({ranks[0]}), x({ranks[1]}) of n={n} (binomial)"
    else:
        return Verdict(
            **base,
            verdict="inconclusive",
            reason=f"{kind} is not compared",
        )
    return _judged(base, point, lo, hi, c, True, method, policy)


def judge_throughput(
    run: str,
    claim: str,
    claimed: Decimal,
    rows: list[tuple[float, float]],
    scale: float,
    policy: Policy,
) -> Verdict:
    """A throughput claim; ``rows`` are (output tokens, seconds the request held its client
    slot: send to end of stream) of completed requests and
    ``scale`` turns tokens per request-second into the claim's unit (concurrency / gpus).

    The measured figure is the same estimator as its interval (Little's law over the rows): the
    point was tokens over the point's wall time, which counts the ramp-down with fewer requests
    in flight, so a report could sign a figure outside its own interval (312 against 333..363,
    seen on a busy machine)."""
    n = len(rows)
    base: dict[str, Any] = {"run": run, "claim": claim, "claimed": claimed, "n": n}
    if n < MIN_SAMPLES or claimed <= 0:
        return _too_few(base, policy)
    c = float(claimed)

    def little(sample: Sequence[tuple[float, ...]]) -> float:
        seconds = sum(r[1] for r in sample)
        return scale * sum(r[0] for r in sample) / seconds if seconds > 0 else 0.0

    lo, hi = bootstrap(rows, little, policy)
    method = "percentile bootstrap of concurrency x tokens / request time (Little's law)"
    return _judged(base, little(rows), lo, hi, c, False, method, policy)


def _too_few(base: dict[str, Any], policy: Policy) -> Verdict:
    why = f"{base['n']} samples: no {policy.confidence:.0%} interval below {MIN_SAMPLES}"
    return Verdict(**base, verdict="inconclusive", reason=why)


def _judged(
    base: dict[str, Any],
    point: float,
    lo: float,
    hi: float,
    claimed: float,
    lower_is_better: bool,
    method: str,
    policy: Policy,
) -> Verdict:
    """The verdict of a measurement with its interval, as ratios to the claim."""
    verdict = decide(lo / claimed, hi / claimed, lower_is_better, policy.tolerance)
    return Verdict(
        **base,
        verdict=verdict,
        measured=dec(point),
        ratio=dec(point / claimed),
        interval=(dec(lo / claimed), dec(hi / claimed)),
        confidence=dec(policy.confidence),
        method=method,
        reason=_reason(verdict, point, lo, hi, claimed, lower_is_better, policy.tolerance),
    )


def _reason(
    verdict: str, point: float, lo: float, hi: float, claimed: float, lower: bool, tol: float
) -> str:
    bound = f"{'<=' if lower else '>='} {(1 + tol if lower else 1 - tol) * claimed:.6g}"
    return (
        f"measured {point:.6g} (interval {lo:.6g}..{hi:.6g}) vs claimed {claimed:.6g}; "
        f"{verdict} means the interval is {'within' if verdict == 'reproduced' else 'not within'} "
        f"{bound}" + ("" if verdict != "inconclusive" else " either way")
    )
