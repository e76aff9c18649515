"""Pull hashes each chunk as it arrives (issue 23): nothing is placed before its whole hash matched.

Real pieces: the test hub on 127.0.0.1, ``HfHub`` streaming bodies, the real pull engine. What a
man in the middle (or a flaky proxy) does to the bytes in flight is done by a downloader that
wraps the real one and alters the chunks on their way to the part file. Whether a file was ever
placed is watched with inotify on the folder (every create and rename-into under its name is
queued by the kernel, so no poll can miss it).
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from k3kit.hub import HfHub
from k3kit.models import WeightsLock
from k3kit.pull import pull
from k3kit.pull._parts import Sink
from k3kit.weights.pin import pin_hub
from tests.testhub.server import TestHub

REPO = "org/overlap"
SHARD = "model-00001-of-00001.safetensors"
IN_CREATE, IN_MOVED_TO, IN_NONBLOCK = 0x100, 0x80, 0o4000


def shard_bytes() -> bytes:
    """3 MiB and a bit: several 1 MiB chunks, the last one short. Fixed, no randomness."""
    return bytes(range(256)) * (12 * 1024 + 7)


@pytest.fixture
def hub() -> Iterator[TestHub]:
    with TestHub() as h:
        yield h
    assert h.errors == []


@pytest.fixture
def lock(hub: TestHub) -> WeightsLock:
    sha = hub.commit(REPO, {SHARD: shard_bytes(), "config.json": b'{"hidden_size": 8}\n'})
    return pin_hub(HfHub(hub.url), repo=REPO, revision=sha, pinned_at="2026-11-01T00:00:00Z")


class Placements:
    """Names created in, or renamed into, one folder since construction (inotify)."""

    def __init__(self, folder: Path) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK)
        assert self.fd >= 0
        wd = self.libc.inotify_add_watch(self.fd, bytes(folder), IN_CREATE | IN_MOVED_TO)
        assert wd >= 0, os.strerror(ctypes.get_errno())

    def names(self) -> list[str]:
        out: list[str] = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            i = 0
            while i < len(buf):
                _, _, _, n = struct.unpack_from("iIII", buf, i)
                out.append(buf[i + 16 : i + 16 + n].rstrip(b"\0").decode())
                i += 16 + n
        os.close(self.fd)
        return out


class InFlight:
    """The real downloader; ``alter`` may rewrite the chunks of ``path`` before the sink sees
    them, ``after_first`` runs once the first chunk of ``path`` has been written."""

    def __init__(
        self,
        inner: HfHub,
        path: str,
        alter: Callable[[int, bytes, int], bytes] | None = None,
        after_first: Callable[[Sink], None] | None = None,
    ) -> None:
        self.inner, self.path, self.alter, self.after_first = inner, path, alter, after_first
        self.calls = 0

    def fetch(
        self, repo: str, commit: str, path: str, *, size: int, sink: Sink, cancel: threading.Event
    ) -> None:
        if path != self.path:
            return self.inner.fetch(repo, commit, path, size=size, sink=sink, cancel=cancel)
        self.calls += 1
        outer = self

        class Tap:
            def __init__(self) -> None:
                self.seen = 0

            def restart(self) -> None:
                self.seen = 0
                sink.restart()

            def write(self, data: bytes) -> None:
                start, self.seen = self.seen, self.seen + len(data)
                sink.write(outer.alter(start, data, size) if outer.alter else data)
                if start == 0 and outer.after_first:
                    outer.after_first(sink)

        self.inner.fetch(repo, commit, path, size=size, sink=Tap(), cancel=cancel)
        return None


def flip_last_byte(start: int, data: bytes, size: int) -> bytes:
    """Everything right but the very last byte of the file: only a whole hash can tell."""
    if start + len(data) < size:
        return data
    return data[:-1] + bytes([data[-1] ^ 0x01])


def test_a_file_whose_last_byte_changed_in_flight_is_never_placed(
    hub: TestHub, lock: WeightsLock, tmp_path: Path
) -> None:
    dest = tmp_path / "weights"
    dest.mkdir()
    watch = Placements(dest)
    mitm = InFlight(HfHub(hub.url, backoff=0), SHARD, alter=flip_last_byte)
    report = pull(lock, dest, downloader=mitm, layout="plain", workers=2)
    placed = watch.names()
    assert mitm.calls == 2  # fetched, refused, fetched once more, refused again
    assert not report.ok
    assert ("WEIGHTS_DIGEST_MISMATCH", SHARD) in [(p.code, p.path) for p in report.problems]
    assert SHARD not in placed  # never created nor renamed under its name, not even briefly
    assert not (dest / SHARD).exists()
    assert "config.json" in placed and (dest / "config.json").exists()  # the watch works
    moved = [q.moved_to for q in report.quarantined]
    assert len(moved) == 2 and all(m is not None and Path(m).is_file() for m in moved)
    assert all(Path(m).read_bytes() != shard_bytes() for m in moved if m)


def test_a_restarted_transfer_is_hashed_from_its_first_byte(
    hub: TestHub, lock: WeightsLock, tmp_path: Path
) -> None:
    """The hub cuts the body half-way once; the retry truncates the part and must restart its
    hash too: a hash that kept the cut attempt's bytes would refuse the good second attempt."""
    hub.set_fault("drop", path=SHARD, times=1)
    dest = tmp_path / "weights"
    report = pull(lock, dest, downloader=HfHub(hub.url, backoff=0), layout="plain", workers=2)
    assert report.ok, (report.problems, report.errors)
    assert report.quarantined == []  # the second attempt's hash matched on its own
    assert report.bytes_downloaded > lock.total_bytes  # the cut half was received and dropped
    assert (dest / SHARD).read_bytes() == shard_bytes()


def test_a_part_swapped_under_its_name_mid_transfer_is_not_placed(
    hub: TestHub, lock: WeightsLock, tmp_path: Path
) -> None:
    """Another process renames a file of its own over the hidden part name while the transfer
    runs. The streamed hash covers the bytes k3kit wrote, so the file placed must be that very
    file: the swapped-in one (here even holding the genuine bytes) is never renamed into place."""
    dest = tmp_path / "weights"
    dest.mkdir()

    def swap(sink: Sink) -> None:
        (part,) = [p for p in dest.iterdir() if p.name.startswith(f".{SHARD}")]
        planted = dest / "planted"
        planted.write_bytes(shard_bytes())
        os.rename(planted, part)

    watch = Placements(dest)
    swapper = InFlight(HfHub(hub.url, backoff=0), SHARD, after_first=swap)
    report = pull(lock, dest, downloader=swapper, layout="plain", workers=2)
    assert SHARD not in watch.names()
    assert not report.ok
    assert ("PULL_PATH_BLOCKED", SHARD) in [(p.code, p.path) for p in report.problems]
    assert not (dest / SHARD).exists()
