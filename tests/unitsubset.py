"""The unit subset: the tests that run in the test process alone, for a development loop in seconds.

``make unit-fast`` runs ``pytest --unit-only``: every test that starts another process (a
subprocess, Chromium, PostgreSQL, the registry, an engine, the co-tenant user) or listens on a
socket (the test hub, the stand-in servers, whose real delays are most of accept's time) is left
out. Tests are not listed by hand, so no list of them can go stale (the one hand-kept table is
of k3kit verbs that start a process themselves, :data:`PROCESS_VERBS`):

* At collection, :func:`mark` reads what each test uses: the global names of its own code and
  of every fixture in its closure, following the functions and classes of ``tests/`` they name
  (``_render`` -> ``subprocess``; ``StandInServer`` -> its ``start_server``). A test that reaches
  a process-starting name gets the ``process`` marker, one that reaches a listening server gets
  ``server``; ``--unit-only`` deselects both.
* While a ``--unit-only`` test runs, :func:`guard` holds the line the reading may have missed
  (k3kit code that starts ``nvidia-smi``, a helper reached through an attribute): starting a
  process or listening on a socket skips the test with the reason, so the subset stays in-process
  by construction, and ``make unit`` still runs that test in full.

The markers change nothing in a full run: they only name what a test uses.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import socket
import subprocess
import types
from collections.abc import Iterator
from typing import Any

import pytest

#: Stands for a call with a ``process=`` keyword: run_k3kit(..., process=True) starts a process.
PROCESS_KEYWORD = "process="
#: Global names whose use starts another process.
PROCESS_NAMES = frozenset(
    {"subprocess", "Popen", "fork", "posix_spawn", "create_subprocess_exec", "cotenant"}
    | {PROCESS_KEYWORD}
)
#: CLI verbs that start a process inside k3kit itself, reached in-process through run_k3kit and
#: so invisible to the names above: ``engine snapshot`` runs the wheel's own Python for its flags.
#: (Where such a call fills state shared by a module, a skip half-way would fail the next test.)
PROCESS_VERBS = (("engine", "snapshot"),)
#: Global names whose use listens on a socket on 127.0.0.1.
SERVER_NAMES = frozenset(
    {"ThreadingHTTPServer", "HTTPServer", "TCPServer", "start_server", "serving", "listen"}
)
OPTION = "--unit-only"
REASON = "{what} (outside the unit subset; `make unit` runs it)"


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        action="store_true",
        help="run only the tests that start no process and listen on no socket (make unit-fast)",
    )


def configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "process: the test starts another process (auto-applied)")
    config.addinivalue_line("markers", "server: the test listens on a socket (auto-applied)")


def _code_names(code: types.CodeType) -> set[str]:
    """Global and attribute names of ``code`` and of the functions and lambdas nested in it; a
    call with ``process=...`` or of a :data:`PROCESS_VERBS` verb adds :data:`PROCESS_KEYWORD`
    (keyword names and string arguments are the code's constants)."""
    names = set(code.co_names)
    words = {const for const in code.co_consts if isinstance(const, str)}
    if any(words.issuperset(verb) for verb in PROCESS_VERBS):
        names.add(PROCESS_KEYWORD)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
        elif isinstance(const, tuple) and "process" in const:
            names.add(PROCESS_KEYWORD)
    return names


def _is_ours(obj: Any) -> bool:
    return getattr(obj, "__module__", "").startswith("tests.")


#: What each function or class reaches, computed once per object (many tests share helpers).
_REACHED: dict[int, frozenset[str]] = {}


def _reached(obj: Any) -> frozenset[str]:
    """Every name ``obj`` uses, following the functions and classes of ``tests/`` it names."""
    key = id(obj)
    if key in _REACHED:
        return _REACHED[key]
    _REACHED[key] = frozenset()  # a helper that reaches itself adds nothing more
    names: set[str] = set()
    if inspect.isclass(obj):
        # A subclass of ThreadingHTTPServer listens in its base's constructor.
        names = {base.__name__ for base in obj.__mro__[1:]}
        for member in vars(obj).values():
            if inspect.isfunction(member):
                names |= _reached(member)
    else:
        func = inspect.unwrap(obj)
        code = getattr(func, "__code__", None)
        if code is not None:
            names = _code_names(code)
            for name in list(names):
                target = func.__globals__.get(name)
                if (inspect.isfunction(target) or inspect.isclass(target)) and _is_ours(target):
                    names |= _reached(target)
    _REACHED[key] = frozenset(names)
    return _REACHED[key]


def _uses(item: pytest.Function) -> set[str]:
    names = set(_reached(item.function))
    for defs in item._fixtureinfo.name2fixturedefs.values():
        for fixturedef in defs:
            names |= _reached(fixturedef.func)
    return names


def mark(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by what it uses; with ``--unit-only``, deselect the marked ones."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        if isinstance(item, pytest.Function):
            names = _uses(item)
            if names & PROCESS_NAMES:
                item.add_marker(pytest.mark.process)
            if names & SERVER_NAMES:
                item.add_marker(pytest.mark.server)
        marked = item.get_closest_marker("process") or item.get_closest_marker("server")
        (dropped if marked else kept).append(item)
    if config.getoption(OPTION) and dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _refuse(what: str) -> Any:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise pytest.skip.Exception(REASON.format(what=what), _use_item_location=True)

    return refused


@contextlib.contextmanager
def guard(config: pytest.Config) -> Iterator[None]:
    """With ``--unit-only``: a process start or a listening socket skips the test (module doc)."""
    if not config.getoption(OPTION):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "_execute_child", _refuse("starts a process"))
        for name in ("fork", "posix_spawn", "posix_spawnp", "execv", "execve"):
            patch.setattr(os, name, _refuse("starts a process"))
        patch.setattr(socket.socket, "listen", _refuse("listens on a socket"))
        yield
