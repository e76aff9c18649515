"""Docker credential helpers: ``credHelpers`` and ``credsStore`` of a docker or podman config.

A helper is the program ``docker-credential-NAME``; asked ``get`` with the registry's server
name (``HOST[:PORT]``) on stdin, it prints ``{"ServerURL": …, "Username": …, "Secret": …}``
(github.com/docker/docker-credential-helpers). ECR, GCR, ACR and the desktop keychains store
logins this way only, so the config file holds no ``auth`` for them.

Running one runs someone's program as this user, with a secret on its stdout, so k3kit runs it
fail-closed (docs/oci.md, "Credential helpers"):

* found on the caller's ``PATH`` by the one rule for programs k3kit runs by name
  (:func:`k3kit._fs.program_on_path`): one another user could have placed or changed (a
  ``PATH`` through ``/tmp/bin``) is never run (``OCI_CRED_HELPER_UNSAFE``); the name is a bare
  name (``../x`` would be a path, not a lookup);
* given :data:`TIMEOUT_S` seconds and :data:`MAX_OUTPUT` bytes of output, then killed with its
  whole process group (a helper that hangs, or forks something that does, cannot hold k3kit);
* its answer parsed strictly (one JSON object, string ``Username`` and ``Secret``);
* its stderr is never read and nothing it printed is ever echoed: a helper's error text may hold
  the secret it failed to hand over. A failure names the helper, the registry and its exit
  status, and says how to see the helper's own words (run it yourself).

``credentials not found in native keychain`` (the protocol's "no login", exit 1) is no login: the
next credentials file is tried, as docker falls back to no credentials. A ``Username`` of
``<token>`` (docker's identity token, an OAuth2 refresh token for the registry's token service)
is refused with its own message: k3kit does not make that exchange.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field

from k3kit._fs import program_on_path
from k3kit.errors import EnvironmentProblem

PREFIX = "docker-credential-"
TIMEOUT_S = 30.0
"""How long a helper may take in all (ECR's helper asks AWS for a token over the network)."""
MAX_OUTPUT = 64 * 1024
"""The most a helper may print; real answers are a few KiB (an ECR token is about 2 KiB)."""
NOT_FOUND = "credentials not found in native keychain"
IDENTITY_TOKEN = "<token>"  # noqa: S105 - docker's marker, not a secret
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class HelperAnswer:
    """What a helper said: a user name and a secret (never shown by repr)."""

    username: str = field(repr=False)
    secret: str = field(repr=False)


def valid_name(name: object) -> bool:
    """Whether ``name`` (from a config file) is a helper name k3kit may look up on PATH."""
    return isinstance(name, str) and NAME.fullmatch(name) is not None


def ask(name: str, server: str) -> HelperAnswer | None:
    """``docker-credential-NAME get`` for ``server``: its answer, None for "no login", or
    ``OCI_CRED_HELPER_UNSAFE`` / ``OCI_CRED_HELPER_FAILED`` (see the module's docstring)."""
    program = PREFIX + name
    found = program_on_path(program)
    if found is None:
        raise _failed(program, server, "it is not on PATH", "install it or fix PATH")
    path, unsafe = found
    if unsafe is not None:
        raise EnvironmentProblem(
            f"the credential helper {program} found on PATH, {path}, could have been put or "
            f"changed by another user ({unsafe} is not owned by root or you, or others can "
            "write it); it was not run",
            code="OCI_CRED_HELPER_UNSAFE",
            hint="install the helper where only root or you can write (/usr/local/bin, your "
            "own ~/bin) and put that folder first on PATH",
        )
    status, out = _run(str(path), program, server)
    if status != 0:
        if out.strip() == NOT_FOUND.encode():
            return None
        raise _failed(program, server, f"it exited with status {status}")
    return _answer(out, program, server)


def _run(path: str, program: str, server: str) -> tuple[int, bytes]:
    """Run the helper in its own process group; its exit status and stdout (capped, in time)."""
    try:
        proc = subprocess.Popen(
            [path, "get"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:  # not executable, a bad #! line
        raise _failed(program, server, f"it cannot be run ({exc.strerror or exc})") from exc
    try:
        _feed(proc, server)
        out = _collect(proc, program, server, time.monotonic() + TIMEOUT_S)
    except BaseException:
        _kill(proc)
        raise
    finally:
        assert proc.stdout is not None
        proc.stdout.close()
    return proc.returncode, out


def _feed(proc: subprocess.Popen[bytes], server: str) -> None:
    """The server name on stdin, then EOF (a helper that does not read it is no error)."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(server.encode() + b"\n")
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()


def _collect(proc: subprocess.Popen[bytes], program: str, server: str, ends: float) -> bytes:
    """stdout until EOF and exit, refused past ``ends`` or :data:`MAX_OUTPUT` bytes."""
    assert proc.stdout is not None
    fd, out = proc.stdout.fileno(), bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = ends - time.monotonic()
            if left <= 0:
                raise _hung(program, server)
            if not sel.select(left):
                continue
            piece = os.read(fd, 65536)
            if not piece:
                break
            out += piece
            if len(out) > MAX_OUTPUT:
                raise _failed(program, server, f"it printed more than {MAX_OUTPUT} bytes")
    try:
        proc.wait(timeout=max(0.0, ends - time.monotonic()))
    except subprocess.TimeoutExpired as exc:
        raise _hung(program, server) from exc
    return bytes(out)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """End a helper given up on with its whole process group (what it forked too: a shell
    script's ``sleep`` would hold the pipe), then reap it. Called before it is reaped, so the
    group id is still the helper's own."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _answer(out: bytes, program: str, server: str) -> HelperAnswer:
    """The strict reading of a helper's answer; nothing of it is ever echoed."""
    try:
        doc = json.loads(out)
    except (ValueError, RecursionError):
        doc = None
    user = doc.get("Username") if isinstance(doc, dict) else None
    secret = doc.get("Secret") if isinstance(doc, dict) else None
    if not isinstance(user, str) or not isinstance(secret, str) or not user or not secret:
        raise _failed(program, server, "its answer is not JSON with a Username and a Secret")
    if user == IDENTITY_TOKEN:
        raise _failed(
            program,
            server,
            "it answered with an identity token (Username <token>), an OAuth2 refresh token "
            "k3kit does not exchange",
            "log in with a user name and a password or robot-account token instead "
            "(`docker login -u USER`), or use a helper that returns one",
        )
    if ":" in user or any(ord(c) < 0x20 or ord(c) == 0x7F for c in user + secret):
        raise _failed(program, server, "its Username or Secret cannot be sent as Basic auth")
    return HelperAnswer(user, secret)


def _hung(program: str, server: str) -> EnvironmentProblem:
    return _failed(program, server, f"it did not answer within {TIMEOUT_S:g} s; it was killed")


def _failed(program: str, server: str, why: str, fix: str = "") -> EnvironmentProblem:
    """A helper that gave no usable answer; only k3kit's own words, never the helper's."""
    return EnvironmentProblem(
        f"the credential helper {program} gave no credentials for {server}: {why}",
        code="OCI_CRED_HELPER_FAILED",
        hint=fix
        or f"run `echo {server} | {program} get` yourself to see why (k3kit never "
        "shows what a helper prints: it may hold the secret), then log in again",
    )
