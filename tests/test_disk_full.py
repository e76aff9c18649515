"""A disk that is full or read-only, for real: a 64 KiB tmpfs mounted for the test (root only).

A full disk is the machine's fault, not the input's: every writer reports it as exit 4,
``DISK_UNWRITABLE``, naming the folder whose disk is full, and leaves nothing half-written.
(Before: `ledger init` on a full disk was exit 3, ``LEDGER_CONSTRAINT``, "ledger refused".)
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import GoldenKit, run_k3kit
from tests.tmpfs import mounted_tmpfs


def _mount(folder: Path, *options: str) -> Iterator[Path]:
    yield from mounted_tmpfs(folder, "64k", *options)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs with about 4 KiB left: any output larger than that meets ENOSPC."""
    for disk in _mount(tmp_path / "disk"):
        filler = disk / "filler"
        with filler.open("wb") as handle:
            handle.write(b"\0" * (60 * 1024))
        yield disk


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Path]:
    yield from _mount(tmp_path / "ro", "ro")


def _disk_error(done: subprocess.CompletedProcess[str], folder: Path) -> dict[str, str]:
    assert done.returncode == 4, done.stderr
    assert "Traceback" not in done.stderr
    error: dict[str, str] = json.loads(done.stdout)["error"]
    assert error["code"] == "DISK_UNWRITABLE"
    assert f"the disk holding {folder}" in error["message"]
    assert "free space" in error["hint"]
    return error


def _left(disk: Path) -> list[str]:
    return sorted(p.name for p in disk.iterdir() if p.name != "filler")


def test_pack_onto_a_full_disk_is_exit_4_naming_the_disk_and_leaves_nothing(
    golden: GoldenKit, full_disk: Path
) -> None:
    out = full_disk / "kit.kit.tar.gz"
    done = run_k3kit("pack", golden.kit, "-o", out, "--json")
    error = _disk_error(done, full_disk)
    assert "No space left on device" in str(error["message"])
    assert _left(full_disk) == []


def test_ledger_init_on_a_full_disk_is_exit_4_not_a_refused_row(full_disk: Path) -> None:
    done = run_k3kit("ledger", "init", "--db", full_disk / "ledger.sqlite", "--json")
    error = _disk_error(done, Path("the ledger"))
    assert "LEDGER_CONSTRAINT" not in done.stdout and "refused" not in str(error["message"])


def test_install_onto_a_full_disk_is_exit_4(golden: GoldenKit, full_disk: Path) -> None:
    """install compares the kit's size with the disk's free space before copying a byte (the
    one free-space check, k3kit._fs.need_free_space): exit 4, DISK_TOO_SMALL, naming the disk,
    and no staging folder left. (Before, the copy met ENOSPC part-way: DISK_UNWRITABLE.)"""
    done = run_k3kit(
        "install",
        golden.kit,
        "--trust",
        golden.key.public,
        "--into",
        full_disk / "kits",
        "--state-dir",
        full_disk.parent / "state",
        "--json",
    )
    assert done.returncode == 4, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "DISK_TOO_SMALL"
    assert f"on the disk holding {full_disk / 'kits'}" in error["message"]
    assert "on a larger one" in error["hint"]
    assert [p.name for p in (full_disk / "kits").iterdir()] == []


def test_pack_onto_a_read_only_disk_is_exit_4(golden: GoldenKit, read_only_disk: Path) -> None:
    done = run_k3kit("pack", golden.kit, "-o", read_only_disk / "kit.kit.tar.gz", "--json")
    error = _disk_error(done, read_only_disk)
    assert "Read-only file system" in str(error["message"])
    assert os.listdir(read_only_disk) == []
