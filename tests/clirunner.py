"""The real CLI, run in the test process where that is faithful, in a subprocess where it is not.

Starting ``python -m k3kit`` costs an interpreter, k3kit's imports and coverage's subprocess
patch (0.5-1 s of CPU) per call, and the suite makes hundreds of calls: most of its time was
spent there. In-process, :func:`run_in_process` calls :func:`k3kit.cli._app.main` with the same
argv and gives back the same :class:`subprocess.CompletedProcess` (exit status, stdout, stderr as
text), with what a fresh process would have had around it: its own environment (the caller's
plus ``env``), working folder, umask, an empty non-terminal stdin, Python's default warning
filters printing to its stderr, no handler on the root logger (a library's warning reaches
that stderr through logging's last resort), and a ``SystemExit``/uncaught exception turned into
the exit status and traceback ``python -m k3kit`` gives. Every one of these is put back
afterwards, so one run cannot leak into the next test.

:func:`needs_process` names the calls that only a real process can answer, and those still start
one: settings huggingface_hub reads once at import (``HF_*``), a ``timeout=`` the test relies on
(shorter than the default: a bounded-time check), ``launch`` without ``--dry-run`` (it execs the
engine), a PKCS#11 module (a native library initialised once per process), and every call when
``K3KIT_TEST_CLI=process`` (to compare both ways by hand). A test that needs a real process for
another reason (signals, fds, another uid, ``sys.modules``) passes ``process=True`` or calls
:func:`subprocess.run` itself.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

#: The default ``timeout=``: a call that passes a shorter one asserts a bounded time.
DEFAULT_TIMEOUT = 120.0
#: 2026-11-01T00:00:00Z, as every run of the suite has used: receipts and pins are reproducible.
SOURCE_DATE_EPOCH = "1793491200"
#: Prefixes of variables read once, at import, by a library k3kit imports (huggingface_hub).
IMPORT_TIME_ENV = ("HF_", "HUGGINGFACE_", "PYTHON", "TZ")
#: The environment at start-up, against which a later ``HF_*`` change is noticed.
_STARTUP_ENV = dict(os.environ)


def _import_time_env_changed(env: Mapping[str, str]) -> bool:
    """True when a variable read at import differs from the value this process imported with."""
    names = {*env, *_STARTUP_ENV}
    return any(
        name.startswith(IMPORT_TIME_ENV) and env.get(name) != _STARTUP_ENV.get(name)
        for name in names
    )


def needs_process(argv: list[str], env: Mapping[str, str], timeout: float) -> bool:
    """True when only a real ``python -m k3kit`` answers this call faithfully (module doc)."""
    if os.environ.get("K3KIT_TEST_CLI") == "process" or timeout < DEFAULT_TIMEOUT:
        return True
    if _import_time_env_changed(env):
        return True
    if argv[:1] == ["launch"] and "--dry-run" not in argv:
        return True
    return any(arg.startswith("pkcs11:") for arg in argv)


def run_in_subprocess(
    argv: list[str], cwd: Path | None, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """``python -m k3kit ARGV`` in a new process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "k3kit", *argv],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class _ProcessExit(BaseException):
    """``os._exit`` called in-process: the status, without ending the test process."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _exit_in_process(status: int) -> None:
    raise _ProcessExit(status)


def _exec_in_process(*args: object) -> None:
    raise AssertionError(
        "the CLI tried to exec another program in the test process: run it with process=True "
        f"(tests/clirunner.py needs_process): {args[:2]!r}"
    )


def _stream() -> io.TextIOWrapper:
    """A text stream as a pipe gives a child here: UTF-8, surrogateescape, not a terminal."""
    return io.TextIOWrapper(
        io.BytesIO(), encoding="utf-8", errors="surrogateescape", write_through=True
    )


def _text(stream: io.TextIOWrapper) -> str:
    """What ``subprocess.run(text=True)`` decodes from a pipe: strict UTF-8, universal newlines."""
    stream.flush()
    raw = stream.buffer.getvalue()  # type: ignore[attr-defined]
    return str(raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n"))


def _stream_handlers() -> list[logging.StreamHandler]:  # type: ignore[type-arg]
    """Plain stream handlers that libraries attached to their loggers (not files, not root's)."""
    loggers = [v for v in logging.root.manager.loggerDict.values() if isinstance(v, logging.Logger)]
    return [h for lg in loggers for h in lg.handlers if type(h) is logging.StreamHandler]


@contextlib.contextmanager
def _process_state(cwd: Path | None, env: Mapping[str, str]) -> Iterator[None]:
    """The environment, folder, umask and warning filters of a fresh process, restored after."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_umask = os.umask(0o022)
    os.umask(saved_umask)
    real_exit, real_execve = os._exit, os.execve
    root_handlers = logging.root.handlers[:]
    library_streams = [(h, h.stream) for h in _stream_handlers()]
    try:
        # No handler on the root logger, as in a fresh process: a library's warning (e.g.
        # huggingface_hub's) reaches stderr through logging's last resort, not pytest's capture.
        logging.root.handlers.clear()
        # A handler a library made for itself (huggingface_hub does, on first use) holds the
        # stderr of that moment, here an earlier test's capture; a fresh process's is its own.
        for handler, _ in library_streams:
            handler.setStream(sys.stderr)
        os.environ.clear()
        os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        os._exit, os.execve = _exit_in_process, _exec_in_process  # type: ignore[assignment]
        with warnings.catch_warnings():
            warnings.resetwarnings()  # Python's own defaults, not pytest's recorder
            for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning):
                warnings.simplefilter("ignore", category)
            warnings.simplefilter("ignore", ResourceWarning)
            warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
            yield
    finally:
        for handler, stream in library_streams:
            handler.setStream(stream)
        logging.root.handlers[:] = root_handlers
        os._exit, os.execve = real_exit, real_execve
        os.chdir(saved_cwd)
        os.umask(saved_umask)
        os.environ.clear()
        os.environ.update(saved_env)


def _status(exc: SystemExit, stderr: io.TextIOWrapper) -> int:
    """The exit status the interpreter gives for ``sys.exit(code)``."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=stderr)
    return 1


def run_in_process(
    argv: list[str], cwd: Path | None, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """``k3kit.cli._app.main(argv)`` in this process, as :func:`run_in_subprocess` would see it."""
    from k3kit.cli._app import main

    out, err = _stream(), _stream()
    streams = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    try:
        with _process_state(cwd, env):
            main(argv)
            code = 0
    except SystemExit as exc:
        code = _status(exc, err)
    except _ProcessExit as exc:
        code = exc.status
    except Exception:  # what the interpreter does with an uncaught exception
        traceback.print_exc(file=err)
        code = 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
    return subprocess.CompletedProcess(
        [sys.executable, "-m", "k3kit", *argv], code, _text(out), _text(err)
    )
