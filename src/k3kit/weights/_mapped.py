"""blake3 of one large weight file through a memory mapping, hashed in a child process.

Why a mapping: a kernel that caches a file in large folios (Linux 6.18's ext4 does for every file
written in large writes or read back from disk; XFS has since 5.18) lets a mapping reach it with
few TLB entries, and blake3 gains about 40 % from that, which a reader that copies out of the page
cache cannot: on one 4 GiB file in 2 MiB folios the copying reader ran at 0.54-0.83x of blake3's
own ``update_mmap``, this one at 0.91-1.01x; in small folios both ran at 0.95x
(docs/performance.md, "Eleventh pass").

Why a child: a mapped page that cannot be read (the file truncated under the mapping, a disk read
error) arrives as ``SIGBUS``, which kills the process that touches it. In a child that death is
only "no answer": :func:`digest_mapped` returns None and the caller reads the file again the
ordinary way (:func:`k3kit._digest.digest_file`), which names what is wrong (``TRUNCATED``,
``UNREADABLE``) as it always did. A verdict never comes from a process that could die mid-read.

What the child is given, and why it can be trusted with it:

* the parent's own descriptor (``pass_fds``), opened by :func:`k3kit._fs.open_regular` and stamped
  before and after with ``fstat``, so the child maps the very file the parent checked, with no
  second lookup of a path someone could swap;
* ``python -I -S``: no ``PYTHON*`` variable, no user site, no current folder or script folder on
  its path (a co-tenant's folder cannot put a module in front of ``mmap``), no ``.pth`` files; only
  blake3's own folder is appended to the standard library's;
* its folder is ``/`` and it may leave no core file (a death by ``SIGBUS`` is an expected answer,
  and must not drop a core into a weights folder); the descriptor it maps is numbered 3 or more,
  so its own stdin, stdout and stderr cannot take its number when the parent runs without them;
* nothing on stdin; its stdout is parsed strictly (ASCII decimal progress lines, increasing, then
  ``digest`` and 64 lowercase hex digits); any other output, a non-zero exit or a signal is "no
  answer".

The window (256 MiB) bounds the child's resident memory and sets how soon a cancel is seen (the
parent kills the child between two progress lines). Starting the child costs 10-60 ms, so the
pool sends only files of ``hashpool.MAPPED_MIN_BYTES`` (1 GiB) or more this way.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

from k3kit._digest import Cancelled, FileDigest, FileStamp
from k3kit._fs import open_regular

WINDOW = 256 * 1024 * 1024
CHILD = Path(__file__).with_name("_mapped_child.py")

_PROGRESS = re.compile(rb"[0-9]{1,20}\n", re.ASCII)
_DIGEST = re.compile(rb"digest ([0-9a-f]{64})\n", re.ASCII)


def _blake3_dir() -> str | None:
    """The folder that holds the ``blake3`` package, for the child's path; None if not found."""
    spec = find_spec("blake3")
    if spec is None or spec.origin is None:
        return None
    return str(Path(spec.origin).resolve().parent.parent)


def child_argv(fd: int, size: int, threads: int, window: int = WINDOW) -> list[str] | None:
    """The child's command line, or None when this interpreter cannot start one."""
    where = _blake3_dir()
    if not sys.executable or where is None:
        return None
    return [
        sys.executable,
        "-I",
        "-S",
        str(CHILD),
        where,
        str(fd),
        str(size),
        str(window),
        str(max(1, threads)),
    ]


def _start(fd: int, size: int, threads: int, window: int) -> subprocess.Popen[bytes] | None:
    """The child, hashing ``fd``; None when it cannot be started (the caller reads instead)."""
    argv = child_argv(fd, size, threads, window)
    if argv is None:
        return None
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            pass_fds=(fd,),
            env={},
            cwd="/",
        )
    except OSError:
        return None


def _above_std(fd: int) -> int:
    """``fd`` moved to a number of 3 or more (close-on-exec), the original closed."""
    import fcntl

    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)


def _read_answer(
    proc: subprocess.Popen[bytes],
    size: int,
    cancel: threading.Event | None,
    on_bytes: Callable[[int], None] | None,
) -> str | None:
    """The child's digest, reporting its progress as it comes; None on any other ending."""
    assert proc.stdout is not None
    done = 0
    for line in iter(proc.stdout.readline, b""):
        if cancel is not None and cancel.is_set():
            raise Cancelled
        if _PROGRESS.fullmatch(line):
            now = int(line)
            if not done < now <= size:
                return None
            if on_bytes is not None:
                on_bytes(now - done)
            done = now
            continue
        found = _DIGEST.fullmatch(line)
        if found is None or done != size or proc.stdout.read(1):
            return None
        return found.group(1).decode("ascii")
    return None


def digest_mapped(
    path: Path,
    *,
    blake3_threads: int = 1,
    cancel: threading.Event | None = None,
    on_bytes: Callable[[int], None] | None = None,
    window: int = WINDOW,
) -> FileDigest | None:
    """blake3 of a regular file (never through a symlink), hashed by a child through a mapping.

    Returns the digest with the file's stamps before and after, or None when the child gave no
    answer (it died, e.g. of ``SIGBUS``; it could not start; the file changed size meanwhile):
    the caller then reads the file with :func:`k3kit._digest.digest_file`, which names the
    problem. Raises what :func:`k3kit._fs.open_regular` raises, and :class:`Cancelled`.
    """
    fd, st_before = open_regular(path, follow_symlinks=False)
    if fd < 3:  # started with stdin/out/err closed: the child's pipes would take this number
        try:
            fd = _above_std(fd)
        except OSError:  # no descriptor left: the caller reads the file instead
            return None
    size = st_before.st_size
    digest: str | None = None
    try:
        proc = _start(fd, size, blake3_threads, window)
        if proc is None:
            return None
        try:
            digest = _read_answer(proc, size, cancel, on_bytes)
        finally:
            _finish(proc, answered=digest is not None)
        st_after = os.fstat(fd)
    finally:
        os.close(fd)
    if digest is None or proc.returncode != 0 or st_after.st_size != size:
        return None
    before, after = FileStamp.of(st_before), FileStamp.of(st_after)
    return FileDigest({"blake3": digest}, size, before, after)


def _finish(proc: subprocess.Popen[bytes], *, answered: bool) -> None:
    """Reap the child: one that answered gets a moment to exit; any other is killed."""
    if answered:
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
    elif proc.poll() is None:
        proc.kill()
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()
