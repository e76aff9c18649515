"""A ``k3kit`` on PATH that forks a process with k3kit already imported, for the docs' blocks.

Why: tests/test_doc_commands.py runs every shell block of the docs as written, by bash, and
most of their time was each ``k3kit`` command's start-up: the interpreter and k3kit's imports
(0.5-0.9 s of CPU for ``audit``, ``card``, ``sign``; the command's own work is often less). The
blocks stay as written; only what ``k3kit`` starts is cheaper.

How it stays the real command: :func:`write_shim` writes an executable ``k3kit`` (first on the
blocks' PATH) that sends its argv, working folder, environment, umask and its own stdin, stdout
and stderr (the file descriptors themselves, over a Unix socket) to a server started once per
document (:func:`serve`, with the document's environment, which has imported k3kit's modules
and nothing else). The server forks; the child takes those descriptors, folder, environment and
umask, and runs what the venv's ``k3kit`` script runs (``sys.exit(k3kit.cli.main())``), with
Python's own handling of ``SystemExit``, an uncaught exception and the ``atexit`` handlers; the
shim exits with the child's status. Pipes, redirections, ``$(...)`` and exit codes are the
process's own. Each child is a fresh fork of a server that has never run a command, so no call
sees another's state.

When a fork could differ from a fresh process, the shim starts the real ``k3kit`` instead (the
venv's script, by ``exec``): when the command's environment differs from the server's in
anything but what bash sets itself (``PWD``, ``SHLVL``, ``_``, ``OLDPWD``), because a library
may read a variable once at import (huggingface_hub reads ``HF_ENDPOINT``: README's
``HF_ENDPOINT=... k3kit pull`` runs as a real process); for ``launch`` without ``--dry-run``
(it execs the engine, as tests/clirunner.py also says); when ``K3KIT_TEST_CLI=process`` is in
the command's environment, or in the test's (then no server is started: to compare both ways by
hand); and when no server answers. Every call is logged with which way it
ran (:func:`served`), and tests/test_doc_commands.py checks that forks and real processes give
the same bytes.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import signal
import socket
import struct
import sys
import traceback
from pathlib import Path
from typing import Any

#: Variables bash itself sets or changes in what it passes to a command.
BASH_OWN = frozenset({"PWD", "SHLVL", "_", "OLDPWD"})
#: The modules the docs' commands import (each a verb's library); imported once by the server.
PRELOAD = (
    "k3kit.cli._app",
    "k3kit.cli.publish",
    "k3kit.cli.buyer",
    "k3kit.cli.deploy",
    "k3kit.cli.review",
    "k3kit.cli.present",
    "k3kit.cli.accept",
    "k3kit.cli.commerce",
    "k3kit.cli.channel",
    "k3kit.audit",
    "k3kit.card",
    "k3kit.evidence",
    "k3kit.accept",
    "k3kit.commerce",
    "k3kit.channel",
    "k3kit.publish",
    "k3kit.node",
)
_HEADER = struct.Struct("!Q")
_STATUS = struct.Struct("!i")


def differs(env: dict[str, str], server_env: dict[str, str]) -> list[str]:
    """The variables (other than bash's own) whose value a fresh process would see differently
    from what the server imported with."""
    names = (set(env) | set(server_env)) - BASH_OWN
    return sorted(n for n in names if env.get(n) != server_env.get(n))


def fallback_reason(argv: list[str], env: dict[str, str], server_env: dict[str, str]) -> str:
    """Why this call must be a real process ("" when a fork is the same thing)."""
    if env.get("K3KIT_TEST_CLI") == "process":
        return "K3KIT_TEST_CLI=process"
    if argv[:1] == ["launch"] and "--dry-run" not in argv:
        return "launch execs the engine"
    changed = differs(env, server_env)
    return f"environment differs: {', '.join(changed)}" if changed else ""


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("the shim hung up")
        data += chunk
    return data


def _exit_status(exc: SystemExit) -> int:
    """The status ``python`` gives a ``SystemExit``: None is 0, an int itself, else 1 (printed)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _run_command(argv: list[str], script: str) -> int:
    """What the venv's ``k3kit`` script does, with the interpreter's own top-level handling."""
    sys.argv = [script, *argv]
    try:
        from k3kit.cli import main

        main()
        raise SystemExit(0)
    except SystemExit as exc:
        status = _exit_status(exc)
    except KeyboardInterrupt:
        traceback.print_exc()
        status = 130
    except BaseException:  # the interpreter prints any uncaught exception
        traceback.print_exc()
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return status


def _running_coverage() -> Any:
    """The coverage.py measurement of this process (the suite's ``--cov``), or None."""
    coverage = sys.modules.get("coverage")
    return coverage.Coverage.current() if coverage is not None else None


def _own_coverage() -> None:
    """Measure the child as coverage.py measures any new process of the suite (``patch =
    ["subprocess"]``): with a Coverage of its own and its own data file. The server's, inherited
    by the fork, would write every child's lines under one file name (its suffix was chosen at
    the server's start), so it is dropped unsaved; this is what coverage's own ``patch =
    ["fork"]`` does in a child."""
    current = _running_coverage()
    if current is None:
        return
    current._auto_save = False
    current.stop()
    sys.modules["coverage"].process_startup(force=True)


def _child(conn: socket.socket, request: dict[str, Any], fds: list[int], script: str) -> None:
    """Become the command: its descriptors, folder, environment and umask; report its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(str(request["cwd"]))
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(int(request["umask"]))
    _own_coverage()
    status = _run_command(list(request["argv"]), script)
    try:
        conn.sendall(_STATUS.pack(status))
    finally:
        os._exit(status)


def _handle(conn: socket.socket, listener: socket.socket, script: str, log: Path) -> None:
    head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
    request = json.loads(_recv_exact(conn, _HEADER.unpack(head)[0]))
    reason = fallback_reason(request["argv"], request["env"], dict(os.environ))
    with log.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"argv": request["argv"], "real_process": reason}) + "\n")
    if reason:
        conn.sendall(b"F")
        for fd in fds:
            os.close(fd)
        return
    conn.sendall(b"K")
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() == 0:
        listener.close()
        _child(conn, request, fds, script)
    for fd in fds:
        os.close(fd)


def serve(sock_path: Path, script: str, log: Path) -> None:
    """Import k3kit's modules, then fork one child per ``k3kit`` call until terminated."""
    sys.path[0] = str(Path(script).parent)  # as for the venv's script: its own folder first
    for name in PRELOAD:
        importlib.import_module(name)
    measuring = _running_coverage()
    if measuring is not None:  # the imports' lines: a child measures from the fork on
        measuring.save()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path) + ".tmp")
    listener.listen(16)
    os.rename(str(sock_path) + ".tmp", sock_path)  # it exists once it accepts
    while True:
        conn, _ = listener.accept()
        with conn:
            _handle(conn, listener, script, log)


