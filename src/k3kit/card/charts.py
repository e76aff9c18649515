"""Serving-curve charts as geometry: what the HTML template draws as inline SVG.

One chart per metric, every profile on the same axes (one series per profile and workload), one
point per signed run that states both a concurrency and the metric; nothing is interpolated or
smoothed. Concurrency is drawn on a log2 axis when it spans a factor of 4 or more (1, 8, 32 would
otherwise crowd the left edge); values on a linear axis from zero to a round number just above the
largest (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten: 115,149 ms tops the axis at
120,000, not 200,000). Only numbers are computed here: every label is escaped by the template
engine when it is drawn.

One more chart plots the trade-off the profiles exist for, as the industry's serving charts do
(InferenceMAX): output tokens/s per GPU (the signed figure) against tokens/s per user, that is
``1000 / TPOT`` in ms (the same TPOT statistic as the TPOT chart), one point per run that states
both, one line per profile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal

from k3kit.card.data import CardData, fig, metric
from k3kit.models.claims import Run

WIDTH, HEIGHT = 560, 300
WIDE, WIDE_HEIGHT = 1120, 360  # a chart across both columns, drawn at its own scale
LEFT, RIGHT, TOP, BOTTOM = 72, 150, 36, 48
COLORS = ("#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#a16207", "#0e7490")
CHARTS = (
    ("output_tok_s_per_gpu", "Output tokens/s per GPU", "tokens/s per GPU"),
    ("output_tok_s", "Aggregate output tokens/s", "tokens/s"),
    ("ttft_ms", "Time to first token", "ms"),
    ("tpot_ms", "Time per output token", "ms"),
)


@dataclass
class Point:
    x: float
    y: float
    run: str
    concurrency: int | None
    value: str  # the signed figure, exactly
    x_value: str = ""  # the x figure where it is not the concurrency (tokens/s per user)


@dataclass
class Series:
    name: str
    color: str
    points: list[Point]

    @property
    def path(self) -> str:
        return " ".join(
            f"{'M' if i == 0 else 'L'}{p.x:.1f},{p.y:.1f}" for i, p in enumerate(self.points)
        )


@dataclass
class Chart:
    id: str
    metric: str
    title: str
    unit: str
    series: list[Series]
    xticks: list[tuple[float, str]] = field(default_factory=list)
    yticks: list[tuple[float, str]] = field(default_factory=list)
    log_x: bool = False
    x_label: str = "concurrency"
    caption: str = ""
    width: int = WIDTH
    height: int = HEIGHT
    plot: tuple[int, int, int, int] = (LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM)


# Round tops for a linear axis: the largest value fills at least 5/6 of its height.
_STEPS = (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exp = float(10.0 ** math.floor(math.log10(value)))
    for step in _STEPS:
        if value <= step * exp:
            return step * exp
    return 10 * exp


def _tick(value: float) -> str:
    """An axis label: ``120k`` for 120000, ``0.5`` for 0.5 (the point titles keep exact figures)."""
    if value >= 10_000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _latency_stat(data: CardData, name: str) -> str:
    """The median where the receipt has one, else the first statistic it does have."""
    runs = [r for p in data.profiles for r in p.runs]
    for stat in ("p50", "mean", "p90", "p99"):
        if any(metric(r, f"{name}.{stat}") is not None for r in runs):
            return stat
    return "p50"


def build_charts(data: CardData) -> list[Chart]:
    charts = []
    # A profile keeps its colour on every chart, whether or not it has points there.
    colors = {p.name: COLORS[i % len(COLORS)] for i, p in enumerate(data.profiles)}
    for key, title, unit in CHARTS:
        full = key
        if key.endswith("_ms"):
            stat = _latency_stat(data, key)
            full, title = f"{key}.{stat}", f"{title} ({stat})"
        raw: list[tuple[str, str, list[tuple[int, Decimal, str]]]] = []
        for prof in data.profiles:
            by_workload: dict[str, list[tuple[int, Decimal, str]]] = {}
            for r in prof.runs:
                value = metric(r, full)
                if r.concurrency is not None and value is not None:
                    by_workload.setdefault(r.workload, []).append((r.concurrency, value, r.id))
            for workload, pts in sorted(by_workload.items()):
                label = prof.name if len(by_workload) == 1 else f"{prof.name} / {workload}"
                raw.append((label, colors[prof.name], sorted(pts, key=lambda p: (p[0], p[2]))))
        charts.append(_layout(f"chart-{key.replace('_', '-')}", full, title, unit, raw))
    # The trade-off first and across the page: it is the one picture of what each profile buys.
    return [_tradeoff(data, colors), *charts]


PER_GPU = "output_tok_s_per_gpu"


def per_user(run: Run, stat: str) -> Decimal | None:
    """Tokens/s per user: ``1000 / TPOT`` (ms), to 2 decimals; None without a positive TPOT."""
    tpot = metric(run, f"tpot_ms.{stat}")
    if tpot is None or tpot <= 0:
        return None
    return (Decimal(1000) / tpot).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)


def _tradeoff(data: CardData, colors: dict[str, str]) -> Chart:
    """Throughput per GPU against interactivity: one point per run, one line per profile,
    points joined in order of tokens/s per user."""
    stat = _latency_stat(data, "tpot_ms")
    chart = Chart(
        "chart-tradeoff",
        PER_GPU,
        "Throughput per GPU vs interactivity",
        "tokens/s per GPU",
        [],
        x_label=f"tokens/s per user (1000 / TPOT {stat})",
        caption=f"x: 1000 / TPOT {stat} (ms) of each run; y: its signed output tokens/s per GPU",
        width=WIDE,
        height=WIDE_HEIGHT,
        plot=(LEFT, TOP, WIDE - RIGHT, WIDE_HEIGHT - BOTTOM),
    )
    raw = []
    missing = []
    for prof in data.profiles:
        pts = []
        for r in prof.runs:
            x, y = per_user(r, stat), metric(r, PER_GPU)
            if x is not None and y is not None:
                pts.append((x, y, r))
        if pts:
            raw.append((prof.name, colors.get(prof.name, COLORS[0]), sorted(pts, key=_by_x)))
        elif prof.runs and prof.name not in missing:
            missing.append(prof.name)
    if missing:  # a profile absent from the picture is named, not silently left out
        chart.caption += f"; not drawn: {', '.join(missing)} (no run states both figures)"
    if not raw:
        return chart
    x0, y0, x1, y1 = chart.plot
    right = _nice_max(max(float(x) for _, _, pts in raw for x, _, _ in pts))
    top = _nice_max(max(float(y) for _, _, pts in raw for _, y, _ in pts))

    def fx(v: float) -> float:
        return x0 + v / right * (x1 - x0)

    def fy(v: float) -> float:
        return y1 - max(v, 0.0) / top * (y1 - y0)

    chart.xticks = [(fx(right * i / 4), _tick(right * i / 4)) for i in range(5)]
    chart.yticks = [(fy(top * i / 4), _tick(top * i / 4)) for i in range(5)]
    for name, color, pts in raw:
        points = [
            Point(fx(float(x)), fy(float(y)), r.id, r.concurrency, fig(y), fig(x))
            for x, y, r in pts
        ]
        chart.series.append(Series(name, color, points))
    return chart


def _by_x(point: tuple[Decimal, Decimal, Run]) -> tuple[Decimal, str]:
    return point[0], point[2].id


def _layout(
    chart_id: str,
    key: str,
    title: str,
    unit: str,
    raw: list[tuple[str, str, list[tuple[int, Decimal, str]]]],
) -> Chart:
    chart = Chart(chart_id, key, title, unit, [])
    x0, y0, x1, y1 = chart.plot
    concs = sorted({c for _, _, pts in raw for c, _, _ in pts})
    values = [float(v) for _, _, pts in raw for _, v, _ in pts]
    if not concs:
        return chart
    chart.log_x = concs[0] > 0 and concs[-1] / concs[0] >= 4

    def fx(c: int) -> float:
        lo, hi = concs[0], concs[-1]
        if hi == lo:
            return (x0 + x1) / 2
        if chart.log_x:
            return x0 + (math.log2(c) - math.log2(lo)) / (math.log2(hi) - math.log2(lo)) * (x1 - x0)
        return x0 + (c - lo) / (hi - lo) * (x1 - x0)

    top = _nice_max(max(values))

    def fy(v: float) -> float:
        return y1 - max(v, 0.0) / top * (y1 - y0)

    chart.xticks = [(fx(c), str(c)) for c in concs]
    chart.yticks = [(fy(top * i / 4), _tick(top * i / 4)) for i in range(5)]
    for name, color, pts in raw:
        chart.series.append(
            Series(
                name,
                color,
                [Point(fx(c), fy(float(v)), run, c, fig(v)) for c, v, run in pts],
            )
        )
    return chart
