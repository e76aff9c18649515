"""The pieces a pull is made of: the downloader protocol, content groups, a daemon pool."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from k3kit.models import LockedFile
from k3kit.pull._report import PullError


class Sink(Protocol):
    """Where a downloader puts a body: ``restart`` before each attempt, then ``write``s."""

    def restart(self) -> None: ...

    def write(self, data: bytes) -> None: ...


class Downloader(Protocol):
    """What a pull needs from a hub; ``k3kit.hub.HfHub`` implements it.

    ``fetch`` must refuse a declared size other than ``size`` before reading the body, never
    hand more than ``size`` bytes to the sink, and stop at its next chunk once ``cancel`` is set.
    """

    def fetch(
        self,
        repo: str,
        commit: str,
        path: str,
        *,
        size: int,
        sink: Sink,
        cancel: threading.Event,
    ) -> None: ...


@dataclass
class Group:
    """Lock entries stored as one file (in a cache: one blob): fetched and moved together."""

    files: list[LockedFile]
    downloads: int = 0
    error: PullError | None = None


class DaemonPool:
    """A thread pool whose threads never delay the process's exit.

    ``ThreadPoolExecutor`` joins its threads when the interpreter exits, so a download stalled in
    a socket read (up to the read timeout) would hold Ctrl-C hostage; these threads are daemons:
    after a Ctrl-C the pull deletes its part files and exits, and a stalled read dies with it.
    """

    def __init__(self, workers: int, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None]
        self._queue = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(max(1, workers))
        ]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        fut: Future[Any] = Future()
        self._queue.put((fut, fn))
        return fut

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            fut, fn = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except BaseException as exc:  # handed to the main thread through the future
                fut.set_exception(exc)

    def shutdown(self, *, wait: bool) -> None:
        for _ in self._threads:
            self._queue.put(None)
        if wait:
            for t in self._threads:
                t.join()


def stopped_error(g: Group, after: str | None) -> PullError:
    reason = f"not fetched: the pull stopped after {after}"
    return PullError("PULL_STOPPED", g.files[0].path, reason)
