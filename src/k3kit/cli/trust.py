"""The ``k3kit root …`` verbs: create, rotate, revoke and sign roots of trust (docs/trust.md),
which are TUF root metadata (k3kit's release role is TUF's targets role).

``root create`` writes version 1; ``root add-key`` / ``revoke`` / ``rotate`` / ``floor`` each
write version N+1 from N, signed by the ``--sign-key`` keys given; ``root sign`` adds one more
signature (root keys live on separate machines); ``root attach`` puts the chain into a kit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from k3kit._values import ascii_int
from k3kit.cli._app import EXIT_CODES_HELP, cli, emit_json, err, handle_errors
from k3kit.cli._shared import (
    KitFolder,
    Whole,
    now_for_verification,
)
from k3kit.cli.signing import key_option, load_signer

_TS = "YYYY-MM-DDTHH:MM:SSZ"
# k3kit.signing.trust.edit.ROLE_NAMES' keys (release is TUF's targets role); spelled here so
# `--help` does not import python-tuf.
_ROLES = ["root", "release", "snapshot", "timestamp"]


def _signers(paths: tuple[str, ...], passphrase_env: str | None) -> list[Any]:
    if not paths:
        raise click.UsageError("give at least one --sign-key")
    return [load_signer(p, passphrase_env) for p in paths]


def _pubs(paths: tuple[Path, ...]) -> list[Any]:
    from k3kit.signing.keys import load_public

    return [load_public(p) for p in paths]


def _read(path: Path) -> bytes:
    from k3kit.signing.trust.source import read_root_file

    return read_root_file(path)


def _write_root(
    body: Any,
    out: Path,
    sign_keys: tuple[str, ...],
    passphrase_env: str | None,
    force: bool,
    as_json: bool,
) -> None:
    from k3kit._fs import atomic_write
    from k3kit._values import format_timestamp
    from k3kit.signing.trust.edit import sign_root

    signers = _signers(sign_keys, passphrase_env)
    atomic_write(out, sign_root(body, signers), force=force)
    expires = format_timestamp(body.expires)
    summary = {
        "root": str(out),
        "version": body.version,
        "expires": expires,
        "signatures": len(signers),
    }
    if as_json:
        emit_json(summary)
    else:
        click.echo(
            f"wrote root version {body.version} to {out} ({len(signers)} signature(s)); "
            f"expires {expires}"
        )


def _edit_command(name: str, help_text: str) -> Callable[[Callable[..., Any]], Any]:
    """Options every N -> N+1 edit shares: PREV, -o, --expires, --sign-key, --force, --json."""

    def wrap(func: Callable[..., Any]) -> Any:
        for deco in reversed(
            [
                root.command(name, help=help_text, epilog=EXIT_CODES_HELP),
                click.argument("prev", type=click.Path(path_type=Path, dir_okay=False)),
                click.option(
                    "-o",
                    "--output",
                    required=True,
                    type=click.Path(path_type=Path),
                    help="Where to write root version N+1.",
                ),
                click.option(
                    "--expires", required=True, metavar=_TS, help="Expiry of the new root."
                ),
                click.option(
                    "--sign-key",
                    "sign_keys",
                    multiple=True,
                    metavar="URI",
                    help="Private key (file or pkcs11: URI) to sign with "
                    "(repeatable; the root thresholds of N and N+1 must both be met).",
                ),
                click.option("--passphrase-env", metavar="VAR", help="Passphrase of the keys."),
                click.option("--force", is_flag=True, help="Replace an existing output."),
                click.option("--json", "as_json", is_flag=True, help="Print a JSON summary."),
                handle_errors,
            ]
        ):
            func = deco(func)
        return func

    return wrap


@cli.group(epilog=EXIT_CODES_HELP)
def root() -> None:
    """Create, rotate, revoke and sign roots of trust (docs/trust.md)."""


@root.command("create", epilog=EXIT_CODES_HELP)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path),
    help="Where to write root version 1.",
)
@click.option(
    "--root-key",
    "root_keys",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="Public key of the root role (repeatable).",
)
@click.option("--root-threshold", type=Whole(1, 64), default=1, show_default=True)
@click.option(
    "--release-key",
    "release_keys",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="Public key that signs receipts: TUF's targets role (repeatable).",
)
@click.option("--release-threshold", type=Whole(1, 64), default=1, show_default=True)
@click.option(
    "--snapshot-key",
    "snapshot_keys",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Public key of TUF's snapshot role (repeatable; default: the release keys).",
)
@click.option(
    "--timestamp-key",
    "timestamp_keys",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Public key of TUF's timestamp role (repeatable; default: the release keys). A channel "
    "wants an online key of its own here.",
)
@click.option("--expires", required=True, metavar=_TS)
@click.option(
    "--sign-key",
    "sign_keys",
    multiple=True,
    metavar="URI",
    help="Private root key(s), file or pkcs11: URI, to sign with (repeatable).",
)
@click.option("--passphrase-env", metavar="VAR", help="Passphrase of the keys.")
@click.option("--force", is_flag=True, help="Replace an existing output.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@handle_errors
def root_create(
    output: Path,
    root_keys: tuple[Path, ...],
    root_threshold: int,
    release_keys: tuple[Path, ...],
    release_threshold: int,
    snapshot_keys: tuple[Path, ...],
    timestamp_keys: tuple[Path, ...],
    expires: str,
    sign_keys: tuple[str, ...],
    passphrase_env: str | None,
    force: bool,
    as_json: bool,
) -> None:
    """Write TUF root version 1: the root, release (targets), snapshot and timestamp roles."""
    from k3kit.signing.trust.edit import create

    body = create(
        root_keys=_pubs(root_keys),
        root_threshold=root_threshold,
        release_keys=_pubs(release_keys),
        release_threshold=release_threshold,
        expires=expires,
        snapshot_keys=_pubs(snapshot_keys),
        timestamp_keys=_pubs(timestamp_keys),
    )
    _write_root(body, output, sign_keys, passphrase_env, force, as_json)
    if not timestamp_keys:
        err(
            "note: the timestamp role uses the release key(s); a channel renews its timestamp "
            "every day from an online machine, so give that machine a key of its own "
            "(--timestamp-key) and keep the release key offline"
        )


@_edit_command("add-key", "Write N+1 with a key added to a role (release keys may get a window).")
@click.option("--role", type=click.Choice(_ROLES), default="release", show_default=True)
@click.option("--key", "key", required=True, type=click.Path(path_type=Path), help="Public key.")
@click.option("--not-before", metavar=_TS, help="First issued_at this key may sign.")
@click.option("--not-after", metavar=_TS, help="Last issued_at this key may sign.")
@click.option("--threshold", type=Whole(1, 64), help="New threshold of the role.")
def root_add_key(
    prev: Path,
    output: Path,
    expires: str,
    sign_keys: tuple[str, ...],
    passphrase_env: str | None,
    force: bool,
    as_json: bool,
    role: str,
    key: Path,
    not_before: str | None,
    not_after: str | None,
    threshold: int | None,
) -> None:
    from k3kit.signing.trust.edit import add_key, read_root

    body = add_key(
        read_root(_read(prev), source=str(prev)),
        role,
        _pubs((key,))[0],
        expires=expires,
        not_before=not_before,
        not_after=not_after,
        threshold=threshold,
    )
    _write_root(body, output, sign_keys, passphrase_env, force, as_json)


@_edit_command("revoke", "Write N+1 with a key revoked: removed from every role, never counted.")
@click.option(
    "--key", "key", required=True, type=click.Path(path_type=Path), help="Public key to revoke."
)
@click.option("--reason", required=True, help="Why (e.g. compromise, lost).")
@click.option("--since", metavar=_TS, help="When (default: now).")
def root_revoke(
    prev: Path,
    output: Path,
    expires: str,
    sign_keys: tuple[str, ...],
    passphrase_env: str | None,
    force: bool,
    as_json: bool,
    key: Path,
    reason: str,
    since: str | None,
) -> None:
    from k3kit.signing.keys import keyid
    from k3kit.signing.trust.edit import read_root, revoke

    body = revoke(
        read_root(_read(prev), source=str(prev)),
        keyid(_pubs((key,))[0]),
        reason=reason,
        since=since or now_for_verification(),
        expires=expires,
    )
    _write_root(body, output, sign_keys, passphrase_env, force, as_json)


@_edit_command("rotate", "Write N+1 whose role is exactly the given keys and threshold.")
@click.option("--role", type=click.Choice(_ROLES), required=True)
@click.option(
    "--key",
    "keys",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="Public key of the role (repeatable).",
)
@click.option("--threshold", type=Whole(1, 64), required=True)
def root_rotate(
    prev: Path,
    output: Path,
    expires: str,
    sign_keys: tuple[str, ...],
    passphrase_env: str | None,
    force: bool,
    as_json: bool,
    role: str,
    keys: tuple[Path, ...],
    threshold: int,
) -> None:
    from k3kit.signing.trust.edit import read_root, rotate

    body = rotate(
        read_root(_read(prev), source=str(prev)), role, _pubs(keys), threshold, expires=expires
    )
    _write_root(body, output, sign_keys, passphrase_env, force, as_json)


@_edit_command("floor", "Write N+1 with a minimum sequence per package/channel.")
@click.option(
    "--min-sequence",
    "floors",
    multiple=True,
    required=True,
    metavar="PACKAGE/CHANNEL=N",
    help="Refuse kits below N (repeatable).",
)
def root_floor(
    prev: Path,
    output: Path,
    expires: str,
    sign_keys: tuple[str, ...],
    passphrase_env: str | None,
    force: bool,
    as_json: bool,
    floors: tuple[str, ...],
) -> None:
    from k3kit.signing.trust.edit import read_root, set_floor

    parsed: dict[str, int] = {}
    for item in floors:
        key, _, value = item.partition("=")
        try:  # the one ASCII integer parser: "²" passed isdigit() and then crashed int()
            parsed[key] = ascii_int(value, lo=0, hi=2**53 - 1)
        except ValueError:
            raise click.UsageError(f"--min-sequence {item!r}: expected PACKAGE/CHANNEL=N") from None
    body = set_floor(read_root(_read(prev), source=str(prev)), parsed, expires=expires)
    _write_root(body, output, sign_keys, passphrase_env, force, as_json)


@root.command("sign", epilog=EXIT_CODES_HELP)
@click.argument("root_file", type=click.Path(path_type=Path, dir_okay=False))
@key_option("A root key's private key.")
@click.option("--passphrase-env", metavar="VAR", help="Read the key's passphrase from $VAR.")
@handle_errors
def root_sign(root_file: Path, key: str, passphrase_env: str | None) -> None:
    """Add one TUF signature to ROOT_FILE in place (its signed part is unchanged)."""
    from k3kit._fs import atomic_write
    from k3kit.signing.trust.edit import add_root_signature

    data = add_root_signature(
        _read(root_file), load_signer(key, passphrase_env), source=str(root_file)
    )
    atomic_write(root_file, data, force=True)
    click.echo(f"added a signature to {root_file}")


def _holds(path: Path, data: bytes) -> bool:
    return path.is_file() and not path.is_symlink() and path.read_bytes() == data


@root.command("attach", epilog=EXIT_CODES_HELP)
@click.argument("kit", type=KitFolder(buyer=False))
@click.argument("roots", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace roots the kit already carries.")
@handle_errors
def root_attach(kit: Path, roots: tuple[Path, ...], force: bool) -> None:
    """Copy a chain of roots (consecutive versions, oldest first) into KIT/root/."""
    from k3kit._fs import atomic_write, refuse_existing
    from k3kit.signing.trust.root import ROOT_DIR, VerifiedRoot, verify_root

    chain: list[VerifiedRoot] = []
    for path in roots:  # the whole chain verifies before anything is written
        chain.append(
            verify_root(_read(path), trusted=chain[-1] if chain else None, source=str(path))
        )
    writes = [(kit / ROOT_DIR / f"{e.version}.root.json", e.data) for e in chain]
    writes = [(dest, data) for dest, data in writes if not _holds(dest, data)]
    for dest, _ in writes:  # every refusal before the first write: no half-attached chain
        refuse_existing(dest, force=force)
    for dest, data in writes:
        atomic_write(dest, data, force=force)
    click.echo(f"{kit}/{ROOT_DIR}: versions up to {chain[-1].version}")
