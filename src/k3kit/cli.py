"""The ``k3kit`` command line: the only module that prints, reads argv/env, and exits.

Exit codes (DESIGN.md): 0 all checks hold; 1 something checked does not hold; 2 usage error;
3 bad input; 4 environment (I/O, network, key file); 70 internal error (a bug; traceback only with
``--debug``). With ``--json`` a command prints exactly one JSON object on stdout and its human
status on stderr.
"""

from __future__ import annotations

import functools
import json
import os
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

    Publisher: keygen, pin, build, sign, pack. Buyer: verify. Everyone: demo.
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


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--local",
    "local",
    required=True,
    type=click.Path(path_type=Path),
    help="Local weights folder or Hugging Face cache snapshot to hash.",
)
@click.option("--repo", required=True, help="Upstream repo id, e.g. moonshotai/Kimi-K3.")
@click.option("--revision", required=True, help="The 40-hex commit these files are.")
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
    local: Path,
    repo: str,
    revision: str,
    output: Path,
    workers: int | None,
    force: bool,
    as_json: bool,
) -> None:
    """Pin a weight revision: hash every file (sha256 + blake3) into a lock."""
    from k3kit._canonical import model_bytes
    from k3kit._fs import atomic_write
    from k3kit.pin import pin_local

    if output.exists() and not force:
        raise InputError(f"{output} exists", code="OUTPUT_EXISTS", hint="pass --force to replace")
    lock = pin_local(
        local,
        repo=repo,
        revision=revision,
        pinned_at=_now(),
        workers=workers,
        on_file_done=_progress("hashing"),
    )
    atomic_write(output, model_bytes(lock), force=force)
    summary = {
        "lock": str(output),
        "repo": lock.repo,
        "commit": lock.commit,
        "files": lock.file_count,
        "total_bytes": lock.total_bytes,
    }
    if as_json:
        _emit_json(summary)
    else:
        click.echo(
            f"pinned {lock.repo}@{lock.commit}: {lock.file_count} files, "
            f"{lock.total_bytes} bytes -> {output}"
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
    _err("verdict: " + ("VERIFIED" if report.ok else "NOT VERIFIED - do not deploy"))


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
    from k3kit.keys import load_public
    from k3kit.verify import verify_path

    trusted = [load_public(p) for p in trust]
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
