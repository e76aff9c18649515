"""The in-process CLI runner (tests/clirunner.py) answers as ``python -m k3kit`` does.

Most CLI tests now run the CLI in the test process; these tests are why that is allowed: the same
invocations run both ways give the same exit status, stdout and stderr, byte for byte; a run
leaves the test process as it found it; and the calls only a process can answer still get one.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import clirunner
from tests.conftest import GoldenKit, KeyFiles, run_k3kit

Argv = Callable[[GoldenKit, KeyFiles], list[str]]


@pytest.fixture(autouse=True)
def in_process_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the in-process runner: K3KIT_TEST_CLI=process (every call in a
    subprocess, for a comparison by hand) does not apply to them."""
    monkeypatch.delenv("K3KIT_TEST_CLI", raising=False)


# Representative calls: success, a failed check, usage errors, registered errors with and
# without --json, help and version, and commands that write files (run in a fresh folder each
# way, with relative paths, so both write the same names).
PARITY: dict[str, Argv] = {
    "version": lambda g, o: ["--version"],
    "help": lambda g, o: ["--help"],
    "verb help": lambda g, o: ["verify", "--help"],
    "unknown verb": lambda g, o: ["no-such-verb"],
    "unknown verb --json": lambda g, o: ["no-such-verb", "--json"],
    "missing option value": lambda g, o: ["verify", str(g.kit), "--trust"],
    "verify ok": lambda g, o: ["verify", str(g.kit), "--trust", str(g.key.public)],
    "verify ok --json": lambda g, o: ["verify", str(g.kit), "--trust", str(g.key.public), "--json"],
    "verify wrong key --json": lambda g, o: [
        *("verify", str(g.kit), "--trust", str(o.public), "--json")
    ],
    "verify no kit --json": lambda g, o: ["verify", "no-such-kit", "--json"],
    "show": lambda g, o: ["show", str(g.kit)],
    "show --json": lambda g, o: ["show", str(g.kit), "--json"],
    "ledger not found --json": lambda g, o: ["ledger", "verify", "--db", "none.sqlite", "--json"],
    "ledger init --json": lambda g, o: ["ledger", "init", "--db", "l.sqlite", "--json"],
    "keygen": lambda g, o: ["keygen", "--out", "acme"],
    "keygen bad folder --json": lambda g, o: ["keygen", "--out", "no/such/dir/acme", "--json"],
}


def _masked(text: str) -> str:
    """A fresh key's id and fingerprint differ on every keygen, whichever way it runs."""
    text = re.sub(r"\b[0-9a-f]{64}\b", "<key id>", text)
    return re.sub(r"SHA256:[A-Za-z0-9+/]{43}", "<fingerprint>", text)


@pytest.mark.parametrize("name", sorted(PARITY))
def test_in_process_and_subprocess_runs_give_the_same_answer(
    name: str, golden: GoldenKit, other_key: KeyFiles, tmp_path: Path
) -> None:
    """The same call, each way in its own empty folder: identical status, stdout, stderr."""
    argv = PARITY[name](golden, other_key)
    inside, outside = tmp_path / "in-process", tmp_path / "subprocess"
    inside.mkdir()
    outside.mkdir()
    # each side its own cache folder: the signature memo there would let the second run recall
    # what the first one checked, and say so (a flake of the order the cases ran in)
    mine = run_k3kit(*argv, cwd=inside, env={"XDG_CACHE_HOME": str(inside / ".cache")})
    real = run_k3kit(
        *argv, cwd=outside, process=True, env={"XDG_CACHE_HOME": str(outside / ".cache")}
    )
    assert (mine.returncode, _masked(mine.stdout), _masked(mine.stderr)) == (
        real.returncode,
        _masked(real.stdout.replace(str(outside), str(inside))),
        _masked(real.stderr.replace(str(outside), str(inside))),
    )
    assert sorted(p.name for p in inside.rglob("*")) == sorted(p.name for p in outside.rglob("*"))


