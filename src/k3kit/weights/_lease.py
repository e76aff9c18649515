"""Linux read leases as a witness that nobody writes a file while k3kit reads it.

A verification cache may only trust a file's timestamps if no writer can still change its bytes
without moving them. ``write()`` updates mtime/ctime when it *starts*, so a write stalled part-way
(its source buffer on FUSE or a network mount) keeps changing bytes after the times were read. A
read lease (``fcntl(F_SETLEASE, F_RDLCK)``) cannot be taken while any process holds the file open
for writing, including a writable shared mapping, and an open for writing or a truncate breaks it;
so a read that began and ended under an unbroken lease saw bytes no writer was changing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
from pathlib import Path

from k3kit._fs import NotRegularFile, open_regular

# The lease-break notice goes to a signal whose default action is to ignore it (never SIGIO, whose
# default kills the process); the lease is polled with F_GETLEASE instead, between reads.
_BREAK_SIGNAL = signal.SIGURG
_F_SETSIG = getattr(fcntl, "F_SETSIG", 10)


class ReadLease:
    """A Linux read lease on ``path``: proof that no process has it open for writing.

    Taking it fails (EAGAIN) while any process holds the file open for writing (a ``write()`` in
    flight, a writable shared mapping); a later open for writing or a truncate breaks it, which
    :meth:`intact` sees. ``note`` is None while the lease holds, else why it cannot vouch for the
    read. A lease is only a witness: nothing here blocks a writer for longer than one poll.
    """

    def __init__(self, path: Path) -> None:
        self.fd: int | None = None
        self.note: str | None = None
        self.identity: tuple[int, int] | None = None
        if not hasattr(fcntl, "F_SETLEASE"):
            self.note = "this OS has no file leases"
            return
        try:
            fd, st = open_regular(path)
        except NotRegularFile:
            # Said as it is: EINVAL from F_SETLEASE would read as "the filesystem cannot".
            self.note = "no lease: not a regular file"
            return
        except OSError as exc:
            self.note = f"cannot open for a lease: {exc.strerror}"
            return
        try:
            fcntl.fcntl(fd, _F_SETSIG, _BREAK_SIGNAL)
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
        except OSError as exc:
            os.close(fd)
            self.note = _lease_refusal(exc)
            return
        self.fd, self.identity = fd, (st.st_dev, st.st_ino)

    def intact(self) -> bool:
        """True while the lease holds; a pending break releases it at once (the writer waits
        for one read at most, not the kernel's lease-break-time)."""
        if self.fd is None:
            return False
        try:
            held = fcntl.fcntl(self.fd, fcntl.F_GETLEASE) == fcntl.F_RDLCK
        except OSError:
            held = False
        if not held:
            self.note = "a process opened it for writing while it was read"
            self.release()
        return held

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                fcntl.fcntl(self.fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
            os.close(self.fd)
            self.fd = None


def _lease_refusal(exc: OSError) -> str:
    if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
        return "a process has it open for writing"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "no lease: not the file's owner and no CAP_LEASE"
    if exc.errno == errno.EINVAL:
        return "no lease: this filesystem does not support file leases"
    return f"no lease: {exc.strerror or exc}"
