"""Option handling shared by several commands: passphrases, tokens, endpoints, trusted keys and
the verifying verbs' trust options (``--trust``, ``--root``, ``--allow-rollback``), progress
lines, and the human rendering of a verification report."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from k3kit._text import shown
from k3kit._values import utc_timestamp
from k3kit.cli._app import err, outcome_decided
from k3kit.errors import InputError, UsageProblem, VerificationError

if TYPE_CHECKING:
    from k3kit.signing.memo import SignatureMemo


def read_passphrase(env_var: str | None) -> bytes | None:
    if env_var is None:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise InputError(
            f"--passphrase-env {env_var}: the variable is not set or empty",
            code="PASSPHRASE_MISSING",
        )
    return value.encode()


def file_progress(label: str, total: int | None = None) -> Callable[[str, int], None] | None:
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
            f"\r{shown(label)}: {state['files']} files, {state['bytes'] / 1e9:.2f}{of} GB, "
            f"{rate:.2f} GB/s "
        )
        sys.stderr.flush()

    return tick


def trusted_keys(paths: tuple[Path, ...]) -> list[Any]:
    """The --trust keys, by the library's one loading rule (a key given twice is exit 3)."""
    from k3kit.signing.trust.source import load_trusted_keys

    return load_trusted_keys(paths)


def read_token(env_var: str | None) -> str | None:
    """The hub token from $VAR; its value is handed to the hub client and never printed."""
    if env_var is None:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise InputError(
            f"--token-env {env_var}: the variable is not set or empty", code="TOKEN_ENV_EMPTY"
        )
    return value


def print_report(report: Any, *, quiet: bool = False) -> None:
    """Human rendering of a verify report: one line per check, problems indented, the verdict.

    ``quiet`` keeps only the failed checks, notes and the verdict. Once it is called the verdict
    is decided: a Ctrl-C from here on is ignored (:func:`outcome_decided`), so what is printed
    and the exit code agree.
    """
    outcome_decided()
    marks = {"passed": "ok  ", "failed": "FAIL", "not checked": "--  "}
    for i, check in enumerate(report.checks, start=1):
        if quiet and check.status != "failed":
            continue
        code = f" [{shown(check.code)}]" if check.code and check.status == "failed" else ""
        err(f"{i}. {marks[check.status]} {check.title}{code}: {shown(check.detail)}")
        for problem in check.problems[:50]:
            # Paths are file names from the kit or the weights folder: attacker bytes.
            err(f"       {shown(problem.code):<26} {shown(problem.path)}: {shown(problem.detail)}")
        if len(check.problems) > 50:
            err(f"       … and {len(check.problems) - 50} more (use --json for all)")
    note = report.facts.get("weights", {}).get("cache", {}).get("note")
    if note:
        err(f"note: {shown(note)}")
    weights = next((c for c in report.checks if c.id == "weights"), None)
    unchecked = weights is not None and weights.status != "passed"
    scope = " (kit and receipt; weights not checked)" if unchecked else ""
    err("verdict: " + (f"VERIFIED{scope}" if report.ok else "NOT VERIFIED - do not deploy"))


def default_state_dir() -> Path | None:
    """Where k3kit keeps what protects this node (rollback memory, accepted roots, launch's
    runtime folder): $XDG_STATE_HOME/k3kit; else /var/lib/k3kit for root; else
    ~/.local/state/k3kit. Never a cache folder, which users and tools empty to free space."""
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "k3kit"
    if os.geteuid() == 0:
        return Path("/var/lib/k3kit")
    try:
        return Path.home() / ".local" / "state" / "k3kit"
    except RuntimeError:  # no home directory: the caller asks for --state-dir
        return None


