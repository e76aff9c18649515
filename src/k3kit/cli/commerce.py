"""Enterprise-tier verbs: ``licence sign|verify``, ``ledger init|purchase|verify`` and
``buyer-receipt issue`` (docs/licence.md, docs/ledger.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from k3kit.cli._app import EXIT_CODES_HELP, cli, emit_json, err, handle_errors, now_utc, say
from k3kit.cli._shared import Whole, need_trust, timestamp_option, trusted_keys, whole_number
from k3kit.cli.signing import key_option, load_signer
from k3kit.errors import ExitCode, InputError

DB_HELP = "Ledger: a SQLite file path or a postgresql:// URL (env K3KIT_LEDGER)."
db_option = click.option(
    "--db", envvar="K3KIT_LEDGER", default="k3kit-ledger.sqlite", show_default=True, help=DB_HELP
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


def _done(as_json: bool, text: str) -> None:
    """The human summary: stdout normally, stderr when stdout carries the JSON object."""
    (err if as_json else say)(text)


def _read(path: Path, what: str, limit: int = 1024 * 1024) -> bytes:
    from k3kit._fs import read_capped

    return read_capped(path, limit, what=what, error=InputError, code="BAD_INPUT")


@cli.group()
def licence() -> None:
    """Sign and check the enterprise licence (docs/licence.md)."""


@licence.command("sign", epilog=EXIT_CODES_HELP)
@click.argument("terms", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--entity", required=True, help="The licensed entity (legal name).")
@click.option("--signer", "signer_name", required=True, help="The person signing.")
@click.option("--authority", required=True, help="Their authority to bind the entity.")
@click.option("--package", required=True, help="The package this licence buys (its name).")
@click.option("--amount", required=True, type=Whole(1, 10**15), help="Price, minor units.")
@click.option("--currency", required=True, help="ISO 4217 code of the price, e.g. EUR.")
@click.option("--term-days", type=Whole(1, 3660), default=365, show_default=True)
@click.option(
    "--affirm",
    multiple=True,
    metavar="ID",
    help="One affirmation, after reading its text (repeat for each; there is no default).",
)
@key_option("Signer's private key.")
@click.option("--passphrase-env", metavar="VAR", help="Read the key's passphrase from $VAR.")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace an existing file.")
@json_option
@handle_errors
def licence_sign(
    terms: Path,
    entity: str,
    signer_name: str,
    authority: str,
    package: str,
    amount: int,
    currency: str,
    term_days: int,
    affirm: tuple[str, ...],
    key: str,
    passphrase_env: str | None,
    output: Path,
    force: bool,
    as_json: bool,
) -> None:
    """Sign the licence over TERMS (its sha256), the parties, the package and its price
    (each payment of --amount --currency buys --term-days), and each affirmation.

    Every affirmation's text is shown on stderr; each must be given with its own --affirm ID.
    Exit 3 when one is missing (nothing is written).
    """
    from k3kit._fs import atomic_write, refuse_existing
    from k3kit.commerce.licence import (
        MAX_TERMS_BYTES,
        check_affirmations,
        licence_body,
        sign_licence,
    )
    from k3kit.models.commerce import AFFIRMATIONS

    for aid, text in AFFIRMATIONS.items():
        err(f"[{'x' if aid in affirm else ' '}] {aid}: {text}")
    check_affirmations(list(affirm))  # before the key is even read: nothing to sign without all
    refuse_existing(output, force=force)
    data = _read(terms, "terms", MAX_TERMS_BYTES)
    signer = load_signer(key, passphrase_env)
    body = licence_body(
        data,
        terms.name,
        entity=entity,
        package=package,
        price={"amount_minor": amount, "currency": currency, "term_days": term_days},
        signer_name=signer_name,
        authority=authority,
        affirm=list(affirm),
        public_key=signer.public_key(),
        signed_at=now_utc(),
    )
    envelope = sign_licence(body, signer)
    atomic_write(output, envelope, force=force)
    from k3kit.commerce.licence import sha256_tag, verify_licence

    lic = verify_licence(envelope, source=output.name, terms=data)
    if as_json:
        emit_json(
            {
                "ok": True,
                "licence": str(output),
                "licence_sha256": lic.licence_sha256,
                "terms_sha256": sha256_tag(data),
                "signer_keyid": lic.signer_keyid,
            }
        )
    _done(as_json, f"signed licence {lic.licence_sha256} for {entity} -> {output}")


@licence.command("verify", epilog=EXIT_CODES_HELP)
@click.argument("licence_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--terms", type=click.Path(path_type=Path, dir_okay=False), required=True)
@click.option(
    "--trust",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Also require the signer to be one of these public keys.",
)
@json_option
@handle_errors
def licence_verify(licence_file: Path, terms: Path, trust: tuple[Path, ...], as_json: bool) -> None:
    """Check a licence: signature, each affirmation, the terms text's sha256 (exit 1 if not)."""
    from k3kit._fs import read_capped
    from k3kit.commerce.licence import verify_licence
    from k3kit.errors import VerificationError

    data = read_capped(
        licence_file, 1024 * 1024, what="licence", error=VerificationError, code="LICENCE_MISSING"
    )
    lic = verify_licence(
        data,
        source=licence_file.name,
        terms=_read(terms, "terms"),
        trusted=trusted_keys(trust) if trust else None,
    )
    b = lic.body
    if as_json:
        emit_json(
            {
                "ok": True,
                "licence_sha256": lic.licence_sha256,
                "entity": b.entity,
                "package": b.package,
                "price": b.price.model_dump(),
                "signer": b.signer.name,
                "authority": b.signer.authority,
                "signer_keyid": lic.signer_keyid,
                "terms_sha256": b.terms.sha256,
                "affirmations": [a.id for a in b.affirmations],
                "signed_at": b.signed_at,
            }
        )
    p = b.price
    _done(
        as_json,
        f"licence {lic.licence_sha256}: {b.entity}, signed by {b.signer.name}, for {b.package} "
        f"at {p.amount_minor} {p.currency} per {p.term_days} days",
    )


