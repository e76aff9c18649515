"""Signing helpers and verbs beside the root group: passphrases (env var or prompt), receipt
co-signing and SSHSIG for stock-tool verification. The verifying verbs' trust options
(``--root``, ``--allow-rollback``) live in :mod:`k3kit.cli._shared`."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from k3kit.cli._app import EXIT_CODES_HELP, cli, handle_errors
from k3kit.cli._shared import KitFolder
from k3kit.errors import InputError, VerificationError
from k3kit.formats.names import MANIFEST_SIG_NAME

_F = TypeVar("_F", bound=Callable[..., Any])


def key_option(help_text: str) -> Callable[[_F], _F]:
    """``--key URI``, the same on every command that signs: a key file path, ``file:PATH`` or
    ``pkcs11:...`` (taken as text, never normalised as a path: a URI is not one)."""
    return click.option(
        "--key",
        "key",
        required=True,
        metavar="URI",
        help=f"{help_text} A key file, file:PATH, or pkcs11:token=...;object=... (HSM).",
    )


def cli_secrets(passphrase_env: str | None) -> Callable[[str, str], bytes | None]:
    """The secrets callback of the CLI: $VAR when --passphrase-env is given (checked now, so an
    empty variable is named even for a key that would need none), else a prompt when stdin is
    a terminal, else nothing (the scheme's own error then names the fix)."""
    preset = None
    if passphrase_env is not None:
        value = os.environ.get(passphrase_env)
        if not value:
            raise InputError(
                f"--passphrase-env {passphrase_env} is not set or empty", code="PASSPHRASE_MISSING"
            )
        preset = value.encode()

    def secrets(name: str, what: str) -> bytes | None:
        if preset is not None:
            return preset
        if not sys.stdin.isatty():
            return None
        return str(click.prompt(f"{name} for {what}", hide_input=True, err=True)).encode()

    return secrets


def load_signer(key: str | Path, passphrase_env: str | None) -> Any:
    """The signer ``--key`` names (a path or a URI, see :mod:`k3kit.signing.schemes`)."""
    from k3kit.signing.schemes import signer_from_uri

    return signer_from_uri(str(key), cli_secrets(passphrase_env))


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=KitFolder(buyer=False))
@key_option("The co-signer's private key.")
@click.option("--passphrase-env", metavar="VAR", help="Read the key's passphrase from $VAR.")
@handle_errors
def countersign(kit: Path, key: str, passphrase_env: str | None) -> None:
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
@click.argument("kit", type=KitFolder(buyer=False))
@key_option("The publisher's private key.")
@click.option(
    "--principal",
    default="release@k3kit",
    show_default=True,
    help="Name in the allowed_signers line.",
)
@click.option("--passphrase-env", metavar="VAR", help="Read the key's passphrase from $VAR.")
@click.option("--force", is_flag=True, help="Replace an existing MANIFEST.json.sig.")
@handle_errors
def sshsig(kit: Path, key: str, principal: str, passphrase_env: str | None, force: bool) -> None:
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
    atomic_write(kit / MANIFEST_SIG_NAME, ssh.sign(manifest, signer).encode(), force=force)
    click.echo(
        f"wrote {kit / MANIFEST_SIG_NAME}\nallowed_signers line (give it to buyers out of "
        f"band):\n{ssh.allowed_signers_line(signer.public_key(), principal)}"
    )