def default_cache_dir() -> Path | None:
    """Where k3kit keeps its verification cache: $XDG_CACHE_HOME/k3kit, else ~/.cache/k3kit.
    Losing it costs a re-hash, nothing else."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "k3kit"
    try:
        return Path.home() / ".cache" / "k3kit"
    except RuntimeError:  # no home directory: run without a cache rather than guess
        return None


def state_and_cache(state_dir: Path | None) -> tuple[Path | None, Path | None]:
    """The state folder and the cache folder: ``--state-dir DIR`` holds both, otherwise each
    has its own default. Both pass the same private-folder check when used."""
    if state_dir is not None:
        return state_dir, state_dir
    state, cache = default_state_dir(), default_cache_dir()
    _refuse_state_left_in_the_cache(state, cache)
    return state, cache


def signature_memo(cache: Path | None, *, full: bool) -> SignatureMemo | None:
    """The node's record of signature checks passed before, in the cache folder beside the
    weights' records (none without a cache folder); ``--full`` recalls nothing from it."""
    if cache is None:
        return None
    from k3kit.signing.memo import SignatureMemo

    return SignatureMemo(cache, recall=not full)


def memo_note(memo: SignatureMemo | None) -> None:
    """A memo that could not be used costs every start one more signature check and changes no
    verdict; say why, as the weights' cache does, so an operator can fix the folder."""
    if memo is not None and memo.status.startswith(("refused", "ignored", "not saved")):
        err(f"note: signature memo {shown(memo.status)}; each run checks the signature again")


def _refuse_state_left_in_the_cache(state: Path | None, cache: Path | None) -> None:
    """Earlier k3kit kept rollback memory and accepted roots in the cache folder. Starting afresh
    in the new state folder would silently forget them (a rollback on upgrade), so until they
    are moved, or the old folder is named with --state-dir, the run stops."""
    if state is None or cache is None or os.path.lexists(state):
        return
    left = [cache / n for n in ("rollback.json", "roots") if os.path.lexists(cache / n)]
    if left:
        raise VerificationError(
            f"this node's rollback memory is still in the cache folder {shown(str(cache))}, "
            f"not in the state folder {shown(str(state))}",
            code="STATE_LOST",
            hint=f"mkdir -p -m 700 {state} && mv {' '.join(map(str, left))} {state}/ "
            f"(or pass --state-dir {cache})",
        )


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


TRUST_HINT = "pass --trust with the publisher's public key (KEY.pub, as `k3kit keygen` wrote it)"


def no_trust_given(message: str = "no trusted key was given") -> UsageProblem:
    """The one refusal of every verb given no trusted key, whatever it had as an alternative
    (--root, a site's K3KIT_TRUST_KEY): ``TRUST_EMPTY``, exit 2 (a usage mistake, as any other
    missing option). Before, it was click's "Missing option" (exit 2) in six verbs, a usage
    error in four and ``TRUST_EMPTY`` exit 3 in ``launch``."""
    return UsageProblem(message, code="TRUST_EMPTY", hint=TRUST_HINT)


def need_trust(
    _ctx: click.Context, _param: click.Parameter, value: tuple[Path, ...]
) -> tuple[Path, ...]:
    """``--trust`` of a verb with no other way to say what is trusted: refused while parsing,
    before any work (:func:`main` maps the error)."""
    if not value:
        raise no_trust_given("no trusted key: this verb needs --trust")
    return value


# The publisher keys a verifying command trusts; required, because trust is never implicit.
trust_option = click.option(
    "--trust",
    "trust",
    multiple=True,
    callback=need_trust,
    type=click.Path(path_type=Path),
    help="Publisher public key you trust (repeatable; required).",
)


def whole_number(option: str, text: str, *, lo: int, hi: int) -> int:
    """An integer option through the one ASCII integer parser (``k3kit._values``): other
    scripts' digits, ``_``, ``+`` and values out of range are input errors (exit 3)."""
    from k3kit._values import ascii_int

    try:
        return ascii_int(text, lo=lo, hi=hi)
    except ValueError as exc:
        raise InputError(f"{option} {shown(text)}: {exc}", code="BAD_INPUT") from None


