"""What does hashing add to a pull, now that each chunk is hashed as it arrives?  (issue 23)

Serves N synthetic files (random bytes, generated in a temporary folder, deleted after) from the
test hub (a separate process on 127.0.0.1, LFS bodies streamed with sendfile through its storage
port) and times, in rotating order, into a fresh folder each time:

* ``download only``: the very transfers ``k3kit pull`` makes (``HfHub.fetch``: HEAD through
  huggingface_hub, the body streamed by k3kit with its size cap) into plain files, in a thread
  pool of the same size, hashing nothing. The floor a pull cannot go under.
* ``k3kit pull``: the real pull (streamed sha256 of every chunk as it arrives, the file renamed
  into place only after its whole hash matched the lock, quarantine logic, the final verdict).
* ``download, then hash``: the design pull had before this change, rebuilt from the same pieces:
  each file hashed by reading it back (``hash_fd``) in a hash pool as soon as it has landed.

The ratios are medians of wall time; CPU seconds (this process + the hub server) are printed too.
On a 2-core machine an unpaced loopback transfer is CPU-bound: that is the case the issue's 1.1x
bound is about. Usage:
    python benchmarks/pull_overlap.py [--files 4] [--file-mib 256] [--runs 5] [--workers 8]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")  # the test hub speaks plain HTTP
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="k3kit-bench-hf-home-")

from k3kit._digest import hash_fd  # noqa: E402
from k3kit.hub import HfHub  # noqa: E402
from k3kit.pull import pull  # noqa: E402
from k3kit.weights.pin import pin_hub  # noqa: E402

REPO = "bench/overlap-shards"


class FileSink:
    """A plain file written through an fd: what a download costs without any hashing."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def restart(self) -> None:
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        os.fsync(self.fd)  # pull fsyncs each file before placing it: the same disk work
        os.close(self.fd)


def make_repo(folder: Path, files: int, file_bytes: int) -> None:
    folder.mkdir(parents=True)
    for i in range(1, files + 1):
        with open(folder / f"model-{i:05d}-of-{files:05d}.safetensors", "wb") as f:
            left = file_bytes
            while left:
                n = min(left, 8 << 20)
                f.write(os.urandom(n))
                left -= n
    (folder / "config.json").write_text('{"hidden_size": 7168}\n')


def start_hub(folder: Path) -> tuple[subprocess.Popen[str], str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.testhub.server", "--repo", f"{REPO}={folder}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    _, _, sha = proc.stdout.readline().split()
    return proc, url, sha


def _cpu(pid: int) -> float:
    """User + system CPU seconds of a process (the hub server), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(func: Callable[[Path], object], scratch: Path, server_pid: int) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this process + the hub server) of one cold download."""
    dest = scratch / "dest"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir()
    os.sync()
    cpu0, server0 = time.process_time(), _cpu(server_pid)
    start = time.perf_counter()
    func(dest)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0 + _cpu(server_pid) - server0
    shutil.rmtree(dest, ignore_errors=True)
    return elapsed, cpu


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--file-mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="k3kit-bench-overlap-"))
    try:
        make_repo(scratch / "repo", args.files, args.file_mib << 20)
        proc, url, sha = start_hub(scratch / "repo")
        try:
            hub = HfHub(url)
            lock = pin_hub(hub, repo=REPO, revision=sha, pinned_at="2026-11-01T00:00:00Z")

            def fetch_one(dest: Path, index: int) -> Path:
                f = lock.files[index]
                target = dest / f"file-{index}"
                sink = FileSink(target)
                try:
                    hub.fetch(REPO, sha, f.path, size=f.size, sink=sink, cancel=threading.Event())
                finally:
                    sink.close()
                return target

            def download_only(dest: Path) -> None:
                with ThreadPoolExecutor(args.workers) as pool:
                    list(pool.map(lambda i: fetch_one(dest, i), range(len(lock.files))))

            def hash_back(path: Path) -> str:
                fd = os.open(path, os.O_RDONLY)
                try:
                    return hash_fd(fd, ("sha256",))[0]["sha256"]
                finally:
                    os.close(fd)

            def download_then_hash(dest: Path) -> None:
                with (
                    ThreadPoolExecutor(args.workers) as pool,
                    ThreadPoolExecutor(os.cpu_count() or 2) as hashers,
                ):
                    hashed: list[Future[str]] = []

                    def job(i: int) -> None:
                        hashed.append(hashers.submit(hash_back, fetch_one(dest, i)))

                    list(pool.map(job, range(len(lock.files))))
                    digests = [h.result() for h in hashed]
                assert sorted(digests) == sorted(f.sha256 for f in lock.files)

            def k3kit_pull(dest: Path) -> None:
                report = pull(lock, dest, downloader=hub, layout="plain", workers=args.workers)
                assert report.ok, (report.problems, report.errors)

            methods: dict[str, Callable[[Path], object]] = {
                "download only": download_only,
                "k3kit pull": k3kit_pull,
                "download, then hash": download_then_hash,
            }
            timed(k3kit_pull, scratch, proc.pid)  # warm-up: page cache, connections, imports
            times: dict[str, list[float]] = {name: [] for name in methods}
            cpu: dict[str, list[float]] = {name: [] for name in methods}
            names = list(methods)
            for run in range(args.runs):
                for name in names[run % len(names) :] + names[: run % len(names)]:
                    wall, used = timed(methods[name], scratch, proc.pid)
                    times[name].append(wall)
                    cpu[name].append(used)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(os.environ["HF_HOME"], ignore_errors=True)

    total = lock.total_bytes
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    cpu_medians = {name: statistics.median(c) for name, c in cpu.items()}
    ratios = {
        "k3kit pull / download only": medians["k3kit pull"] / medians["download only"],
        "download, then hash / download only": medians["download, then hash"]
        / medians["download only"],
        "k3kit pull / download only (cpu)": cpu_medians["k3kit pull"]
        / cpu_medians["download only"],
    }
    load = os.getloadavg()[0]
    print(
        f"{len(lock.files)} files, {total / 1e6:.0f} MB, {args.workers} download workers, "
        f"{args.runs} runs, {os.cpu_count()} CPUs, unpaced loopback test hub, "
        f"load average {load:.2f} at the end"
    )
    for name, ts in times.items():
        print(
            f"  {name:<22} median {medians[name]:6.3f} s  {total / medians[name] / 1e9:5.2f} GB/s"
            f"  cpu {cpu_medians[name]:5.2f} s  runs {' '.join(f'{t:.3f}' for t in ts)}"
        )
    for name, value in ratios.items():
        print(f"  {name:<38} {value:.3f}")
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"pull_overlap-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.write_text(
        json.dumps(
            {
                "benchmark": "pull_overlap",
                "files": len(lock.files),
                "total_bytes": total,
                "workers": args.workers,
                "runs": args.runs,
                "cpus": os.cpu_count(),
                "load_average_at_end": load,
                "python": platform.python_version(),
                "seconds": times,
                "median_seconds": medians,
                "cpu_seconds": cpu,
                "median_cpu_seconds": cpu_medians,
                "ratios": ratios,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
