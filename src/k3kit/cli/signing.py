"""Signing helpers and verbs beside the root group: passphrases (env var or prompt), receipt
co-signing, SSHSIG for stock-tool verification, and ``verify``'s trust options (``--root``,
``--allow-rollback``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from k3kit._values import utc_timestamp
from k3kit.cli._app import EXIT_CODES_HELP, cli, handle_errors
from k3kit.errors import InputError, K3kitError, VerificationError


def now_for_verification() -> str:
    """The real clock, read once per run (never SOURCE_DATE_EPOCH: that is for builds)."""
    return utc_timestamp()


def load_signer(path: Path, passphrase_env: str | None) -> Any:
    """A PEM signer; the passphrase comes from $VAR, else a prompt when stdin is a terminal."""
    from k3kit.signing.signers import PemSigner

    passphrase = None
    if passphrase_env is not None:
        value = os.environ.get(passphrase_env)
        if not value:
            raise InputError(
                f"--passphrase-env {passphrase_env} is not set or empty", code="PASSPHRASE_MISSING"
            )
        passphrase = value.encode()
    try:
        return PemSigner.from_file(path, passphrase)
    except K3kitError as exc:
        if exc.code != "KEY_PASSPHRASE" or passphrase is not None or not sys.stdin.isatty():
            raise
        typed = click.prompt(f"passphrase for {path}", hide_input=True, err=True)
        return PemSigner.from_file(path, str(typed).encode())


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--key", required=True, type=click.Path(path_type=Path), help="Private key.")
@click.option("--passphrase-env", metavar="VAR", help="Read the key's passphrase from $VAR.")
@handle_errors
def countersign(kit: Path, key: Path, passphrase_env: str | None) -> None:
    """Add a signature to KIT's receipt in place, for a release threshold above 1."""
    from k3kit._fs import atomic_write, read_capped
    from k3kit.formats.manifest import RECEIPT_NAME
    from k3kit.signing.sign import MAX_ENVELOPE_BYTES, add_signature

    path = kit / RECEIPT_NAME
    data = read_capped(
        path, MAX_ENVELOPE_BYTES, what="receipt", error=VerificationError, code="RECEIPT_MISSING"
    )
    atomic_write(
        path, add_signature(data, load_signer(key, passphrase_env), source=str(path)), force=True
    )
    click.echo(f"added a signature to {path}")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--key", required=True, type=click.Path(path_type=Path), help="Private key.")
@click.option(
    "--principal",
    default="release@k3kit",
    show_default=True,
    help="Name in the allowed_signers line.",
)
@click.option("--passphrase-env", metavar="VAR", help="Read the key's passphrase from $VAR.")
@click.option("--force", is_flag=True, help="Replace an existing MANIFEST.json.sig.")
@handle_errors
def sshsig(kit: Path, key: Path, principal: str, passphrase_env: str | None, force: bool) -> None:
    """Write KIT/MANIFEST.json.sig (SSHSIG, namespace k3kit) for `ssh-keygen -Y verify`."""
    from k3kit._fs import atomic_write, read_capped
    from k3kit.formats.documents import MAX_DOCUMENT_BYTES
    from k3kit.formats.manifest import MANIFEST_NAME
    from k3kit.signing.trust import sshsig as ssh

    manifest = read_capped(
        kit / MANIFEST_NAME,
        MAX_DOCUMENT_BYTES,
        what="manifest",
        error=InputError,
        code="KIT_INCOMPLETE",
    )
    signer = load_signer(key, passphrase_env)
    atomic_write(kit / ssh.SIG_NAME, ssh.sign(manifest, signer).encode(), force=force)
    click.echo(
        f"wrote {kit / ssh.SIG_NAME}\nallowed_signers line (give it to buyers out of "
        f"band):\n{ssh.allowed_signers_line(signer.public_key(), principal)}"
    )


root_option = click.option(
    "--root",
    "root_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Pinned root of trust (N.root.json); the kit's root/ chain may move it forward.",
)
allow_rollback_option = click.option(
    "--allow-rollback",
    is_flag=True,
    help="OPERATOR OVERRIDE: accept an older or conflicting kit for this package/channel "
    "(recorded in the state file; a root's minimum sequence still applies).",
)


def trust_source(
    trust: tuple[Path, ...], root_file: Path | None, state_dir: Path | None, allow_rollback: bool
) -> tuple[Any, Any]:
    """What ``verify`` trusts: --trust keys, or --root with rollback state in STATE_DIR."""
    from k3kit.cli._shared import trusted_keys
    from k3kit.signing.trust import RollbackPolicy, RootAnchor

    if root_file is None:
        if allow_rollback:
            raise click.UsageError("--allow-rollback needs --root (rollback is tracked per root)")
        if not trust:
            raise click.UsageError("give --trust KEY.pub or --root ROOT.json")
        return trusted_keys(trust), None
    if trust:
        raise click.UsageError("give either --trust or --root, not both")
    now = now_for_verification()
    anchor = RootAnchor(_read_root(root_file), str(root_file), state_dir, now)
    if allow_rollback:
        click.echo(
            "WARNING: --allow-rollback: an older or conflicting kit will be accepted and recorded",
            err=True,
        )
    policy = RollbackPolicy(state_dir, allow_rollback, now) if state_dir is not None else None
    return anchor, policy


def _read_root(path: Path) -> bytes:
    from k3kit._fs import check_trust_anchor, read_capped
    from k3kit.signing.trust.root import MAX_ROOT_BYTES

    check_trust_anchor(path, "root")
    return read_capped(path, MAX_ROOT_BYTES, what="root", error=InputError, code="ROOT_INVALID")


# verify's --trust: optional there, because --root is the other way to say what is trusted.
optional_trust_option = click.option(
    "--trust",
    "trust",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Publisher public key you trust (repeatable); or use --root.",
)
