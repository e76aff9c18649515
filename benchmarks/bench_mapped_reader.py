"""One large file hashed with blake3: the copying reader against the mapped reader, on the same
bytes held in large and in small page-cache folios (issue 23, docs/performance.md "Tenth pass"
and "Eleventh pass").

    python benchmarks/bench_mapped_reader.py [--mib 4096] [--rounds 3] [--workdir DIR]

Why: on Linux 6.18 with ext4 the page cache holds a freshly written file, or one read back from
disk, in 2 MiB folios; a mapping of those needs few TLB entries and blake3's own ``update_mmap``
gains about 40 % from it, which a reader that copies out of the page cache cannot. k3kit now
hashes a large file with spare workers through a mapping in a child process
(``k3kit.weights._mapped``); this script measures what that gains and what the child costs.

Contenders, alternating in one process after a warm-up round, medians over ``--rounds``:

* ``update_mmap``: ``blake3(max_threads=AUTO).update_mmap(path)``, the ceiling;
* ``copying``: the pool (``run_jobs``) with its copying pipelined reader;
* ``windows``: the child's own loop (``_mapped_child.hash_windows``: 256 MiB mapped windows,
  ``MADV_SEQUENTIAL``, two blake3 threads) run in this process, so without the child's start;
* ``mapped``: the pool as shipped, the mapped reader in its child, timed from the call to the
  digest (the child's start included).

The file is written in 16 MiB writes (large folios), then copied with 4 KiB writes (small
folios: the kernel builds folios from the writes it is given); ``FileHugePages`` of
``/proc/meminfo`` is printed before and after each copy so the reader can see which it got.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import blake3  # noqa: E402
from perf_gate import write_big_file  # noqa: E402

from k3kit.weights._mapped import WINDOW  # noqa: E402
from k3kit.weights._mapped_child import hash_windows  # noqa: E402
from k3kit.weights.hashpool import HashJob, run_jobs  # noqa: E402


def _pool(path: Path, mapped_min: int) -> str:
    job = HashJob(path.name, path, path.stat().st_size, "0" * 64)
    result = run_jobs([job], "blake3", workers=2, stop_on_first=False, mapped_min=mapped_min)
    digest = result.results[0].digest
    assert digest is not None
    return digest.digests["blake3"]


def _windows(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        with open(os.devnull, "wb") as progress:
            return hash_windows(fd, os.fstat(fd).st_size, WINDOW, 2, progress)
    finally:
        os.close(fd)


def _own(path: Path) -> str:
    return str(blake3.blake3(max_threads=blake3.blake3.AUTO).update_mmap(path).hexdigest())


CONTENDERS: dict[str, Callable[[Path], str]] = {
    "update_mmap": _own,
    "copying": lambda path: _pool(path, mapped_min=1 << 62),
    "windows": _windows,
    "mapped": lambda path: _pool(path, mapped_min=0),
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
