"""Exact interval arithmetic over published figures: tolerances come from the printed decimals.

A figure published as ``34.10`` stands for every value in [34.095, 34.105]: half a unit in its last
printed digit, read from the Decimal's exponent (``7.4E+3`` is +-50, ``0.133`` is +-0.0005). An
identity such as per-GPU = aggregate / 8 holds when the intervals of both sides overlap; nothing is
hard-coded. Tool floats are taken at their exact binary value, widened by a relative 1e-9 for the
float arithmetic of the tool's own computation. All arithmetic is in Fractions, so the auditor
adds no rounding of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

FLOAT_REL = Fraction(1, 10**9)
Number = Fraction | Decimal | float | int


def frac(x: Number) -> Fraction:
    return x if isinstance(x, Fraction) else Fraction(x)


def half_unit(d: Decimal) -> Fraction:
    """Half a unit in the last printed digit of ``d``."""
    exponent = d.as_tuple().exponent
    if not isinstance(exponent, int):
        raise ValueError(f"not a finite decimal: {d}")
    return Fraction(1, 2) * Fraction(10) ** exponent


@dataclass(frozen=True)
class Interval:
    lo: Fraction
    hi: Fraction

    @classmethod
    def published(cls, d: Decimal) -> Interval:
        """Every value that prints as ``d`` at its precision."""
        h = half_unit(d)
        return cls(Fraction(d) - h, Fraction(d) + h)

    @classmethod
    def exact(cls, x: Number) -> Interval:
        v = frac(x)
        return cls(v, v)

    @classmethod
    def measured(cls, x: Number, rel: Fraction = FLOAT_REL) -> Interval:
        """A tool's float, allowing for the float rounding of the tool's own arithmetic."""
        v = frac(x)
        return cls(v - abs(v) * rel, v + abs(v) * rel)

    def __add__(self, other: Interval) -> Interval:
        return Interval(self.lo + other.lo, self.hi + other.hi)

    def __sub__(self, other: Interval) -> Interval:
        return Interval(self.lo - other.hi, self.hi - other.lo)

    def __mul__(self, other: Interval) -> Interval:
        products = [a * b for a in (self.lo, self.hi) for b in (other.lo, other.hi)]
        return Interval(min(products), max(products))

    def __truediv__(self, other: Interval) -> Interval:
        if other.lo <= 0 <= other.hi:
            raise ZeroDivisionError("interval divisor contains zero")
        return self * Interval(1 / other.hi, 1 / other.lo)

    def overlaps(self, other: Interval) -> bool:
        return self.lo <= other.hi and other.lo <= self.hi

    def contains(self, x: Number) -> bool:
        return self.lo <= frac(x) <= self.hi

    @property
    def mid(self) -> Fraction:
        return (self.lo + self.hi) / 2

    @property
    def radius(self) -> Fraction:
        return (self.hi - self.lo) / 2

    def text(self, digits: int = 6) -> str:
        """``mid ±radius``; a tool float's tiny float allowance is not worth printing."""
        if self.radius <= abs(self.mid) * FLOAT_REL:
            return num(self.mid, digits)
        return f"{num(self.mid, digits)} ±{num(self.radius, 3)}"

    def range_text(self, digits: int = 6) -> str:
        return f"[{num(self.lo, digits)}, {num(self.hi, digits)}]"


def num(x: Number, digits: int = 6) -> str:
    """A readable fixed-point rendering with about ``digits`` significant digits."""
    value = float(x)
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    decimals = max(0, min(12, digits - 1 - math.floor(math.log10(abs(value)))))
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def pct(x: Number, digits: int = 4) -> str:
    return f"{num(frac(x) * 100, digits)}%"
