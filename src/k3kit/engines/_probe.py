"""Asking an installed engine for its version, and saying why when it cannot answer.

The probe runs the engine exactly as launch will run it: the same executable, the same
environment (the fixed one plus the profile's ``engine.env``) and the same working folder.
Several engine builds only start with their ``engine.env``: vLLM's CPU wheel, without
``VLLM_TARGET_DEVICE=cpu``, loads an AVX-512 kernel library and dies with SIGILL on a machine
without AVX-512, so a probe in another environment refuses an engine that would run (and could
accept one that would not).

An engine that cannot start at all (a Python traceback, an illegal instruction, a missing shared
library) is a different problem from a wrong version and is reported as one
(``ENGINE_CANNOT_START``), with how it ended and the tail of what it wrote to stderr, because that
tail is the only place the reason is written.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from k3kit._text import shown_lines
from k3kit.engines._adapter import EngineAdapter
from k3kit.errors import EnvironmentProblem

#: ``vllm --version`` imports torch: it took 25-46 s on a loaded 2-core machine, so the probe
#: waits five minutes before it calls the engine unable to start (a healthy one never comes near).
VERSION_TIMEOUT_S = 300.0
#: How much of the engine's stderr a report carries (its last lines: where a traceback ends).
STDERR_TAIL_LINES = 12
STDERR_TAIL_CHARS = 2000


def how_it_ended(returncode: int) -> str:
    """A process's end in words: ``killed by SIGILL (signal 4)``; ``exit status 132 (a shell's
    report of SIGILL)`` when a wrapper script passed the signal on as 128+N; ``exit status 1``."""
    if returncode < 0:
        return f"killed by {_signal_name(-returncode)} (signal {-returncode})"
    if returncode > 128 and _signal_name(returncode - 128).startswith("SIG"):
        return f"exit status {returncode} (a shell's report of {_signal_name(returncode - 128)})"
    return f"exit status {returncode}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def stderr_tail(text: str) -> str:
    """The last lines of ``text``, bounded and escaped: an engine's stderr is shown, not obeyed."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    tail = "\n".join(lines[-STDERR_TAIL_LINES:])[-STDERR_TAIL_CHARS:]
    return shown_lines(tail) if tail else "(nothing on stderr)"


def probe_version(
    engine: EngineAdapter,
    path: str,
    env: Mapping[str, str],
    cwd: Path | None = None,
    timeout: float = VERSION_TIMEOUT_S,
) -> str:
    """The version ``path`` reports when run as launch will run it ('' when it prints none).

    Raises ``EnvironmentProblem`` ``ENGINE_NOT_FOUND`` when the file cannot be found, and
    ``ENGINE_CANNOT_START`` (exit 4) when it cannot be run, ends in error or by a signal, or does
    not answer within ``timeout`` seconds."""
    argv = engine.version_argv(path)
    try:
        proc = subprocess.run(
            argv,
            env=dict(env),
            cwd=cwd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise EnvironmentProblem(f"cannot run {path}: {exc}", code="ENGINE_NOT_FOUND") from exc
    except OSError as exc:
        raise _cannot_start(argv, f"could not be run ({exc.strerror or exc})", "") from exc
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else ""
        raise _cannot_start(argv, f"did not answer within {timeout:g} s", err) from exc
    if proc.returncode != 0:
        raise _cannot_start(argv, how_it_ended(proc.returncode), proc.stderr)
    return engine.parse_version(proc.stdout)


def _cannot_start(argv: list[str], ended: str, stderr: str) -> EnvironmentProblem:
    command = " ".join(argv)
    return EnvironmentProblem(
        f"the engine cannot start: `{shown_lines(command)}` {ended}; the end of its stderr:\n"
        f"{stderr_tail(stderr)}",
        code="ENGINE_CANNOT_START",
        hint="run that command in the kit's engine.env to see the whole error; an illegal "
        "instruction (SIGILL) usually means an engine build for a CPU this node does not have",
    )
