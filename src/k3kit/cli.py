"""The ``k3kit`` command line: the only module that prints, reads argv/env, and exits.

Exit codes (DESIGN.md): 0 all checks hold; 1 something checked does not hold; 2 usage error;
3 bad input; 4 environment (I/O, network, key file); 70 internal error (a bug; traceback only with
``--debug``). With ``--json`` a command prints exactly one JSON object on stdout and its human
status on stderr.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from k3kit import __version__
from k3kit.errors import ExitCode, InputError, K3kitError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 a check failed (do not deploy); 2 usage; 3 bad input; "
    "4 environment (I/O, network, key file); 70 internal error."
)


def _now() -> str:
    """UTC time for pins and receipts; SOURCE_DATE_EPOCH makes reproducible builds reproducible."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    t = int(epoch) if epoch and epoch.isdigit() else int(time.time())
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _err(text: str) -> None:
    click.echo(text, err=True)


def _emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=True))


def handle_errors(func: F) -> F:
    """Map K3kitError to its exit code with a one-line message; anything else is a bug (70)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        try:
            return func(*args, **kwargs)
        except K3kitError as exc:
            _err(f"error: {exc.message}")
            if exc.hint:
                _err(f"hint: {exc.hint}")
            ctx.exit(int(exc.exit_code))
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:
            if ctx.find_root().params.get("debug"):
                traceback.print_exc()
            _err(
                f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the "
                "traceback; please report it)"
            )
            ctx.exit(int(ExitCode.INTERNAL))

    return wrapper  # type: ignore[return-value]


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_CODES_HELP,
)
@click.version_option(__version__, prog_name="k3kit")
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
def cli(debug: bool) -> None:
    """Pin, build, sign, verify and audit deployment kits for frontier LLMs.

    Publisher: keygen, pin, build, sign, pack. Buyer: pull, verify. Auditor: audit.
    Everyone: demo.
    """


def _passphrase(env_var: str | None) -> bytes | None:
    if env_var is None:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise InputError(
            f"--passphrase-env {env_var}: the variable is not set or empty",
            code="PASSPHRASE_MISSING",
        )
    return value.encode()


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="Path prefix: writes OUT.key (private, 0600) and OUT.pub.",
)
@click.option("--passphrase-env", metavar="VAR", help="Encrypt the private key with $VAR.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def keygen(out: Path, passphrase_env: str | None, as_json: bool) -> None:
    """Generate an Ed25519 signing key pair. Never overwrites an existing key."""
    from k3kit.keys import keyid, ssh_fingerprint, write_keypair

    paths, pub = write_keypair(out, _passphrase(passphrase_env))
    result = {
        "private_key": str(paths.private),
        "public_key": str(paths.public),
        "keyid": keyid(pub),
        "fingerprint": ssh_fingerprint(pub),
    }
    if as_json:
        _emit_json(result)
        return
    click.echo(f"private key  {paths.private} (mode 0600; keep it secret, never commit it)")
    click.echo(f"public key   {paths.public}")
    click.echo(f"key id       {result['keyid']}")
    click.echo(f"fingerprint  {result['fingerprint']}")


def _progress(label: str, total: int | None = None) -> Callable[[str, int], None] | None:
    """Per-file progress on stderr when it is a terminal; silent otherwise."""
    if not sys.stderr.isatty():
        return None
    state = {"bytes": 0, "files": 0, "start": time.monotonic()}

    def tick(_rel: str, size: int) -> None:
        state["bytes"] += size
        state["files"] += 1
        rate = state["bytes"] / max(time.monotonic() - state["start"], 1e-6) / 1e9
        of = f"/{total / 1e9:.2f}" if total else ""
        sys.stderr.write(
            f"\r{label}: {state['files']} files, {state['bytes'] / 1e9:.2f}{of} GB, "
            f"{rate:.2f} GB/s "
        )
        sys.stderr.flush()

    return tick


_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def _endpoint(value: str | None, fallback: str | None = None) -> str:
    """--endpoint, else the given fallback, else $HF_ENDPOINT, else the public Hub."""
    from k3kit.hub import DEFAULT_ENDPOINT
    from k3kit.models.lock import ENDPOINT_PATTERN

    chosen = (value or fallback or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    if not re.match(ENDPOINT_PATTERN, chosen):
        raise InputError(
            "--endpoint must be an http(s) URL without credentials, query or fragment",
            code="BAD_ENDPOINT",
        )
    return chosen


def _trusted_keys(paths: tuple[Path, ...]) -> list[Any]:
    """Load the --trust keys; the same key given twice is a caller mistake (exit 3)."""
    from k3kit.keys import keyid, load_public

    keys = [load_public(p) for p in paths]
    ids = [keyid(k) for k in keys]
    if len(set(ids)) != len(ids):
        raise InputError("the same public key was given twice with --trust",
                         code="TRUST_DUPLICATE_KEY")
    return keys


def _refuse_token_over_plain_http(url: str) -> None:
    """A bearer token in clear text is readable by anyone on the path; loopback is the exception."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme == "http" and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise InputError(f"refusing to send a hub token over plain http to {url}",
                         code="TOKEN_OVER_HTTP", hint="use an https endpoint")


