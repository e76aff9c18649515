"""Node and site commands: ``preflight`` (can this node run this profile?) and ``render-site``
(the buyer's deploy files with site values filled in and checked)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from k3kit.cli._app import EXIT_CODES_HELP, cli, emit_json, err, handle_errors, say
from k3kit.cli._shared import (
    KitFolder,
    allow_rollback_option,
    optional_trust_option,
    root_option,
    trust_source,
)
from k3kit.errors import InputError
from k3kit.formats.vocab import PreflightStatus as Status

if TYPE_CHECKING:
    from collections.abc import Callable

    from k3kit.preflight import PreflightReport

_MARK = {Status.PASS: "PASS", Status.FAIL: "FAIL", Status.NOT_CHECKED: "NOT CHECKED"}


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=KitFolder(buyer=True))
@optional_trust_option
@root_option
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="State folder for --root: accepted roots, rollback state (default: as `verify`).",
)
@click.option("--profile", required=True, help="Operating profile (see kit.json).")
@click.option("--topology", help="Topology of the profile (default: its single-node one).")
@click.option(
    "--weights",
    type=click.Path(path_type=Path),
    help="Weights folder: its filesystem's free space is checked.",
)
@click.option(
    "--nvidia-smi-xml",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Judge a recorded `nvidia-smi -q -x` file instead of this node's GPUs.",
)
@click.option(
    "--os-facts",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Judge a recorded OS reading (JSON: shm_bytes, memlock_bytes, disk_free_bytes).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@handle_errors
def preflight(
    kit: Path,
    trust: tuple[Path, ...],
    root_file: Path | None,
    state_dir: Path | None,
    profile: str,
    topology: str | None,
    weights: Path | None,
    nvidia_smi_xml: Path | None,
    os_facts: Path | None,
    as_json: bool,
) -> None:
    """Check this node against a profile before launch: GPUs, driver, memory budget, OS.

    GPUs are read through NVML (nvidia-ml-py), else `nvidia-smi -q -x`. Each check is PASS,
    FAIL (expected vs actual) or NOT CHECKED (with why); a check whose source is missing is never
    PASS. Exit 1 when a required check fails or could not be checked.

    What the profile needs is read from KIT only after it verified against its signed receipt
    (--trust or --root, as `verify`); a kit that does not verify is not judged (exit 1).
    """
    from k3kit.cli._shared import default_state_dir
    from k3kit.formats.documents import read_bounded
    from k3kit.preflight import from_nvidia_smi_xml, os_facts_from_json, run_preflight

    state = state_dir if state_dir is not None else default_state_dir()
    trusted, rollback = trust_source(trust, root_file, state, False)

    node = None
    if nvidia_smi_xml is not None:
        data = read_bounded(
            nvidia_smi_xml,
            8 * 1024 * 1024,
            what="nvidia-smi XML",
            error=InputError,
            code="INPUT_MISSING",
        )
        node = from_nvidia_smi_xml(data, source=str(nvidia_smi_xml))
    osf = None
    if os_facts is not None:
        raw = read_bounded(
            os_facts, 64 * 1024, what="OS facts", error=InputError, code="INPUT_MISSING"
        )
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise InputError(f"{os_facts}: not JSON: {exc}", code="BAD_INPUT") from exc
        if not isinstance(doc, dict):
            raise InputError(f"{os_facts}: not a JSON object", code="BAD_INPUT")
        osf = os_facts_from_json(doc)
    report = _verified_preflight(
        lambda: run_preflight(
            kit,
            profile,
            trusted=trusted,
            rollback=rollback,
            topology=topology,
            node=node,
            osf=osf,
            weights=weights,
        ),
        as_json=as_json,
    )
    if as_json:
        emit_json(report.as_json())
    print_preflight(report)
    if not report.ok:
        sys.exit(1)


def _verified_preflight(run: Callable[[], PreflightReport], *, as_json: bool) -> PreflightReport:
    """``run``, with a kit that does not verify shown as its report (exit 1), not judged."""
    from k3kit.cli._shared import print_report
    from k3kit.node.verify import KitNotVerified

    try:
        return run()
    except KitNotVerified as exc:
        if as_json:
            emit_json({**exc.report.as_json(), "preflight": None})
        print_report(exc.report)
        err("preflight: the kit did not verify; the node was not judged against it")
        sys.exit(1)


def print_preflight(report: PreflightReport) -> None:
    """One line per check (expected vs found, or why it could not be checked), then the verdict;
    ``launch`` prints the same lines when its preflight refuses a node."""
    for c in report.checks:
        label = _MARK[c.status] + ("" if c.required else " (advisory)")
        detail = (
            f"expected {c.expected}; found {c.actual}" if c.status != Status.NOT_CHECKED else c.why
        )
        err(f"{label:<24} {c.name:<24} {detail}")
    verdict = "this node can run" if report.ok else "this node cannot be shown to run"
    err(f"preflight: {verdict} {report.profile} ({report.topology}); GPUs from {report.source}")


@cli.command("render-site", epilog=EXIT_CODES_HELP)
@click.argument("kit", type=KitFolder(buyer=True))
@optional_trust_option
@root_option
@allow_rollback_option
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="State folder for --root: accepted roots, rollback state (default: as `verify`).",
)
@click.option(
    "--site",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Site file (KEY=value lines; see the kit's site.example.env).",
)
@click.option(
    "-o", "--output", required=True, type=click.Path(path_type=Path), help="Folder to write."
)
@click.option(
    "--force", is_flag=True, help="Replace an output folder render-site wrote (nothing else)."
)
@click.option(
    "--kit-ref",
    help="oci://HOST/REPO@sha256:HEX: the Kubernetes workloads install the kit from this "
    "registry (by digest) in an init container instead of mounting KIT_DIR (docs/oci.md).",
)
@click.option(
    "--kit-pull-secret",
    metavar="NAME",
    help="With --kit-ref: a kubernetes.io/dockerconfigjson Secret the init container logs in "
    "to the registry with (mounted read-only as REGISTRY_AUTH_FILE; only its name is rendered).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the written files as JSON.")
@handle_errors
def render_site(
    kit: Path,
    trust: tuple[Path, ...],
    root_file: Path | None,
    allow_rollback: bool,
    state_dir: Path | None,
    site: Path,
    output: Path,
    force: bool,
    kit_ref: str | None,
    kit_pull_secret: str | None,
    as_json: bool,
) -> None:
    """Verify KIT, then write its compose, systemd and Kubernetes files with the site's values
    filled in.

    KIT is verified against its signed receipt first (--trust or --root, as `verify`): receipt
    signature, kit checksum, every file against MANIFEST.json. A kit that does not verify renders
    nothing (exit 1); the files are rendered from the verified bytes. Every site value is checked
    against the site schema; a line naming a value the kit locks (an engine flag, an engine
    variable, the pinned image) or a runtime value (NODE_RANK) is refused with the file, the line
    and the key (exit 3). Node rank and leader address stay runtime.
    """
    from k3kit.cli._shared import default_state_dir, print_report
    from k3kit.node.sitefiles import render_site as render
    from k3kit.node.verify import KitNotVerified

    state = state_dir if state_dir is not None else default_state_dir()
    trusted, rollback = trust_source(trust, root_file, state, allow_rollback)
    try:
        files = render(
            kit, site, output, trusted=trusted, rollback=rollback, force=force, kit_ref=kit_ref,
            kit_pull_secret=kit_pull_secret,
        )  # fmt: skip
    except KitNotVerified as exc:
        if as_json:
            emit_json({**exc.report.as_json(), "output": None})
        print_report(exc.report)
        err("render-site: the kit did not verify; nothing was written")
        sys.exit(1)
    if as_json:
        emit_json({"output": str(output), "files": files})
    else:
        for rel in files:
            say(str(output / rel))
    err(f"render-site: {len(files)} files in {output}")
