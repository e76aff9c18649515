"""``k3kit release-notes OLD NEW``: what changed between two verified versions of a kit.

Each version stands on its own receipt. Measurements are never inherited: every figure shown for
NEW comes from NEW's signed receipt, and a claim OLD's receipt makes that NEW's does not re-measure
(the same profile, workload and concurrency, the same metric) is listed as *not carried over*,
not copied forward. Settings are compared as written in each kit's verified deploy files, pins and
hardware as each kit.json states them; both kits must verify (:func:`k3kit.card.load_view`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k3kit.card.data import LATENCIES, STATS, fig, metric
from k3kit.card.markdown import md
from k3kit.card.source import KitView, load_view
from k3kit.models.claims import Run
from k3kit.models.kit import KitInfo
from k3kit.models.package import HardwareTarget
from k3kit.signing.keys import PublicKey

SCALARS = ("output_tok_s_per_gpu", "output_tok_s", "total_tok_s", "request_rate", "duration_s")
METRICS = SCALARS + tuple(f"{n}.{s}" for n, _ in LATENCIES for s in STATS)


@dataclass
class Change:
    section: str  # "engine", "weights", "hardware", "settings:<profile>", "limitations", ...
    item: str
    old: str | None  # None: added in NEW
    new: str | None  # None: removed in NEW

    def as_json(self) -> dict[str, Any]:
        return {"section": self.section, "item": self.item, "old": self.old, "new": self.new}


@dataclass
class ReleaseNotes:
    old: KitView
    new: KitView
    changes: list[Change] = field(default_factory=list)
    not_carried_over: list[dict[str, str]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "old": _ident(self.old),
            "new": _ident(self.new),
            "changes": [c.as_json() for c in self.changes],
            "not_carried_over": self.not_carried_over,
            "measurements": {"old": _runs_json(self.old), "new": _runs_json(self.new)},
        }


def _ident(view: KitView) -> dict[str, Any]:
    pkg = view.info.package
    return {
        "kit": view.label,
        "name": pkg.name,
        "version": pkg.version,
        "sequence": pkg.sequence,
        "kit_sha256": view.kit_sha256,
        "issued_at": view.statement.predicate.issued_at,
    }


def _runs_json(view: KitView) -> list[dict[str, Any]]:
    return [
        {"run": r.id, "key": list(_key(r)), **{m: fig(v) for m in METRICS if (v := metric(r, m))}}
        for r in view.statement.predicate.runs
    ]


def _key(run: Run) -> tuple[str, str, str]:
    return run.profile, run.workload, fig(run.concurrency or run.offered_rate)


def _diff(section: str, old: dict[str, str], new: dict[str, str]) -> list[Change]:
    return [
        Change(section, key, old.get(key), new.get(key))
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]


def _pins(view: KitView) -> dict[str, dict[str, str]]:
    info = view.info
    hw = info.hardware
    return {
        "engine": {
            "name": info.engine.name,
            "version": info.engine.version,
            "image": info.engine.image or "(none pinned)",
        },
        "weights": {
            "repo": info.weights.repo,
            "commit": info.weights.commit,
            "files": str(info.weights.file_count),
            "bytes": str(info.weights.total_bytes),
            "weight checksum": f"sha256:{view.weights_sha256}",
        },
        "hardware": {**_hardware(hw), **_pools(info)},
        "price": (
            {
                "amount": f"{fig(info.price.amount)} {info.price.currency}",
                "maintenance per month": fig(info.price.maintenance_per_month),
                "GPU-hour reference (USD)": fig(info.price.gpu_hour_usd),
            }
            if info.price is not None
            else {"amount": "not declared"}
        ),
    }


def compare(old: KitView, new: KitView) -> ReleaseNotes:
    notes = ReleaseNotes(old, new)
    old_pins, new_pins = _pins(old), _pins(new)
    for section in old_pins:
        notes.changes += _diff(section, old_pins[section], new_pins[section])
    for prof in sorted(old.settings.keys() | new.settings.keys()):
        for name in ("serve.yaml", "engine.env"):
            before = old.settings.get(prof, {}).get(name, {})
            after = new.settings.get(prof, {}).get(name, {})
            notes.changes += _diff(f"settings:{prof}:{name}", before, after)
    o_lim, n_lim = old.statement.predicate.limitations, new.statement.predicate.limitations
    notes.changes += [Change("limitations", x, x, None) for x in o_lim if x not in n_lim]
    notes.changes += [Change("limitations", x, None, x) for x in n_lim if x not in o_lim]
    new_runs = {_key(r): r for r in new.statement.predicate.runs}
    for run in old.statement.predicate.runs:
        match = new_runs.get(_key(run))
        for m in METRICS:
            value = metric(run, m)
            if value is not None and (match is None or metric(match, m) is None):
                notes.not_carried_over.append(
                    {"kind": "run", "run": run.id, "metric": m, "old_value": fig(value)}
                )
    new_pred = new.statement.predicate
    for comp in old.statement.predicate.comparisons:
        if comp.id not in {c.id for c in new_pred.comparisons}:
            notes.not_carried_over.append(
                {
                    "kind": "comparison",
                    "run": comp.id,
                    "metric": comp.metric,
                    "old_value": comp.description,
                }
            )
    for ctl in old.statement.predicate.controls:
        if ctl.id not in {c.id for c in new_pred.controls}:
            notes.not_carried_over.append(
                {
                    "kind": "control",
                    "run": ctl.id,
                    "metric": ctl.metric,
                    "old_value": fig(ctl.agreement_percent),
                }
            )
    return notes


def release_notes(old: Path, new: Path, trusted: list[PublicKey]) -> ReleaseNotes:
    """Verify both kits (either failing raises ``KitNotVerified``), then compare them."""
    return compare(load_view(old, trusted), load_view(new, trusted))


def _measurements(view: KitView) -> list[str]:
    pkg = view.info.package
    out = [
        f"### Measured for {md(pkg.version)} (its own receipt, issued "
        f"{view.statement.predicate.issued_at})",
        "",
        "| run | profile | workload | concurrency | tok/s per GPU | aggregate tok/s | TTFT p50 ms "
        "| TPOT p50 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in view.statement.predicate.runs:
        cells = [r.id, r.profile, r.workload, fig(r.concurrency)]
        cells += [
            fig(metric(r, m))
            for m in ("output_tok_s_per_gpu", "output_tok_s", "ttft_ms.p50", "tpot_ms.p50")
        ]
        out.append("| " + " | ".join(md(c) for c in cells) + " |")
    return [*out, ""]


def render_markdown(notes: ReleaseNotes) -> str:
    o, n = notes.old.info.package, notes.new.info.package
    out = [
        f"# {md(n.name)} {md(n.version)}: release notes",
        "",
        f"From {md(o.name)} {md(o.version)} (sequence {o.sequence}) to {md(n.name)} "
        f"{md(n.version)} (sequence {n.sequence}); both kits verified against the trusted key.",
        "",
    ]
    if n.sequence <= o.sequence:
        out += [f"**Note: NEW's sequence {n.sequence} is not above OLD's {o.sequence}.**", ""]
    out += ["## What changed", ""]
    if not notes.changes:
        out.append("Nothing in pins, hardware, price, settings or limitations.")
    for c in notes.changes:
        if c.old is None:
            what = f"added: {md(c.new)}" if c.section != "limitations" else "added"
        elif c.new is None:
            what = f"removed (was {md(c.old)})" if c.section != "limitations" else "removed"
        else:
            what = f"{md(c.old)} → {md(c.new)}"
        out.append(f"- **{md(c.section)}** {md(c.item)}: {what}")
    out += ["", "## Claims not carried over", ""]
    if not notes.not_carried_over:
        out.append(f"None: every claim of {md(o.version)} is re-measured in {md(n.version)}.")
    for item in notes.not_carried_over:
        out.append(
            f"- {item['kind']} {md(item['run'])}, {md(item['metric'])} = "
            f"{md(item['old_value'])} in {md(o.version)}: **not carried over** (not "
            f"re-measured in {md(n.version)}'s receipt)"
        )
    out += ["", "## Measurements", "", *_measurements(notes.old), *_measurements(notes.new)]
    return "\n".join(out)


def _pools(info: KitInfo) -> dict[str, str]:
    """A disaggregated kit's pools as rows, so a changed pool (GPU model, size) is a change."""
    if info.disaggregation is None:
        return {}
    return {
        f"{role} pool": f"{p.nodes} x {p.gpus_per_node} {p.gpu} ({p.gpu_memory_gb} GB)"
        for role, p in info.disaggregation.pools()
    }


def _hardware(hw: HardwareTarget) -> dict[str, str]:
    """The target's facts as release-note rows (a CPU target has no GPU rows to compare)."""
    if hw.is_cpu:
        return {
            "accelerator": "cpu",
            "cores": str(hw.cpu_cores),
            "memory GiB": str(hw.memory_gib),
            "CPU features": ", ".join(hw.cpu_features or []),
            "nodes": str(hw.nodes),
        }
    return {
        "gpu": str(hw.gpu),
        "gpu memory GB": str(hw.gpu_memory_gb),
        "GPUs per node": str(hw.gpus_per_node),
        "nodes": str(hw.nodes),
        "min compute capability": str(hw.min_compute_capability),
    }
