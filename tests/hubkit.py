"""Helpers for the pin/pull tests: a served repo, a signed kit pinned from it, no-sleep retries.

The test hub runs in the pytest process (threads on 127.0.0.1); the CLI runs either as a real
subprocess (``run_k3kit``) or in-process through click's ``CliRunner`` when a test must skip the
client's retry pauses (1-8 s each) with :func:`no_sleep`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from k3kit._canonical import model_bytes
from k3kit._digest import Cancelled
from k3kit._fs import atomic_write
from k3kit.cli import cli
from k3kit.errors import VerificationError
from k3kit.hub import HfHub
from k3kit.models import WeightsLock
from k3kit.publish.kit import build, sign
from k3kit.signing.keys import load_private
from k3kit.weights import check_weights
from k3kit.weights.pin import pin_hub
from tests.conftest import EXAMPLE, FIXED_TIME, KeyFiles
from tests.testhub.server import TestHub

REPO = "moonshotai/Kimi-K3"  # the example package's repo, so a real kit can be built
SHARD = bytes(range(256)) * 1024  # 256 KiB
SHARD2 = bytes((i * 7 + 3) % 256 for i in range(256)) * 1024  # not SHARD's inverse either


def files_v1() -> dict[str, bytes]:
    """A small repo with LFS shards, small files, a nested folder and two identical files."""
    return {
        "config.json": b'{"architectures": ["KimiK3"], "hidden_size": 64}\n',
        "tokenizer_config.json": b'{"model_max_length": 1048576}\n',
        "model-00001-of-00002.safetensors": SHARD,
        "model-00002-of-00002.safetensors": SHARD2,
        "model.safetensors.index.json": b'{"weight_map": {}}\n',
        "extra/notes.txt": b"same bytes\n",
        "extra/copy.txt": b"same bytes\n",
    }


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class ServedKit:
    hub: TestHub
    commit: str
    files: dict[str, bytes]
    lock: WeightsLock
    lock_path: Path
    kit: Path
    key: KeyFiles


def make_served_kit(
    hub: TestHub,
    root: Path,
    key: KeyFiles,
    files: dict[str, bytes] | None = None,
    token: str | None = None,
) -> ServedKit:
    """Commit ``files`` to the hub, pin main from it, build and sign the example kit."""
    files = files or files_v1()
    commit = hub.commit(REPO, files)
    lock = pin_hub(HfHub(hub.url, token), repo=REPO, revision="main", pinned_at=FIXED_TIME)
    lock_path = root / "weights.lock.json"
    atomic_write(lock_path, model_bytes(lock), force=True)
    kit = root / "kit"
    build(EXAMPLE / "package.toml", lock_path, kit)
    sign(kit, load_private(key.private, None), EXAMPLE / "claims.toml", issued_at=FIXED_TIME)
    hub.reset_log()
    return ServedKit(hub, commit, files, lock, lock_path, kit, key)


class NoSleep:
    """Stands in for ``time`` in huggingface_hub and k3kit.hub: records pauses, skips them."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def pause(self, seconds: float, cancel: threading.Event | None) -> None:
        """k3kit.hub's pause between attempts, which waits on its Ctrl-C event (not
        ``time.sleep``) when a pull's workers run it: recorded and skipped, a Ctrl-C still
        honoured. Unskipped, each retrying pull test waited its real back-off (about 6 s)."""
        self.sleeps.append(seconds)
        if cancel is not None and cancel.is_set():
            raise Cancelled

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def skip_sleeps(monkeypatch: pytest.MonkeyPatch) -> NoSleep:
    """Retry pauses of huggingface_hub and k3kit.hub become records (CLI run in-process)."""
    shim = NoSleep()
    for target in (
        "huggingface_hub.utils._http.time",
        "huggingface_hub.file_download.time",
        "k3kit.hub.time",
    ):
        monkeypatch.setattr(target, shim)
    monkeypatch.setattr("k3kit.hub._pause", shim.pause)
    return shim


def serve() -> Iterator[TestHub]:
    """Body of a ``hub`` fixture: a running hub that must not have hit a bug of its own."""
    with TestHub() as h:
        yield h
    assert h.errors == []


def invoke(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    """The CLI in-process (so monkeypatches apply); stdout and stderr stay separate."""
    return CliRunner().invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)


def as_json(result: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def unverified_files(weights: Path, lock: WeightsLock) -> list[str]:
    """Files in place whose bytes do not match the lock (missing files are not counted).

    The invariant every pull must keep, whatever went wrong: nothing unverified where a
    launcher would load it.
    """
    try:
        report = check_weights(weights, lock, algorithm="sha256", all_errors=True)
    except VerificationError as exc:  # no snapshot at all: nothing in place
        assert exc.code in ("WEIGHTS_MISSING_SNAPSHOT", "WEIGHTS_NOT_FOUND"), exc.code
        return []
    return [p.path for p in report.problems if p.code != "WEIGHTS_FILE_MISSING"]


def resolve_gets(hub: TestHub) -> list[str]:
    """Paths of files whose bytes were requested (GET /resolve on the API or a storage GET)."""
    out = []
    for r in hub.requests:
        if r.method == "GET" and (r.server == "storage" or "/resolve/" in r.path):
            out.append(r.path)
    return out
