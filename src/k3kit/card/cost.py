"""Dollars per million output tokens at each measured point of a serving curve.

    cost = gpu_hour_usd x GPUs / 3600 / (aggregate output tokens/s) x 10^6

GPUs is the run's own GPU count (else the receipt's ``environment.gpu_count``); aggregate
output tokens/s is the run's signed ``output_tok_s``, never derived from the per-GPU figure, so
the cost of a point is computed from exactly two signed numbers and the price the reader chose.
A point without a signed aggregate throughput has no cost: it is shown as not computable, with
the reason, rather than estimated. Arithmetic is decimal throughout (no binary floats), so the
figure a test recomputes from the receipt is the figure on the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

from k3kit.errors import InputError
from k3kit.models import ReceiptPredicate

FORMULA = "gpu_hour_usd × GPUs / 3600 / (aggregate output tokens/s) × 10^6"
_CENTS = Decimal("0.01")


@dataclass(frozen=True)
class PointCost:
    run: str
    profile: str
    concurrency: int | None
    gpus: int
    aggregate_tok_s: Decimal | None
    usd_per_million: Decimal | None  # exact (decimal) result; None when not computable
    reason: str = ""

    @property
    def shown(self) -> str:
        """What the page prints: dollars to the cent (banker's rounding, like the decimal type)."""
        if self.usd_per_million is None:
            return "not computable"
        return f"${self.usd_per_million.quantize(_CENTS, rounding=ROUND_HALF_EVEN)}"


def usd_per_million(gpu_hour_usd: Decimal, gpus: int, aggregate_tok_s: Decimal) -> Decimal:
    """The formula above, in decimal arithmetic."""
    if aggregate_tok_s <= 0:
        raise ArithmeticError("aggregate throughput must be positive")
    return gpu_hour_usd * gpus / Decimal(3600) / aggregate_tok_s * Decimal(10) ** 6


def parse_price(text: str) -> Decimal:
    """``--gpu-hour-usd``: a positive decimal number of dollars per GPU-hour."""
    try:
        if not text.isascii():  # Decimal() reads other scripts' digits ("１.５") too
            raise InvalidOperation(text)
        value = Decimal(text)
    except InvalidOperation as exc:
        raise InputError(
            f"--gpu-hour-usd {text!r} is not a number", code="BAD_GPU_HOUR_PRICE"
        ) from exc
    if not value.is_finite() or value <= 0 or value > 1_000_000:
        raise InputError(
            f"--gpu-hour-usd {text!r} must be a positive price below 1000000",
            code="BAD_GPU_HOUR_PRICE",
        )
    return value


def point_costs(pred: ReceiptPredicate, gpu_hour_usd: Decimal | None) -> list[PointCost]:
    """One entry per signed run that states a concurrency, in receipt order."""
    out: list[PointCost] = []
    for run in pred.runs:
        gpus = run.gpus_in(pred.environment)
        agg = run.metrics.output_tok_s
        cost: Decimal | None = None
        reason = ""
        if gpu_hour_usd is None:
            reason = "no GPU-hour price given (--gpu-hour-usd) or declared in the package"
        elif agg is None:
            reason = "the receipt states no aggregate output tokens/s for this run"
        elif agg <= 0:
            reason = "the receipt's aggregate output tokens/s is not positive"
        else:
            cost = usd_per_million(gpu_hour_usd, gpus, agg)
        out.append(PointCost(run.id, run.profile, run.concurrency, gpus, agg, cost, reason))
    return out
