"""``k3kit push``: a verified kit into an OCI registry, and the referrers of one read back."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from k3kit.cli._app import EXIT_CODES_HELP, cli, emit_json, err, handle_errors, say
from k3kit.cli._shared import (
    allow_rollback_option,
    print_report,
    root_option,
    state_and_cache,
    trust_source,
)
from k3kit.errors import ExitCode


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("sources", nargs=-1, required=True)
@click.option(
    "--trust",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Publisher public key you trust (repeatable); or use --root.",
)
@root_option
@allow_rollback_option
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="The state folder (as for verify); needed with --root.",
)
@click.option(
    "--attach",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="A file (an acceptance report) to attach to the kit as a referrer (repeatable).",
)
@click.option(
    "--list-referrers",
    is_flag=True,
    help="Instead of pushing: verify the kit oci://HOST/REPO@sha256:HEX names and list and "
    "check each of its referrers.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def push(
    sources: tuple[str, ...],
    trust: tuple[Path, ...],
    root_file: Path | None,
    allow_rollback: bool,
    state_dir: Path | None,
    attach: tuple[Path, ...],
    list_referrers: bool,
    as_json: bool,
) -> None:
    """Push ARCHIVE to oci://HOST/REPO:TAG, or with --list-referrers check oci://…@sha256:….

    `k3kit push ARCHIVE oci://HOST/REPO:TAG` verifies a private copy of ARCHIVE against --trust
    (nothing is pushed if it does not verify), stores that copy as an OCI artifact
    (artifactType application/vnd.k3kit.kit.v1), then the kit's receipt, its card (when the kit
    has one) and each --attach file as referrers of the kit's manifest (OCI 1.1 subject; the
    sha256-<hex> tag index where the registry has no referrers API). It prints the manifest
    digest: install with `k3kit install oci://HOST/REPO@DIGEST`. Plain http only to a registry
    on this machine; https otherwise (docs/oci.md).

    `k3kit push --list-referrers oci://HOST/REPO@sha256:HEX` downloads the kit by digest,
    verifies it, and checks every referrer: a receipt must be the kit's own signed receipt, a
    card the card file its signed manifest lists (exit 1 otherwise).
    """
    state, _cache = state_and_cache(state_dir)
    trusted, rollback = trust_source(trust, root_file, state, allow_rollback)
    if list_referrers:
        if len(sources) != 1 or attach:
            raise click.UsageError("--list-referrers takes one oci://…@sha256:… and no --attach")
        verify_from_registry(sources[0], trusted, rollback, as_json)
        return
    if len(sources) != 2:
        raise click.UsageError("push takes ARCHIVE and oci://HOST/REPO:TAG")
    _push(Path(sources[0]), sources[1], (trusted, rollback), list(attach), as_json)


def _push(
    archive: Path, target: str, trust: tuple[Any, Any], attach: list[Path], as_json: bool
) -> None:
    from k3kit.node.registry import push_archive
    from k3kit.node.verify import KitNotVerified

    try:  # push_archive refuses a bad reference before it reads the archive
        pushed, report = push_archive(archive, target, trust[0], attach=attach, rollback=trust[1])
    except KitNotVerified as exc:
        if as_json:
            emit_json({**exc.report.as_json(), "pushed": None})
        print_report(exc.report)
        err("nothing was pushed")
        sys.exit(int(ExitCode.CHECK_FAILED))
    pinned = pushed.reference.pinned(pushed.digest)
    result = {
        "ok": True,
        "digest": pushed.digest,
        "reference": pinned,
        "referrers": [
            {"digest": d, "artifactType": t, "title": title} for d, t, title in pushed.referrers
        ],
        "referrers_index": "tag " + pushed.digest.replace(":", "-", 1)
        if pushed.fallback_index
        else "referrers API",
        "kit_sha256": report.facts.get("kit_sha256"),
    }
    if as_json:
        emit_json(result)
    for d, t, title in pushed.referrers:
        err(f"attached {title} ({t}) {d}")
    err(f"pushed; install with: k3kit install {pinned} --trust KEY --into DIR")
    if not as_json:
        say(pushed.digest)


def verify_from_registry(text: str, trusted: object, rollback: object, as_json: bool) -> None:
    """``verify oci://…@sha256:…`` and ``push --list-referrers``: the kit by digest, verified,
    then each referrer checked against it; exits 0 only when all hold."""
    from k3kit.node.registry import verify_registry_kit
    from k3kit.node.verify import KitNotVerified

    try:
        verdict = verify_registry_kit(text, trusted, rollback=rollback)  # type: ignore[arg-type]
    except KitNotVerified as exc:
        if as_json:
            emit_json({**exc.report.as_json(), "referrers": None})
        print_report(exc.report)
        sys.exit(int(ExitCode.CHECK_FAILED))
    if as_json:
        emit_json(verdict.as_json())
    print_report(verdict.report, quiet=True)
    err(f"referrers of {verdict.digest} (from the {verdict.source}):")
    for line in verdict.referrers:
        err(f"  {line['status']:10} {line['title']} {line['artifactType']} {line['digest']}")
        err(f"             {line['detail']}")
    if not as_json:
        say("ok" if verdict.ok else "FAILED")
    sys.exit(0 if verdict.ok else int(ExitCode.CHECK_FAILED))
