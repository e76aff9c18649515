"""The statistics an auditor needs, in plain Python (no numpy/scipy in a verifier's dependencies).

* Percentiles by the estimators tools actually use: numpy's default ``linear`` (Hyndman-Fan type 7,
  what vLLM reports), its ``lower``/``higher``/``nearest``/``midpoint`` variants, nearest-rank
  (= numpy ``inverted_cdf``) and MLPerf LoadGen's ``sorted[int(n*p)]``.
* The regularized incomplete beta function by its continued fraction, which gives binomial tails,
  Clopper-Pearson intervals (by bisection on the tail) and MLPerf's early-stopping minimum sample
  counts (``loadgen/early_stopping.cc``: smallest h with ``I_p(h, 1 + t) < 1 - confidence``).
* Distribution-free confidence intervals of the median from binomial order statistics, exact in
  integers.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache

PERCENTILE_METHODS = (
    "numpy-linear",
    "nearest-rank",
    "lower",
    "higher",
    "nearest",
    "midpoint",
    "loadgen",
)


def percentile(sorted_values: Sequence[float], p: float, method: str = "numpy-linear") -> float:
    """The ``p``-th percentile (0-100) of an ascending, non-empty sequence."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of an empty sample")
    if method == "nearest-rank":
        rank = max(1, math.ceil(n * p / 100))
        return sorted_values[min(rank, n) - 1]
    if method == "loadgen":
        return sorted_values[min(int(n * p / 100), n - 1)]
    q = p / 100
    position = n * q + (1 - q) - 1  # numpy's virtual index for alpha = beta = 1, same rounding
    lo = math.floor(position)
    hi = min(lo + 1, n - 1)
    frac = position - lo
    a, b = sorted_values[lo], sorted_values[hi]
    if method == "lower":
        return a
    if method == "higher":
        return b if frac > 0 else a
    if method == "midpoint":
        return (a + b) / 2 if frac > 0 else a
    if method == "nearest":
        # numpy rounds the position half to even
        return sorted_values[min(round(position), n - 1)]
    if method != "numpy-linear":
        raise ValueError(f"unknown percentile method {method!r}")
    # numpy's _lerp: stable on both halves of the interval
    diff = b - a
    return b - diff * (1 - frac) if frac >= 0.5 else a + diff * frac


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


class Ordered(list[float]):
    """Samples in ascending order, with their mean and standard deviation computed once: the
    rules ask for them again and again, and an exact sum over a million ITL samples is not free."""

    @cached_property
    def mean(self) -> float:
        return mean(self)

    @cached_property
    def std(self) -> float:
        return pstdev(self, self.mean)


def pstdev(values: Sequence[float], mu: float | None = None) -> float:
    """Population standard deviation (numpy's default ``ddof=0``), two-pass (``mu``: the mean,
    when the caller has it)."""
    mu = mean(values) if mu is None else mu
    deviations = list(map(operator.sub, values, itertools.repeat(mu, len(values))))
    # d * d is the correctly rounded square (``** 2`` went through C pow(), within half an ULP
    # or so); map() keeps both loops over a million ITL samples in C.
    return math.sqrt(math.fsum(map(operator.mul, deviations, deviations)) / len(values))


def interpolates_top_two(n: int, p: float) -> bool:
    """True when numpy-linear's p-th percentile lies strictly between the two largest samples."""
    return n >= 2 and (n - 1) * p / 100 > n - 2


# -- incomplete beta, binomial tails ------------------------------------------------------------


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of I_x(a, b), modified Lentz; converges fast for x < (a+1)/(a+b+2)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < eps:
            break
    return result


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if not (a > 0 and b > 0) or not 0.0 <= x <= 1.0:
        raise ValueError("betainc needs a, b > 0 and 0 <= x <= 1")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


def binom_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return betainc(k, n - k + 1, p)


def _bisect(func: Callable[[float], float], target: float, increasing: bool) -> float:
    """The q in [0, 1] where a monotone ``func`` crosses ``target``."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if (func(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact two-sided binomial interval for k successes in n trials."""
    if not 0 <= k <= n or n == 0:
        raise ValueError("need 0 <= k <= n and n > 0")
    alpha = 1.0 - confidence
    lower = 0.0 if k == 0 else _bisect(lambda q: binom_sf(k, n, q), alpha / 2, increasing=True)
    upper = 1.0 if k == n else _bisect(lambda q: 1.0 - binom_sf(k + 1, n, q), alpha / 2, False)
    return lower, upper


