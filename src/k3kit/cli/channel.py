"""The maintenance channel: ``publish --channel`` and ``channel init|timestamp`` on the
publisher's side, ``update`` on the buyer's node (python-tuf, the ``channel`` extra)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from k3kit._text import shown
from k3kit._values import is_lower_hex
from k3kit.cli._app import EXIT_CODES_HELP, cli, emit_json, err, handle_errors, outcome_decided
from k3kit.cli._shared import (
    ByteProgress,
    Real,
    Whole,
    allow_rollback_option,
    no_trust_given,
    optional_trust_option,
    print_report,
    root_option,
    state_and_cache,
    trust_source,
    trusted_keys,
)
from k3kit.cli.signing import load_signer
from k3kit.errors import UsageProblem

_F = TypeVar("_F", bound=Callable[..., Any])

_KEY_HELP = (
    "A signing key of the channel (repeatable): a key file, file:PATH or pkcs11:... Each key "
    "signs every role the channel's root names it for."
)


def _need_tuf() -> None:
    from k3kit._resources import require_extra

    require_extra("channel", "tuf")


def _signers(keys: tuple[str, ...], passphrase_env: str | None) -> list[Any]:
    return [load_signer(key, passphrase_env) for key in keys]


def _expiries(timestamp_hours: float) -> Any:
    from datetime import timedelta

    from k3kit.channel.repository import timestamp_expiries

    return timestamp_expiries(timedelta(hours=timestamp_hours))


_timestamp_option = click.option(
    "--timestamp-hours",
    type=Real(1, 24 * 31),
    default=24.0,
    show_default=True,
    help="How long the new timestamp stays valid: a buyer refuses the channel after that "
    "(a freeze is found out within this time); renew it with `k3kit channel timestamp`.",
)


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("archive", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--channel", required=True, help="Channel name, e.g. stable.")
@click.option(
    "--repo", required=True, type=click.Path(path_type=Path, file_okay=False), help="The channel."
)
@click.option("--key", "keys", multiple=True, required=True, metavar="URI", help=_KEY_HELP)
@click.option("--passphrase-env", metavar="VAR", help="Read the keys' passphrase from $VAR.")
@optional_trust_option
@_timestamp_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def publish(
    archive: Path,
    channel: str,
    repo: Path,
    keys: tuple[str, ...],
    passphrase_env: str | None,
    trust: tuple[Path, ...],
    timestamp_hours: float,
    as_json: bool,
) -> None:
    """Add ARCHIVE (a .kit.tar.gz) to CHANNEL of the TUF repository REPO.

    The archive must first verify against the publisher's own --trust keys: a kit whose
    receipt does not verify is refused (CHANNEL_KIT_UNVERIFIED). Then a target
    CHANNEL/PACKAGE/VERSION.kit.tar.gz is added with its package, version, sequence, kit sha256
    and release time, and new targets, snapshot and timestamp metadata are signed with the --key
    signers. A version already published with other bytes is refused (CHANNEL_VERSION_EXISTS).
    REPO can then be served from any static HTTP host (docs/distribution.md).
    """
    _need_tuf()
    from k3kit.channel.publish import publish_archive
    from k3kit.channel.repository import utc_now

    if not trust:
        raise no_trust_given(
            "no trusted key: give --trust KEY.pub (publish verifies the kit first)"
        )
    trusted = trusted_keys(trust)
    result = publish_archive(
        archive,
        channel,
        repo,
        trusted,
        _signers(keys, passphrase_env),
        now=utc_now(),
        expires=_expiries(timestamp_hours),
    )
    if as_json:
        emit_json(result)
    what = "published" if result["published"] else "already published (same bytes)"
    err(f"{what}: {result['target']} in {repo}")


@cli.group(epilog=EXIT_CODES_HELP)
def channel() -> None:
    """Create a channel repository and keep its timestamp fresh (docs/distribution.md)."""


def _role_key(role: str) -> Callable[[_F], _F]:
    return click.option(
        f"--{role}-key",
        f"{role}_keys",
        multiple=True,
        type=click.Path(path_type=Path, dir_okay=False),
        help=f"A public key (KEY.pub) of the {role} role (repeatable).",
    )


def _public_keys(paths: tuple[Path, ...]) -> list[Any]:
    from k3kit.signing.keys import load_public

    return [load_public(p) for p in paths]


@channel.command("init", epilog=EXIT_CODES_HELP)
@click.option("--repo", required=True, type=click.Path(path_type=Path, file_okay=False))
@_role_key("root")
@_role_key("targets")
@_role_key("snapshot")
@_role_key("timestamp")
# ASCII digits only (click's int reads `２` and `1_0` too); 1024 is past any role's keys
@click.option("--root-threshold", type=Whole(1, 1024), default=1, show_default=True, help="1-1024.")
@click.option(
    "--targets-threshold", type=Whole(1, 1024), default=1, show_default=True, help="1-1024."
)
@click.option("--key", "keys", multiple=True, metavar="URI", help="Root key(s).")
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Start from the publisher's root of trust instead (`k3kit root create`'s 1.root.json, "
    "then any later versions in order; repeatable): no --ROLE-key or --key then.",
)
@click.option("--passphrase-env", metavar="VAR", help="Read the keys' passphrase from $VAR.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def channel_init(
    repo: Path,
    root_keys: tuple[Path, ...],
    targets_keys: tuple[Path, ...],
    snapshot_keys: tuple[Path, ...],
    timestamp_keys: tuple[Path, ...],
    root_threshold: int,
    targets_threshold: int,
    keys: tuple[str, ...],
    roots: tuple[Path, ...],
    passphrase_env: str | None,
    as_json: bool,
) -> None:
    """Create REPO/metadata/1.root.json: each role's public keys (--ROLE-key KEY.pub) and
    thresholds, signed by the root keys given with --key; or, with --root, the publisher's root
    of trust made by `k3kit root create` (the same TUF format). Buyers pin this file for
    `k3kit update --root` and `verify`/`install --root` alike."""
    _need_tuf()
    given = [*root_keys, *targets_keys, *snapshot_keys, *timestamp_keys, *keys]
    if roots:
        if given:
            raise click.UsageError("--root takes the roles from the root: no --ROLE-key or --key")
        path = _adopt(repo, roots)
    else:
        options = (root_keys, targets_keys, snapshot_keys, timestamp_keys, keys)
        missing = [name for name, v in zip(_ROLES, options, strict=True) if not v]
        if missing:
            raise click.UsageError(f"give --root, or {', '.join(missing)}")
        path = _create(repo, options, (root_threshold, targets_threshold), passphrase_env)
    if as_json:
        emit_json({"root": str(path)})
    err(f"wrote {path}: give it to buyers out of band (`k3kit update --root {path}`)")


ROLES = ("root", "targets", "snapshot", "timestamp")
_ROLES = ("--root-key", "--targets-key", "--snapshot-key", "--timestamp-key", "--key")


def _adopt(repo: Path, roots: tuple[Path, ...]) -> Path:
    from k3kit.channel.repository import adopt_roots
    from k3kit.signing.trust.source import read_root_file

    return adopt_roots(repo, [(read_root_file(p), str(p)) for p in roots])


def _create(
    repo: Path,
    options: tuple[tuple[Any, ...], ...],
    thresholds: tuple[int, int],
    passphrase_env: str | None,
) -> Path:
    """A new channel root from the four roles' public keys, signed by the --key root keys."""
    from k3kit.channel.repository import init_channel, utc_now

    *role_keys, keys = options
    return init_channel(
        repo,
        {role: _public_keys(k) for role, k in zip(ROLES, role_keys, strict=True)},
        {"root": thresholds[0], "targets": thresholds[1]},
        _signers(keys, passphrase_env),
        now=utc_now(),
    )