def _token(env_var: str | None) -> str | None:
    """The hub token from $VAR; its value is handed to the hub client and never printed."""
    if env_var is None:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise InputError(
            f"--token-env {env_var}: the variable is not set or empty", code="TOKEN_ENV_EMPTY"
        )
    return value


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
@click.option("--workers", type=click.IntRange(1, 256), help="Hashing threads (default: cores).")
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
    --repo ORG/NAME --revision SHA40 -o weights.lock.json` hashes every file (sha256 + blake3).
    """
    from k3kit._canonical import model_bytes
    from k3kit._fs import atomic_write

    if repo and repo_arg and repo != repo_arg:
        raise click.UsageError("give the repo once: ORG/NAME or --repo")
    repo_id = repo or repo_arg
    if not repo_id:
        raise click.UsageError("name the repo: k3kit pin ORG/NAME --revision REV -o LOCK")
    if not _REPO_ID.match(repo_id):
        raise InputError(f"{repo_id!r} is not a repo id of the form ORG/NAME", code="BAD_REPO_ID")
    if local is not None and (endpoint or token_env or include or exclude or hash_local):
        raise click.UsageError(
            "--endpoint, --token-env, --include, --exclude and --hash-local pin from a hub; "
            "--local pins a local copy"
        )
    if output.exists() and not force:
        raise InputError(f"{output} exists", code="OUTPUT_EXISTS", hint="pass --force to replace")
    progress = _progress("hashing")
    if local is not None:
        from k3kit.pin import pin_local

        lock = pin_local(
            local, repo=repo_id, revision=revision, pinned_at=_now(), workers=workers,
            on_file_done=progress,
        )
    else:
        from k3kit.hub import HfHub
        from k3kit.pin import pin_hub

        url = _endpoint(endpoint)
        token = _token(token_env)
        if token is not None:
            _refuse_token_over_plain_http(url)
        client = HfHub(url, token)
        lock = pin_hub(
            client, repo=repo_id, revision=revision, pinned_at=_now(), include=include,
            exclude=exclude, hash_local=hash_local, workers=workers, on_file_done=progress,
        )
    atomic_write(output, model_bytes(lock), force=force)
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
        _emit_json(summary)
    else:
        click.echo(
            f"pinned {lock.repo}@{lock.commit} ({lock.source.requested_revision}): "
            f"{lock.file_count} files, {lock.total_bytes} bytes -> {output}\nsha256: {trusted}"
        )


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path(path_type=Path))
@click.option(
    "--dir",
    "dest",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Where the weights go: the cache root (--layout cache) or the folder (plain).",
)
@click.option(
    "--layout",
    type=click.Choice(["cache", "plain"]),
    default="cache",
    show_default=True,
    help="Hugging Face cache layout (models--org--name/snapshots/<commit>/) or a plain folder.",
)
@click.option("--endpoint", help="Hub URL (default: the lock's endpoint).")
@click.option("--token-env", metavar="VAR", help="Read the hub token from $VAR (gated repos).")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=8,
    show_default=True,
    help="Parallel downloads.",
)
@click.option(
    "--trust",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Verify the kit with this publisher key before pulling (repeatable; optional).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def pull(
    kit: Path,
    dest: Path,
    layout: str,
    endpoint: str | None,
    token_env: str | None,
    workers: int,
    trust: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Download KIT's pinned weights from the hub, hashing each file as it lands.

    KIT is a kit directory, a .kit.tar.gz, or a weights.lock.json. Exactly the lock's files at
    the lock's commit are fetched; a file with wrong bytes is quarantined beside DIR (in
    DIR.k3kit-quarantine/) and fetched once more. A rerun resumes. Exit 0 only when every file
    matches the lock (the same verdict as `k3kit verify --weights DIR`); 1 wrong bytes or other
    files in DIR; 4 hub, network or auth trouble.
    """
    from k3kit.hub import HfHub
    from k3kit.pull import pull as pull_weights
    from k3kit.pull import read_kit_lock

    kit_lock = read_kit_lock(kit, _trusted_keys(trust))
    lock = kit_lock.lock
    # The lock's endpoint is only a default when the kit verified: an unverified lock must never
    # choose where this machine connects, let alone where its hub token is sent.
    url = _endpoint(endpoint, lock.source.endpoint if kit_lock.verified else None)
    token = _token(token_env)
    if token is not None:
        _refuse_token_over_plain_http(url)
    _err(f"kit      {kit} ({kit_lock.detail})")
    _err(f"weights  {lock.repo}@{lock.commit}: {lock.file_count} files, {lock.total_bytes} bytes "
         f"from {url}")
    report = pull_weights(
        lock, dest, downloader=HfHub(url, token),
        layout="plain" if layout == "plain" else "cache",
        workers=workers, on_file_done=_progress("pulling", lock.total_bytes),
        on_event=lambda text: _err(f"note     {text}"),
    )
    result = {
        "ok": report.ok,
        "exit_code": report.exit_code,
        "kit": {"path": str(kit), "verified": kit_lock.verified, "detail": kit_lock.detail},
        "repo": lock.repo,
        "commit": lock.commit,
        "endpoint": url,
        "layout": layout,
        "dir": str(dest),
        "weights_root": str(report.root),
        "files": lock.file_count,
        "total_bytes": lock.total_bytes,
        "files_downloaded": report.files_downloaded,
        "bytes_downloaded": report.bytes_downloaded,
        "files_in_place": report.files_in_place,
        "bytes_hashed": report.bytes_hashed,
        "quarantined": [dataclasses.asdict(q) for q in report.quarantined],
        "problems": [dataclasses.asdict(p) for p in report.problems],
        "errors": [dataclasses.asdict(e) for e in report.errors],
    }
    if as_json:
        _emit_json(result)
    for p in report.problems[:50]:
        _err(f"FAIL     {p.code:<26} {p.path}: {p.detail}")
    for e in report.errors[:50]:
        _err(f"ERROR    {e.code:<26} {e.path}: {e.message}")
        if e.hint:
            _err(f"hint     {e.hint}")
    _err(
        f"pulled   {report.files_downloaded} files ({report.bytes_downloaded} bytes) downloaded, "
        f"{report.files_in_place} already in place, {len(report.quarantined)} quarantined"
    )
    verdict = {0: "VERIFIED", 1: "NOT VERIFIED - do not deploy", 4: "INCOMPLETE - rerun to resume"}
    _err(f"verdict: {verdict[report.exit_code]} ({report.root})")
    sys.exit(report.exit_code)


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
@click.option("--force", is_flag=True, help="Replace an existing kit directory.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@handle_errors
def build(package: Path, lock: Path, output: Path, force: bool, as_json: bool) -> None:
    """Render a deterministic kit directory from PACKAGE (package.toml) and a lock."""
    from k3kit.kit import build as build_kit
    from k3kit.manifest import kit_checksum

    manifest = build_kit(package, lock, output, force=force)
    digest = kit_checksum(manifest)
    if as_json:
        _emit_json({"kit": str(output), "files": len(manifest.files), "kit_sha256": digest})
    else:
        click.echo(f"built {output}: {len(manifest.files)} files, kit checksum sha256:{digest}")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path(path_type=Path))
@click.option("--key", required=True, type=click.Path(path_type=Path), help="Private key (.key).")
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
    kit: Path, key: Path, claims: Path, passphrase_env: str | None, force: bool, as_json: bool
) -> None:
    """Sign KIT's benchmark receipt (DSSE + in-toto Statement, Ed25519)."""
    from k3kit.keys import keyid, load_private
    from k3kit.kit import sign as sign_kit

    private = load_private(key, _passphrase(passphrase_env))
    sign_kit(kit, private, claims, issued_at=_now(), force=force)
    receipt = kit / "receipt.dsse.json"
    if as_json:
        _emit_json({"receipt": str(receipt), "keyid": keyid(private.public_key())})
    else:
        click.echo(f"signed {receipt} with key {keyid(private.public_key())[:16]}")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Archive path (default: NAME-VERSION.kit.tar.gz beside the kit).",
)
@click.option("--force", is_flag=True, help="Replace an existing archive.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@handle_errors
def pack(kit: Path, output: Path | None, force: bool, as_json: bool) -> None:
    """Write a deterministic .kit.tar.gz of a signed kit directory."""
    from k3kit.archive import pack as pack_kit

    out = output or kit.resolve().parent / f"{kit.resolve().name}.kit.tar.gz"
    digest, size = pack_kit(kit, out, force=force)
    if as_json:
        _emit_json({"archive": str(out), "sha256": digest, "size": size})
    else:
        click.echo(f"packed {out}\nsha256 {digest}\nsize   {size} bytes")


def print_report(report: Any, *, quiet: bool = False) -> None:
    """Human rendering of a verify report: one line per check, problems indented, the verdict.

    ``quiet`` keeps only the failed checks, notes and the verdict.
    """
    marks = {"passed": "ok  ", "failed": "FAIL", "not checked": "--  "}
    for i, check in enumerate(report.checks, start=1):
        if quiet and check.status != "failed":
            continue
        code = f" [{check.code}]" if check.code and check.status == "failed" else ""
        _err(f"{i}. {marks[check.status]} {check.title}{code}: {check.detail}")
        for problem in check.problems[:50]:
            _err(f"       {problem['code']:<26} {problem['path']}: {problem['detail']}")
        if len(check.problems) > 50:
            _err(f"       … and {len(check.problems) - 50} more (use --json for all)")
    note = report.facts.get("weights", {}).get("cache", {}).get("note")
    if note:
        _err(f"note: {note}")
    weights = next((c for c in report.checks if c.id == "weights"), None)
    unchecked = weights is not None and weights.status != "passed"
    scope = " (kit and receipt; weights not checked)" if unchecked else ""
    _err("verdict: " + (f"VERIFIED{scope}" if report.ok else "NOT VERIFIED - do not deploy"))


def default_state_dir() -> Path | None:
    """Where k3kit keeps its verification cache: $XDG_CACHE_HOME/k3kit, else ~/.cache/k3kit."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "k3kit"
    try:
        return Path.home() / ".cache" / "k3kit"
    except RuntimeError:  # no home directory: run without a cache rather than guess
        return None


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


class ByteProgress:
    """One self-rewriting stderr line: bytes done of total, rate, ETA. Only used on a terminal."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.start = time.monotonic()
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        elapsed = time.monotonic() - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        if rate > 0 and total > done:
            left = int((total - done) / rate)
            eta = f"{left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}"
        else:
            eta = "0:00:00" if done >= total else "-"
        pct = 100.0 * done / total if total else 100.0
        sys.stderr.write(
            f"\r{self.label}: {_size(done)} of {_size(total)} ({pct:.0f}%), "
            f"{_size(rate)}/s, ETA {eta}\x1b[K"
        )
        sys.stderr.flush()
        self.shown = True

    def finish(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("kit", type=click.Path(path_type=Path))
@click.option(
    "--trust",
    "trust",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="Publisher public key you trust (repeatable).",
)
@click.option(
    "--weights",
    type=click.Path(path_type=Path),
    help="Weights folder: plain, cache snapshot, or cache root.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    help="Hashing threads (default: the cores this process may use).",
)
@click.option(
    "--algorithm",
    type=click.Choice(["sha256", "blake3"]),
    help="Force a digest (default: blake3 when the lock has it; sha256 is the hub's).",
)
@click.option(
    "--all-errors", is_flag=True, help="Hash every file instead of stopping at the first mismatch."
)
@click.option(
    "--full",
    is_flag=True,
    help="Re-read and re-hash every file, ignoring the verification cache (then refresh it).",
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Verification cache folder (default: $XDG_CACHE_HOME/k3kit or ~/.cache/k3kit).",
)
@click.option(
    "-q", "--quiet", is_flag=True, help="No progress; print only failures and the verdict."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def verify(
    kit: Path,
    trust: tuple[Path, ...],
    weights: Path | None,
    workers: int | None,
    algorithm: str | None,
    all_errors: bool,
    full: bool,
    state_dir: Path | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Verify KIT (directory or .kit.tar.gz): receipt, kit files, weight lock, weights.

    Exits 0 only if every check ran and passed (the weights check is reported as not checked
    when --weights is not given). Weight files that verified before and whose device, inode,
    size, mtime and ctime have not changed since are not read again (see
    docs/verification-cache.md); --full reads everything. Progress (bytes, rate, ETA) goes to
    stderr when it is a terminal.
    """
    from k3kit.verify import verify_path

    trusted = _trusted_keys(trust)
    progress = ByteProgress("verifying weights") if sys.stderr.isatty() and not quiet else None
    options: dict[str, Any] = {
        "workers": workers,
        "algorithm": algorithm,
        "all_errors": all_errors,
        "full": full,
        "state_dir": state_dir if state_dir is not None else default_state_dir(),
        "on_progress": progress,
    }
    try:
        report = verify_path(kit, trusted, weights=weights, weights_options=options)
    finally:
        if progress is not None:
            progress.finish()
    if as_json:
        _emit_json(report.as_json())
    print_report(report, quiet=quiet)
    sys.exit(0 if report.ok else int(ExitCode.CHECK_FAILED))


def print_findings(report: Any, echo: Callable[[str], None], *, show_passes: bool = False) -> None:
    """The audit table: rule, severity, run, message with expected vs actual; then the counts."""
    rows: list[tuple[Any, list[str]]] = []
    for f in report.findings:
        if f.severity == "pass" and not show_passes:
            continue
        # Identical "not checkable"/"pass" lines for several runs are shown once, runs listed.
        last = rows[-1][0] if rows else None
        if (
            f.severity in ("not-checkable", "pass")
            and last is not None
            and (last.rule, last.severity, last.message) == (f.rule, f.severity, f.message)
        ):
            rows[-1][1].append(f.run or "-")
            continue
        rows.append((f, [f.run or "-"]))
    echo(f"{'RULE':<5} {'SEVERITY':<13} {'RUN':<28} MESSAGE")
    for f, runs in rows:
        message = f.message
        if f.expected is not None or f.actual is not None:
            message += f" [expected: {f.expected}; actual: {f.actual}]"
        run = runs[0] if len(runs) == 1 else f"{len(runs)} runs"
        if len(runs) > 1:
            message += f" [runs: {', '.join(runs)}]"
        echo(f"{f.rule:<5} {f.severity:<13} {run:<28} {message}")
    counts = report.counts()
    echo(
        "findings: "
        + ", ".join(f"{counts[s]} {s}" for s in ("error", "warning", "info", "not-checkable"))
        + f"; {counts['pass']} checks passed (--all shows them)"
    )


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("target", type=click.Path(path_type=Path))
@click.option(
    "--trust",
    "trust",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="Publisher public key you trust (repeatable).",
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning"]),
    default="error",
    show_default=True,
    help="Exit 1 if any finding is at or above this severity.",
)
@click.option("--all", "show_all", is_flag=True, help="Also list the checks that passed.")
@click.option("--json", "as_json", is_flag=True, help="Print every finding as JSON.")
@handle_errors
def audit(
    target: Path, trust: tuple[Path, ...], fail_on: str, show_all: bool, as_json: bool
) -> None:
    """Audit the claims of a signed receipt: TARGET is a kit directory, a .kit.tar.gz or a
    receipt.dsse.json.

    The signature is verified first (an unverifiable receipt is an R01 error). Then rules R01-R37
    (docs/audit.md) check arithmetic, metric definitions, statistical support, comparisons,
    controls, scope and limitations; with a kit, also its checksums and evidence files.
    Severities: error, warning, info, not-checkable (never counted as a pass).
    """
    from k3kit.audit import audit_path

    trusted = _trusted_keys(trust)
    report = audit_path(target, trusted)
    failing = report.at_or_above(fail_on)
    if as_json:
        _emit_json(report.as_json(fail_on))
        print_findings(report, _err, show_passes=show_all)
    else:
        print_findings(report, click.echo, show_passes=show_all)
    _err(
        f"audit: {len(failing)} finding(s) at or above {fail_on}"
        + (" - the receipt's claims do not all hold as stated" if failing else "")
    )
    sys.exit(int(ExitCode.CHECK_FAILED) if failing else 0)


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    default=Path("k3kit-demo"),
    show_default=True,
    help="Folder for everything the demo makes.",
)
@click.option("--force", is_flag=True, help="Empty an existing, non-empty workdir first.")
@handle_errors
def demo(workdir: Path, force: bool) -> None:
    """Run the whole pipeline offline on the built-in Kimi K3 example with STAND-IN weights."""
    from k3kit.demo import run_demo

    click.echo("k3kit demo: Kimi K3 on 8x NVIDIA B300 with vLLM 0.33.0 (offline, stand-in weights)")
    result = run_demo(workdir, force=force, now=_now(), say=click.echo)
    expectations = {
        "kit+weights": True,
        "archive+weights": True,
        "tampered kit file": False,
        "tampered weight shard": False,
    }
    all_as_expected = True
    for name, report in result.reports.items():
        failed = [f"{c.id}:{c.code}" for c in report.checks if c.status == "failed"]
        as_expected = report.ok == expectations[name]
        all_as_expected &= as_expected
        verdict = "VERIFIED" if report.ok else "REJECTED (" + ", ".join(failed) + ")"
        click.echo(f"verify   {name:<22} {verdict}{'' if as_expected else '  <-- UNEXPECTED'}")
    if result.audit is not None:
        # Findings about the published numbers are reported as they are; they do not decide the
        # demo's exit code (only the verifier's expectations above do).
        click.echo("\naudit    the example's published figures, exactly as published:")
        print_findings(result.audit, click.echo)
    click.echo("\nWhere everything is:")
    for name, path in result.paths.items():
        click.echo(f"  {name:<12} {path}")
    click.echo(
        "\nThe weights are STAND-INS for the 1.56 TB upstream shards; everything else is "
        "the real pipeline."
    )
    if not all_as_expected:
        raise click.exceptions.Exit(int(ExitCode.CHECK_FAILED))


def main() -> None:
    cli(prog_name="k3kit")


if __name__ == "__main__":
    main()
