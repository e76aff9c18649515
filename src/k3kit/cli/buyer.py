"""Buyer commands: pull the pinned weights, verify kit + receipt + weights."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from k3kit.cli._app import EXIT_CODES_HELP, cli, emit_json, err, handle_errors, outcome_decided
from k3kit.cli._shared import (
    ByteProgress,
    Real,
    Whole,
    allow_rollback_option,
    file_progress,
    memo_note,
    optional_trust_option,
    print_report,
    read_token,
    root_option,
    signature_memo,
    state_and_cache,
    trust_source,
    trusted_keys,
)
from k3kit.errors import ExitCode

if TYPE_CHECKING:  # the verb imports k3kit.pull when it runs, not at start-up
    from k3kit.pull import PullError


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path(path_type=Path))
@click.option(
    "--dir",
    "dest",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Where the weights go: the cache root (--layout cache) or the folder (plain).",
)
@click.option(
    "--layout",
    type=click.Choice(["cache", "plain"]),
    default="cache",
    show_default=True,
    help="Hugging Face cache layout (models--org--name/snapshots/<commit>/) or a plain folder.",
)
@click.option("--endpoint", help="Hub URL (default: the lock's endpoint).")
@click.option("--token-env", metavar="VAR", help="Read the hub token from $VAR (gated repos).")
@click.option(
    "--workers",
    type=Whole(1, 64),
    default=8,
    show_default=True,
    help="Parallel downloads.",
)
@click.option(
    "--trust",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Verify the kit with this publisher key before pulling (repeatable; optional).",
)
@click.option(
    "--timeout",
    type=Real(0.5, 600),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the hub (connect, each read); a file with its retries gives up "
    "after 2.5x this.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def pull(
    kit: Path,
    dest: Path,
    layout: str,
    endpoint: str | None,
    token_env: str | None,
    workers: int,
    trust: tuple[Path, ...],
    timeout: float,
    as_json: bool,
) -> None:
    """Download KIT's pinned weights from the hub, hashing each file as it lands.

    KIT is a kit directory, a .kit.tar.gz, or a weights.lock.json. Exactly the lock's files at
    the lock's commit are fetched; a file with wrong bytes is quarantined beside DIR (in
    DIR.k3kit-quarantine/) and fetched once more. A rerun resumes. Exit 0 only when every file
    matches the lock (the same verdict as `k3kit verify --weights DIR`); 1 wrong bytes, a size
    other than the lock's, other files or planted links in DIR; 4 hub, network or auth trouble;
    130 Ctrl-C (no partial file is left in DIR). Nothing outside DIR is written or removed.
    """
    from dataclasses import asdict  # the quarantine records' JSON: not on verify's start-up

    from k3kit.hub import HfHub
    from k3kit.hub.policy import hub_endpoint
    from k3kit.pull import pull as pull_weights
    from k3kit.pull import read_kit_lock

    kit_lock = read_kit_lock(kit, trusted_keys(trust))
    lock = kit_lock.lock
    # The lock's endpoint is only a default when the kit verified: an unverified lock must never
    # choose where this machine connects, let alone where its hub token is sent.
    token = read_token(token_env)
    own = lock.source.endpoint if kit_lock.verified else None
    url = hub_endpoint(endpoint, token, fallback=own, environ=os.environ)
    err(f"kit      {kit} ({kit_lock.detail})")
    err(
        f"weights  {lock.repo}@{lock.commit}: {lock.file_count} files, {lock.total_bytes} bytes "
        f"from {url}"
    )
    try:
        report = pull_weights(
            lock,
            dest,
            downloader=HfHub(url, token, timeout=timeout),
            layout="plain" if layout == "plain" else "cache",
            workers=workers,
            on_file_done=file_progress("pulling", lock.total_bytes),
            on_event=lambda text: err(f"note     {text}"),
        )
    except KeyboardInterrupt:
        err("\ninterrupted: stopped; no partial file left in the weights folder (rerun resumes)")
        sys.exit(130)
    outcome_decided()  # the pull is over: what follows reports it, a Ctrl-C cannot change it
    result = {
        "ok": report.ok,
        "exit_code": report.exit_code,
        "kit": {"path": str(kit), "verified": kit_lock.verified, "detail": kit_lock.detail},
        "repo": lock.repo,
        "commit": lock.commit,
        "endpoint": url,
        "layout": layout,
        "dir": str(dest),
        "weights_root": str(report.root),
        "files": lock.file_count,
        "total_bytes": lock.total_bytes,
        "files_downloaded": report.files_downloaded,
        "bytes_downloaded": report.bytes_downloaded,
        "files_in_place": report.files_in_place,
        "bytes_hashed": report.bytes_hashed,
        "quarantined": [asdict(q) for q in report.quarantined],
        "problems": [p.as_json() for p in report.problems],
        "errors": [e.as_json() for e in report.errors],
    }
    if as_json:
        emit_json(result)
    for p in report.problems[:50]:
        err(f"FAIL     {p.code:<26} {p.path}: {p.detail}")
    _print_errors(report.errors)
    err(
        f"pulled   {report.files_downloaded} files ({report.bytes_downloaded} bytes) downloaded, "
        f"{report.files_in_place} already in place, {len(report.quarantined)} quarantined"
    )
    verdict = {0: "VERIFIED", 1: "NOT VERIFIED - do not deploy", 4: "INCOMPLETE - rerun to resume"}
    err(f"verdict: {verdict[report.exit_code]} ({report.root})")
    sys.exit(report.exit_code)


def _print_errors(errors: list[PullError]) -> None:
    """One line per kind of failure, not one per file: a hub that is down fails every file the
    same way, and 13 identical lines (234 with the client's retry chatter) hide the cause."""
    by_code: dict[str, list[PullError]] = {}
    for e in errors:
        by_code.setdefault(e.code, []).append(e)
    stopped = by_code.pop("PULL_STOPPED", []) if len(by_code) > 1 else []
    for i, (code, same) in enumerate(by_code.items()):
        first = same[0]
        more = [f"{len(same) - 1} more files alike"] if len(same) > 1 else []
        if i == 0 and stopped:
            more.append(f"pull stopped, {len(stopped)} other files not fetched")
        tail = f" ({'; '.join(more)})" if more else ""
        err(f"ERROR    {code:<26} {first.path}: {first.message}{tail}")
        if first.hint:
            err(f"hint     {first.hint}")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path())  # a str: Path() would fold the // of oci://