@lru_cache(maxsize=64)
def mlperf_min_samples(percentile_value: float, confidence: float = 0.99) -> int:
    """LoadGen's minimum query count for a latency percentile (t = 1 sample over the estimate).

    ``odds(h, t, p) = I_p(h, 1 + t)`` is the chance of seeing at most ``t`` of ``h + t`` samples
    above the true p-quantile; the minimum is ``h + t`` for the smallest ``h`` whose odds fall
    below ``1 - confidence``, with ``t = 1``. This reproduces MLPerf's 11, 64, 130, 662 and 6636
    for p50, p90, p95, p99 and p99.9.
    """
    p = percentile_value / 100
    t = 1

    def passes(h: int) -> bool:
        return betainc(h, 1 + t, p) < 1 - confidence

    hi = 1
    while not passes(hi):  # the odds fall monotonically with h: double, then bisect
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi + t


def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int, Fraction] | None:
    """1-based ranks (k, n-k+1) of the distribution-free CI of the median, and its coverage.

    The interval [x(k), x(n-k+1)] covers the median with probability 1 - 2 P(Bin(n, 1/2) <= k-1);
    k is the largest rank that keeps the coverage at or above ``confidence``. None when even
    [min, max] does not reach it (n < 6 at 95%). Exact in integers up to n = 1000; above, the
    binomial tail comes from the incomplete beta function (coverage then a float).
    """
    if n < 1:
        return None
    alpha = 1 - Fraction(confidence).limit_denominator(10_000)
    if n > 1000:
        # P(Bin(n, 1/2) <= k-1) = 1 - P(X >= k); largest k with 2 * tail <= alpha, by bisection.
        def tail(k: int) -> float:
            return 1.0 - binom_sf(k, n, 0.5)

        if 2 * tail(1) > alpha:
            return None
        lo, hi = 1, n // 2 + 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if 2 * tail(mid) <= alpha:
                lo = mid
            else:
                hi = mid
        return lo, n - lo + 1, Fraction(1 - 2 * tail(lo))
    total = 2**n
    tail_count, comb = 0, 1  # comb = C(n, k-1), built incrementally
    best = None
    for k in range(1, n // 2 + 1):
        tail_count += comb
        if 2 * tail_count * alpha.denominator > alpha.numerator * total:
            break
        best = (k, n - k + 1, 1 - Fraction(2 * tail_count, total))
        comb = comb * (n - k + 1) // k
    return best


def minmax_coverage(n: int) -> Fraction:
    """Coverage of [min, max] as an interval for the median: 1 - 2 / 2^n."""
    return 1 - Fraction(2, 2**n)


def smallest_fraction(lo: Fraction, hi: Fraction, max_den: int = 100_000) -> tuple[int, int] | None:
    """The k/n in [lo, hi] with the smallest n, trying each n in turn; None above ``max_den``."""
    if lo > hi or hi < 0 or lo > 1:
        return None
    for n in range(1, max_den + 1):
        k = math.ceil(lo * n)
        if Fraction(k, n) <= hi and 0 <= k <= n:
            return k, n
    return None


# --- What a mean can be, given n and some quantiles -------------------------------------------


@dataclass(frozen=True)
class Quantile:
    """A reported percentile p (0-100) whose exact value lies in [lo, hi]."""

    p: Fraction
    lo: Fraction
    hi: Fraction


def _anchor(n: int, p: Fraction, method: str) -> tuple[int, Fraction] | None:
    """(k, f): the reported value is (1 - f) x_k + f x_(k+1) of the sorted sample (0-based)."""
    if method == "numpy-linear":
        h = (n - 1) * p / 100
        k = int(h)
        return k, h - k
    if method == "nearest-rank":
        rank = max(1, -(-(p * n) // 100))  # ceil(p n / 100), at least the first
        return int(rank) - 1, Fraction(0)
    return None


Anchor = tuple[int, Fraction, Quantile]  # (k, f, the quantile): see _anchor


def sum_bounds(
    n: int, quantiles: list[Quantile], method: str, floor: Fraction = Fraction(0)
) -> tuple[Fraction, Fraction | None] | None:
    """The smallest and largest sum n samples can have, given their reported quantiles.

    Sorted samples x_0 <= ... <= x_(n-1). A quantile anchored at (k, f) bounds every x_i with
    i <= k from above by its value v (x_k <= v), and every x_i with i >= k + (f > 0) from below.
    Where f > 0 the pair (x_k, x_(k+1)) is tied by (1 - f) x_k + f x_(k+1) = v: its sum is linear
    in x_k, so its extremes lie at the ends of x_k's feasible range (taken jointly, not one
    position at a time, which would double-count). The largest sum is None when some position
    has no upper bound (nothing anchors the top of the sample). Every bound here holds for any
    sample with those quantiles, so a mean outside [smallest, largest] / n is impossible: sound
    for any data, tight enough to rule out a shrunk median with a small n (issue example:
    n = 8, median 6.66, p99 9.39 allow a sum of at most 61.47, a mean of 7.68).
    Returns None for a method it does not model or for n < 1.
    """
    anchors = _anchors(n, quantiles, method)
    if anchors is None:
        return None
    pairs = _pair_sums(n, anchors, floor)
    paired = {i for k in pairs for i in (k, k + 1)}
    low_sum, high_sum, unbounded = _unpaired_sums(n, anchors, paired, floor)
    for lo_pair, hi_pair in pairs.values():
        low_sum += lo_pair
        high_sum += hi_pair if hi_pair is not None else 0
        unbounded = unbounded or hi_pair is None
    return low_sum, None if unbounded else high_sum


def _anchors(n: int, quantiles: list[Quantile], method: str) -> list[Anchor] | None:
    """Each quantile's anchor in the sorted sample; None if ``method`` is not modelled or n < 1
    (then no bound can be claimed at all)."""
    anchors: list[Anchor] = []
    for q in quantiles:
        at = _anchor(n, q.p, method) if n >= 1 else None
        if at is None:
            return None
        anchors.append((at[0], at[1], q))
    return anchors


def _upper(anchors: list[Anchor], i: int) -> Fraction | None:
    """The least value x_i can be held under: every quantile anchored at or above i caps it."""
    caps = [q.hi for k, _, q in anchors if i <= k]
    return min(caps) if caps else None


def _lower(anchors: list[Anchor], floor: Fraction, i: int) -> Fraction:
    """The greatest value x_i must reach: every quantile anchored wholly below i, or ``floor``."""
    floors = [q.lo for k, f, q in anchors if i >= k + (1 if f > 0 else 0)]
    return max([floor, *floors])


def _pair_sums(
    n: int, anchors: list[Anchor], floor: Fraction
) -> dict[int, tuple[Fraction, Fraction | None]]:
    """The joint extremes of each interpolated pair (x_k, x_(k+1)), keyed by k; pairs that
    would overlap an earlier one are left to the per-position bounds (no double count)."""
    pairs: dict[int, tuple[Fraction, Fraction | None]] = {}
    for k, f, q in sorted(anchors, key=lambda a: a[0]):
        if f == 0 or k + 1 >= n or k in pairs or k - 1 in pairs:
            continue
        pairs[k] = _pair_sum(
            f,
            q,
            _lower(anchors, floor, k),
            _upper(anchors, k),
            _lower(anchors, floor, k + 1),
            _upper(anchors, k + 1),
        )
    return pairs


def _unpaired_sums(
    n: int, anchors: list[Anchor], paired: set[int], floor: Fraction
) -> tuple[Fraction, Fraction, bool]:
    """Smallest and largest sum of the positions outside any pair, and whether some position
    has no upper bound. Both bounds are constant between consecutive anchor positions (k and
    k + 1 of each), so each stretch between cuts adds count x its bound."""
    cuts = sorted({0, n} | {i for k, _, _ in anchors for i in (k, k + 1) if 0 <= i <= n})
    low_sum, high_sum, unbounded = Fraction(0), Fraction(0), False
    for start, end in itertools.pairwise(cuts):
        count = end - start - (1 if start in paired else 0)  # a paired position starts its cut
        if count <= 0:
            continue
        low_sum += count * _lower(anchors, floor, start)
        cap = _upper(anchors, start)
        if cap is None:
            unbounded = True
        else:
            high_sum += count * cap
    return low_sum, high_sum, unbounded


def _pair_sum(
    f: Fraction,
    q: Quantile,
    lo_k: Fraction,
    hi_k: Fraction | None,
    lo_next: Fraction,
    hi_next: Fraction | None,
) -> tuple[Fraction, Fraction | None]:
    """Extremes of x_k + x_(k+1) given (1 - f) x_k + f x_(k+1) = v, v in [q.lo, q.hi]."""

    def ends(v: Fraction) -> tuple[Fraction, Fraction] | None:
        # x_k in [bottom, top]: x_k <= v <= x_(k+1), both within their own bounds.
        top = min(v, (v - f * lo_next) / (1 - f), *([hi_k] if hi_k is not None else []))
        bottom = lo_k if hi_next is None else max(lo_k, (v - f * hi_next) / (1 - f))
        if bottom > top:
            return None  # no room at this v (rounding of the reported values): no pair bound
        sums = [x + (v - (1 - f) * x) / f for x in (bottom, top)]
        return min(sums), max(sums)

    low_end, high_end = ends(q.lo), ends(q.hi)
    if low_end is None or high_end is None:
        # One position at a time: looser, still true for every sample.
        separate = None if hi_k is None or hi_next is None else hi_k + hi_next
        return lo_k + max(lo_next, q.lo), separate
    return low_end[0], high_end[1]
