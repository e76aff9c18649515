"""Hashing of bytes and files: sha256 (hub-comparable) and blake3 (fast, parallel within a file).

Files are read with ``readv`` into reusable buffers, so memory stays flat whatever the file size;
hashlib and blake3 release the GIL on large buffers, so threads hashing different files scale with
cores. Measured on the 2-core machine (docs/performance.md): read sizes from 256 KiB to 4 MiB hash
at the same speed, 16 MiB is slower (the buffer falls out of the CPU caches); the default is 2 MiB
and it shrinks when many workers share the memory budget.

Within one file only blake3 can use more than one core. ``readv`` + ``blake3(max_threads=2)``
measured no faster than one thread (~7 GB/s), because the copy out of the page cache then runs
while both hashing threads wait; a reader thread that fills the next 4 MiB buffer while blake3
hashes the current one (:func:`_pipelined`) reached 11.6 GB/s on one 2 GB file, ahead of blake3's
own ``update_mmap`` (10.5) and ``b3sum`` (10.3). This process never maps a file: a file truncated
under a mapping kills the process that reads it (SIGBUS). On a page cache of large folios a
mapping is still faster, so weight files of 1 GiB and more are hashed through one in a child
process, whose death costs nothing but a second read here (k3kit.weights._mapped).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from k3kit._fs import NotRegularFile as NotRegularFile  # its home; re-exported
from k3kit._fs import open_regular
from k3kit._immutable import NamedTuple
from k3kit._sha256 import sha256_hex as sha256_hex  # its home; re-exported

CHUNK = 2 * 1024 * 1024
PIPELINE_CHUNK = 4 * 1024 * 1024  # multi-threaded blake3 pays a hand-off per update: bigger reads
MIN_CHUNK = 256 * 1024
_SMALLEST_READ = 64 * 1024  # fitted_buffer's floor: a file that grows is read in these
BUFFER_BUDGET = 32 * 1024 * 1024  # all workers' read buffers together
PIPELINE_DEPTH = 3  # buffers in flight per pipelined file: one hashing, one filling, one spare
ALGORITHMS = ("sha256", "blake3")


# hashlib is imported only to hash a file of more than SMALL_BYTES (a weight file: it releases the
# GIL, so hashing threads scale) and a download (StreamHash): it loads the system libcrypto,
# ~3.5 ms of CPU on every node start, while verify of a kit folder hashes KBs (its documents, its
# files, key ids), which CPython's built-in sha256 does without loading a library (k3kit._sha256).
# The same function gives the same digest either way.
SMALL_BYTES = 256 * 1024


class Cancelled(Exception):
    """Hashing stopped part-way because the caller asked it to (another file already failed)."""


def read_size(buffers: int, preferred: int = CHUNK) -> int:
    """Size of each of ``buffers`` buffers: ``preferred``, smaller when the budget is shared."""
    share = BUFFER_BUDGET // max(1, buffers)
    return max(MIN_CHUNK, min(preferred, share - share % (64 * 1024)))


# Value records are NamedTuples, not frozen dataclasses: verify imports this module on every node
# start, and a frozen dataclass costs ~0.5 ms of CPU to create (docs/performance.md, "Start-up").
class FileStamp(NamedTuple):
    """What the filesystem says about a file's identity and last change, to the nanosecond.

    ``ctime`` is the key field: any write, truncate, chmod, rename-over or ``utime`` moves it to
    the current clock, and unlike ``mtime`` it cannot be set back from user space.
    """

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileStamp:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def encode(self) -> str:
        """One exact string (64-bit inode numbers do not survive JSON numbers)."""
        return f"{self.device}:{self.inode}:{self.size}:{self.mtime_ns}:{self.ctime_ns}"


class FileDigest(NamedTuple):
    """Digests of one file and its stamp before and after the read."""

    digests: dict[str, str]
    size: int
    before: FileStamp
    after: FileStamp

    @property
    def stable(self) -> bool:
        """True when nothing visibly changed the file while it was being read."""
        return self.before == self.after and self.size == self.before.size


if TYPE_CHECKING:  # annotations only: a Protocol class costs ~0.05 ms of every node start

    class _Hasher(Protocol):
        def update(self, data: memoryview, /) -> object: ...
        def hexdigest(self) -> str: ...


class _Sha256:
    """sha256 of a file by the engine its size calls for: up to SMALL_BYTES (a kit's files) by
    :func:`sha256_hex`'s, so verify imports no hashlib; anything larger by hashlib's, which
    releases the GIL, so threads hashing weights scale with cores. A file whose first read is
    larger goes to hashlib at once; a smaller first read is held (at most SMALL_BYTES, copied:
    the read buffer is reused) until the end of the file or more bytes decide."""

    __slots__ = ("_held", "_large", "_size")

    def __init__(self) -> None:
        self._held: list[bytes] = []
        self._size = 0
        self._large: _Hasher | None = None

    def update(self, data: memoryview, /) -> None:
        if self._large is None:
            self._size += len(data)
            if self._size <= SMALL_BYTES:
                self._held.append(bytes(data))
                return
            import hashlib

            self._large = hashlib.sha256()
            for part in self._held:
                self._large.update(memoryview(part))
            self._held = []
        self._large.update(data)

    def hexdigest(self) -> str:
        if self._large is not None:
            return self._large.hexdigest()
        return sha256_hex(b"".join(self._held))


def _hashers(
    algos: tuple[str, ...], blake3_threads: int, *, stream: bool = False
) -> list[tuple[str, _Hasher]]:
    """One hasher per algorithm; ``stream`` (a download's :class:`StreamHash`) keeps hashlib for
    sha256 from the first byte, as before :class:`_Sha256`."""
    out: list[tuple[str, _Hasher]] = []
    for name in algos:
        if name == "sha256" and stream:
            import hashlib  # see SMALL_BYTES

            out.append((name, hashlib.sha256()))
        elif name == "sha256":
            out.append((name, _Sha256()))
        elif name == "blake3":
            import blake3  # only when asked for: verify of a kit's own files needs sha256 only

            out.append((name, blake3.blake3(max_threads=max(1, blake3_threads))))
        else:
            raise ValueError(f"unknown digest algorithm {name!r}")
    return out


class StreamHash:
    """Digests of bytes as they arrive (a download), so nothing has to read them back.

    ``restart`` forgets everything hashed so far: a retried transfer starts its file over, and
    its hash must start over with it (bytes of a failed attempt never count toward a match).
    ``hashlib`` and ``blake3`` release the GIL on large updates, so a download thread hashing its
    own chunks runs alongside the other transfers' socket reads.
    """

    def __init__(self, algorithms: Iterable[str]) -> None:
        self.algorithms = tuple(algorithms)
        self.restart()

    def restart(self) -> None:
        self._hashers = _hashers(self.algorithms, 1, stream=True)
        self.size = 0

    def update(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        for _, hasher in self._hashers:
            hasher.update(view)
        self.size += len(view)

    def hexdigests(self) -> dict[str, str]:
        return {name: hasher.hexdigest() for name, hasher in self._hashers}


def _pipelined(
    fd: int,
    first: bytearray,
    consume: Callable[[memoryview], None],
    stop: Callable[[], bool],
) -> int:
    """Read ``fd`` in a helper thread into a small ring of buffers while ``consume`` hashes.

    The reader never gets more than PIPELINE_DEPTH buffers ahead, so memory stays bounded; the
    ``finally`` joins it before the caller can close ``fd``.
    """
    import queue  # the helper thread's hand-off; verify's sha256 of small files never needs it

    free: queue.SimpleQueue[bytearray | None] = queue.SimpleQueue()
    full: queue.SimpleQueue[tuple[bytearray, int] | BaseException] = queue.SimpleQueue()
    free.put(first)
    for _ in range(PIPELINE_DEPTH - 1):
        free.put(bytearray(len(first)))
    quit_reading = threading.Event()

    def reader() -> None:
        try:
            while not quit_reading.is_set():
                buf = free.get()
                if buf is None:
                    return
                n = os.readv(fd, [buf])
                full.put((buf, n))
                if n == 0:
                    return
        except BaseException as exc:  # handed to the hashing thread, which re-raises it
            full.put(exc)

    thread = threading.Thread(target=reader, name="k3kit-read", daemon=True)
    thread.start()
    total = 0
    try:
        while True:
            item = full.get()
            if isinstance(item, BaseException):
                raise item
            buf, n = item
            if n == 0:
                return total
            if stop():
                raise Cancelled
            consume(memoryview(buf)[:n])
            total += n
            free.put(buf)
    finally:
        quit_reading.set()
        free.put(None)
        thread.join()


def hash_fd(
    fd: int,
    algorithms: Iterable[str] = ("sha256",),
    *,
    blake3_threads: int = 1,
    buffer: bytearray | None = None,
    cancel: threading.Event | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> tuple[dict[str, str], int]:
    """Hash an open file descriptor from its current offset; returns (digests, bytes read).

    ``buffer`` lets a worker reuse one allocation for every file it hashes. ``cancel`` is polled
    between reads, so a large file stops within one buffer of being told to (raises Cancelled).
    ``on_bytes`` is called with each read's size, from this thread, for progress.
    With ``blake3_threads`` > 1 reading moves to a helper thread (see the module docstring).
    """
    algos = tuple(algorithms)
    hashers = _hashers(algos, blake3_threads)
    buf = buffer if buffer is not None else bytearray(CHUNK)

    def consume(chunk: memoryview) -> None:
        for _, hasher in hashers:
            hasher.update(chunk)
        if on_bytes is not None:
            on_bytes(len(chunk))

    def stop() -> bool:
        return cancel is not None and cancel.is_set()

    if blake3_threads > 1 and "blake3" in algos:
        total = _pipelined(fd, buf, consume, stop)
    else:
        view = memoryview(buf)
        total = 0
        while True:
            if stop():
                raise Cancelled
            n = os.readv(fd, [buf])
            if n == 0:
                break
            consume(view[:n])
            total += n
    return {name: hasher.hexdigest() for name, hasher in hashers}, total


def _open_regular(path: Path | str, follow_symlinks: bool) -> tuple[int, os.stat_result]:
    # k3kit._fs's safe open: non-blocking (a FIFO would otherwise wait for a writer forever),
    # regular files only, checked on the descriptor that is then read.
    return open_regular(path, follow_symlinks=follow_symlinks)


def hash_file(
    path: Path | str,
    algorithms: Iterable[str] = ("sha256",),
    *,
    follow_symlinks: bool = False,
    blake3_threads: int = 1,
) -> tuple[dict[str, str], int]:
    """Hash a regular file; refuses to follow a symlink unless asked and refuses special files."""
    fd, st = _open_regular(path, follow_symlinks)
    try:
        buffer = None if blake3_threads > 1 else fitted_buffer(st.st_size)
        return hash_fd(fd, algorithms, blake3_threads=blake3_threads, buffer=buffer)
    finally:
        os.close(fd)


def fitted_buffer(size: int) -> bytearray:
    """A read buffer no larger than a file of ``size`` bytes needs, and never above
    :data:`CHUNK`: one byte more than the file, so its first read takes it all and the second
    finds the end (a file that grew meanwhile is still read to its end, in more reads).

    A kit's files are a few kB each; a fresh 2 MiB buffer for each of them (allocated and
    zeroed, its pages faulted in) was most of what hashing a kit's 32 files cost: about 6 ms of
    the 7 on verify's first run (issue 23, docs/performance.md), paid twice by ``launch``.
    """
    return bytearray(max(_SMALLEST_READ, min(CHUNK, size + 1)))


def digest_file(
    path: Path,
    algorithms: Iterable[str],
    *,
    blake3_threads: int = 1,
    buffer: bytearray | None = None,
    cancel: threading.Event | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> FileDigest:
    """Hash a regular file (never through a symlink) and stamp it before and after the read.

    The two stamps come from ``fstat`` on the open descriptor, so they describe the very bytes
    that were hashed; a verification cache may only trust the digest when they are equal.
    """
    fd, st_before = _open_regular(path, follow_symlinks=False)
    try:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # larger kernel read-ahead
        digests, size = hash_fd(
            fd,
            algorithms,
            blake3_threads=blake3_threads,
            buffer=buffer,
            cancel=cancel,
            on_bytes=on_bytes,
        )
        st_after = os.fstat(fd)
    finally:
        os.close(fd)
    return FileDigest(digests, size, FileStamp.of(st_before), FileStamp.of(st_after))
