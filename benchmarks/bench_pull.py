"""Does hashing as files land cost anything?  `k3kit pull` vs the same download without hashing.

Serves synthetic shards from the test hub (a separate process on 127.0.0.1, LFS files streamed
from disk with sendfile and redirected to its storage port, as the real Hub redirects to its CDN),
then times, in rotating order, into a fresh cache folder each time:

* ``snapshot_download``: huggingface_hub's own parallel download of the pinned commit (lists the
  tree, HEAD + GET per file); what a user would run; hashes nothing.
* ``hf_hub_download x N``: one huggingface_hub call per file (HEAD + GET), in a thread pool of
  the same size; hashes nothing.
* ``k3kit pull``: the same requests (metadata through huggingface_hub, the body streamed by
  k3kit with a cap at the locked size into descriptor-opened part files), every file
  sha256-hashed as soon as it lands, quarantine logic and the final file-set verdict included.
* ``download, then verify``: ``hf_hub_download x N`` followed by a separate ``check_weights``
  pass (the two-pass alternative that pull replaces), for scale.

Prints medians and ratios; writes JSON under benchmarks/results/. Usage:
    python benchmarks/bench_pull.py [--shards 32] [--shard-mib 16] [--runs 9] [--workers 8]
                                    [--rate-mib 32]
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
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")  # the test hub speaks plain HTTP
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="k3kit-bench-hf-home-")

import huggingface_hub  # noqa: E402
from huggingface_hub import hf_hub_download, snapshot_download  # noqa: E402

from k3kit.hub import HfHub  # noqa: E402
from k3kit.pull import pull  # noqa: E402
from k3kit.weights import check_weights  # noqa: E402
from k3kit.weights.pin import pin_hub  # noqa: E402

REPO = "bench/synthetic-shards"


def make_repo(folder: Path, shards: int, shard_bytes: int) -> None:
    folder.mkdir(parents=True)
    for i in range(1, shards + 1):
        with open(folder / f"model-{i:05d}-of-{shards:05d}.safetensors", "wb") as f:
            left = shard_bytes
            while left:
                n = min(left, 8 << 20)
                f.write(os.urandom(n))
                left -= n
    (folder / "config.json").write_text('{"hidden_size": 7168}\n')
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 1048576}\n')
    (folder / "model.safetensors.index.json").write_text('{"weight_map": {}}\n')


def start_hub(folder: Path, rate_mib: float | None) -> tuple[subprocess.Popen[str], str, str]:
    pace = [] if rate_mib is None else ["--rate-mib", str(rate_mib)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.testhub.server", "--repo", f"{REPO}={folder}", *pace],
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
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--shard-mib", type=int, default=16)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument(
        "--rate-mib",
        type=float,
        default=None,
        help="pace the hub to this many MiB/s per connection (a network link); "
        "default: unpaced loopback, bound by CPU",
    )
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="k3kit-bench-pull-"))
    try:
        make_repo(scratch / "repo", args.shards, args.shard_mib << 20)
        proc, url, sha = start_hub(scratch / "repo", args.rate_mib)
        try:
            lock = pin_hub(HfHub(url), repo=REPO, revision=sha, pinned_at="2026-11-01T00:00:00Z")
            paths = [f.path for f in lock.files]

            def per_file(dest: Path) -> None:
                with ThreadPoolExecutor(args.workers) as pool:
                    list(
                        pool.map(
                            lambda p: hf_hub_download(
                                REPO, p, revision=sha, cache_dir=dest, endpoint=url, token=False
                            ),
                            paths,
                        )
                    )

            def snapshot(dest: Path) -> None:
                snapshot_download(
                    REPO,
                    revision=sha,
                    cache_dir=dest,
                    endpoint=url,
                    token=False,
                    max_workers=args.workers,
                )

            def k3kit_pull(dest: Path) -> None:
                report = pull(lock, dest, downloader=HfHub(url), workers=args.workers)
                assert report.ok, (report.problems, report.errors)

            def two_pass(dest: Path) -> None:
                per_file(dest)
                assert check_weights(dest, lock).ok

            methods: dict[str, Callable[[Path], object]] = {
                "snapshot_download": snapshot,
                "hf_hub_download x N": per_file,
                "k3kit pull": k3kit_pull,
                "download, then verify": two_pass,
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
    ratios = {
        "k3kit pull / snapshot_download": medians["k3kit pull"] / medians["snapshot_download"],
        "k3kit pull / hf_hub_download x N": medians["k3kit pull"] / medians["hf_hub_download x N"],
        "download, then verify / k3kit pull": medians["download, then verify"]
        / medians["k3kit pull"],
    }
    link = "unpaced" if args.rate_mib is None else f"paced to {args.rate_mib} MiB/s per connection"
    load = os.getloadavg()[0]
    print(
        f"{len(lock.files)} files, {total / 1e6:.0f} MB, {args.workers} download workers, "
        f"{args.runs} runs, {os.cpu_count()} CPUs, loopback test hub ({link}), "
        f"load average {load:.2f} at the end"
    )
    cpu_medians = {name: statistics.median(c) for name, c in cpu.items()}
    for name, ts in times.items():
        print(
            f"  {name:<24} median {medians[name]:6.3f} s  {total / medians[name] / 1e9:5.2f} GB/s"
            f"  cpu {cpu_medians[name]:5.2f} s  runs {' '.join(f'{t:.3f}' for t in ts)}"
        )
    for name, value in ratios.items():
        print(f"  {name:<36} {value:.3f}")
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"bench_pull-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.write_text(
        json.dumps(
            {
                "benchmark": "bench_pull",
                "files": len(lock.files),
                "total_bytes": total,
                "workers": args.workers,
                "runs": args.runs,
                "cpus": os.cpu_count(),
                "rate_mib_per_connection": args.rate_mib,
                "load_average_at_end": load,
                "python": platform.python_version(),
                "huggingface_hub": huggingface_hub.__version__,
                "seconds": times,
                "median_seconds": medians,
                "ratios": ratios,
                "cpu_seconds": cpu,
                "median_cpu_seconds": cpu_medians,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
