"""The package card as Markdown (``k3kit card --markdown``), for a release page or a README.

Strings from the kit are escaped for Markdown: characters that would start markup, a table cell
or raw HTML are backslash-escaped or entity-encoded, so a crafted description cannot inject a
link or HTML into the page that renders it.
"""

from __future__ import annotations

import re

from k3kit.card.charts import build_charts
from k3kit.card.data import NOT_PUBLISHED, CardData, ProfileData, fig, metric
from k3kit.card.safe import plain, scrub

_SPECIAL = re.compile(r"([\\`*_{}\[\]|~#!])")


def md(text: object) -> str:
    """Escape one string for a Markdown paragraph or table cell (controls first: safe.plain)."""
    raw = plain(text).replace("&", "&amp;").replace("<", "&lt;")
    return _SPECIAL.sub(r"\\\1", raw)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render_markdown(data: CardData) -> bytes:
    """The card, section by section, in the order the HTML card shows them."""
    out: list[str] = []
    if not data.verified:
        out += ["> **UNVERIFIED: this kit did NOT verify. Nothing here is vouched for.**", ""]
    out += [f"# {md(data.title)}", "", _row(["", ""]), _row(["---", "---"])]
    out += [_row([md(k), md(v)]) for k, v in data.facts]
    out += ["", "## Workloads", ""] + [f"- **{md(w)}**: {md(t)}" for w, t in data.workloads]
    out += _curve(data) + _costs(data)
    for prof in data.profiles:
        out += _profile(prof)
    out += _comparisons_and_controls(data)
    out += ["", "## Limitations (not measured)", ""] + [f"- {md(x)}" for x in data.limitations]
    out += _audit_summary(data)
    out += ["", "## Install, pull, verify, launch", "", "```sh"]
    out += [cmd for _, cmd in data.commands] + ["```", ""]
    if not data.verified:
        out += ["> **UNVERIFIED: this kit did NOT verify. Do not deploy.**", ""]
    return scrub("\n".join(out)).encode("utf-8")


def _curve(data: CardData) -> list[str]:
    out = ["", "## Serving curve", ""]
    for chart in build_charts(data):
        for s in chart.series:
            points = ", ".join(
                f"{p.x_value} tok/s per user: {p.value}"
                if p.x_value
                else f"c={p.concurrency}: {p.value}"
                for p in s.points
            )
            out.append(f"- {md(chart.title)} ({md(chart.unit)}), {md(s.name)}: {points}")
    return out


def _costs(data: CardData) -> list[str]:
    price = f"${data.gpu_hour_usd}" if data.gpu_hour_usd is not None else "none"
    out = ["", "## Cost per million output tokens", ""]
    out += [f"Formula: `{data.formula}`; GPU-hour price {price} ({md(data.price_source)}).\n"]
    out += [_row(["run", "concurrency", "GPUs", "aggregate output tok/s", "USD per 1M"])]
    out += [_row(["---"] * 5)]
    for c in data.costs:
        out.append(
            _row([md(c.run), fig(c.concurrency), str(c.gpus), fig(c.aggregate_tok_s), c.shown])
        )
    return out


def _profile(prof: ProfileData) -> list[str]:
    out = ["", f"## Profile {md(prof.name)}", "", md(prof.description), ""]
    if not prof.runs:
        return [*out, "No runs measured on this topology."]
    header = ["run", "workload", "concurrency", "requests", "completed", "evidence"]
    out += [_row(header + [md(c.label) for c in prof.columns])]
    out += [_row(["---"] * (len(header) + len(prof.columns)))]
    for run in prof.runs:
        cells = [
            md(run.id),
            md(run.workload),
            fig(run.concurrency),
            fig(run.requests),
            fig(run.completed),
            run.evidence_level or NOT_PUBLISHED,
        ]
        out.append(_row(cells + [fig(metric(run, c.key)) for c in prof.columns]))
    return out


def _comparisons_and_controls(data: CardData) -> list[str]:
    pred = data.view.statement.predicate
    out = ["", "## Comparisons", ""]
    for comp in pred.comparisons:
        points = ", ".join(f"c={p.concurrency}: {fig(p.stated_percent)} %" for p in comp.points)
        out.append(f"- **{md(comp.id)}**: {md(comp.description)}: {points}")
    out += ["", "## Controls", ""]
    for ctl in pred.controls:
        out.append(
            f"- **{md(ctl.id)}** ({ctl.kind}): {md(ctl.description)}; agreement "
            f"{fig(ctl.agreement_percent)} %"
        )
    return out


def _audit_summary(data: CardData) -> list[str]:
    counts = data.counts
    out = [
        "",
        "## Audit summary",
        "",
        f"{counts['error']} error(s), {counts['warning']} warning(s), "
        f"{counts['not-checkable']} not checkable.",
        "",
    ]
    return out + [
        f"- {f.rule} {f.severity}: {md(f.run or '-')}: {md(f.message)}" for f in data.findings
    ]
