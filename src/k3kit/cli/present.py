"""What a buyer reads: `show` (the signed content), `card` (HTML, Markdown), `release-notes`."""

from __future__ import annotations

from pathlib import Path

import click

from k3kit.cli._app import EXIT_CODES_HELP, cli, emit_json, err, handle_errors, say
from k3kit.cli._shared import print_report, trust_option, trusted_keys

_UNVERIFIED = "WARNING: UNVERIFIED - this kit did NOT verify; the output is stamped as such"


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path(path_type=Path))
@trust_option
@click.option("--json", "as_json", is_flag=True, help="Print the signed statement as JSON.")
@handle_errors
def show(kit: Path, trust: tuple[Path, ...], as_json: bool) -> None:
    """Verify KIT (a kit directory or .kit.tar.gz), then print what it signs, readably.

    Package, version, sequence, channel, price; upstream repo, pinned commit, weight bytes and
    files; kit and weight checksums; hardware and engine; per profile the runs table; the
    comparisons, controls, limitations and the audit counts. With --json: the verified in-toto
    statement itself (under "statement"), as signed, and its release time ("released_at"). A
    kit that does not verify is not shown (exit 1, with the failed check).
    """
    from k3kit.card import card_data, load_view, show_lines
    from k3kit.node.verify import KitNotVerified

    try:
        view = load_view(kit, trusted_keys(trust))
    except KitNotVerified as exc:
        print_report(exc.report, quiet=True)
        raise
    if as_json:
        emit_json(
            {
                "ok": True,
                "kit": str(kit),
                "kit_sha256": view.kit_sha256,
                "weights_lock_sha256": view.weights_sha256,
                "signer_keyid": view.signer_keyid,
                # The release time a sale's term must cover (docs/licence.md, "Selling a kit").
                "released_at": view.statement.predicate.issued_at,
                "statement": view.statement_json,
            }
        )
        return
    for line in show_lines(card_data(view, None)):
        say(line)


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path(path_type=Path))
@trust_option
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="HTML card path [default: NAME-VERSION.card.html].",
)
@click.option(
    "--markdown", type=click.Path(path_type=Path), help="Also write the card as Markdown."
)
@click.option(
    "--gpu-hour-usd",
    metavar="X",
    help="GPU-hour price in USD for the cost per million output "
    "tokens (default: the package's declared price, if any).",
)
@click.option(
    "--unverified",
    is_flag=True,
    help="Render a kit that does not verify; every page is stamped "
    "UNVERIFIED (exit 1 all the same).",
)
@click.option("--force", is_flag=True, help="Replace existing output files.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@handle_errors
def card(
    kit: Path,
    trust: tuple[Path, ...],
    output: Path | None,
    markdown: Path | None,
    gpu_hour_usd: str | None,
    unverified: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Write KIT's package card: a self-contained HTML page (inline CSS and SVG, nothing fetched).

    Made only from the verified kit and receipt: what `show` shows, the serving-curve charts per
    profile, the cost per million output tokens at each measured point (the formula is on the
    page), the audit summary and the exact install, pull, verify and launch commands. A kit that
    does not verify is refused (exit 1) unless --unverified, which stamps every page and still
    exits 1.
    """
    from k3kit._fs import atomic_write
    from k3kit.card import card_data, load_view, render_html, render_markdown
    from k3kit.card.cost import parse_price
    from k3kit.node.verify import KitNotVerified

    price = parse_price(gpu_hour_usd) if gpu_hour_usd is not None else None
    try:
        view = load_view(kit, trusted_keys(trust), unverified=unverified)
    except KitNotVerified as exc:
        print_report(exc.report, quiet=True)
        raise
    data = card_data(view, price)
    name = f"{view.info.package.name}-{view.info.package.version}"
    html_path = output or Path(f"{name}.card.html")
    atomic_write(html_path, render_html(data), force=force)
    written = {"html": str(html_path)}
    if markdown is not None:
        atomic_write(markdown, render_markdown(data), force=force)
        written["markdown"] = str(markdown)
    if as_json:
        emit_json({"ok": view.verified, "verified": view.verified, "kit": str(kit), **written})
    for what, path in written.items():
        err(f"card     {what}: {path}")
    if not view.verified:
        print_report(view.report, quiet=True)
        err(_UNVERIFIED)
        raise click.exceptions.Exit(1)


@cli.command("release-notes", epilog=EXIT_CODES_HELP)
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@trust_option
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Also write them here.")
@click.option("--force", is_flag=True, help="Replace an existing --output file.")
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
@handle_errors
def release_notes(
    old: Path,
    new: Path,
    trust: tuple[Path, ...],
    output: Path | None,
    force: bool,
    as_json: bool,
) -> None:
    """What changed from OLD to NEW (kit directories or .kit.tar.gz), as Markdown.

    Both kits must verify. Shows changed deploy settings per profile, engine and weight pins,
    hardware, price and limitations, then each version's measurements from its own receipt. A
    claim of OLD's receipt that NEW's does not re-measure is listed as not carried over.
    """
    from k3kit._fs import atomic_write
    from k3kit.card import load_view
    from k3kit.node.verify import KitNotVerified
    from k3kit.publish.releasenotes import compare, render_markdown

    trusted = trusted_keys(trust)
    views = []
    for kit in (old, new):
        try:
            views.append(load_view(kit, trusted))
        except KitNotVerified as exc:
            print_report(exc.report, quiet=True)
            raise
    notes = compare(views[0], views[1])
    text = render_markdown(notes)
    if output is not None:
        atomic_write(output, text.encode("utf-8"), force=force)
        err(f"release notes written to {output}")
    if as_json:
        emit_json(notes.as_json())
    else:
        say(text)
