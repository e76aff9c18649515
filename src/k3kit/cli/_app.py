"""The click group, the error-to-exit-code mapping, and output helpers shared by every command.

Exit codes (docs/design.md): 0 all checks hold; 1 something checked does not hold; 2 usage error;
3 bad input; 4 environment (I/O, network, key file); 70 internal error (a bug; traceback only with
``--debug``); 130 interrupted (Ctrl-C; every file k3kit writes is atomic, so nothing is left
half-written). With ``--json`` a command prints exactly one JSON object on stdout and its human
status on stderr; a refused or failed call prints ``{"ok": false, "exit_code": N, "error":
{"code", "message", "hint"}}``, usage errors (exit 2) included.

Every line printed goes through :func:`err` or :func:`say`, which escape control characters
(:func:`k3kit._text.shown_lines`): names are escaped where they are formatted, and this is the
last-line defence, so no file name can move the cursor or paint over a verdict.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import json
import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from k3kit._fs import disk_problem, os_error_text
from k3kit._text import shown_lines
from k3kit._values import ascii_int, utc_timestamp
from k3kit._version import __version__
from k3kit.errors import ExitCode, K3kitError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 a check failed (do not deploy); 2 usage; 3 bad input; "
    "4 environment (I/O, network, key file); 70 internal error; 130 interrupted; "
    "141 stdout closed (| head)."
)
INTERRUPTED = 130  # the shell's convention for SIGINT (128 + 2)
# What a shell reports for a tool stopped by SIGPIPE (128 + 13): `k3kit show … | head -0` ends
# as `cat` and `grep` do there, quietly, not with exit 4 (an I/O problem) or a traceback.
BROKEN_PIPE = 141
_OWN_PROCESS = False  # set by main(): the process is k3kit's, its signal dispositions too


def outcome_decided() -> None:
    """From here on the verb only reports what has happened (installed, verified, pulled): a
    Ctrl-C can no longer change it, so it is ignored until the process exits. Without this, a
    SIGINT between "installed read-only" and the exit turned a success into exit 130 (the
    verdict printed and the exit code disagreed). ``launch`` restores it before exec. Only in
    the process :func:`main` runs: a caller driving ``cli`` in-process keeps its own Ctrl-C."""
    if _OWN_PROCESS:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def stdout_reader_gone() -> bool:
    """True when stdout is a pipe whose reader has gone: the write end polls as an error. The
    one test, so that a broken pipe of another kind (an engine probe's) is not taken for it."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def quiet_broken_pipe() -> NoReturn:
    """Exit :data:`BROKEN_PIPE` without a word: whoever read stdout stopped reading on purpose
    (``head``). stdout is pointed at /dev/null first, so the exit's own flush cannot fail."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(BROKEN_PIPE)


def now_utc() -> str:
    """UTC time for pins and receipts; SOURCE_DATE_EPOCH makes reproducible builds reproducible."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    t = int(time.time())
    # The one ASCII integer parser ("²" passed isdigit() and then crashed int()); a malformed
    # value leaves the clock, as before.
    with contextlib.suppress(ValueError):
        t = ascii_int(epoch or "", lo=0, hi=253402300799)  # up to 9999-12-31T23:59:59Z
    return utc_timestamp(t)


def err(text: str) -> None:
    """A human line on stderr, control characters escaped (line feeds kept)."""
    click.echo(shown_lines(text), err=True)


def say(text: str) -> None:
    """A human line on stdout, control characters escaped (line feeds kept)."""
    click.echo(shown_lines(text))


def emit_json(obj: Any) -> None:
    # ensure_ascii: a control character or a non-UTF-8 name's surrogate is a JSON escape.
    click.echo(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=True))


def error_object(exit_code: int, code: str, message: str, hint: str | None) -> dict[str, Any]:
    """The one JSON shape of a call that did not produce its result."""
    return {
        "ok": False,
        "exit_code": exit_code,
        "error": {"code": code, "message": message, "hint": hint},
    }


def _fail(
    ctx: click.Context, exit_code: int, code: str, message: str, hint: str | None = None
) -> None:
    """Report a failure on stderr (and as a JSON error object with --json), then exit."""
    err(message)
    if hint:
        err(f"hint: {hint}")
    if ctx.params.get("as_json"):
        emit_json(error_object(exit_code, code, message, hint))
    ctx.exit(exit_code)


