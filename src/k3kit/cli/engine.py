"""Publisher command for engine versions k3kit ships no flag data for: ``engine snapshot``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from k3kit._text import shown
from k3kit.cli._app import EXIT_CODES_HELP, cli, emit_json, handle_errors, now_utc, say


@cli.group(epilog=EXIT_CODES_HELP)
def engine() -> None:
    """Engine flag snapshots for versions k3kit does not ship (docs/deploy.md)."""


@engine.command("snapshot", epilog=EXIT_CODES_HELP)
@click.option(
    "--engine",
    "engine_name",
    required=True,
    type=click.Choice(["vllm", "sglang"]),
    help="The engine the wheel is.",
)
@click.option(
    "--wheel",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The engine's released wheel (.whl), a local file: nothing is downloaded.",
)
@click.option(
    "--version",
    "version",
    help="The version the wheel must be (its METADATA is read; a different one is refused).",
)
@click.option(
    "--python",
    "python",
    default=sys.executable,
    show_default="this Python",
    help="Interpreter that can import the engine's dependencies (a CPU torch is enough); the "
    "wheel's own files are put first on its path.",
)
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace an existing file.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@handle_errors
def snapshot(
    engine_name: str,
    wheel: Path,
    version: str | None,
    python: str,
    output: Path,
    force: bool,
    as_json: bool,
) -> None:
    """Read the engine's server flags, environment variables and registries from its own
    argument parser in WHEEL, and write them with their provenance (wheel name and sha256, the
    parser's source file and sha256, date) for `build --engine-snapshot`."""
    from k3kit._fs import atomic_write, refuse_existing
    from k3kit.engines import snapshot_file_bytes, snapshot_sha256
    from k3kit.engines._make import make_snapshot

    refuse_existing(output, force=force)
    doc = make_snapshot(engine_name, wheel, python=python, today=now_utc()[:10], version=version)
    atomic_write(output, snapshot_file_bytes(doc), force=force)
    digest = snapshot_sha256(doc)
    if as_json:
        emit_json(
            {
                "snapshot": str(output),
                "engine": doc.engine,
                "version": doc.version,
                "options": len(doc.options),
                "sha256": digest,
            }
        )
    else:
        say(
            f"wrote {shown(output)}: {doc.engine} {doc.version}, {len(doc.options)} options, "
            f"{len(doc.env_vars)} environment variables, sha256:{digest}"
        )
