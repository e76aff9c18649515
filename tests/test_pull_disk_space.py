"""A pull into a folder whose disk is too small: refused before the first byte is downloaded.

Before: `k3kit pull` downloaded until ENOSPC (on a real kit, hours in), then reported the bytes
of the part files it had just deleted. Now the one free-space check (``k3kit._fs.need_free_space``)
compares what the lock still needs with the disk's free space first. The disk is real: a small
tmpfs mounted for the test (root only, as tests/test_disk_full.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import KeyFiles, run_k3kit
from tests.hubkit import ServedKit, make_served_kit, resolve_gets, serve
from tests.testhub.server import TestHub
from tests.tmpfs import mounted_tmpfs


@pytest.fixture
def hub() -> Iterator[TestHub]:
    yield from serve()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 128 KiB tmpfs: the served repo (two 256 KiB shards) cannot fit on it."""
    yield from mounted_tmpfs(tmp_path / "small", "128k")


def test_pull_into_a_too_small_disk_is_refused_before_any_download(
    hub: TestHub, tmp_path: Path, signing_key: KeyFiles, small_disk: Path
) -> None:
    served: ServedKit = make_served_kit(hub, tmp_path, signing_key)
    dest = small_disk / "weights"
    done = run_k3kit(
        "pull",
        served.kit,
        "--dir",
        dest,
        "--trust",
        served.key.public,
        "--layout",
        "plain",
        "--json",
    )
    assert done.returncode == 4, done.stderr
    assert "Traceback" not in done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "DISK_TOO_SMALL"
    assert f"pulling {served.lock.repo} needs" in error["message"]
    assert f"on the disk holding {dest}" in error["message"]
    assert "nothing was written" in error["message"]
    assert "on a larger one" in error["hint"]
    assert resolve_gets(hub) == []  # not one byte of any file was asked for
    assert [p.name for p in small_disk.rglob("*") if p.is_file()] == []


def test_pull_resuming_counts_only_what_is_still_missing(
    hub: TestHub, tmp_path: Path, signing_key: KeyFiles
) -> None:
    """A rerun after a complete pull needs no space: the files in place are hashed, not
    fetched, so the check must not count them (it would refuse a full disk for nothing)."""
    served = make_served_kit(hub, tmp_path, signing_key)
    dest = tmp_path / "w"
    args = ("pull", served.kit, "--dir", dest, "--trust", served.key.public, "--json")
    first = run_k3kit(*args)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["files_downloaded"] == served.lock.file_count
    hub.reset_log()
    again = run_k3kit(*args)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["bytes_downloaded"] == 0 and report["files_in_place"] == served.lock.file_count
    assert resolve_gets(hub) == []
