"""Publisher commands: keygen, pin, build, sign, pack."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from k3kit._text import shown
from k3kit.cli._app import EXIT_CODES_HELP, cli, emit_json, handle_errors, now_utc, say
from k3kit.cli._shared import (
    KitFolder,
    Whole,
    file_progress,
    read_passphrase,
    read_token,
)
from k3kit.cli.signing import key_option, load_signer
from k3kit.formats.names import RECEIPT_NAME

if TYPE_CHECKING:  # the CLI imports library modules inside each command (fast start-up)
    from k3kit.models import WeightsLock


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(),
    help="Path prefix: writes OUT.key (private, 0600) and OUT.pub. A folder (existing, or "
    "ending in /) gets OUT/publisher.key and OUT/publisher.pub.",
)
@click.option("--passphrase-env", metavar="VAR", help="Encrypt the private key with $VAR.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def keygen(out: str, passphrase_env: str | None, as_json: bool) -> None:
    """Generate an Ed25519 signing key pair. Never overwrites an existing key."""
    from k3kit.signing.keys import key_prefix, keyid, ssh_fingerprint, write_keypair

    paths, pub = write_keypair(key_prefix(out), read_passphrase(passphrase_env))
    result = {
        "private_key": str(paths.private),
        "public_key": str(paths.public),
        "keyid": keyid(pub),
        "fingerprint": ssh_fingerprint(pub),
    }
    if as_json:
        emit_json(result)
        return
    say(f"private key  {shown(paths.private)} (mode 0600; keep it secret, never commit it)")
    say(f"public key   {shown(paths.public)}")
    say(f"key id       {result['keyid']}")
    say(f"fingerprint  {result['fingerprint']}")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("repo_arg", metavar="[ORG/NAME]", required=False)
@click.option(
    "--local",
    "local",
    type=click.Path(path_type=Path),
    help="Pin a local copy instead (plain folder or cache snapshot); needs --repo, 40-hex rev.",
)
@click.option("--repo", help="Upstream repo id, e.g. moonshotai/Kimi-K3 (or give ORG/NAME).")
@click.option(
    "--revision", required=True, help="Branch, tag or commit to pin (--local: the 40-hex commit)."
)
@click.option("--endpoint", help="Hub URL (default: $HF_ENDPOINT, else https://huggingface.co).")
@click.option("--token-env", metavar="VAR", help="Read the hub token from $VAR (gated repos).")
@click.option("--include", multiple=True, metavar="PATTERN", help="Pin only matching paths.")
@click.option("--exclude", multiple=True, metavar="PATTERN", help="Leave matching paths out.")
@click.option(
    "--hash-local",
    type=click.Path(path_type=Path),
    help="Also hash this local copy: check every sha256 against the hub, add blake3.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path),
    help="Where to write weights.lock.json.",
)
@click.option("--workers", type=Whole(1, 256), help="Hashing threads (default: cores).")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@handle_errors
def pin(
    repo_arg: str | None,
    local: Path | None,
    repo: str | None,
    revision: str,
    endpoint: str | None,
    token_env: str | None,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    hash_local: Path | None,
    output: Path,
    workers: int | None,
    force: bool,
    as_json: bool,
) -> None:
    """Pin a weight revision into a lock, from the hub's metadata or from a local copy.

    From a hub: `k3kit pin ORG/NAME --revision REV -o weights.lock.json` resolves REV to its
    commit and records every file's size and sha256 (the LFS oid the hub publishes; small files
    are fetched and hashed). No LFS byte is downloaded. From a local copy: `k3kit pin --local DIR
    --repo ORG/NAME --revision SHA40 -o weights.lock.json` hashes every file (sha256 + blake3)
    except `.git/`, which is always left out; --include/--exclude select files as for a hub. A
    cache snapshot must be the one of --repo and --revision. A file name k3kit cannot lock
    (outside [A-Za-z0-9._-], e.g. a space) is refused before hashing (exit 3); exclude it.
    """
    from k3kit.weights.pin import check_repo_id, pin_into

    if repo and repo_arg and repo != repo_arg:
        raise click.UsageError("give the repo once: ORG/NAME or --repo")
    repo_id = repo or repo_arg
    if not repo_id:
        raise click.UsageError("name the repo: k3kit pin ORG/NAME --revision REV -o LOCK")
    check_repo_id(repo_id)
    if local is not None and (endpoint or token_env or hash_local):
        raise click.UsageError(
            "--endpoint, --token-env and --hash-local pin from a hub; --local pins a local copy"
        )
    progress = file_progress("hashing")

    def make() -> WeightsLock:
        if local is not None:
            from k3kit.weights.pin import pin_local

            return pin_local(
                local,
                repo=repo_id,
                revision=revision,
                pinned_at=now_utc(),
                include=include,
                exclude=exclude,
                workers=workers,
                on_file_done=progress,
            )
        from k3kit.hub import HfHub
        from k3kit.hub.policy import hub_endpoint
        from k3kit.weights.pin import pin_hub

        token = read_token(token_env)
        return pin_hub(
            HfHub(hub_endpoint(endpoint, token, environ=os.environ), token),
            repo=repo_id,
            revision=revision,
            pinned_at=now_utc(),
            include=include,
            exclude=exclude,
            hash_local=hash_local,
            workers=workers,
            on_file_done=progress,
        )

    lock = pin_into(output, make, force=force)  # an existing output is refused before hashing
    trusted = {
        "local-hash": "hashed from the local copy",
        "hub-lfs": "LFS sha256 as declared on the hub (uploader's LFS oid), not checked locally",
        "hub-lfs+local-hash": "hub sha256 values checked against the local copy",
    }[lock.source.sha256_source]
    summary = {
        "lock": str(output),
        "repo": lock.repo,
        "commit": lock.commit,
        "requested_revision": lock.source.requested_revision,
        "endpoint": lock.source.endpoint,
        "files": lock.file_count,
        "total_bytes": lock.total_bytes,
        "sha256_source": lock.source.sha256_source,
    }
    if as_json:
        emit_json(summary)
    else:
        say(
            f"pinned {lock.repo}@{lock.commit} ({shown(lock.source.requested_revision)}): "
            f"{lock.file_count} files, {lock.total_bytes} bytes -> {shown(output)}\n"
            f"sha256: {trusted}"
        )


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("package", type=click.Path(path_type=Path))
@click.option(
    "--lock",
    "lock",
    required=True,
    type=click.Path(path_type=Path),
    help="weights.lock.json from `k3kit pin`.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path),
    help="Kit directory to create.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing kit or an empty folder (any other folder is refused).",
)
@click.option(
    "--model-config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The weights' config.json (its sha256 must be the lock's): checks the context length "
    "and records layers and KV heads for preflight's memory budget.",
)
@click.option(
    "--ssh-signer",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The publisher's public key (.pub): the kit README gets its allowed_signers line, so a "
    "buyer can check `k3kit sshsig`'s MANIFEST.json.sig with ssh-keygen alone.",
)
@click.option(
    "--principal",
    default="release@k3kit",
    show_default=True,
    help="Name in that allowed_signers line.",
)
@click.option(
    "--engine-snapshot",
    type=click.Path(path_type=Path, dir_okay=False),
    help="For an engine version k3kit ships no flag data for: the snapshot from `k3kit engine "
    "snapshot`; settings are checked against it and it is signed into the kit.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@handle_errors
def build(
    package: Path,
    lock: Path,
    output: Path,
    force: bool,
    model_config: Path | None,
    ssh_signer: Path | None,
    principal: str,
    engine_snapshot: Path | None,
    as_json: bool,
) -> None:
    """Render a deterministic kit directory from PACKAGE (package.toml) and a lock.

    Engine settings are checked against the pinned engine version's flag snapshot (exact names,
    types, choices, registries, environment variables), parallel sizes against each topology's
    GPUs, and model facts against the lock; every problem names the file, the key and a fix.
    """
    from k3kit.formats.manifest import kit_checksum
    from k3kit.publish.kit import build as build_kit
    from k3kit.publish.kit import readme_signer_line

    allowed = readme_signer_line(ssh_signer, principal) if ssh_signer is not None else None
    manifest = build_kit(
        package,
        lock,
        output,
        force=force,
        model_config=model_config,
        allowed_signers=allowed,
        engine_snapshot=engine_snapshot,
    )
    digest = kit_checksum(manifest)
    if as_json:
        emit_json({"kit": str(output), "files": len(manifest.files), "kit_sha256": digest})
    else:
        say(f"built {shown(output)}: {len(manifest.files)} files, kit checksum sha256:{digest}")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=KitFolder(buyer=False))
@key_option("The publisher's private key (.key).")
@click.option(
    "--claims",
    required=True,
    type=click.Path(path_type=Path),
    help="claims.toml: what was measured and what was not.",
)
@click.option("--passphrase-env", metavar="VAR", help="Read the key's passphrase from $VAR.")
@click.option("--force", is_flag=True, help="Replace an existing receipt.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@handle_errors
def sign(
    kit: Path, key: str, claims: Path, passphrase_env: str | None, force: bool, as_json: bool
) -> None:
    """Sign KIT's benchmark receipt (DSSE + in-toto Statement, Ed25519)."""
    from k3kit.publish.kit import sign as sign_kit
    from k3kit.signing.keys import keyid

    signer = load_signer(key, passphrase_env)
    sign_kit(kit, signer, claims, issued_at=now_utc(), force=force)
    receipt = kit / RECEIPT_NAME
    if as_json:
        emit_json({"receipt": str(receipt), "keyid": keyid(signer.public_key())})
    else:
        say(f"signed {shown(receipt)} with key {keyid(signer.public_key())[:16]}")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=KitFolder(buyer=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Archive path, or a folder for the default name "
    "(default: NAME-VERSION.kit.tar.gz from kit.json, beside the kit).",
)
@click.option(
    "--trust",
    "trust",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also check the receipt's signature with this public key (repeatable).",
)
@click.option(
    "--unsigned",
    is_flag=True,
    help="Pack a kit without a receipt, as NAME-VERSION.unsigned.kit.tar.gz (never a release).",
)
@click.option("--force", is_flag=True, help="Replace an existing archive.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@handle_errors
def pack(
    kit: Path,
    output: Path | None,
    trust: tuple[Path, ...],
    unsigned: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Write a deterministic .kit.tar.gz of a kit directory that verifies.

    Packs only a kit whose files match its MANIFEST.json and whose receipt names this kit's
    checksum and its weight lock's checksum (with --trust, the signature is checked too). A
    weights folder or any other folder is refused.
    """
    from k3kit.cli._shared import trusted_keys
    from k3kit.publish.kitpack import pack_kit

    packed = pack_kit(
        kit,
        output,
        trusted=trusted_keys(trust) if trust else None,
        unsigned=unsigned,
        force=force,
    )
    if as_json:
        emit_json(
            {
                "archive": str(packed.path),
                "sha256": packed.sha256,
                "size": packed.size,
                "signed": packed.signed,
                "checked": packed.checked,
            }
        )
        return
    if not packed.signed:
        click.echo("WARNING: UNSIGNED kit (no receipt): a test archive, not a release", err=True)
    click.echo(f"packed  {packed.path}\nsha256  {packed.sha256}\nsize    {packed.size} bytes")
    click.echo(f"checked {packed.checked}")