def timestamp_option(option: str, text: str) -> str:
    """A timestamp option through the one RFC 3339 parser, rewritten to the canonical UTC form
    (``2026-01-31T13:00:00+01:00`` becomes ``2026-01-31T12:00:00Z``); anything else exits 3."""
    from k3kit._values import normalise_timestamp

    try:
        return normalise_timestamp(text)
    except ValueError as exc:
        raise InputError(f"{option}: {shown(str(exc))}", code="BAD_INPUT") from None


class Real(click.ParamType[float]):
    """``click.FloatRange`` without ``nan`` (which passes every range check), ``1_0`` or other
    scripts' digits: the one ASCII decimal parser."""

    name = "number"

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        from k3kit._values import ascii_decimal

        if isinstance(value, (int, float)):
            value = repr(float(value)) if value == value else "nan"
        try:
            return ascii_decimal(value, lo=self.lo, hi=self.hi)
        except ValueError as exc:
            self.fail(shown(str(exc)), param, ctx)


class Whole(click.ParamType[int]):
    """``click.IntRange`` with ASCII digits only (click's own accepts ``１２`` and ``1_0``)."""

    name = "integer"

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from k3kit._values import ascii_int

        if isinstance(value, int):
            value = str(value)
        try:
            return ascii_int(value, lo=self.lo, hi=self.hi)
        except ValueError as exc:
            self.fail(shown(str(exc)), param, ctx)


# What to do with an archive given to a verb that needs the kit folder, by who runs the verb.
_BUYER_HINT = (
    "install the archive first (k3kit install ARCHIVE --into DIR --trust KEY.pub), then give "
    "the folder it prints (DIR/NAME-VERSION)"
)
_PUBLISHER_HINT = (
    "give the kit folder `k3kit build` wrote; an archive is its packed copy (`k3kit install` "
    "and `k3kit verify` take archives)"
)


class KitFolder(click.ParamType[Path]):
    """A KIT argument that must be a kit folder: an archive, lock or receipt is refused by the
    one rule (:func:`k3kit.formats.kitpath.require_kit_folder`, ``KIT_NOT_A_FOLDER``, exit 3)
    with a hint naming the verb that takes it, instead of click's "Directory ... is a file".
    The :class:`~k3kit.errors.InputError` is raised while click parses; :func:`main` maps it."""

    name = "kit folder"

    def __init__(self, *, buyer: bool) -> None:
        self.hint = _BUYER_HINT if buyer else _PUBLISHER_HINT

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        from k3kit.formats.kitpath import require_kit_folder

        verb = ctx.command_path if ctx is not None else "this command"
        return require_kit_folder(Path(value), verb=verb, hint=self.hint)


# The options of every verb that verifies a kit. Here, not in cli.signing: that module also
# defines the signing verbs, which launch's and verify's start-up need not build.
def now_for_verification() -> str:
    """The real clock, read once per run (never SOURCE_DATE_EPOCH: that is for builds)."""
    return utc_timestamp()


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
    from k3kit.signing.trust.source import root_trust

    if root_file is None:
        if allow_rollback:
            raise click.UsageError("--allow-rollback needs --root (rollback is tracked per root)")
        if not trust:
            raise no_trust_given("no trusted key: give --trust KEY.pub or --root ROOT.json")
        return trusted_keys(trust), None
    if trust:
        raise click.UsageError("give either --trust or --root, not both")
    anchor, policy = root_trust(
        root_file, state_dir, now=now_for_verification(), allow_rollback=allow_rollback
    )
    if allow_rollback:
        click.echo(
            "WARNING: --allow-rollback: an older or conflicting kit will be accepted and recorded",
            err=True,
        )
    return anchor, policy


# verify's --trust: optional there, because --root is the other way to say what is trusted.
optional_trust_option = click.option(
    "--trust",
    "trust",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Publisher public key you trust (repeatable); or use --root.",
)