def served(log: Path) -> list[dict[str, object]]:
    """Every call the server saw: its argv and why it ran as a real process ("" = forked)."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


_SHIM = '''#!{python} -IS
"""k3kit for the docs' blocks: forked by tests/docfork.py's server, or the real one (see there)."""
import json, os, socket, struct, sys
SOCK, REAL = {sock!r}, {real!r}
argv = sys.argv[1:]
try:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(SOCK)
    body = json.dumps({{"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
                       "umask": os.umask(0o022)}}).encode()
    socket.send_fds(conn, [struct.pack("!Q", len(body))], [0, 1, 2])
    conn.sendall(body)
    answer = conn.recv(1)
except OSError:
    answer = b"F"
if answer != b"K":
    os.execv(REAL[0], [*REAL, *argv])
status = b""
while len(status) < 4:
    chunk = conn.recv(4 - len(status))
    if not chunk:
        sys.stderr.write("docfork: the k3kit process ended without an exit status\\n")
        sys.exit(1)
    status += chunk
sys.exit(struct.unpack("!i", status)[0])
'''


def real_k3kit() -> list[str]:
    """The command a clone's venv runs as ``k3kit``: its script, else ``python -m k3kit``."""
    script = Path(sys.executable).parent / "k3kit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "k3kit"]


def write_shim(bindir: Path, sock_path: Path) -> Path:
    """The ``k3kit`` executable that asks the server at ``sock_path`` (module doc)."""
    bindir.mkdir(parents=True)
    shim = bindir / "k3kit"
    shim.write_text(
        _SHIM.format(python=sys.executable, sock=str(sock_path), real=real_k3kit()),
        encoding="utf-8",
    )
    shim.chmod(0o755)
    return shim


if __name__ == "__main__":
    serve(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