@optional_trust_option
@root_option
@allow_rollback_option
@click.option(
    "--weights",
    type=click.Path(path_type=Path),
    help="Weights folder: plain, cache snapshot, or cache root.",
)
@click.option(
    "--workers",
    type=Whole(1, 256),
    help="Hashing threads (default: the cores this process may use).",
)
@click.option(
    "--algorithm",
    type=click.Choice(["sha256", "blake3"]),
    help="Force a digest (default: blake3 when the lock has it; sha256 is the hub's).",
)
@click.option(
    "--all-errors", is_flag=True, help="Hash every file instead of stopping at the first mismatch."
)
@click.option(
    "--full",
    is_flag=True,
    help="Re-read and re-hash every file and re-check every signature, ignoring the "
    "verification cache (then refresh it).",
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="One folder for the rollback state, accepted roots and the verification cache "
    "(default: state in $XDG_STATE_HOME/k3kit, ~/.local/state/k3kit or, for root, "
    "/var/lib/k3kit; cache in $XDG_CACHE_HOME/k3kit). It must be yours alone (docs/trust.md).",
)
@click.option(
    "-q", "--quiet", is_flag=True, help="No progress; print only failures and the verdict."
)
@click.option(
    "--buyer-receipt",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also check this buyer receipt belongs to KIT (and to --licence, when given).",
)
@click.option("--licence", type=click.Path(path_type=Path, dir_okay=False), help="Licence file.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def verify(
    kit: str,
    trust: tuple[Path, ...],
    root_file: Path | None,
    allow_rollback: bool,
    weights: Path | None,
    workers: int | None,
    algorithm: str | None,
    all_errors: bool,
    full: bool,
    state_dir: Path | None,
    quiet: bool,
    buyer_receipt: Path | None,
    licence: Path | None,
    as_json: bool,
) -> None:
    """Verify KIT (directory or .kit.tar.gz): receipt, kit files, weight lock, weights.

    Exits 0 only if every check ran and passed (the weights check is reported as not checked
    when --weights is not given). Weight files that verified before and whose device, inode,
    size, mtime and ctime have not changed since are not read again (see
    docs/verification-cache.md); --full reads everything. Progress (bytes, rate, ETA) goes to
    stderr when it is a terminal. With --root, trust comes from a root of trust that the kit's
    root/ chain may move forward, and a kit older than (or conflicting with) one this node
    accepted is refused (ROLLBACK, EQUIVOCATION; docs/trust.md).
    """
    from k3kit.node.verify import verify_path

    if licence is not None and buyer_receipt is None:  # before hours of hashing, not after
        raise click.UsageError("--licence is checked against a --buyer-receipt; give both")
    state, cache = state_and_cache(state_dir)
    trusted, rollback = trust_source(trust, root_file, state, allow_rollback)
    if kit.startswith(("oci://", "oci+http://")):  # by digest, with its referrers (docs/oci.md)
        if weights is not None or buyer_receipt is not None:
            raise click.UsageError("oci:// kits: install first, then verify the folder with those")
        from k3kit.cli.oci import verify_from_registry

        verify_from_registry(kit, trusted, rollback, as_json)
        return
    progress = None
    options = None  # without --weights nothing is hashed: the hashing engine is not imported
    if weights is not None:
        from k3kit.weights import WeightsOptions

        progress = ByteProgress("verifying weights") if sys.stderr.isatty() and not quiet else None
        options = WeightsOptions(
            workers=workers,
            algorithm=algorithm,
            all_errors=all_errors,
            full=full,
            state_dir=cache,
            on_progress=progress,
        )
    memo = signature_memo(cache, full=full)
    try:
        report = verify_path(
            Path(kit),
            trusted,
            weights=weights,
            weights_options=options,
            rollback=rollback,
            memo=memo,
        )
    finally:
        if progress is not None:
            progress.finish()
    if buyer_receipt is not None:
        # no database here: k3kit.commerce.buyer_receipt never imports one
        from k3kit.commerce.buyer_receipt import add_buyer_receipt_check

        add_buyer_receipt_check(report, buyer_receipt, trusted, licence=licence)
    if as_json:
        emit_json(report.as_json())
    print_report(report, quiet=quiet)
    memo_note(memo)
    sys.exit(0 if report.ok else int(ExitCode.CHECK_FAILED))
