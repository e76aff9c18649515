"""A real second user on this machine, for attacks a co-tenant can make.

Class 3 of the threat model ("state others can write") is only honest when the attacker's steps
run under another uid: a mock of ``os.stat`` proves nothing about what the kernel lets a co-tenant
delete or rename. As root (CI runs as root), :func:`as_cotenant` runs a command as ``nobody``
(uid/gid 65534) with :mod:`subprocess`'s ``user=``/``group=``; elsewhere the tests that need it skip
with that reason.

pytest's ``tmp_path`` lives under ``/tmp/pytest-of-root`` (mode 0700), which ``nobody`` cannot
reach, so :func:`shared_folder` makes a fresh folder directly in the system's temporary directory,
sticky and world-writable like ``/tmp`` itself, and removes it afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

COTENANT_UID = 65534
COTENANT_GID = 65534

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="a real second user needs root to switch uid (CI runs as root)"
)


def as_cotenant(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as the co-tenant (uid/gid 65534) and return what it did."""
    if os.geteuid() != 0:
        pytest.skip("a real second user needs root to switch uid (CI runs as root)")
    return subprocess.run(
        argv,
        user=COTENANT_UID,
        group=COTENANT_GID,
        extra_groups=[],
        capture_output=True,
        text=True,
        check=check,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": "/"},
    )


def cotenant_python(code: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a standard-library Python snippet as the co-tenant (``sys.argv[1:]`` are ``args``).

    The test's own interpreter may live where the co-tenant cannot reach it (``/root/.pyenv``), so
    the snippet runs on the system's ``python3``, which every user can execute.
    """
    system_python = shutil.which("python3", path="/usr/bin:/bin")
    if system_python is None:
        pytest.skip("no system python3 for the co-tenant's steps")
    return as_cotenant([system_python, "-I", "-c", code, *args], check=check)


@contextmanager
def shared_folder(mode: int = 0o1777) -> Iterator[Path]:
    """A fresh folder both users can reach, sticky and world-writable like ``/tmp`` by default."""
    folder = Path(tempfile.mkdtemp(prefix="k3kit-cotenant-", dir="/tmp"))
    folder.chmod(mode)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