def test_an_in_process_run_leaves_the_test_process_as_it_found_it(tmp_path: Path) -> None:
    """Environment, folder, umask, Ctrl-C handler, warning filters and std streams after a run
    that changes its environment (``env=``), folder (``cwd=``) and writes files."""
    umask_before = os.umask(0o022)
    os.umask(umask_before)
    before = (
        dict(os.environ),
        os.getcwd(),
        signal.getsignal(signal.SIGINT),
        list(warnings.filters),
        umask_before,
    )
    streams = (sys.stdin, sys.stdout, sys.stderr)
    done = run_k3kit("keygen", "--out", "acme", cwd=tmp_path, env={"K3KIT_RUNNER_PROBE": "1"})
    assert done.returncode == 0, done.stderr
    assert any(tmp_path.iterdir())
    umask = os.umask(0o022)
    os.umask(umask)
    assert (
        dict(os.environ),
        os.getcwd(),
        signal.getsignal(signal.SIGINT),
        list(warnings.filters),
        umask,
    ) == before
    assert (sys.stdin, sys.stdout, sys.stderr) == streams


def test_an_exit_status_above_255_wraps_as_the_kernels_does() -> None:
    """``sys.exit(256)`` is status 0 in a real process: the runner reports the same."""
    err = clirunner._stream()
    assert clirunner._status(SystemExit(256), err) == 0
    assert clirunner._status(SystemExit(None), err) == 0
    assert clirunner._status(SystemExit("bye"), err) == 1
    assert clirunner._text(err) == "bye\n"


@pytest.mark.parametrize(
    ("argv", "env", "timeout"),
    [
        (["launch", "kit", "--no-preflight"], {}, 120.0),  # execs the engine
        (["verify", "kit"], {"HF_ENDPOINT": "http://127.0.0.1:1"}, 120.0),  # read at import
        (["pull", "kit"], {"HF_HUB_OFFLINE": "1"}, 120.0),  # a variable not set at start-up
        (["sign", "kit", "--key", "pkcs11:token=t"], {}, 120.0),  # a native module, loaded once
        (["verify", "kit"], {}, 30.0),  # a bounded-time check
    ],
)
def test_calls_only_a_process_answers_get_one(
    argv: list[str], env: dict[str, str], timeout: float
) -> None:
    assert clirunner.needs_process(argv, {**os.environ, **env}, timeout)


@pytest.mark.parametrize(
    "argv",
    [["launch", "kit", "--no-preflight", "--dry-run"], ["verify", "kit"], ["ledger", "init"]],
)
def test_ordinary_calls_run_in_process(argv: list[str]) -> None:
    assert not clirunner.needs_process(argv, dict(os.environ), clirunner.DEFAULT_TIMEOUT)


def test_an_exec_in_process_fails_the_test_instead_of_replacing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """If a new path in the CLI execs, the test fails loudly naming the fix; pytest survives."""
    monkeypatch.setattr(clirunner, "needs_process", lambda *a: False)
    import k3kit.cli._app as app

    def exec_now(*args: object, **kwargs: object) -> None:
        os.execve("/bin/true", ["/bin/true"], {})

    monkeypatch.setattr(app, "_main", exec_now)
    done = run_k3kit("--version")
    assert done.returncode == 1
    assert "AssertionError: the CLI tried to exec another program" in done.stderr
    assert "process=True" in done.stderr


def test_a_library_warning_reaches_the_runs_stderr_as_in_a_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fresh process has no root handler, so huggingface_hub's logged warning is printed on
    stderr by logging's last resort; in-process, pytest's capture handler must not swallow it."""
    import logging

    from huggingface_hub.utils import logging as hf_logging

    import k3kit.cli._app as app

    hf_logging.get_logger("huggingface_hub.file_download")  # hub's own handler, made earlier

    def warn_and_exit(args: list[str]) -> None:
        logging.getLogger("huggingface_hub.file_download").warning("a library's warning")
        logging.getLogger("k3kit-runner-probe").warning("a logger without a handler")
        sys.exit(0)

    handlers = logging.root.handlers[:]
    hub = logging.getLogger("huggingface_hub").handlers
    hub_streams = [getattr(h, "stream", None) for h in hub]
    monkeypatch.setattr(app, "_main", warn_and_exit)
    done = run_k3kit("--version")
    assert (done.returncode, done.stderr) == (
        0,
        "a library's warning\na logger without a handler\n",
    )
    assert logging.root.handlers == handlers
    assert [getattr(h, "stream", None) for h in hub] == hub_streams
