"""The child process of :mod:`k3kit.weights._mapped`: blake3 of one inherited descriptor, read
through a memory mapping, window by window.

Run as ``python -I -S _mapped_child.py BLAKE3_DIR FD SIZE WINDOW THREADS``. It imports nothing
of k3kit (the parent starts it with ``-S``, so only the standard library and ``BLAKE3_DIR`` are on
its path) and writes only to stdout, in ASCII: after each window, the number of bytes hashed so
far on a line of its own; at the end, ``digest`` and the 64 hex digits. Any other ending (a
signal, an exception, a short count) is read by the parent as "no answer", never as a digest.

A window is mapped, hashed and unmapped before the next one, so the child's resident memory stays
at one window whatever the file's size. ``MADV_SEQUENTIAL`` asks the kernel to read ahead and to
drop pages behind the reader.
"""

from __future__ import annotations

import mmap
import resource
import sys
from typing import BinaryIO


def hash_windows(fd: int, size: int, window: int, threads: int, out: BinaryIO) -> str:
    """blake3 of the first ``size`` bytes of ``fd``; reports progress to ``out`` per window."""
    import blake3

    hasher = blake3.blake3(max_threads=threads)
    offset = 0
    while offset < size:
        length = min(window, size - offset)
        with mmap.mmap(fd, length, access=mmap.ACCESS_READ, offset=offset) as mapped:
            mapped.madvise(mmap.MADV_SEQUENTIAL)
            with memoryview(mapped) as view:
                hasher.update(view)
        offset += length
        out.write(b"%d\n" % offset)
        out.flush()
    digest = hasher.hexdigest()
    out.write(b"digest %s\n" % digest.encode("ascii"))
    out.flush()
    return str(digest)


def main(argv: list[str]) -> int:
    # Its death by SIGBUS is an expected answer, not a crash to keep: no core file (the parent
    # also starts it in "/", so none could land in a weights folder).
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    fd, size, window, threads = (int(a) for a in argv[2:6])
    sys.path.append(argv[1])
    hash_windows(fd, size, window, threads, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
