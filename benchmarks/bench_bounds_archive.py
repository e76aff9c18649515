"""Bounded cost of the strict archive reader on archives up to ~100 MB, genuine-ish and hostile.

Each archive is read by ``extract_safely`` in a fresh child process; the table reports the
outcome (accepted, or the refusal code), wall time and the child's peak RSS from
``resource.getrusage(RUSAGE_CHILDREN)``. The target (issue 8) is every archive verified or
refused within 200 MB RSS. Figures go to docs/performance.md; nothing here is asserted in tests.

    nice .venv/bin/python -m benchmarks.bench_bounds_archive [--mb 100]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from tests.archivekit import directory, finish, gz, header, member

MiB = 1024 * 1024
CHILD = """
import resource, sys
from pathlib import Path
from k3kit.archive import extract_safely
from k3kit.errors import K3kitError
try:
    staging, _ = extract_safely(Path(sys.argv[1]), Path(sys.argv[2]))
    print("accepted")
except K3kitError as exc:
    print(exc.code)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _stream_gz(path: Path, chunks: Callable[[], object]) -> None:
    """Write a single gzip member from the byte chunks ``chunks()`` yields, without holding them."""
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        for chunk in chunks():  # type: ignore[attr-defined]
            out.write(comp.compress(chunk))
        out.write(comp.flush())


def genuine_large(path: Path, mb: int) -> None:
    """Random (incompressible) 32 MiB files summing to ``mb`` MB: a kit carrying large files."""

    def chunks():  # type: ignore[no-untyped-def]
        left, i = mb * MiB, 0
        while left > 0:
            size = min(32 * MiB, left)
            yield header(f"blob/f{i:03d}.bin", size)
            for _ in range(size // MiB):
                yield os.urandom(MiB)
            yield os.urandom(size % MiB) + b"\0" * (-size % 512)
            left, i = left - size, i + 1
        yield b"\0" * 10240

    _stream_gz(path, chunks)


def many_members(path: Path, count: int) -> None:
    path.write_bytes(gz(finish(b"".join(member(f"d/f{i:05d}", b"x" * 100) for i in range(count)))))


def pax_claims(path: Path, mb: int) -> None:
    """A PAX header claiming 4 GiB, then ``mb`` MB of random bytes (the file is ~mb MB)."""

    def chunks():  # type: ignore[no-untyped-def]
        yield directory("d") + header("PaxHeader", 4 * 1024**3 - 512, typeflag=b"x")
        for _ in range(mb):
            yield os.urandom(MiB)

    _stream_gz(path, chunks)


def zero_bomb(path: Path, gib: int) -> None:
    """A valid member, then ``gib`` GiB of zeros (a ~1000:1 decompression bomb)."""

    def chunks():  # type: ignore[no-untyped-def]
        yield member("README.md", b"hello\n") + b"\0" * 1024
        zeros = bytes(16 * MiB)
        for _ in range(gib * 64):
            yield zeros

    _stream_gz(path, chunks)


def member_bomb(path: Path, count: int) -> None:
    """``count`` 64 MiB members of zeros: hits the 512 MiB content cap."""

    def chunks():  # type: ignore[no-untyped-def]
        zeros = bytes(16 * MiB)
        for i in range(count):
            yield header(f"z{i:03d}.bin", 64 * MiB)
            for _ in range(4):
                yield zeros
        yield b"\0" * 10240

    _stream_gz(path, chunks)


def run_one(archive: Path, workdir: Path) -> tuple[str, float, float]:
    """Outcome, wall seconds and peak RSS (MiB) of one child reading ``archive``.

    The child reports its own ``getrusage(RUSAGE_SELF).ru_maxrss`` (Linux: KiB): the figure
    ``RUSAGE_CHILDREN`` would give the parent, but per case rather than the maximum so far."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(archive), str(workdir)],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    lines = proc.stdout.split()
    if proc.returncode != 0 or len(lines) != 2:
        return f"exit {proc.returncode}: {proc.stderr[-200:]}", wall, float("nan")
    return lines[0], wall, int(lines[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=100, help="size of the large archives (MB)")
    args = parser.parse_args()
    cases: list[tuple[str, Callable[[Path], None]]] = [
        ("many members (10,000 x 100 B)", lambda p: many_members(p, 10_000)),
        ("too many members (10,001)", lambda p: many_members(p, 10_001)),
        (f"PAX header claiming 4 GiB + {args.mb} MB body", lambda p: pax_claims(p, args.mb)),
        ("zero bomb: 4 GiB of zeros after the marker", lambda p: zero_bomb(p, 4)),
        ("member bomb: 9 x 64 MiB zero members", lambda p: member_bomb(p, 9)),
        (f"genuine-ish: {args.mb} MB of random files", lambda p: genuine_large(p, args.mb)),
    ]
    print("| archive | file size | outcome | wall (s) | peak RSS (MiB) |")
    print("|---|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for label, make in cases:
            archive = root / "bench.kit.tar.gz"
            make(archive)
            size = archive.stat().st_size
            outcome, wall, rss = run_one(archive, root)
            print(
                f"| {label} | {size / MiB:.1f} MiB | {outcome} | {wall:.2f} | {rss:.0f} |",
                flush=True,
            )
            archive.unlink()
            for left in root.glob("k3kit-kit-*"):
                subprocess.run(["rm", "-rf", str(left)], check=False)


if __name__ == "__main__":
    main()
