"""The acceptance judgement's statistics, checked against an independent exact computation.

The order-statistic interval for a percentile is recomputed here from the binomial distribution
with exact fractions (``math.comb``), not with the code under test: its coverage must reach the
confidence, and each end must be the tightest rank that keeps its tail at or below alpha/2.
"""

from __future__ import annotations

import random
from decimal import Decimal
from fractions import Fraction
from math import comb

import pytest

from k3kit.accept.compare import (
    MIN_SAMPLES,
    Policy,
    dec,
    decide,
    judge_latency,
    judge_throughput,
    quantile_ci_ranks,
)


def _cdf(k: int, n: int, q: Fraction) -> Fraction:
    """P(B <= k) for B ~ Binomial(n, q), exactly."""
    return sum((comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k + 1)), Fraction(0))


@pytest.mark.parametrize(
    ("n", "q"),
    [(60, 0.9), (100, 0.9), (100, 0.95), (500, 0.99), (1000, 0.99)],
)
def test_percentile_ranks_cover_and_are_tightest(n: int, q: float) -> None:
    ranks = quantile_ci_ranks(n, q, 0.95)
    assert ranks is not None
    lo, hi = ranks
    qf = Fraction(q).limit_denominator(1000)
    alpha = Fraction(1, 40)  # (1 - 0.95) / 2
    # Coverage: P(x(lo) <= xi_q <= x(hi)) = P(lo <= B <= hi - 1).
    coverage = _cdf(hi - 1, n, qf) - _cdf(lo - 1, n, qf)
    assert coverage >= Fraction(95, 100), float(coverage)
    # Each tail at most alpha, and one rank tighter would break it.
    assert _cdf(lo - 1, n, qf) <= alpha and 1 - _cdf(hi - 1, n, qf) <= alpha
    assert lo == n or _cdf(lo, n, qf) > alpha
    assert hi == 1 or 1 - _cdf(hi - 2, n, qf) > alpha


@pytest.mark.parametrize(
    ("n", "q"), [(20, 0.9), (59, 0.95), (300, 0.99), (50, 0.99), (5, 0.5)], ids=str
)
def test_too_few_samples_for_a_high_percentile_have_no_interval(n: int, q: float) -> None:
    """P(all n samples fall below the q-quantile) = q^n > 2.5% here (0.9^20 = 12%, 0.99^300 =
    4.9%): even the largest sample is too likely to lie below it, so no upper rank exists."""
    assert quantile_ci_ranks(n, q, 0.95) is None


def test_the_median_uses_the_exact_median_ranks() -> None:
    assert quantile_ci_ranks(20, 0.5, 0.95) == (6, 15)


@pytest.mark.parametrize(
    ("lo", "hi", "lower_is_better", "expected"),
    [
        (0.9, 1.05, True, "reproduced"),
        (1.2, 1.4, True, "not reproduced"),
        (1.0, 1.3, True, "inconclusive"),
        (0.95, 1.1, False, "reproduced"),
        (0.5, 0.8, False, "not reproduced"),
        (0.8, 1.0, False, "inconclusive"),
    ],
    ids=[
        "latency within",
        "latency above",
        "latency straddles",
        "throughput within",
        "throughput below",
        "throughput straddles",
    ],
)
def test_decide(lo: float, hi: float, lower_is_better: bool, expected: str) -> None:
    assert decide(lo, hi, lower_is_better, 0.10) == expected


def _samples(n: int, centre: float, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [centre * rng.uniform(0.95, 1.05) for _ in range(n)]


def test_a_p90_claim_is_judged_by_order_statistics() -> None:
    v = judge_latency("r", "ttft_ms.p90", Decimal(100), _samples(200, 100.0), Policy())
    assert v.verdict == "reproduced" and v.n == 200
    assert v.method.startswith("order statistics x(") and "n=200 (binomial)" in v.method
    assert v.interval is not None and v.ratio is not None
    assert v.interval[0] <= v.ratio <= v.interval[1]


def test_a_mean_claim_is_judged_by_a_seeded_bootstrap() -> None:
    samples = _samples(50, 130.0)
    a = judge_latency("r", "tpot_ms.mean", Decimal(100), samples, Policy())
    b = judge_latency("r", "tpot_ms.mean", Decimal(100), samples, Policy())
    assert a.verdict == "not reproduced" and a == b  # same seed, same interval
    assert a.method.startswith("percentile bootstrap of the mean")


@pytest.mark.parametrize(
    ("claim", "samples", "claimed", "reason"),
    [
        ("ttft_ms.p50", [100.0] * (MIN_SAMPLES - 1), Decimal(100), "5 samples: no 95% interval"),
        ("ttft_ms.p50", [100.0] * 50, Decimal(0), "50 samples: no 95% interval"),
        (
            "ttft_ms.p99",
            [100.0] * 50,
            Decimal(100),
            "n=50 has no distribution-free interval for p99",
        ),
        ("ttft_ms.std", [100.0] * 50, Decimal(100), "std is not compared"),
    ],
    ids=["too few samples", "a zero claim", "p99 of 50", "a statistic not compared"],
)
def test_inconclusive_judgements_say_why(
    claim: str, samples: list[float], claimed: Decimal, reason: str
) -> None:
    v = judge_latency("r", claim, claimed, samples, Policy())
    assert v.verdict == "inconclusive" and reason in v.reason
    assert v.interval is None and v.measured is None


def test_a_throughput_figure_is_the_estimator_its_interval_bootstraps() -> None:
    """The signed figure was tokens over the point's wall time while its interval bootstrapped
    Little's law over the time each request held its slot; with a ramp-down (fewer requests in
    flight at the end) the figure fell outside its own interval (312 against 333..363). Now
    both are Little's law over the same rows."""
    rng = random.Random(7)
    rows = [(128.0, 1.0 + rng.random()) for _ in range(60)]
    verdict = judge_throughput("r", "output_tok_s", Decimal(300), rows, 4.0, Policy())
    little = 4.0 * sum(t for t, _ in rows) / sum(s for _, s in rows)
    assert verdict.measured == dec(little)
    assert verdict.interval is not None
    lo, hi = (float(x) * 300 for x in verdict.interval)
    assert lo <= little <= hi
