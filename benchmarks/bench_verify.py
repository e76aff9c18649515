"""How fast does `k3kit verify --weights` check weights, next to the tools a user would reach for?

Run: ``python benchmarks/bench_verify.py [--runs 5] [--total-gib 8] [--shards 100]``

1. Makes (or reuses) a synthetic weights folder in HF cache layout: ``--shards`` equal shards plus
   a config file, sized to the machine (at most 40 % of available memory, so it all stays in the
   page cache, and 30 % of free disk), and one single large file for the within-file case. Pins
   them, builds and signs real kits.
2. Reads everything once, so every contender runs from the page cache (CPU-bound, not disk-bound
   numbers; the projection in docs/performance.md adds storage bandwidth).
3. Runs every contender ``--runs`` times, round-robin with a rotating start, in fresh processes:
   k3kit's CLI (sha256 and blake3, cold with ``--full`` and warm from the verification cache), the
   same engine timed in-process, the raw ceiling (N threads of hashlib/blake3 with no bookkeeping),
   one thread of hashlib sha256 with 1 MiB reads (what `hf cache verify` does), `hf cache verify`
   itself against a loopback stand-in hub, ``sha256sum`` (1 and N processes) and ``b3sum`` when
   installed. Peak RSS of every process comes from GNU time (``%M``).
4. Prints medians, GB/s (10^9 bytes) and ratios, and writes JSON under benchmarks/results/.

"net" figures subtract the median wall time of `k3kit verify` on the same kit without --weights
(start-up, signature and kit checks), measured in the same run: they are the weights check alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from verify_data import (
    Kit,
    StandInHub,
    hf_env,
    load_or_make,
    make_hf_cache,
    make_key,
    make_kit,
    shard_sizes,
)

from k3kit.weights.vcache import COARSE_SETTLE_NS

MIB, GIB = 1 << 20, 1 << 30
RESULTS = Path(__file__).resolve().parent / "results"

RAW = r"""
import hashlib, json, os, sys, time
from concurrent.futures import ThreadPoolExecutor
import blake3
algo, mode, threads, bufsize = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
files = sys.argv[5:]
def one(path):
    if mode == "mmap":
        return blake3.blake3(max_threads=blake3.blake3.AUTO).update_mmap(path).hexdigest()
    h = hashlib.sha256() if algo == "sha256" else blake3.blake3()
    buf = bytearray(bufsize); view = memoryview(buf)
    fd = os.open(path, os.O_RDONLY)
    try:
        while n := os.readv(fd, [buf]):
            h.update(view[:n])
    finally:
        os.close(fd)
    return h.hexdigest()
t = time.perf_counter()
with ThreadPoolExecutor(threads) as pool:
    digests = list(pool.map(one, files))
print(json.dumps({"seconds": time.perf_counter() - t, "digests": digests}))
"""

ENGINE = r"""
import json, sys, time
from pathlib import Path
from k3kit.models import WeightsLock
from k3kit.weights import check_weights
lock = WeightsLock.model_validate_json(Path(sys.argv[1]).read_bytes())
opts = json.loads(sys.argv[3])
opts["state_dir"] = Path(opts["state_dir"])
def rchar():
    with open("/proc/self/io") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("rchar:"))
r0 = rchar(); t = time.perf_counter()
report = check_weights(Path(sys.argv[2]), lock, **opts)
seconds = time.perf_counter() - t; read = rchar() - r0
print(json.dumps({"seconds": seconds, "ok": report.ok, "files_hashed": report.files_hashed,
                  "files_from_cache": report.files_from_cache, "bytes_hashed": report.bytes_hashed,
                  "rchar": read}))
"""


TIME = Path("/usr/bin/time") if Path("/usr/bin/time").exists() else None
QUIET = 0.15  # a run is "quiet" when other tenants took less than this many cores meanwhile


def run_child(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd``: wall seconds, exit code, stdout, its CPU seconds and peak RSS, other load.

    Peak RSS and CPU come from GNU time (``%M %U %S``): a child forked straight from this (large)
    process would inherit this process's high-water mark through fork+exec, which wait4 reports.
    ``other_cores`` is the machine's busy CPU time during the run minus the child's, per second
    of wall: how much of the machine other tenants took meanwhile.
    """
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as usage,
    ):
        wrapped = [str(TIME), "-f", "%M %U %S", "-o", usage.name, *cmd] if TIME else cmd
        busy0 = cpu_busy()[0]
        start = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdout=out, stderr=err, env=env)
        rc = proc.wait()
        wall = time.perf_counter() - start
        busy = cpu_busy()[0] - busy0
        out.seek(0)
        err.seek(0)
        fields = usage.read().split()[-3:] if TIME else []
        cpu = float(fields[1]) + float(fields[2]) if len(fields) == 3 else None
        return {
            "wall": wall,
            "rc": rc,
            "stdout": out.read().decode(),
            "stderr": err.read().decode()[-2000:],
            "maxrss_mb": int(fields[0]) / 1024 if len(fields) == 3 else None,
            "cpu_s": cpu,
            "other_cores": max(0.0, busy - (cpu or 0.0)) / wall,
        }