def handle_errors(func: F) -> F:
    """Map K3kitError to its exit code with a one-line message, Ctrl-C to 130, an unexpected
    OSError to 4 (the environment), and anything else to 70 (a bug); with ``--json`` each also
    prints the JSON error object on stdout."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = bool(ctx.find_root().params.get("debug"))
        try:
            return func(*args, **kwargs)
        except K3kitError as exc:
            _fail(ctx, int(exc.exit_code), exc.code, f"error: {exc.message}", exc.hint)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            _fail(ctx, INTERRUPTED, "INTERRUPTED", "interrupted: nothing was left half-written")
        except BrokenPipeError:
            if stdout_reader_gone():
                quiet_broken_pipe()
            raise
        except OSError as exc:  # the machine got in the way (disk full, permissions, no such dir)
            if debug:
                traceback.print_exc()
            disk = disk_problem(None, exc)
            if disk is not None:
                _fail(ctx, int(disk.exit_code), disk.code, f"error: {disk.message}", disk.hint)
            _fail(
                ctx,
                int(ExitCode.ENVIRONMENT),
                "IO_ERROR",
                f"error: {os_error_text(exc)} (an I/O problem on this machine; --debug shows "
                "where)",
            )
        except Exception as exc:
            if debug:
                traceback.print_exc()
            _fail(
                ctx,
                int(ExitCode.INTERNAL),
                "INTERNAL_ERROR",
                f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the "
                "traceback; please report it)",
            )

    return wrapper  # type: ignore[return-value]


# Which module defines each top-level verb. `k3kit verify` on a GPU node imports the CLI module of
# `verify` only, not the publisher's, the ledger's or accept's (with their own imports), which
# was a quarter of its start-up (docs/performance.md). A verb missing here still works: the
# group then imports every module (tests/test_startup.py pins that the map is complete).
VERB_MODULES: dict[str, str] = {
    "accept": "accept",
    "audit": "review",
    "build": "publish",
    "buyer-receipt": "commerce",
    "card": "present",
    "channel": "channel",
    "countersign": "signing",
    "demo": "review",
    "engine": "engine",
    "install": "deploy",
    "keygen": "publish",
    "launch": "deploy",
    "ledger": "commerce",
    "licence": "commerce",
    "pack": "publish",
    "pin": "publish",
    "preflight": "preflight",
    "publish": "channel",
    "pull": "buyer",
    "push": "oci",
    "release-notes": "present",
    "render-site": "preflight",
    "root": "trust",
    "show": "present",
    "sign": "publish",
    "sshsig": "signing",
    "update": "channel",
    "verify": "buyer",
}
#: Every module that registers verbs on the group (the values above, plus any a new verb lives in).
VERB_PACKAGES: tuple[str, ...] = (
    "accept",
    "buyer",
    "channel",
    "commerce",
    "deploy",
    "engine",
    "oci",
    "preflight",
    "present",
    "publish",
    "review",
    "signing",
    "trust",
)


def load_verbs(names: tuple[str, ...] = VERB_PACKAGES) -> None:
    """Import the CLI modules ``names``: importing one registers its verbs on :data:`cli`."""
    for name in names:
        importlib.import_module(f"k3kit.cli.{name}")


class VerbGroup(click.Group):
    """A click group that imports a verb's module only when that verb is asked for.

    Listing the verbs (``--help``, the generated docs) imports them all; asking for one known verb
    imports its module alone; an unknown name imports them all before click says "no such
    command", so a verb added without a :data:`VERB_MODULES` entry is slower, never missing.
    """

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            module = VERB_MODULES.get(cmd_name)
            load_verbs((module,) if module else VERB_PACKAGES)
        if cmd_name not in self.commands:
            load_verbs()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        load_verbs()
        return super().list_commands(ctx)


@click.group(
    cls=VerbGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_CODES_HELP,
)
@click.version_option(__version__, prog_name="k3kit")
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
def cli(debug: bool) -> None:
    """Pin, build, sign, verify and audit deployment kits for frontier LLMs.

    Publisher: keygen, pin, build, sign, pack, card, release-notes. Buyer: install, pull,
    verify, preflight, launch, show, accept, render-site. Auditor: audit. Trust over time: root,
    countersign, sshsig (docs/trust.md). Enterprise: licence, ledger, buyer-receipt
    (docs/licence.md). Everyone: demo.
    """


def _report_parse_error(exc: K3kitError, as_json: bool) -> None:
    """A registered error from an argument's type, before any command ran: the same lines and
    JSON object as :func:`handle_errors` gives (its wrapper is not yet running then)."""
    message = f"error: {exc.message}"
    err(message)
    if exc.hint:
        err(f"hint: {exc.hint}")
    if as_json:
        emit_json(error_object(int(exc.exit_code), exc.code, message, exc.hint))


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; click's own failures (usage errors, Ctrl-C outside a command) are mapped
    here, because click's standalone mode would print them without the --json error object.

    ``argv`` given means an in-process caller (a test, a script): it gets its own Ctrl-C and
    signal state back when this returns. Without that, one in-process run left the caller's
    SIGINT ignored for good (:func:`outcome_decided`), and every process it started afterwards
    inherited the ignored signal: a whole test session's later Ctrl-C tests failed."""
    global _OWN_PROCESS
    owned, handler = _OWN_PROCESS, signal.getsignal(signal.SIGINT)
    _OWN_PROCESS = True
    args = sys.argv[1:] if argv is None else list(argv)
    stdout = sys.stdout
    if argv is None:
        # The process is k3kit's own: what start-up imported (the CLI, click, the codes) lives
        # until exit, so the collector stops walking it, in the verb's collections and in the
        # full one at exit: 24 M instructions less on `--version` (8 %), 36 M on verify, 26 M
        # on launch (docs/performance.md, "Eighth pass"). Objects made from here on are collected as
        # before. An in-process caller (a test, a script) keeps its collector as it was.
        gc.freeze()
    try:
        _main(args)
    except BrokenPipeError:  # a usage error's JSON, the exit's flush into a closed pipe
        if not stdout_reader_gone():
            raise
        quiet_broken_pipe()
    except SystemExit:
        # click met the closed pipe itself (--help): it swapped stdout for a quiet wrapper and
        # exits 1; the one convention is 141.
        if sys.stdout is not stdout and stdout_reader_gone():
            quiet_broken_pipe()
        raise
    finally:
        if argv is None:
            # The verb is done and the process is about to exit: what the verb's lazy imports
            # and its work left alive is frozen too, so the three full collections of the
            # interpreter's shutdown do not walk it only to find it still referenced. 8.5 M
            # instructions less on launch (2 %), 5.5 M on verify, none on `--version` (which
            # imports nothing after the first freeze; docs/performance.md, "Ninth pass").
            # Reference counting still frees everything as modules are cleared; only a cycle
            # the verb left unreachable stays unfreed at exit, as after the first freeze.
            # Only when the main thread is the last one: a pull stopped by Ctrl-C leaves its
            # download threads blocked in a socket, and freezing under them made the shutdown
            # crash with SIGSEGV in 5 of 8 runs (tests/test_pull_attacks.py, Ctrl-C mid-download).
            threading = sys.modules.get("threading")  # never imported: no thread to wait for
            if threading is None or threading.active_count() == 1:
                gc.freeze()
        else:  # the process is the caller's: leave it as it was
            _OWN_PROCESS = owned
            if handler is not None:
                signal.signal(signal.SIGINT, handler)