@channel.command("timestamp", epilog=EXIT_CODES_HELP)
@click.option("--repo", required=True, type=click.Path(path_type=Path, file_okay=False))
@click.option("--key", "keys", multiple=True, required=True, metavar="URI", help=_KEY_HELP)
@click.option("--passphrase-env", metavar="VAR", help="Read the keys' passphrase from $VAR.")
@_timestamp_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def channel_timestamp(
    repo: Path,
    keys: tuple[str, ...],
    passphrase_env: str | None,
    timestamp_hours: float,
    as_json: bool,
) -> None:
    """Re-sign REPO's timestamp (run it from cron, more often than --timestamp-hours)."""
    _need_tuf()
    from k3kit.channel.repository import renew_timestamp, utc_now

    version = renew_timestamp(
        repo, _signers(keys, passphrase_env), now=utc_now(), expires=_expiries(timestamp_hours)
    )
    if as_json:
        emit_json({"timestamp_version": version})
    err(f"timestamp version {version} written to {repo}/metadata/timestamp.json")


def _keyid(value: str) -> str:
    """A key to remove, named by its public key file or by its TUF key id (64 hex digits: a
    leaked key is revoked even when its .pub file is gone)."""
    if is_lower_hex(value, 64) and not Path(value).exists():
        return value
    from k3kit.channel.tufsigner import tuf_key
    from k3kit.signing.keys import load_public

    return tuf_key(load_public(Path(value))).keyid