@cli.group()
def ledger() -> None:
    """The append-only licence ledger on SQLite or PostgreSQL (docs/ledger.md)."""


def _open_ledger(db: str, *, create: bool = False) -> Any:
    """The ledger's engine, disposed (its pooled connections closed) when the command ends. A
    process's exit closes them anyway; a caller that runs the CLI in its own process (a script,
    the test suite) would otherwise keep a PostgreSQL connection open per call until the server's
    limit, and a SQLite ledger's -wal/-shm files beside it. ``create=False``: every verb but
    ``ledger init`` refuses a ledger that does not exist (:func:`open_engine`)."""
    from k3kit.commerce.ledger import open_engine

    engine = open_engine(db, create=create)
    click.get_current_context().call_on_close(engine.dispose)
    return engine


@ledger.command("init", epilog=EXIT_CODES_HELP)
@db_option
@json_option
@handle_errors
def ledger_init(db: str, as_json: bool) -> None:
    """Create the ledger's tables and triggers, or bring an older schema up to date."""
    from k3kit.commerce.ledger import migrate

    applied = migrate(_open_ledger(db, create=True), now_utc())
    if as_json:
        emit_json({"ok": True, "applied": applied})
    _done(as_json, f"ledger schema: applied {applied or 'nothing (up to date)'}")