def _main(args: list[str]) -> None:
    as_json = "--json" in args
    try:
        rv = cli.main(args=args, prog_name="k3kit", standalone_mode=False)
    except click.UsageError as exc:
        exc.show()
        if as_json:
            hint = "run with --help for the usage"
            emit_json(error_object(int(ExitCode.USAGE), "USAGE", exc.format_message(), hint))
        sys.exit(int(ExitCode.USAGE))
    except K3kitError as exc:  # raised while click parsed an argument (e.g. a KIT's kind)
        _report_parse_error(exc, as_json)
        sys.exit(int(exc.exit_code))
    except click.ClickException as exc:
        exc.show()
        if as_json:
            emit_json(error_object(exc.exit_code, "CLICK_ERROR", exc.format_message(), None))
        sys.exit(exc.exit_code)
    except click.Abort as exc:
        interrupted = isinstance(exc.__cause__, KeyboardInterrupt)
        code = INTERRUPTED if interrupted else int(ExitCode.CHECK_FAILED)
        err("interrupted" if interrupted else "aborted")
        if as_json:
            emit_json(error_object(code, "INTERRUPTED" if interrupted else "ABORTED", "", None))
        rv = code
    except KeyboardInterrupt:
        err("interrupted")
        rv = INTERRUPTED
    if rv == INTERRUPTED:
        # Worker threads (hashing a shard, a download) are not interruptible and the interpreter
        # would join them before exiting: Ctrl-C would wait for a whole file. Every `finally` of
        # the main thread has run and every write is atomic, so leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(INTERRUPTED)
    sys.stdout.flush()  # here, where a closed pipe is caught, not in the interpreter's exit
    sys.exit(rv if isinstance(rv, int) else 0)