@channel.command("rotate", epilog=EXIT_CODES_HELP)
@click.option("--repo", required=True, type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--role",
    required=True,
    type=click.Choice(["root", "targets", "snapshot", "timestamp"]),
    help="The role whose keys or threshold change.",
)
@click.option(
    "--add-key",
    "add_keys",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="A public key (KEY.pub) the role gains (repeatable).",
)
@click.option(
    "--remove-key",
    "remove_keys",
    multiple=True,
    metavar="KEY.pub|KEYID",
    help="A key the role loses, revoked from the new root on (repeatable).",
)
@click.option("--threshold", type=Whole(1, 1024), help="The role's new threshold (1-1024).")
@click.option("--key", "keys", multiple=True, required=True, metavar="URI", help=_KEY_HELP)
@click.option("--passphrase-env", metavar="VAR", help="Read the keys' passphrase from $VAR.")
@_timestamp_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def channel_rotate(
    repo: Path,
    role: str,
    add_keys: tuple[Path, ...],
    remove_keys: tuple[str, ...],
    threshold: int | None,
    keys: tuple[str, ...],
    passphrase_env: str | None,
    timestamp_hours: float,
    as_json: bool,
) -> None:
    """Rotate or revoke ROLE's keys: write root N+1 and re-sign what the change made stale.

    The new root must be signed by the old root's threshold of root keys AND the new one's
    (TUF's rule), so --key gives the root keys, plus the keys of the roles re-signed under the
    new root: targets, snapshot and timestamp for a targets change; snapshot and timestamp for
    a snapshot change; the timestamp for a timestamp change; none for a root change. Refused,
    writing nothing: too few keys (CHANNEL_KEYS_MISSING), a role left without keys or with a
    threshold its keys cannot meet (CHANNEL_ROTATION_INVALID).
    """
    _need_tuf()
    from k3kit.channel.repository import KeyChange, rotate_keys, utc_now

    change = KeyChange(
        role,
        tuple(_public_keys(add_keys)),
        tuple(_keyid(value) for value in remove_keys),
        threshold,
    )
    done = rotate_keys(
        repo,
        change,
        _signers(keys, passphrase_env),
        now=utc_now(),
        expires=_expiries(timestamp_hours),
    )
    if as_json:
        emit_json(
            {
                "root": str(done.root),
                "version": done.version,
                "role": role,
                "keyids": list(done.keyids),
                "threshold": done.threshold,
                "resigned": list(done.resigned),
            }
        )
    err(
        f"wrote {done.root}: {role} now has {len(done.keyids)} key(s), threshold "
        f"{done.threshold}; re-signed: {', '.join(done.resigned) or 'nothing else'}"
    )


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--channel", "channel_name", required=True, help="Channel name, e.g. stable.")
@click.option("--from", "url", required=True, help="Base URL the channel is served from.")
@click.option(
    "--from-registry",
    "registry",
    help="oci://HOST/REPO: download the chosen kit from this registry, by the sha256 the "
    "channel's signed targets give (never by tag); the metadata still comes from --from.",
)
@click.option(
    "--channel-root",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The channel's TUF root (1.root.json), pinned, when it is not the --root the kits are "
    "verified with (default: --root; the one root serves both).",
)
@click.option(
    "--into",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder that holds installed kits; the kit goes to INTO/NAME-VERSION/.",
)
@optional_trust_option
@root_option
@allow_rollback_option
@click.option("--package", help="Package to update (default: the channel's only one).")
@click.option("--version", "version", help="Install this version (default: the newest in term).")
@click.option("--buyer-receipt", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--licence", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def update(
    channel_name: str,
    url: str,
    registry: str | None,
    channel_root: Path | None,
    into: Path,
    trust: tuple[Path, ...],
    root_file: Path | None,
    allow_rollback: bool,
    package: str | None,
    version: str | None,
    buyer_receipt: Path | None,
    licence: Path | None,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Install the newest release of a channel this buyer is entitled to.

    python-tuf's updater reads the channel from --from, starting from the pinned --root (or
    --channel-root, when the channel's root is not the one the kits are verified with),
    and refuses a frozen channel (CHANNEL_FROZEN), a rollback (CHANNEL_ROLLBACK), metadata mixed
    from two views (CHANNEL_INCONSISTENT) and metadata its root's keys did not sign
    (CHANNEL_UNTRUSTED). With --buyer-receipt and --licence, releases after the entitlement's
    term are not installed (CHANNEL_OUT_OF_TERM when nothing in term is left); without them the
    term is not checked and the newest release is installed. The kit is then verified and
    installed exactly as `k3kit install` does (--trust or --root), into INTO/NAME-VERSION/.
    With --from-registry oci://HOST/REPO the kit's bytes come from that registry instead, asked
    for by the sha256 the signed targets give and checked against it (docs/distribution.md).
    """
    _need_tuf()
    from k3kit.channel.client import Request
    from k3kit.channel.client import update as run_update
    from k3kit.channel.term import term_for

    state, _cache = state_and_cache(state_dir)
    if state is None:
        raise UsageProblem(
            "update keeps the channel's metadata in a state folder: give --state-dir"
        )
    channel_root = channel_root or root_file
    if channel_root is None:
        raise UsageProblem(
            "update needs the publisher's pinned root: give --root 1.root.json (it pins the "
            "channel and verifies the kit)"
        )
    trusted, rollback = trust_source(trust, root_file, state, allow_rollback)
    term = term_for(buyer_receipt, licence, trusted)
    if term is None:
        err("term     not checked (no --buyer-receipt/--licence): the newest release is taken")
    progress = ByteProgress("downloading") if sys.stderr.isatty() else None
    request = Request(
        url, channel_name, channel_root, into, state, package, version, term, registry
    )
    try:
        done = run_update(request, trusted, rollback=rollback, on_progress=progress)
    finally:
        if progress is not None:
            progress.finish()
    outcome_decided()
    _report(done, as_json)


def _report(done: Any, as_json: bool) -> None:
    installed = done.installed
    result = {
        **installed.report.as_json(),
        "installed": str(installed.path),
        "name": installed.name,
        "version": installed.version,
        "already_installed": installed.already_installed,
        "release": done.entry.as_json(),
        "newest_in_channel": done.newest.as_json(),
        "out_of_term": [e.as_json() for e in done.skipped_out_of_term],
        "term": done.term.as_json() if done.term is not None else None,
    }
    if as_json:
        emit_json(result)
    print_report(installed.report, quiet=True)
    for skipped in done.skipped_out_of_term:
        err(f"skipped  {skipped.version}: released {skipped.released_at}, after the term")
    outcome = "already installed" if installed.already_installed else "installed read-only"
    err(
        f"{outcome}: {installed.name} {installed.version} (kit sha256 {installed.kit_sha256}) "
        f"from {shown(installed.report.kit)} into {installed.path}"
    )
    if not as_json:
        click.echo(str(installed.path))
