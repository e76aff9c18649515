"""Deploy commands: install a verified kit, launch a profile on exactly the verified bytes."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import click

from k3kit.cli._app import EXIT_CODES_HELP, cli, emit_json, err, handle_errors
from k3kit.cli._shared import (
    ByteProgress,
    KitFolder,
    Whole,
    allow_rollback_option,
    memo_note,
    print_report,
    root_option,
    signature_memo,
    state_and_cache,
    trust_source,
)
from k3kit.errors import InputError, VerificationError

_STATE_HELP = (
    "One folder for the rollback state, accepted roots, verified config copies and the "
    "verification cache (default: state in $XDG_STATE_HOME/k3kit, ~/.local/state/k3kit or, for "
    "root, /var/lib/k3kit; cache in $XDG_CACHE_HOME/k3kit). It must be yours alone."
)


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path())  # a str: Path() would fold the // of oci://
@click.option(
    "--trust",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Publisher public key you trust (repeatable); or use --root.",
)
@root_option
@allow_rollback_option
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), help=_STATE_HELP)
@click.option(
    "--into",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder that holds installed kits; the kit goes to INTO/NAME-VERSION/.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def install(
    kit: str,
    trust: tuple[Path, ...],
    root_file: Path | None,
    allow_rollback: bool,
    state_dir: Path | None,
    into: Path,
    as_json: bool,
) -> None:
    """Verify KIT (a .kit.tar.gz or a kit folder) and install exactly the verified bytes.

    The archive is read once, into a private staging folder inside INTO; that copy is verified
    (receipt signature, kit checksum, every file against MANIFEST.json, weight lock) and the same
    copy is renamed to INTO/NAME-VERSION/ and made read-only. Nothing is installed when a check
    fails. Installing the same kit again is a no-op when INTO/NAME-VERSION is as install left
    it (owned by you, read-only, nothing anyone else can write) and verifies again; a folder
    install did not leave there is refused whatever its bytes (exit 4, INSTALL_TARGET_FOREIGN),
    and another kit under the same name and version is refused (exit 1, INSTALL_CONFLICT).
    With --root, an older or conflicting kit for the same package and channel is refused
    (ROLLBACK, EQUIVOCATION) and the accepted sequence is recorded in the state folder.
    Weights are checked by `pull` and `launch`.
    KIT may be oci://HOST/REPO@sha256:HEX: the kit is downloaded by digest into the same private
    staging folder (every byte checked against the digest) and installed from there (docs/oci.md).
    """
    from k3kit.node.install import install as install_kit
    from k3kit.node.verify import KitNotVerified

    state, _cache = state_and_cache(state_dir)
    trusted, rollback = trust_source(trust, root_file, state, allow_rollback)
    try:
        if kit.startswith(("oci://", "oci+http://")):
            from k3kit.node.registry import install_from_registry

            done, digest = install_from_registry(kit, trusted, into, rollback=rollback)
            done.report.facts["oci_digest"] = digest
        else:
            done = install_kit(Path(kit), trusted, into, rollback=rollback)
    except KitNotVerified as exc:
        if as_json:
            emit_json({**exc.report.as_json(), "installed": None})
        print_report(exc.report)
        err("nothing was installed")
        sys.exit(1)
    result = {
        **done.report.as_json(),
        "installed": str(done.path),
        "name": done.name,
        "version": done.version,
        "already_installed": done.already_installed,
    }
    if as_json:
        emit_json(result)
    print_report(done.report, quiet=True)
    outcome = (
        "already installed (same kit, verified again)"
        if done.already_installed
        else "installed read-only"
    )
    err(f"{outcome}: {done.path}")
    if not as_json:
        click.echo(str(done.path))


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=KitFolder(buyer=True))
@click.option("--profile", required=True, help="Operating profile to launch (see kit.json).")
@click.option("--topology", help="Topology of the profile (needed when it has several).")
@click.option(
    "--weights",
    type=click.Path(path_type=Path),
    help="Weights folder (plain, cache snapshot, repo or cache root); default: the site's "
    "MODEL_DIR.",
)
@click.option(
    "--trust",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Publisher public key you trust (repeatable); default: the site's K3KIT_TRUST_KEY.",
)
@root_option
@allow_rollback_option
@click.option(
    "--site",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Site file read as data: MODEL_DIR, K3KIT_TRUST_KEY, HOST, PORT (KEY=value lines).",
)
@click.option("--host", help="Listen address (default: the site's HOST, else 127.0.0.1).")
@click.option("--port", type=Whole(1, 65535), help="Listen port (default 8000).")
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), help=_STATE_HELP)
@click.option(
    "--full",
    is_flag=True,
    help="Re-hash every weight file and re-check the receipt's signature, ignoring the "
    "verification cache (then refresh it).",
)
@click.option("--workers", type=Whole(1, 256), help="Hashing threads.")
@click.option(
    "--node-rank",
    type=Whole(0, 1023),
    help="Multi-node topologies: this node's rank (0 = leader; LWS_WORKER_INDEX).",
)
@click.option("--leader", help="Multi-node topologies: address of node 0 (LWS_LEADER_ADDRESS).")
@click.option(
    "--rdzv-port",
    type=Whole(1, 65535),
    help="Multi-node topologies: the engine's rendezvous port (default: the engine's).",
)
@click.option(
    "--dry-run", is_flag=True, help="Verify everything, then print the argv and environment."
)
@click.option(
    "--no-preflight",
    is_flag=True,
    help="Skip the node check (GPUs, driver, memory budget, OS) that runs before anything else. "
    "Loudly at your own risk.",
)
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: print the plan as JSON.")
@handle_errors
def launch(
    kit: Path,
    profile: str,
    topology: str | None,
    weights: Path | None,
    trust: tuple[Path, ...],
    root_file: Path | None,
    allow_rollback: bool,
    site: Path | None,
    host: str | None,
    port: int | None,
    state_dir: Path | None,
    full: bool,
    workers: int | None,
    node_rank: int | None,
    leader: str | None,
    rdzv_port: int | None,
    dry_run: bool,
    no_preflight: bool,
    as_json: bool,
) -> None:
    """Check the node, verify KIT, its receipt and the weights, then exec the engine on exactly
    those bytes.

    First `k3kit preflight` for the profile (GPU count and model, driver, memory budget, OS);
    a node that cannot be shown to run the profile is refused unless --no-preflight.

    The engine gets the weights folder that was hashed (resolved, never a path that can mean
    something else), the profile's signed serve configuration (a read-only copy of the verified
    bytes), the profile's engine.env parsed as data, and a clean environment (HOME, USER,
    LOGNAME, LANG, LC_ALL, TZ, TERM from the caller; PATH = the engine's folder then the system
    folders; TMPDIR = a private folder), started in the private runtime folder. A signed setting
    the engine would read as an option, or one that loads code or files from outside the kit
    that the publisher did not declare, is refused. The engine's --version, asked in that same
    environment, must match the kit's pin (exact, or same-release when the kit says so); an
    engine that cannot start is reported with its exit status or signal and the end of its
    stderr (exit 4). When any check fails the engine is not started (exit 1). --dry-run prints
    what would be executed, where, and what the kit declares it loads.
    A multi-node topology also needs --node-rank and --leader, the only values not signed.
    """
    from k3kit.node.launch import launch_inputs, plan_launch

    if (node_rank is None) != (leader is None):
        raise InputError("--node-rank and --leader go together", code="RUNTIME_VALUES_MISSING")
    runtime = None
    if node_rank is not None and leader is not None:
        from k3kit.engines import Runtime  # a multi-node launch's values: imported for one

        runtime = Runtime(node_rank, leader, rdzv_port)
    from k3kit.node.verify import KitNotVerified
    from k3kit.weights import WeightsOptions

    # The site file fills what the options left out, by the library's one rule (node/launch.py).
    given = launch_inputs(
        site,
        weights=weights,
        trust_keys=trust,
        root_given=root_file is not None,
        host=host,
        port=port,
    )
    state, cache = state_and_cache(state_dir)
    if state is None:
        raise InputError("no state folder: pass --state-dir", code="STATE_DIR_MISSING")
    trusted, rollback = trust_source(given.trust_keys, root_file, state, allow_rollback)
    if no_preflight:
        err(
            "WARNING: --no-preflight: this node's GPUs, driver, memory budget and OS are NOT "
            "checked before launch"
        )
    node_check = None
    if not no_preflight:  # the node check's modules are imported only by a launch that runs it
        from k3kit.preflight import launch_node_check

        node_check = launch_node_check(weights=given.weights)
    progress = ByteProgress("verifying weights") if sys.stderr.isatty() and not as_json else None
    memo = signature_memo(cache, full=full)
    try:
        plan = plan_launch(
            kit,
            trusted,
            profile=profile,
            topology=topology,
            weights=given.weights,
            runtime_dir=state / "launch",
            base_env=os.environ,
            site=given.site,
            runtime=runtime,
            weights_options=WeightsOptions(
                workers=workers, full=full, state_dir=cache, on_progress=progress
            ),
            rollback=rollback,
            on_step=lambda text: err(f"launch   {text}"),
            check_node=node_check,
            memo=memo,
        )
    except KitNotVerified as exc:
        if as_json:
            emit_json({**exc.report.as_json(), "launched": False})
        print_report(exc.report)
        memo_note(memo)
        err("the engine was not started")
        sys.exit(1)
    except VerificationError as exc:
        if node_check is None:  # no node check ran, so this is not its refusal
            raise
        _refused_by_preflight(exc, as_json)
    finally:
        if progress is not None:
            progress.finish()
    print_report(plan.report, quiet=True)
    memo_note(memo)
    if dry_run:
        if as_json:
            emit_json({"ok": True, "dry_run": True, **plan.as_json()})
        else:
            click.echo("argv: " + " ".join(_shell_word(a) for a in plan.argv))
            click.echo(f"cwd:  {_shell_word(str(plan.cwd))}")
            for key, value in sorted(plan.env.items()):
                click.echo(f"env:  {key}={_shell_word(value)}")
            for name, reason in plan.loads.items():
                click.echo(f"loads: {name} (declared by the publisher: {reason})")
        err("dry run: verified; the engine was not started")
        return
    err(f"launch   exec {plan.executable} (profile {plan.profile}, {plan.topology})")
    sys.stdout.flush()
    sys.stderr.flush()
    for name, reason in plan.loads.items():
        err(f"launch   the kit loads {name} (declared by the publisher: {reason})")
    # The plan's executable is the absolute path whose version was checked; no shell is involved.
    # Nothing relative in the signed settings may resolve in the caller's folder.
    os.chdir(plan.cwd)
    # The report above ignored Ctrl-C (outcome_decided); an ignored SIGINT would survive exec,
    # and the engine must stop on Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execve(plan.executable, plan.argv, plan.env)  # noqa: S606


def _refused_by_preflight(exc: VerificationError, as_json: bool) -> None:
    """Print preflight's refusal (``NodeNotReady``) and exit 1; any other failure goes on up."""
    from k3kit.cli.preflight import print_preflight
    from k3kit.preflight import NodeNotReady

    if not isinstance(exc, NodeNotReady):
        raise exc
    if as_json:
        emit_json({"ok": False, "launched": False, "preflight": exc.report.as_json()})
    print_preflight(exc.report)
    err("the engine was not started (pass --no-preflight to launch without the node check)")
    sys.exit(1)


def _shell_word(text: str) -> str:
    import shlex

    return shlex.quote(text)
