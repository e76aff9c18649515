"""The unit subset's two halves (tests/unitsubset.py): the reading at collection that marks a test
by what it uses, and the guard that skips a ``--unit-only`` test the reading missed."""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import unitsubset
from tests.conftest import run_k3kit
from tests.unitsubset import PROCESS_NAMES, SERVER_NAMES, _reached


def _spawns() -> None:
    subprocess.run(["true"], check=True)


def _calls_a_spawner() -> None:
    _spawns()


class _Server(http.server.ThreadingHTTPServer):
    pass


def _serves() -> None:
    _Server(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler).server_close()


def _cli_in_a_process(tmp: Path) -> None:
    run_k3kit("--version", cwd=tmp, process=True)


def _engine_snapshot(tmp: Path) -> None:
    run_k3kit("engine", "snapshot", "--engine", "vllm", "--wheel", tmp / "x.whl", cwd=tmp)


def _in_process() -> str:
    return json.dumps({"a": [1, 2]})


def test_a_helper_that_starts_a_process_marks_its_callers() -> None:
    assert _reached(_calls_a_spawner) & PROCESS_NAMES == {"subprocess"}
    assert unitsubset.PROCESS_KEYWORD in _reached(_cli_in_a_process)
    # k3kit starts the wheel's Python itself: the verb's words mark the in-process call.
    assert unitsubset.PROCESS_KEYWORD in _reached(_engine_snapshot)


def test_a_server_subclass_marks_the_function_that_builds_it() -> None:
    assert "ThreadingHTTPServer" in _reached(_serves) & SERVER_NAMES


def test_a_function_that_stays_in_process_is_not_marked() -> None:
    assert not _reached(_in_process) & (PROCESS_NAMES | SERVER_NAMES)


def _config(unit_only: bool) -> Any:
    return SimpleNamespace(getoption=lambda name: unit_only and name == unitsubset.OPTION)


def test_the_guard_skips_a_process_or_a_listener_and_puts_everything_back() -> None:
    with unitsubset.guard(_config(True)):
        with pytest.raises(pytest.skip.Exception, match="starts a process"):
            subprocess.run(["true"], check=True)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            with pytest.raises(pytest.skip.Exception, match="listens on a socket"):
                sock.listen()
    assert subprocess.run(["true"], check=False).returncode == 0
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()


def test_without_the_option_the_guard_lets_everything_run() -> None:
    with unitsubset.guard(_config(False)):
        assert subprocess.run(["true"], check=False).returncode == 0
