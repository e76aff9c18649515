"""The auditor's statistics against known values.

Reference values were computed once with numpy 2.4.6 (``np.percentile(..., method=...)``) and
scipy 1.17.1 (``stats.beta.ppf`` for Clopper-Pearson, ``special.betainc``, ``stats.binom.cdf`` for
median CI ranks), outside this project, and pinned here; MLPerf's minimum sample counts are the
values LoadGen's ``mlperf.conf``/early-stopping tables give.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import pytest

from k3kit.audit.numbers import Interval, half_unit, num
from k3kit.audit.stats import (
    betainc,
    clopper_pearson,
    median_ci_ranks,
    mlperf_min_samples,
    percentile,
    pstdev,
    smallest_fraction,
)

VALUES = sorted([3.1, 0.2, 7.7, 5.5, 1.9, 9.4, 4.4, 2.8, 6.6, 8.3, 0.9, 5.0])
PCTS = (0, 10, 25, 50, 90, 95, 99, 99.9, 100)
NUMPY = {
    "numpy-linear": [
        0.2,
        1.0,
        2.5749999999999997,
        4.7,
        8.24,
        8.795,
        9.279000000000002,
        9.387900000000002,
        9.4,
    ],
    "lower": [0.2, 0.9, 1.9, 4.4, 7.7, 8.3, 8.3, 8.3, 9.4],
    "higher": [0.2, 1.9, 2.8, 5.0, 8.3, 9.4, 9.4, 9.4, 9.4],
    "nearest": [0.2, 0.9, 2.8, 5.0, 8.3, 8.3, 9.4, 9.4, 9.4],
    "midpoint": [
        0.2,
        1.4,
        2.3499999999999996,
        4.7,
        8.0,
        8.850000000000001,
        8.850000000000001,
        8.850000000000001,
        9.4,
    ],
    "nearest-rank": [0.2, 0.9, 1.9, 4.4, 8.3, 9.4, 9.4, 9.4, 9.4],  # numpy inverted_cdf
}


@pytest.mark.parametrize("method", sorted(NUMPY))
def test_percentiles_match_numpy(method: str) -> None:
    got = [percentile(VALUES, p, method) for p in PCTS]
    for value, want in zip(got, NUMPY[method], strict=True):
        assert math.isclose(value, want, rel_tol=1e-12), (method, got)


def test_population_std_matches_numpy() -> None:
    assert math.isclose(pstdev(VALUES), 2.845317791272766, rel_tol=1e-12)


@pytest.mark.parametrize(
    ("k", "n", "lo", "hi"),
    [
        (45, 50, 0.7818646335657977, 0.9667249064109775),
        (5, 10, 0.18708602844739855, 0.8129139715526015),
        (0, 10, 0.0, 0.3084971078187607),
        (10, 10, 0.6915028921812392, 1.0),
        (781, 1000, 0.7540590951943786, 0.8062750780167759),
        (1, 3, 0.008403758659612636, 0.9057006759497539),
        (995, 1000, 0.9883705294401879, 0.9983745804824372),
    ],
)
def test_clopper_pearson_matches_scipy(k: int, n: int, lo: float, hi: float) -> None:
    got = clopper_pearson(k, n)
    assert math.isclose(got[0], lo, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(got[1], hi, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize(
    ("a", "b", "x", "want"),
    [
        (2, 3, 0.4, 0.5247999999999999),
        (10, 2, 0.9, 0.6973568802000002),
        (0.5, 0.5, 0.3, 0.36901011956554536),
        (663, 2, 0.99, 0.00974223398638699),
        (50, 50, 0.5, 0.5000000000000007),
    ],
)
def test_betainc_matches_scipy(a: float, b: float, x: float, want: float) -> None:
    assert math.isclose(betainc(a, b, x), want, rel_tol=1e-10)


def test_mlperf_minimum_sample_counts() -> None:
    """LoadGen early stopping, t = 1, 99% confidence: the table every submitter meets."""
    assert [mlperf_min_samples(p) for p in (50, 90, 95, 99, 99.9)] == [11, 64, 130, 662, 6636]


@pytest.mark.parametrize(
    ("n", "k", "coverage"),
    [
        (6, 1, 0.96875),
        (7, 1, 0.984375),
        (10, 2, 0.978515625),
        (16, 4, 0.978729248046875),
        (20, 6, 0.9586105346679688),
        (64, 24, 0.9672342409011768),
        (100, 40, 0.9647997997822951),
        (1000, 469, 0.9537088026395019),
        (1001, 470, 0.9500154764972456),
        (5000, 2431, 0.9506841418958285),
        (12192, 5988, 0.9506214688810365),
    ],
)
def test_median_ci_ranks_match_binomial(n: int, k: int, coverage: float) -> None:
    ranks = median_ci_ranks(n)
    assert ranks is not None
    assert (ranks[0], ranks[1]) == (k, n - k + 1)
    assert math.isclose(float(ranks[2]), coverage, rel_tol=1e-9)


def test_no_median_ci_below_six_samples() -> None:
    assert [median_ci_ranks(n) for n in range(1, 6)] == [None] * 5


def test_smallest_fraction() -> None:
    # 78.12% printed with two decimals: the smallest denominator is 32 (25/32 = 78.125%).
    assert smallest_fraction(Fraction(78115, 100000), Fraction(78125, 100000)) == (25, 32)
    assert smallest_fraction(Fraction(1, 3) - Fraction(1, 10**6), Fraction(1, 3)) == (1, 3)


def test_tolerance_comes_from_the_printed_decimals() -> None:
    assert half_unit(Decimal("34.10")) == Fraction(1, 200)
    assert half_unit(Decimal("0.133")) == Fraction(1, 2000)
    assert half_unit(Decimal("7.4E+3")) == 50
    assert half_unit(Decimal("64")) == Fraction(1, 2)
    per_gpu, agg = Interval.published(Decimal("34.10")), Interval.published(Decimal("272.77"))
    assert per_gpu.overlaps(agg / Interval.exact(8))
    assert not Interval.published(Decimal("34.11")).overlaps(agg / Interval.exact(8))


def test_num_formatting() -> None:
    assert num(Fraction(1, 3)) == "0.333333"
    assert num(212831.87) == "212832"
    assert num(0) == "0"


def test_sum_bounds_of_the_issue_example() -> None:
    """n = 8, median 6.66, p99 9.39: at most 5 x 6.66 + 3 x 9.39 = 61.47 (x3 = x4 = median's
    pair, x0..x2 below it; x5 below p99; p99's pair (x6, x7) at f = 0.93 maxed at both = 9.39)."""
    from k3kit.audit.stats import Quantile, sum_bounds

    m, q = Fraction("6.66"), Fraction("9.39")
    bounds = sum_bounds(
        8, [Quantile(Fraction(50), m, m), Quantile(Fraction(99), q, q)], "numpy-linear"
    )
    assert bounds is not None and bounds[1] == Fraction("61.47")
    # without an anchor near the top (n = 1000: p99 sits at 989.01), the top is unbounded
    wide = sum_bounds(1000, [Quantile(Fraction(99), q, q)], "numpy-linear")
    assert wide is not None and wide[1] is None
    assert sum_bounds(8, [Quantile(Fraction(50), m, m)], "midpoint") is None  # not modelled


@pytest.mark.parametrize("method", ["numpy-linear", "nearest-rank"])
def test_sum_bounds_hold_for_every_sample(method: str) -> None:
    """Soundness: the true sum of any sample lies within the bounds computed from its own
    percentiles (numpy-linear and nearest-rank as implemented and checked against numpy above).
    Seeded draws of skewed, tied and tiny samples; a false error would be a violation here."""
    import random

    from k3kit.audit.stats import Quantile, percentile, sum_bounds

    rng = random.Random(22)
    bounded = 0
    for _ in range(3000):
        n = rng.randint(1, 60)
        xs = sorted(
            rng.choice([rng.expovariate(1.0), float(rng.randint(1, 3)), rng.lognormvariate(0, 2)])
            for _ in range(n)
        )
        ps = rng.sample([1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9, 100], rng.randint(1, 5))
        quantiles = []
        for p in ps:
            v = Fraction(percentile(xs, p, method))
            quantiles.append(
                Quantile(
                    Fraction(str(p)), v * (1 - Fraction(1, 10**9)), v * (1 + Fraction(1, 10**9))
                )
            )
        bounds = sum_bounds(n, quantiles, method)
        assert bounds is not None
        low, high = bounds
        total = sum(Fraction(x) for x in xs)
        slack = Fraction(1, 10**6) * total
        assert low <= total + slack, (n, ps, xs)
        if high is not None:
            bounded += 1
            assert total <= high + slack, (n, ps, xs)
    assert bounded > 1000  # the check is not vacuous: most draws have an upper bound
