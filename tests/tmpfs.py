"""A real small disk for a test: a tmpfs mounted on a fresh folder (root only; skipped elsewhere).

One helper for every test that needs a disk that is full, read-only or too small, so the skip
rule and the lazy unmount (a test's open descriptor must not fail the teardown) are one.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def mounted_tmpfs(folder: Path, size: str, *options: str) -> Iterator[Path]:
    """Mount a ``size`` tmpfs (``"64k"``) with ``options`` on the new ``folder``, yield it, and
    unmount it afterwards; skip the test where mounting is not allowed."""
    folder.mkdir()
    opts = ",".join((f"size={size}", *options))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)