@ledger.command("purchase", epilog=EXIT_CODES_HELP)
@db_option
@click.option("--licence", "licence_file", required=True, type=click.Path(path_type=Path))
@click.option("--terms", required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--payment", required=True, help="The payment's reference (unique).")
@click.option("--amount", required=True, help="In minor units (cents), 1 to 10^15.")
@click.option("--currency", required=True, help="ISO 4217 code, e.g. EUR.")
@click.option("--package", required=True, help="The package name the entitlement covers.")
@click.option("--valid-from", help="Start of the term (default: now), RFC 3339 (UTC or offset).")
@click.option("--term-days", default="365", show_default=True, help="1 to 3660.")
@json_option
@handle_errors
def ledger_purchase(
    db: str,
    licence_file: Path,
    terms: Path,
    payment: str,
    amount: str,
    currency: str,
    package: str,
    valid_from: str | None,
    term_days: str,
    as_json: bool,
) -> None:
    """Record a payment and its entitlement, bound to a verified licence, in one transaction."""
    from k3kit.commerce.ledger import MAX_AMOUNT_MINOR, purchase, term_end

    amount_minor = whole_number("--amount", amount, lo=1, hi=MAX_AMOUNT_MINOR)
    days = whole_number("--term-days", term_days, lo=1, hi=3660)
    start = timestamp_option("--valid-from", valid_from) if valid_from else now_utc()
    try:
        until = term_end(start, days)
    except ValueError as exc:
        raise InputError(f"--valid-from {start}: {exc}", code="BAD_INPUT") from exc
    p = purchase(
        _open_ledger(db),  # only `ledger init` creates a ledger
        licence=_read(licence_file, "licence"),
        terms=_read(terms, "terms"),
        terms_name=terms.name,
        payment_ref=payment,
        amount_minor=amount_minor,
        currency=currency,
        package=package,
        valid_from=start,
        valid_until=until,
        now=now_utc(),
    )
    if as_json:
        emit_json(
            {
                "ok": True,
                "entitlement": p.entitlement_id,
                "payment": p.payment_ref,
                "licence_sha256": p.licence_sha256,
                "licensee": p.licensee,
                "package": p.package,
                "valid_from": p.valid_from,
                "valid_until": p.valid_until,
                "seq": p.seq,
            }
        )
    _done(as_json, f"entitlement {p.entitlement_id}: {p.package} until {p.valid_until}")


def _anchors(files: tuple[Path, ...], trusted: list[Any] | None) -> list[Any]:
    """The signed heads in ``--checkpoint`` files (checkpoints or buyer receipts), verified."""
    from k3kit.commerce.ledger import read_anchor

    if files and trusted is None:
        raise InputError(
            "--checkpoint needs --trust: a signed head proves something only when the key that "
            "signed it is the seller's",
            code="LEDGER_ANCHOR_NEEDS_TRUST",
        )
    return [read_anchor(_read(f, "checkpoint"), trusted or [], source=f.name) for f in files]


checkpoint_option = click.option(
    "--checkpoint",
    "checkpoints",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="A signed head kept outside the database: a checkpoint file or a buyer receipt (repeat).",
)


def _verdict(report: Any) -> tuple[str, str | None]:
    """The verdict line and a note; never a bare INTACT for a chain no signed head anchors."""
    if not report.ok:
        return "LEDGER BROKEN", None
    through, (seq, _) = report.anchored_through, report.head
    if through is None:
        return "LEDGER CONSISTENT, UNANCHORED", (
            "no signed head was checked (give --trust KEY and --checkpoint FILE): whoever can "
            "write the database could have rewritten it consistently"
        )
    if through < seq:
        return f"LEDGER INTACT through signed head seq {through}", (
            f"entries {through + 1}..{seq}: consistent, unanchored (no signed head covers them)"
        )
    return f"LEDGER INTACT through signed head seq {through} (the head)", None


@ledger.command("verify", epilog=EXIT_CODES_HELP)
@db_option
@click.option(
    "--trust",
    multiple=True,
    type=click.Path(path_type=Path),
    help="The seller's key(s): buyer receipt issuers and checkpoint signers.",
)
@checkpoint_option
@json_option
@handle_errors
def ledger_verify(
    db: str, trust: tuple[Path, ...], checkpoints: tuple[Path, ...], as_json: bool
) -> None:
    """Check the hash chain, every row against it, every signature, that no entitlement lacks
    its payment or licence, and that the chain extends every signed head given (--checkpoint)
    or found (trusted buyer receipts). Exit 1 names the first broken row."""
    from k3kit.commerce.ledger import verify_ledger

    trusted = trusted_keys(trust) if trust else None
    anchors = _anchors(checkpoints, trusted)
    report = verify_ledger(_open_ledger(db), trusted, anchors)
    first = report.first
    verdict, note = _verdict(report)
    if as_json:
        emit_json(
            {
                "ok": report.ok,
                "verdict": verdict,
                "rows": report.rows,
                "counts": report.counts,
                "orphans": report.orphans,
                "issuers_checked": report.issuers_checked,
                "anchored_through": report.anchored_through,
                "anchors": [vars(a) for a in report.anchors[:100]],
                "first_broken": None if first is None else vars(first),
                "breaks": [vars(b) for b in report.breaks[:100]],
            }
        )
    counts = ", ".join(f"{v} {k}" for k, v in report.counts.items())
    err(f"ledger   {report.rows} chained rows: {counts}")
    err(f"anchors  {len(report.anchors)} signed head(s) checked")
    if not report.issuers_checked:
        err("note     buyer receipt issuers: not checked (no --trust)")
    if note is not None:
        err(f"note     {note}")
    if first is not None:
        err(f"FAIL     {first.code} at seq {first.seq} ({first.table} {first.ref}): {first.detail}")
    err("verdict: " + verdict)
    sys.exit(0 if report.ok else int(ExitCode.CHECK_FAILED))


@ledger.command("checkpoint", epilog=EXIT_CODES_HELP)
@db_option
@key_option("Seller's private key.")
@click.option("--passphrase-env", metavar="VAR", help="Read the key's passphrase from $VAR.")
@click.option(
    "--trust",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Other keys that issued buyer receipts or signed checkpoints (the --key is trusted).",
)
@checkpoint_option
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace an existing file.")
@json_option
@handle_errors
def ledger_checkpoint(
    db: str,
    key: str,
    passphrase_env: str | None,
    trust: tuple[Path, ...],
    checkpoints: tuple[Path, ...],
    output: Path,
    force: bool,
    as_json: bool,
) -> None:
    """Verify the ledger, then sign its head (seq + hash + time) into OUTPUT.

    Keep OUTPUT away from the database (another machine, a mail, a repository): it is what
    `ledger verify --trust KEY --checkpoint OUTPUT` later holds the chain to. Exit 1 (nothing
    written) when the ledger does not verify against the --checkpoint files given.
    """
    from k3kit._fs import atomic_write, refuse_existing
    from k3kit.commerce.ledger import checkpoint

    refuse_existing(output, force=force)
    signer = load_signer(key, passphrase_env)
    trusted = [signer.public_key(), *(trusted_keys(trust) if trust else [])]
    done = checkpoint(
        _open_ledger(db),
        signer,
        now=now_utc(),
        trusted=trusted,
        anchors=_anchors(checkpoints, trusted),
    )
    atomic_write(output, done.envelope, force=force)
    if as_json:
        emit_json({"ok": True, "checkpoint": str(output), "seq": done.seq, "head": done.head})
    _done(as_json, f"signed ledger head seq {done.seq} {done.head} -> {output}")


@cli.group("buyer-receipt")
def buyer_receipt() -> None:
    """Issue the signed buyer receipt (docs/licence.md)."""


@buyer_receipt.command("issue", epilog=EXIT_CODES_HELP)
@click.argument("entitlement")
@db_option
@click.option("--kit", required=True, type=click.Path(path_type=Path), help="Kit dir or archive.")
@click.option(
    "--trust",
    multiple=True,
    callback=need_trust,
    type=click.Path(path_type=Path),
    help="Publisher key(s) the kit must verify with (required).",
)
@click.option(
    "--build-record",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="JSON object: engine build, image digest, patches.",
)
@click.option(
    "--serve-command",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The measured serve command: a JSON array, or one shell-quoted line.",
)
@key_option("Publisher's private key.")
@click.option("--passphrase-env", metavar="VAR", help="Read the key's passphrase from $VAR.")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace an existing file.")
@json_option
@handle_errors
def buyer_receipt_issue(
    entitlement: str,
    db: str,
    kit: Path,
    trust: tuple[Path, ...],
    build_record: Path,
    serve_command: Path,
    key: str,
    passphrase_env: str | None,
    output: Path,
    force: bool,
    as_json: bool,
) -> None:
    """Sign and record a buyer receipt for KIT under ENTITLEMENT.

    Refused (exit 1) when KIT does not verify, or was released outside the entitlement's term.
    """
    from k3kit._fs import atomic_write, refuse_existing
    from k3kit.commerce.buyer_receipt import read_build_record, read_serve_command
    from k3kit.commerce.ledger import issue

    refuse_existing(output, force=force)
    issued = issue(
        _open_ledger(db),  # only `ledger init` creates a ledger
        entitlement,
        kit=kit,
        trusted=trusted_keys(trust),
        build_record=read_build_record(build_record),
        serve_command=read_serve_command(serve_command),
        signer=load_signer(key, passphrase_env),
        now=now_utc(),
    )
    atomic_write(output, issued.envelope, force=force)
    result: dict[str, Any] = {
        "ok": True,
        "buyer_receipt": str(output),
        "sha256": issued.sha256,
        "entitlement": issued.entitlement_id,
        "licensee": issued.licensee,
        "kit_sha256": issued.kit_sha256,
        "released_at": issued.released_at,
        "seq": issued.seq,
    }
    if as_json:
        emit_json(result)
    _done(as_json, f"buyer receipt {issued.sha256} for {issued.licensee} -> {output}")
