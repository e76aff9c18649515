"""How the CLI turns each kind of failure into an exit code and a message, one row per kind.

The subprocess tests reach these paths only where a real command can be made to fail that way;
here a throw-away command under the real :func:`handle_errors` and the real :func:`main` raises
each one, so an ``OSError`` is exit 4 and never 70, a bug is 70 with no traceback unless
``--debug``, and ``--json`` always gets exactly one error object on stdout.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import click
import pytest

from k3kit.cli import _app
from k3kit.errors import InputError, VerificationError


def _group(raise_it: Callable[[], None]) -> click.Group:
    @click.group()
    @click.option("--debug", is_flag=True)
    def group(debug: bool) -> None:
        pass

    @group.command()
    @click.option("--json", "as_json", is_flag=True)
    @_app.handle_errors
    def boom(as_json: bool) -> None:
        raise_it()

    @group.command()
    @click.argument("n", type=int)
    @click.option("--json", "as_json", is_flag=True)
    def needs_int(n: int, as_json: bool) -> None:
        pass

    return group


def _raise(exc: BaseException) -> Callable[[], None]:
    def go() -> None:
        raise exc

    return go


class Exited(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _run(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    raise_it: Callable[[], None],
    *argv: str,
) -> tuple[int, str, str]:
    """Run :func:`_app.main` in-process; ``os._exit`` (Ctrl-C's fast exit) is caught too."""
    monkeypatch.setattr(_app, "cli", _group(raise_it))

    def fake_exit(code: int) -> None:
        raise Exited(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    code: Any
    try:
        _app.main(list(argv))
        code = 0
    except SystemExit as exc:
        code = exc.code
    except Exited as exc:
        code = exc.code
    out = capsys.readouterr()
    return int(code or 0), out.out, out.err


CASES = [
    # (name, exception, exit code, JSON error code, words on stderr)
    (
        "a check that does not hold",
        VerificationError("digest differs", code="KIT_FILE_CHANGED"),
        1,
        "KIT_FILE_CHANGED",
        "error: digest differs",
    ),
    (
        "bad input",
        InputError("not a kit", code="PACK_NOT_A_KIT", hint="pass the folder"),
        3,
        "PACK_NOT_A_KIT",
        "hint: pass the folder",
    ),
    (
        "disk full",
        OSError(28, "No space left on device", "/srv/kit"),
        4,
        "DISK_UNWRITABLE",
        "cannot write /srv/kit: No space left on device (the disk holding /srv)",
    ),
    (
        "an OSError without a file",
        PermissionError("denied"),
        4,
        "IO_ERROR",
        "an I/O problem on this machine",
    ),
    ("a bug", KeyError("profile"), 70, "INTERNAL_ERROR", "internal error: KeyError"),
    (
        "Ctrl-C inside a command",
        KeyboardInterrupt(),
        130,
        "INTERRUPTED",
        "nothing was left half-written",
    ),
    (
        "a click error inside a command",
        click.ClickException("cannot"),
        1,
        "CLICK_ERROR",
        "Error: cannot",
    ),
    ("an abort inside a command", click.Abort(), 1, "ABORTED", "aborted"),
]


@pytest.mark.parametrize(
    ("exc", "exit_code", "code", "words"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_failure_has_its_exit_code_and_one_json_object(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    exc: BaseException,
    exit_code: int,
    code: str,
    words: str,
) -> None:
    got, out, err = _run(monkeypatch, capsys, _raise(exc), "boom", "--json")
    assert got == exit_code, err
    assert words in err
    assert "Traceback" not in err
    obj = json.loads(out)  # exactly one JSON document
    assert obj["ok"] is False and obj["exit_code"] == exit_code
    assert obj["error"]["code"] == code


def test_without_json_nothing_is_printed_on_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    got, out, err = _run(monkeypatch, capsys, _raise(KeyError("x")), "boom")
    assert (got, out) == (70, "") and "rerun with --debug" in err


@pytest.mark.parametrize(
    ("exc", "exit_code"),
    [(KeyError("profile"), 70), (OSError(5, "Input/output error", "/dev/sdz"), 4)],
    ids=["a bug", "an I/O error"],
)
def test_debug_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    exc: BaseException,
    exit_code: int,
) -> None:
    got, _out, err = _run(monkeypatch, capsys, _raise(exc), "--debug", "boom")
    assert got == exit_code
    assert "Traceback (most recent call last)" in err and type(exc).__name__ in err


def test_usage_error_is_exit_2_with_a_json_object(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    got, out, err = _run(monkeypatch, capsys, _raise(AssertionError()), "needs-int", "x", "--json")
    assert got == 2 and "is not a valid integer" in err
    obj = json.loads(out)
    assert (
        obj["error"]["code"] == "USAGE" and obj["error"]["hint"] == "run with --help for the usage"
    )


def test_ctrl_c_outside_a_command_exits_130_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while click parses (no command's handler around it) still exits 130 via the fast
    exit, so worker threads cannot hold the process."""

    def interrupted(*_a: Any, **_k: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(click.Group, "main", interrupted)
    got, out, err = _run(monkeypatch, capsys, _raise(AssertionError()), "boom")
    assert (got, out) == (130, "") and "interrupted" in err


def test_an_abort_caused_by_ctrl_c_is_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """click turns Ctrl-C at a prompt into ``Abort`` from ``KeyboardInterrupt``."""

    def prompt_interrupted() -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise click.Abort from exc

    got, out, _err = _run(monkeypatch, capsys, prompt_interrupted, "boom", "--json")
    # The command's handler re-raises click's own exceptions; main maps them.
    assert got == 130
    assert json.loads(out)["error"]["code"] == "INTERRUPTED"


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [("0", "1970-01-01T00:00:00Z"), ("1764547200", "2025-12-01T00:00:00Z")],
)
def test_source_date_epoch_fixes_the_time(
    monkeypatch: pytest.MonkeyPatch, epoch: str, expected: str
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    assert _app.now_utc() == expected


def test_a_malformed_source_date_epoch_falls_back_to_the_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    assert _app.now_utc() > "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("exc", "shown"),
    [
        (ConnectionResetError(104, "Connection reset by peer"), "Connection reset by peer"),
        (FileNotFoundError(2, "No such file or directory", ""), "No such file or directory"),
        (PermissionError(13, "Permission denied", "/srv/k\x1b[2Jit"), "Permission denied: "),
    ],
    ids=["an OSError naming no file", "an empty file name", "a file name with an escape"],
)
def test_an_io_error_never_shows_an_empty_file_name(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    exc: OSError,
    shown: str,
) -> None:
    """Before: "error: Connection reset by peer:  (an I/O problem ...)", a colon before nothing.
    The one formatter (``k3kit._fs.os_error_text``) names the file only when there is one."""
    got, _out, err = _run(monkeypatch, capsys, _raise(exc), "boom")
    assert got == 4, err
    assert f"error: {shown}" in err
    assert ":  (" not in err and ": (" not in err
    assert "\x1b" not in err


def test_an_in_process_run_gives_the_caller_its_ctrl_c_back(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A verb that decided its outcome ignores Ctrl-C until its process exits; run in-process
    (``main([...])``), it used to leave the caller's SIGINT ignored for good, so every process
    the caller started later inherited the ignored signal (in the whole suite, the test hub's and
    pull's Ctrl-C tests after this file failed)."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    seen: list[object] = []

    def decide() -> None:
        _app.outcome_decided()
        seen.append(signal.getsignal(signal.SIGINT))

    code, _, _ = _run(monkeypatch, capsys, decide, "boom")
    assert code == 0 and seen == [signal.SIG_IGN]  # ignored while the verb reported
    assert signal.getsignal(signal.SIGINT) is before  # and the caller's again afterwards
    assert _app._OWN_PROCESS is False
