"""Auditor and newcomer commands: audit a receipt's claims, run the built-in demo."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from k3kit.cli._app import EXIT_CODES_HELP, cli, emit_json, err, handle_errors, now_utc, say
from k3kit.cli._shared import (
    trust_option,
    trusted_keys,
)
from k3kit.errors import ExitCode


def print_findings(report: Any, echo: Callable[[str], None], *, show_passes: bool = False) -> None:
    """The audit table: rule, severity, run, message with expected vs actual; then the counts."""
    rows: list[tuple[Any, list[str]]] = []
    for f in report.findings:
        if f.severity == "pass" and not show_passes:
            continue
        # Identical "not checkable"/"pass" lines for several runs are shown once, runs listed.
        last = rows[-1][0] if rows else None
        if (
            f.severity in ("not-checkable", "pass")
            and last is not None
            and (last.rule, last.severity, last.message) == (f.rule, f.severity, f.message)
        ):
            rows[-1][1].append(f.run or "-")
            continue
        rows.append((f, [f.run or "-"]))
    echo(f"{'RULE':<5} {'SEVERITY':<13} {'RUN':<28} MESSAGE")
    for f, runs in rows:
        message = f.message
        if f.expected is not None or f.actual is not None:
            message += f" [expected: {f.expected}; actual: {f.actual}]"
        run = runs[0] if len(runs) == 1 else f"{len(runs)} runs"
        if len(runs) > 1:
            message += f" [runs: {', '.join(runs)}]"
        echo(f"{f.rule:<5} {f.severity:<13} {run:<28} {message}")
    counts = report.counts()
    echo(
        "findings: "
        + ", ".join(f"{counts[s]} {s}" for s in ("error", "warning", "info", "not-checkable"))
        + f"; {counts['pass']} checks passed (--all shows them)"
    )


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("target", type=click.Path(path_type=Path))
@trust_option
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning"]),
    default="error",
    show_default=True,
    help="Exit 1 if any finding is at or above this severity.",
)
@click.option("--all", "show_all", is_flag=True, help="Also list the checks that passed.")
@click.option("--json", "as_json", is_flag=True, help="Print every finding as JSON.")
@click.option(
    "--policy",
    type=click.Choice(["default", "strict"]),
    default="default",
    show_default=True,
    help="strict: policy thresholds (MLPerf minimum samples, 600 s runs) are errors, not warnings.",
)
@handle_errors
def audit(
    target: Path,
    trust: tuple[Path, ...],
    fail_on: str,
    show_all: bool,
    as_json: bool,
    policy: str,
) -> None:
    """Audit the claims of a signed receipt: TARGET is a kit directory, a .kit.tar.gz or a
    receipt.dsse.json.

    The signature is verified first (an unverifiable receipt is an R01 error). Then every rule
    (docs/audit.md) checks arithmetic, metric definitions, statistical support, comparisons,
    controls, scope and limitations; with a kit, also its checksums and evidence files.
    Severities: error, warning, info, not-checkable (never counted as a pass).
    """
    from k3kit.audit import Policy, audit_path

    trusted = trusted_keys(trust)
    report = audit_path(target, trusted, Policy(strict=policy == "strict"))
    failing = report.at_or_above(fail_on)
    if as_json:
        emit_json(report.as_json(fail_on))
        print_findings(report, err, show_passes=show_all)
    else:
        print_findings(report, say, show_passes=show_all)
    err(
        f"audit: {len(failing)} finding(s) at or above {fail_on}"
        + (" - the receipt's claims do not all hold as stated" if failing else "")
    )
    sys.exit(int(ExitCode.CHECK_FAILED) if failing else 0)


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    default=Path("k3kit-demo"),
    show_default=True,
    help="Folder for everything the demo makes.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace a workdir an earlier demo wrote (never a folder of yours, never '.').",
)
@handle_errors
def demo(workdir: Path, force: bool) -> None:
    """Run the whole pipeline offline on the built-in Kimi K3 example with STAND-IN weights."""
    from k3kit.demo import run_demo, try_next

    click.echo("k3kit demo: Kimi K3 on 8x NVIDIA B300 with vLLM 0.33.0 (offline, stand-in weights)")
    result = run_demo(workdir, force=force, now=now_utc(), say=click.echo)
    expectations = {
        "kit+weights": True,
        "archive+weights": True,
        "tampered kit file": False,
        "tampered weight shard": False,
    }
    all_as_expected = True
    for name, report in result.reports.items():
        failed = [f"{c.id}:{c.code}" for c in report.checks if c.status == "failed"]
        as_expected = report.ok == expectations[name]
        all_as_expected &= as_expected
        verdict = "VERIFIED" if report.ok else "REJECTED (" + ", ".join(failed) + ")"
        click.echo(f"verify   {name:<22} {verdict}{'' if as_expected else '  <-- UNEXPECTED'}")
    if result.audit is not None:
        # Findings about the published numbers are reported as they are; they do not decide the
        # demo's exit code (only the verifier's expectations above do).
        click.echo("\naudit    the example's published figures, exactly as published:")
        print_findings(result.audit, click.echo)
    click.echo("\nWhere everything is:")
    for name, path in result.paths.items():
        click.echo(f"  {name:<12} {path}")
    click.echo(
        "\nThe weights are STAND-INS for the 1.56 TB upstream shards; everything else is "
        "the real pipeline."
    )
    click.echo('\nTry next (README "Try it on the demo"; offline, from the clone\'s root):')
    for line in try_next(result):
        click.echo(f"  {line}")
    if not all_as_expected:
        raise click.exceptions.Exit(int(ExitCode.CHECK_FAILED))
