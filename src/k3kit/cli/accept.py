"""The buyer's acceptance test: ``k3kit accept``."""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path
from typing import Any

import click

from k3kit._values import ascii_int
from k3kit.cli._app import EXIT_CODES_HELP, INTERRUPTED, cli, emit_json, err, handle_errors, now_utc
from k3kit.cli._shared import Real, Whole, trust_option, trusted_keys
from k3kit.cli.signing import key_option, load_signer
from k3kit.errors import ExitCode, InputError

_URL = re.compile(r"^https?://[^\s/@?#]+(:[0-9]+)?(/[^\s?#@]*)?$")


def _points(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        points = sorted({ascii_int(p, lo=-(10**18), hi=65536) for p in parts})
    except ValueError as exc:
        raise InputError(f"--points {text!r}: expected e.g. 1,8,32", code="BAD_POINTS") from exc
    if not points or min(points) < 1:
        raise InputError(f"--points {text!r}: concurrencies are >= 1", code="BAD_POINTS")
    return points


def _node() -> dict[str, str]:
    """Node facts the report carries (what the buyer's node says about itself)."""
    return {
        "hostname": platform.node()[:200],
        "platform": platform.platform()[:200],
        "python": platform.python_version(),
        "cpus": str(os.cpu_count() or 0),
        "preflight": "not run: k3kit preflight facts are not attached yet",
    }


def _summary(result: Any, path: Path) -> dict[str, Any]:
    pred = result.predicate
    return {
        "ok": result.verdict == "reproduced",
        "verdict": result.verdict,
        "partial": pred.partial,
        "report": str(path),
        "signer_keyid": result.signer_keyid,
        "points": [p.model_dump(mode="json") for p in pred.points],
        "verdicts": [v.model_dump(mode="json", exclude_none=True) for v in pred.verdicts],
        "functional": [v.model_dump(mode="json", exclude_none=True) for v in pred.functional],
    }


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path(path_type=Path))
@trust_option
@click.option(
    "--url", required=True, help="The running OpenAI-compatible server, e.g. http://127.0.0.1:8000."
)
@click.option(
    "--weights",
    required=True,
    type=click.Path(path_type=Path),
    help="The weights folder the server serves (verified, and its tokenizer used).",
)
@key_option("The buyer's private key that signs the acceptance report.")
@click.option("--passphrase-env", metavar="VAR", help="Read the key's passphrase from $VAR.")
@click.option("--profile", help="Profile to test (default: the only one with signed runs).")
@click.option("--points", help="Concurrency points to replay, e.g. 1,8,32 (default: all).")
@click.option(
    "--requests",
    type=Whole(1, 1_000_000),
    help="Requests per point (default: the signed count, at least 5 waves).",
)
@click.option(
    "--tolerance",
    type=Real(0, 100),
    default=10.0,
    show_default=True,
    help="Percent a measurement may be worse than the claim and still reproduce it.",
)
@click.option(
    "--stall-timeout",
    type=Real(0.1, 86400),
    default=60.0,
    show_default=True,
    help="Seconds of silence after which a request counts as failed.",
)
@click.option(
    "--request-timeout",
    type=Real(0.1, 604800),
    default=3600.0,
    show_default=True,
    help="Seconds after which any one request counts as failed.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=Path("acceptance"),
    show_default=True,
    help="Folder for acceptance.dsse.json and evidence/.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace the output folder if it is empty or an earlier accept report.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON.")
@handle_errors
def accept(
    kit: Path,
    trust: tuple[Path, ...],
    url: str,
    weights: Path,
    key: str,
    passphrase_env: str | None,
    profile: str | None,
    points: str | None,
    requests: int | None,
    tolerance: float,
    stall_timeout: float,
    request_timeout: float,
    output: Path,
    force: bool,
    as_json: bool,
) -> None:
    """Replay the signed workload of KIT against the server at --url and judge every claim.

    Each claim of the profile's runs is reproduced, not reproduced (with the measured value and
    its 95% interval) or inconclusive (too few samples to tell); tool calls, reasoning separation
    and the maximum context are checked where the profile enables them. The report is signed with
    --key (DSSE, payloadType application/vnd.k3kit.acceptance.v1+json) and `k3kit audit` reads it.
    Exit 0 only if every claim is reproduced; Ctrl-C signs a partial report and exits 130.
    """
    from k3kit.accept import Policy, Timeouts, load_plan, run_accept, write_report
    from k3kit.accept.prompts import load_builder

    if not _URL.fullmatch(url):
        raise InputError("--url must be an http(s) URL without credentials", code="BAD_URL")
    signer = load_signer(key, passphrase_env)
    from k3kit.accept.report import check_output

    check_output(output, force)  # every path accept writes, before the first request
    progress = sys.stderr.isatty()
    err("accept: verifying the kit and the weights")
    plan = load_plan(
        kit,
        trusted_keys(trust),
        weights=weights,
        profile=profile,
        points=_points(points),
        requests=requests,
    )
    for note in plan.skipped:
        err(f"accept: skipped {note}")
    builder = load_builder(plan.weights_root, plan.lock)
    result = run_accept(
        plan,
        url=url,
        builder=builder,
        key=signer,
        policy=Policy(tolerance=tolerance / 100),
        timeouts=Timeouts(stall_s=stall_timeout, request_s=request_timeout),
        issued_at=now_utc(),
        node=_node(),
        on_progress=(lambda t: err(f"accept: {t}")) if progress else None,
    )
    path = write_report(output, result.envelope, result.evidence, force)
    for v in [*result.predicate.verdicts, *result.predicate.functional]:
        err(f"{v.verdict:<15} {v.run:<24} {v.claim:<24} {v.reason}")
    for p in result.predicate.points:
        if p.failed:
            err(f"failed requests {p.run}: {p.failed} of {p.requests} ({', '.join(p.errors)})")
    err(
        f"accept: {result.verdict}"
        + (" (PARTIAL: interrupted)" if result.predicate.partial else "")
        + f"; signed report {path}"
    )
    if as_json:
        emit_json(_summary(result, path))
    if result.predicate.partial:
        sys.exit(INTERRUPTED)
    sys.exit(0 if result.verdict == "reproduced" else int(ExitCode.CHECK_FAILED))
