"""``k3kit show``: the signed content as plain text a person reads in a minute.

Returns lines; the CLI prints them (levels below the CLI never print). Names and strings from the
kit are escaped by the CLI's printer, so this module only lays them out.
"""

from __future__ import annotations

from k3kit.card.data import NOT_PUBLISHED, CardData, fig, metric


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header), fmt.format(*("-" * w for w in widths))] + [
        fmt.format(*r) for r in rows
    ]


def show_lines(data: CardData) -> list[str]:
    lines: list[str] = []
    if not data.verified:
        lines += ["*** UNVERIFIED: this kit did NOT verify; nothing below is vouched for ***", ""]
    lines += [data.title, ""]
    width = max(len(k) for k, _ in data.facts)
    lines += [f"{k:<{width}}  {v}" for k, v in data.facts]
    lines += ["", "workloads:"]
    lines += [f"  {wid}: {text}" for wid, text in data.workloads]
    for prof in data.profiles:
        lines += ["", f"profile {prof.name} ({prof.topology}): {prof.description}"]
        if not prof.runs:
            lines.append("  no runs measured on this topology")
            continue
        header = ["run", "workload", "conc", "requests", "completed", "evidence"]
        header += [c.label for c in prof.columns]
        rows = []
        for run in prof.runs:
            rows.append(
                [
                    run.id,
                    run.workload,
                    fig(run.concurrency),
                    fig(run.requests),
                    fig(run.completed),
                    run.evidence_level or NOT_PUBLISHED,
                    *(fig(metric(run, c.key)) for c in prof.columns),
                ]
            )
        lines += ["  " + line for line in _table(header, rows)]
        lines.append("  sample size: latency percentiles are over the completed requests")
    pred = data.view.statement.predicate
    lines += ["", "comparisons:"] if pred.comparisons else ["", "comparisons: none"]
    for comp in pred.comparisons:
        points = ", ".join(f"c={p.concurrency}: {fig(p.stated_percent)} %" for p in comp.points)
        lines.append(
            f"  {comp.id}: {comp.description} ({comp.metric}, "
            f"{comp.subject_profile} vs {comp.baseline_profile}): {points}"
        )
    lines += ["", "controls:"] if pred.controls else ["", "controls: none"]
    for ctl in pred.controls:
        agreement = fig(ctl.agreement_percent)
        lines.append(
            f"  {ctl.id} ({ctl.kind}): {ctl.description}; {ctl.metric} agreement {agreement} %"
        )
    lines += ["", "limitations (not measured):"] + [f"  - {x}" for x in data.limitations]
    counts = data.counts
    lines += [
        "",
        f"audit: {counts['error']} error(s), {counts['warning']} warning(s), "
        f"{counts['not-checkable']} not checkable (k3kit audit lists every finding)",
    ]
    return lines
