"""One large file hashed with blake3: the shipped copying reader against mapped readers, on the
same bytes held in large and in small page-cache folios (issue 23, docs/performance.md "Tenth
pass").

    python benchmarks/bench_mapped_reader.py [--mib 4096] [--rounds 3] [--workdir DIR]

Why: on Linux 6.18 with ext4 the page cache holds a freshly written file, or one read back from
disk, in 2 MiB folios; a mapping of those needs few TLB entries and blake3's own ``update_mmap``
gains about 40 % from it, which a reader that copies out of the page cache cannot. This script
measures what a mapped reader would gain, and what isolating it in a child process would cost
(a mapped page that cannot be read kills the process with SIGBUS; a child's death would be a
named unreadable file instead). Nothing here is used by k3kit; it is the measurement behind a
design that is not built yet.

Contenders, alternating in one process after a warm-up round, medians over ``--rounds``:

* ``update_mmap``: ``blake3(max_threads=AUTO).update_mmap(path)``, the ceiling;
* ``k3kit``: the shipped engine, ``k3kit.weights.hashpool.run_jobs``;
* ``windows``: 32 MiB mapped windows with ``MADV_SEQUENTIAL``, ``blake3(max_threads=2)``;
* ``windows-child``: the same in a child Python process (spawn, import blake3, hash), timed
  from spawn to digest.

The file is written in 16 MiB writes (large folios), then copied with 4 KiB writes (small
folios: the kernel builds folios from the writes it is given); ``FileHugePages`` of
``/proc/meminfo`` is printed before and after each copy so the reader can see which it got.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import blake3  # noqa: E402
from perf_gate import write_big_file  # noqa: E402

from k3kit.weights.hashpool import HashJob, run_jobs  # noqa: E402

WINDOW = 32 * 1024 * 1024

# The mapped windows, as source: run in this process (``_windows``) and in a child (``_child``),
# so both contenders execute the very same code.
_WINDOWS_SOURCE = r"""
import mmap, os, blake3

def hash_windows(path, window):
    size = os.path.getsize(path)
    hasher = blake3.blake3(max_threads=2)
    fd = os.open(path, os.O_RDONLY)
    try:
        offset = 0
        while offset < size:
            n = min(window, size - offset)
            with mmap.mmap(fd, n, access=mmap.ACCESS_READ, offset=offset) as m:
                m.madvise(mmap.MADV_SEQUENTIAL)
                with memoryview(m) as view:
                    hasher.update(view)
            offset += n
    finally:
        os.close(fd)
    return hasher.hexdigest()
"""
_CHILD = _WINDOWS_SOURCE + "import sys\nprint(hash_windows(sys.argv[1], int(sys.argv[2])))\n"
_NAMESPACE: dict[str, Any] = {}
exec(_WINDOWS_SOURCE, _NAMESPACE)  # this file's own constant: the child runs the same text


def _windows(path: Path) -> str:
    return str(_NAMESPACE["hash_windows"](str(path), WINDOW))


def _child(path: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(WINDOW)],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip()


def _k3kit(path: Path) -> str:
    job = HashJob(path.name, path, path.stat().st_size, "0" * 64)
    result = run_jobs([job], "blake3", stop_on_first=False).results[0]
    assert result.digest is not None
    return result.digest.digests["blake3"]


def _own(path: Path) -> str:
    return str(blake3.blake3(max_threads=blake3.blake3.AUTO).update_mmap(path).hexdigest())


CONTENDERS: dict[str, Callable[[Path], str]] = {
    "update_mmap": _own,
    "k3kit": _k3kit,
    "windows": _windows,
    "windows-child": _child,
}


def _file_huge_pages_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("FileHugePages:"):
            return int(line.split()[1])
    return -1


def _copy_small_writes(src: Path, dst: Path) -> None:
    with src.open("rb") as fin, dst.open("wb") as fout:
        while block := fin.read(4096):
            fout.write(block)
            fout.flush()  # one write(2) of 4 KiB each: small folios


def _measure(path: Path, rounds: int) -> dict[str, float]:
    digests = {name: run(path) for name, run in CONTENDERS.items()}  # warm-up
    assert len(set(digests.values())) == 1, digests
    seconds: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    names = list(CONTENDERS)
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            start = time.perf_counter()
            CONTENDERS[name](path)
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) for name, s in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="k3kit-mapped-") as tmp:
        large, small = Path(tmp) / "large.bin", Path(tmp) / "small.bin"
        before = _file_huge_pages_kb()
        write_big_file(large, args.mib)
        print(f"written in 16 MiB writes: FileHugePages {before} -> {_file_huge_pages_kb()} kB")
        before = _file_huge_pages_kb()
        _copy_small_writes(large, small)
        print(f"copied in 4 KiB writes: FileHugePages {before} -> {_file_huge_pages_kb()} kB")
        print(f"{'file':>6} {'contender':>14} {'median s':>9} {'x of update_mmap':>17}")
        for label, path in (("large", large), ("small", small)):
            medians = _measure(path, args.rounds)
            for name, sec in medians.items():
                ratio = medians["update_mmap"] / sec
                print(f"{label:>6} {name:>14} {sec:>9.3f} {ratio:>16.2f}x")


if __name__ == "__main__":
    main()