def run_parallel(cmds: list[list[str]]) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0 = cpu_busy()[0]
    start = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL) for c in cmds]
    rcs = [p.wait() for p in procs]
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    busy = cpu_busy()[0] - busy0
    return {
        "wall": wall,
        "rc": max(rcs),
        "stdout": "",
        "cpu_s": cpu,
        "other_cores": max(0.0, busy - cpu) / wall,
    }


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    flags = next(
        (
            line
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        ),
        "",
    )
    mem = {
        line.split(":")[0]: int(line.split()[1]) * 1024
        for line in Path("/proc/meminfo").read_text().splitlines()[:3]
    }
    import blake3
    import huggingface_hub

    return {
        "cores_usable": len(os.sched_getaffinity(0)),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "sha_ni": " sha_ni" in flags,
        "avx2": " avx2" in flags,
        "avx512f": " avx512f" in flags,
        "mem_total": mem.get("MemTotal"),
        "mem_available": mem.get("MemAvailable"),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "openssl": ssl.OPENSSL_VERSION,
        "blake3_py": blake3.__version__,
        "huggingface_hub": huggingface_hub.__version__,
        "b3sum": shutil.which("b3sum") is not None,
    }


def cpu_busy() -> tuple[float, float]:
    """(busy, steal) seconds of the whole machine since boot, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / tick, fields[7] / tick


def warm(paths: list[Path]) -> float:
    buf = bytearray(4 * MIB)
    total, start = 0, time.perf_counter()
    for p in paths:
        with p.open("rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
    return total / (time.perf_counter() - start)


def real_files(snapshot: Path) -> list[Path]:
    return sorted(Path(os.path.realpath(p)) for p in snapshot.iterdir())


def wait_until_settled(paths: list[Path]) -> None:
    newest = max(max(p.stat().st_ctime_ns, p.stat().st_mtime_ns) for p in paths)
    left = newest + COARSE_SETTLE_NS - time.time_ns()
    if left > 0:
        time.sleep(left / 1e9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "k3kit-bench")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--slow-runs", type=int, default=3, help="runs of sha256sum (slowest rows)")
    ap.add_argument("--shards", type=int, default=100)
    ap.add_argument("--total-gib", type=float, default=8.0)
    ap.add_argument("--big-gib", type=float, default=2.0)
    ap.add_argument("--no-weights-runs", type=int, default=10)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--prepare-only", action="store_true", help="make the data and kits, then stop")
    args = ap.parse_args()
    work: Path = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    info = machine()
    cores = info["cores_usable"]
    avail = info["mem_available"] or 8 * GIB
    disk_free = shutil.disk_usage(work).free
    budget = min(args.total_gib * GIB, 0.4 * avail, 0.3 * disk_free)
    shard_bytes = int(budget / args.shards) // MIB * MIB
    big_bytes = int(min(args.big_gib * GIB, 0.15 * avail)) // MIB * MIB
    params = {"shards": args.shards, "shard_bytes": shard_bytes, "big_bytes": big_bytes}

    def make() -> dict[str, Any]:
        for sub in ("hf-cache", "big-cache"):
            shutil.rmtree(work / sub, ignore_errors=True)
        print(
            f"making {args.shards} x {shard_bytes / 1e6:.0f} MB + one {big_bytes / 1e9:.1f} GB "
            f"file under {work} ...",
            flush=True,
        )
        snap = make_hf_cache(work / "hf-cache", shard_sizes(args.shards, shard_bytes), "shards")
        big = make_hf_cache(work / "big-cache", {"model.safetensors": big_bytes}, "big")
        return {"snapshot": str(snap), "big_snapshot": str(big)}

    data = load_or_make(work, params, make)
    private, public = make_key(work)
    print("pinning and signing kits ...", flush=True)
    shards = make_kit(work, "shards", Path(data["snapshot"]), private)
    big = make_kit(work, "big", Path(data["big_snapshot"]), private)
    broken = make_kit(work, "broken", Path(data["snapshot"]), private, wrong_first=True)
    shard_files, big_files = real_files(shards.snapshot), real_files(big.snapshot)
    if args.prepare_only:
        print(f"prepared {shards.snapshot} and {big.snapshot}")
        return 0
    total = shards.lock.total_bytes
    wait_until_settled(shard_files + big_files)
    warm(shard_files + big_files)
    copy_rate = warm(shard_files + big_files)
    fincore = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", *map(str, shard_files)],
        capture_output=True,
        text=True,
        check=False,
    )
    resident = sum(int(x) for x in fincore.stdout.split()) if fincore.returncode == 0 else None

    k3kit = [sys.executable, "-m", "k3kit"]
    states = work / "states"
    shutil.rmtree(states, ignore_errors=True)

    def cli(kit: Kit, *extra: str, weights: bool = True, state: str = "scratch") -> list[str]:
        cmd = [
            *k3kit,
            "verify",
            str(kit.kit),
            "--trust",
            str(public),
            "--json",
            "--quiet",
            "--state-dir",
            str(states / state),
            *extra,
        ]
        return cmd + (["--weights", str(kit.snapshot)] if weights else [])

    def engine(kit: Kit, state: str, **opts: Any) -> list[str]:
        lock_path = kit.kit / "weights.lock.json"
        opts["state_dir"] = str(states / state)
        return [sys.executable, "-c", ENGINE, str(lock_path), str(kit.snapshot), json.dumps(opts)]

    def raw(algo: str, mode: str, threads: int, buf: int, files: list[Path]) -> dict[str, Any]:
        """Run a raw hasher and check its digests against the lock (all tools must agree)."""
        kit = big if files == big_files else shards
        by_real = {os.path.realpath(kit.snapshot / f.path): f for f in kit.lock.files}
        want = [getattr(by_real[str(p)], algo) for p in files]
        r = run_child(
            [sys.executable, "-c", RAW, algo, mode, str(threads), str(buf), *map(str, files)]
        )
        r["digests_match_lock"] = _parsed(r).get("digests") == want
        return r

    # Populate the warm verification caches once (and prove both digests verify).
    for algo, state in (("blake3", "warm-blake3"), ("sha256", "warm-sha256")):
        r = run_child(cli(shards, "--algorithm", algo, state=state))
        assert r["rc"] == 0, r["stderr"]

    hub = StandInHub(shards.lock)
    hub.__enter__()
    hf_home = work / "hf-home"
    hf = [
        str(Path(sys.executable).with_name("hf")),
        "cache",
        "verify",
        shards.lock.repo,
        "--revision",
        shards.lock.commit,
        "--cache-dir",
        str(work / "hf-cache"),
    ]
    env = hf_env(hub.url, hf_home)
    slices = [shard_files[i::cores] for i in range(cores)]

    rows: dict[str, Callable[[], dict[str, Any]]] = {
        "k3kit sha256 cold (--full)": lambda: run_child(
            cli(shards, "--algorithm", "sha256", "--full")
        ),
        "k3kit blake3 cold (--full)": lambda: run_child(cli(shards, "--full")),
        "k3kit blake3 warm (cache)": lambda: run_child(cli(shards, state="warm-blake3")),
        "k3kit sha256 warm (cache)": lambda: run_child(
            cli(shards, "--algorithm", "sha256", state="warm-sha256")
        ),
        "k3kit verify, no --weights": lambda: run_child(cli(shards, weights=False)),
        "k3kit early exit (1st file bad)": lambda: run_child(cli(broken, "--full")),
        "engine sha256 cold (in-process)": lambda: run_child(
            engine(shards, "scratch", algorithm="sha256", full=True)
        ),
        "engine blake3 cold (in-process)": lambda: run_child(engine(shards, "scratch", full=True)),
        "engine blake3 warm (in-process)": lambda: run_child(engine(shards, "warm-blake3")),
        f"raw sha256 {cores} threads 1 MiB": lambda: raw("sha256", "read", cores, MIB, shard_files),
        f"raw sha256 {cores} threads 4 MiB": lambda: raw(
            "sha256", "read", cores, 4 * MIB, shard_files
        ),
        f"raw blake3 {cores} threads 1 MiB": lambda: raw("blake3", "read", cores, MIB, shard_files),
        f"raw blake3 {cores} threads 4 MiB": lambda: raw(
            "blake3", "read", cores, 4 * MIB, shard_files
        ),
        "raw sha256 1 thread 1 MiB (= hf)": lambda: raw("sha256", "read", 1, MIB, shard_files),
        "hf cache verify": lambda: run_child(hf, env=env),
        "hf version (start-up)": lambda: run_child([hf[0], "version"], env=env),
        "sha256sum, 1 process": lambda: run_child(["sha256sum", *map(str, shard_files)]),
        f"sha256sum, {cores} processes": lambda: run_parallel(
            [["sha256sum", *map(str, s)] for s in slices]
        ),
        "big: k3kit blake3 (--full)": lambda: run_child(cli(big, "--full")),
        "big: k3kit sha256 (--full)": lambda: run_child(
            cli(big, "--full", "--algorithm", "sha256")
        ),
        "big: engine blake3 (in-process)": lambda: run_child(engine(big, "scratch", full=True)),
        "big: raw blake3 1 thread 1 MiB": lambda: raw("blake3", "read", 1, MIB, big_files),
        "big: raw blake3 update_mmap AUTO": lambda: raw("blake3", "mmap", 1, 0, big_files),
    }
    if info["b3sum"]:
        rows["b3sum (default threads)"] = lambda: run_child(["b3sum", *map(str, shard_files)])
        rows["big: b3sum (default threads)"] = lambda: run_child(["b3sum", *map(str, big_files)])
    slow = {"sha256sum, 1 process", f"sha256sum, {cores} processes"}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in rows}
    busy0, steal0 = cpu_busy()
    ours0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    names = list(rows)
    for rep in range(max(args.runs, args.no_weights_runs)):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for name in order:
            limit = (
                args.no_weights_runs
                if name == "k3kit verify, no --weights"
                else (min(args.slow_runs, args.runs) if name in slow else args.runs)
            )
            if len(results[name]) >= limit:
                continue
            r = rows[name]()
            if r["rc"] == 0:
                r.pop("stderr", None)
            results[name].append(r)
        print(f"run {rep + 1} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    elapsed = time.perf_counter() - t0
    busy1, steal1 = cpu_busy()
    ours1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    hub.__exit__()
    ours = (
        ours1.ru_utime
        + ours1.ru_stime
        - ours0.ru_utime
        - ours0.ru_stime
        + self1.ru_utime
        + self1.ru_stime
        - self0.ru_utime
        - self0.ru_stime
    )
    foreign = max(0.0, (busy1 - busy0) - ours) / elapsed
    report = summarise(results, shards, big, cores)
    git = subprocess.run(
        ["git", "-C", str(Path(__file__).parent), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    report.update(
        {
            "k3kit_commit": git,
            "machine": info,
            "dataset": {
                "files": shards.lock.file_count,
                "bytes": total,
                "shard_bytes": shard_bytes,
                "big_file_bytes": big.lock.total_bytes,
                "page_cache_resident_bytes": resident,
                "single_thread_read_gb_s": copy_rate / 1e9,
            },
            "load": {
                "elapsed_s": elapsed,
                "other_processes_cores": foreign,
                "steal_s": steal1 - steal0,
                "loadavg_end": os.getloadavg(),
            },
            "method": __doc__,
        }
    )
    print_table(report)
    RESULTS.mkdir(exist_ok=True)
    out = args.out or RESULTS / f"verify-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out}")
    return 0


def _parsed(r: dict[str, Any]) -> dict[str, Any]:
    try:
        return json.loads(r["stdout"]) if r["stdout"].strip().startswith("{") else {}
    except json.JSONDecodeError:
        return {}


def summarise(
    results: dict[str, list[dict[str, Any]]], shards: Kit, big: Kit, cores: int
) -> dict[str, Any]:
    total, big_total = shards.lock.total_bytes, big.lock.total_bytes
    rows: dict[str, Any] = {}
    for name, runs in results.items():
        if not runs:
            continue
        size = big_total if name.startswith("big:") else total
        quiet = [r for r in runs if r["other_cores"] < QUIET]
        used = quiet if len(quiet) >= min(3, len(runs)) else runs
        parsed = [_parsed(r) for r in used]
        inner = [p["seconds"] for p in parsed if "seconds" in p]
        wall = statistics.median(r["wall"] for r in used)
        cpu = [r["cpu_s"] for r in used if r.get("cpu_s")]
        row: dict[str, Any] = {
            "runs": len(runs),
            "quiet_runs": len(quiet),
            "median_of": "quiet" if used is quiet else "all (too few quiet runs)",
            "rc": sorted({r["rc"] for r in runs}),
            "wall_s": [r["wall"] for r in runs],
            "other_cores": [r["other_cores"] for r in runs],
            "median_wall_s": wall,
            "bytes": size,
        }
        if cpu:
            row["per_core_gb_s"] = size / statistics.median(cpu) / 1e9
        if inner:
            row["median_inner_s"] = statistics.median(inner)
        rss = [r["maxrss_mb"] for r in runs if r.get("maxrss_mb") is not None]
        if rss:
            row["max_rss_mb"] = max(rss)
        weights_facts = parsed[0].get("weights") if parsed else None
        if weights_facts:
            row["weights_facts"] = weights_facts
        if parsed and "rchar" in parsed[0]:
            row["engine"] = parsed[0]
        if any("digests_match_lock" in r for r in runs):
            row["digests_match_lock"] = all(r.get("digests_match_lock") for r in runs)
        rows[name] = row

    def rate(name: str, key: str = "median_wall_s", minus: float = 0.0) -> float | None:
        row = rows.get(name)
        if not row or key not in row:
            return None
        return row["bytes"] / max(row[key] - minus, 1e-9) / 1e9

    base = rows["k3kit verify, no --weights"]["median_wall_s"]
    hf_start = rows["hf version (start-up)"]["median_wall_s"]
    for name, row in rows.items():
        if "verify, no" in name or "start-up" in name or "warm (in-process)" in name:
            row.pop("per_core_gb_s", None)
            continue
        row["gb_s"] = rate(name)
        if (name.startswith("k3kit") and "cold" in name) or name.startswith("big: k3kit"):
            row["net_gb_s"] = rate(name, minus=base)
        elif name.startswith("k3kit"):
            row["gb_s"] = None  # warm runs and the early exit do not read the data
            row.pop("per_core_gb_s", None)
            row["ms_over_no_weights"] = (row["median_wall_s"] - base) * 1000
        if "median_inner_s" in row:
            row["inner_gb_s"] = rate(name, "median_inner_s")
        if name == "hf cache verify":
            row["net_gb_s"] = rate(name, minus=hf_start)
    bufs = ("1 MiB", "4 MiB")
    ceil_sha = max(rows[f"raw sha256 {cores} threads {b}"]["inner_gb_s"] for b in bufs)
    ceil_b3 = max(rows[f"raw blake3 {cores} threads {b}"]["inner_gb_s"] for b in bufs)
    k_sha, k_b3 = rows["k3kit sha256 cold (--full)"], rows["k3kit blake3 cold (--full)"]
    e_sha, e_b3 = rows["engine sha256 cold (in-process)"], rows["engine blake3 cold (in-process)"]
    hf_row = rows["hf cache verify"]
    ratios = {
        "ceiling_sha256_gb_s": ceil_sha,
        "ceiling_blake3_gb_s": ceil_b3,
        "k3kit_sha256_net / ceiling": k_sha["net_gb_s"] / ceil_sha,
        "k3kit_blake3_net / ceiling": k_b3["net_gb_s"] / ceil_b3,
        "engine_sha256 / ceiling": e_sha["inner_gb_s"] / ceil_sha,
        "engine_blake3 / ceiling": e_b3["inner_gb_s"] / ceil_b3,
        "k3kit_sha256_gross / ceiling": k_sha["gb_s"] / ceil_sha,
        "k3kit_blake3_gross / ceiling": k_b3["gb_s"] / ceil_b3,
        "k3kit_sha256 / hf cache verify (wall)": k_sha["gb_s"] / hf_row["gb_s"],
        "k3kit_blake3 / hf cache verify (wall)": k_b3["gb_s"] / hf_row["gb_s"],
        "k3kit_sha256 / hf cache verify (net)": k_sha["net_gb_s"] / hf_row["net_gb_s"],
        "k3kit_blake3 / hf cache verify (net)": k_b3["net_gb_s"] / hf_row["net_gb_s"],
        "k3kit_sha256 / 1-thread hashlib (net vs inner)": k_sha["net_gb_s"]
        / rows["raw sha256 1 thread 1 MiB (= hf)"]["inner_gb_s"],
        "k3kit_blake3 / 1-thread hashlib sha256 (net vs inner)": k_b3["net_gb_s"]
        / rows["raw sha256 1 thread 1 MiB (= hf)"]["inner_gb_s"],
        "k3kit_sha256 / sha256sum 1 process": k_sha["gb_s"] / rows["sha256sum, 1 process"]["gb_s"],
        f"k3kit_sha256 / sha256sum {cores} processes": k_sha["gb_s"]
        / rows[f"sha256sum, {cores} processes"]["gb_s"],
    }
    if "b3sum (default threads)" in rows:
        b3sum = rows["b3sum (default threads)"]["gb_s"]
        ratios["k3kit_blake3 / b3sum (wall)"] = k_b3["gb_s"] / b3sum
    warm_row = rows["engine blake3 warm (in-process)"]
    warm_cli = rows["k3kit blake3 warm (cache)"]
    early = rows["k3kit early exit (1st file bad)"]
    k3_rows = [r for n, r in rows.items() if "k3kit" in n and "max_rss_mb" in r]
    return {
        "rows": rows,
        "ratios": ratios,
        "no_weights_verify_s": base,
        "warm": {
            "engine_ms": warm_row["median_inner_s"] * 1000,
            "engine_bytes_read": warm_row["engine"]["rchar"],
            "engine_files_from_cache": warm_row["engine"]["files_from_cache"],
            "cli_wall_s": warm_cli["median_wall_s"],
            "cli_ms_over_no_weights": warm_cli["ms_over_no_weights"],
            "cli_files_from_cache": warm_cli["weights_facts"]["files_from_cache"],
            "cli_bytes_hashed": warm_cli["weights_facts"]["bytes_hashed"],
        },
        "early_exit": {
            "wall_s": early["median_wall_s"],
            "rc": early["rc"],
            "bytes_hashed": early["weights_facts"]["bytes_hashed"],
            "bytes_total": total,
        },
        "peak_rss_mb": {
            "k3kit_any": max(r["max_rss_mb"] for r in k3_rows),
            "k3kit_shards": max(
                r["max_rss_mb"]
                for n, r in rows.items()
                if n.startswith("k3kit") and "max_rss_mb" in r
            ),
            "k3kit_one_big_file": max(
                r["max_rss_mb"]
                for n, r in rows.items()
                if n.startswith("big: k3kit") and "max_rss_mb" in r
            ),
        },
    }


def print_table(report: dict[str, Any]) -> None:
    m, d, load = report["machine"], report["dataset"], report["load"]
    print(
        f"\n{m['cores_usable']} cores ({m['cpu']}), {d['files']} files / "
        f"{d['bytes'] / 1e9:.2f} GB from page cache; "
        f"other load during the run: {load['other_processes_cores']:.2f} cores,"
        f" steal {load['steal_s']:.1f} s"
    )
    print(
        f"{'contender':<38} {'median s':>9} {'GB/s':>7} {'net':>7} {'inner':>7} {'/core':>7}"
        f" {'RSS MB':>7} quiet"
    )

    def cell(row: dict[str, Any], key: str) -> str:
        v = row.get(key)
        return f"{v:7.2f}" if isinstance(v, float) else " " * 7

    for name, row in report["rows"].items():
        keys = ("gb_s", "net_gb_s", "inner_gb_s", "per_core_gb_s", "max_rss_mb")
        cells = " ".join(cell(row, k) for k in keys)
        print(
            f"{name:<38} {row['median_wall_s']:9.3f} {cells} {row['quiet_runs']}/{row['runs']}"
            f"  rc={row['rc']}"
        )
    print()
    for name, value in report["ratios"].items():
        print(f"{name:<55} {value:6.2f}")
    print(f"{'k3kit verify without weights (median s)':<55} {report['no_weights_verify_s']:6.3f}")
    w, e, rss = report["warm"], report["early_exit"], report["peak_rss_mb"]
    print(
        f"warm re-verification: {w['engine_files_from_cache']} files from the cache in "
        f"{w['engine_ms']:.1f} ms of engine work, {w['engine_bytes_read']} bytes read; CLI "
        f"{w['cli_wall_s']:.3f} s wall (+{w['cli_ms_over_no_weights']:.0f} ms over no --weights)"
    )
    print(
        f"early exit: {e['bytes_hashed'] / 1e9:.2f} of {e['bytes_total'] / 1e9:.2f} GB read, "
        f"{e['wall_s']:.3f} s wall, rc {e['rc']}"
    )
    print(
        f"peak RSS: k3kit {rss['k3kit_shards']:.0f} MB on the shards, "
        f"{rss['k3kit_one_big_file']:.0f} MB on the single big file"
    )


if __name__ == "__main__":
    sys.exit(main())
