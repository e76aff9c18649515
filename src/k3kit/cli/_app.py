"""The click group, the error-to-exit-code mapping, and output helpers shared by every command.

Exit codes (DESIGN.md): 0 all checks hold; 1 something checked does not hold; 2 usage error;
3 bad input; 4 environment (I/O, network, key file); 70 internal error (a bug; traceback only with
``--debug``). With ``--json`` a command prints exactly one JSON object on stdout and its human
status on stderr.
"""

from __future__ import annotations

import functools
import json
import os
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import click

from k3kit import __version__
from k3kit.errors import ExitCode, K3kitError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 a check failed (do not deploy); 2 usage; 3 bad input; "
    "4 environment (I/O, network, key file); 70 internal error."
)


def now_utc() -> str:
    """UTC time for pins and receipts; SOURCE_DATE_EPOCH makes reproducible builds reproducible."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    t = int(epoch) if epoch and epoch.isdigit() else int(time.time())
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def err(text: str) -> None:
    click.echo(text, err=True)


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=True))


def handle_errors(func: F) -> F:
    """Map K3kitError to its exit code with a one-line message, an unexpected OSError to 4 (the
    environment), and anything else to 70 (a bug)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        try:
            return func(*args, **kwargs)
        except K3kitError as exc:
            err(f"error: {exc.message}")
            if exc.hint:
                err(f"hint: {exc.hint}")
            ctx.exit(int(exc.exit_code))
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except OSError as exc:  # the machine got in the way (disk full, permissions, no such dir)
            if ctx.find_root().params.get("debug"):
                traceback.print_exc()
            err(
                f"error: {exc.strerror or exc}: {exc.filename or ''} (an I/O problem on this "
                "machine; --debug shows where)"
            )
            ctx.exit(int(ExitCode.ENVIRONMENT))
        except Exception as exc:
            if ctx.find_root().params.get("debug"):
                traceback.print_exc()
            err(
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
    Trust over time: root, countersign, sshsig (docs/trust.md). Everyone: demo.
    """
