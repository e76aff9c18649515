"""What a buyer's `k3kit audit` costs on a signed kit whose evidence has 10,000 per-request records.

bench_audit.py times the rules in memory; this one times the command as it is run: a real kit
(the example package over small stand-in weights) signed with a generated `vllm bench serve
--save-detailed` result of 10,000 requests (tests/benchgen.py, seeded, speculative decoding, ~2
tokens per chunk, 256 output tokens), then `python -m k3kit audit KIT --trust PUB --json` as a
subprocess, several times. Wall time is measured around the subprocess (interpreter start and
imports included); peak memory is the child's own maximum resident set size (``os.wait4``), so
nothing of this script's generator counts. Target (issue 22): < 3 s and < 300 MB.
Prints one line per repeat and a summary; writes benchmarks/results/audit_cli.json.
Run: PYTHONPATH=src python benchmarks/bench_audit_cli.py [REQUESTS]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.benchgen import GenRun, ServerModel, make_claims, simulate, write_bundle  # noqa: E402

from k3kit._canonical import model_bytes  # noqa: E402
from k3kit._fs import atomic_write  # noqa: E402
from k3kit.demo import stand_in_files, write_hf_cache  # noqa: E402
from k3kit.publish.kit import build, sign  # noqa: E402
from k3kit.signing.keys import load_private, write_keypair  # noqa: E402
from k3kit.weights.pin import pin_local  # noqa: E402

EXAMPLE = ROOT / "examples" / "kimi-k3-b300x8"
REPEATS = 3


def _kit(root: Path, requests: int) -> tuple[Path, Path, int]:
    """A signed kit with one 10,000-request run; returns (kit, public key, evidence bytes)."""
    snap = write_hf_cache(root / "hf", "moonshotai/Kimi-K3", stand_in_files(3, 4096))
    lock = pin_local(
        snap, repo="moonshotai/Kimi-K3", revision=snap.name, pinned_at="2026-11-01T00:00:00Z"
    )
    lock_path = root / "weights.lock.json"
    atomic_write(lock_path, model_bytes(lock))
    kit = root / "kit"
    build(EXAMPLE / "package.toml", lock_path, kit)
    keys, _ = write_keypair(root / "keys" / "publisher", None)
    result = simulate(
        1,
        concurrency=32,
        num_prompts=requests,
        output_len=256,
        model=ServerModel(decode_s_per_token=0.006, chunk_tokens=(1, 3)),
    )
    runs = [GenRun("interactive-c32", "interactive", 32, requests, result)]
    made = make_claims(runs, input_len=2048, output_len=256)
    made.workload["speculative_decoding"] = True
    claims = write_bundle(root / "bundle", made, runs)
    t0 = time.perf_counter()
    sign(kit, load_private(keys.private, None), claims, issued_at="2026-11-01T00:00:00Z")
    print(f"sign (in process): {time.perf_counter() - t0:.2f} s")
    size = (kit / "evidence" / "interactive-c32.json").stat().st_size
    return kit, keys.public, size


def _audit(kit: Path, public: Path, scratch: Path) -> tuple[float, float, float, int, int]:
    """One `k3kit audit` run: (wall s, child CPU s, child peak RSS MB, exit code, errors).

    CPU time (user + system, the child's own) is the figure that does not grow with other
    people's load on a shared machine; wall time is what the buyer waits on an idle one."""
    argv = [sys.executable, "-m", "k3kit", "audit", str(kit), "--trust", str(public), "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    report_path = scratch / "report.json"
    with report_path.open("wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, reaped here
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = report_path.read_bytes()
    report = json.loads(text) if text.strip().startswith(b"{") else {}
    findings = report.get("findings", [])
    errors = sum(1 for f in findings if f.get("severity") == "error")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, proc.returncode, errors


def main() -> None:
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory(prefix="k3kit-bench-audit-") as tmp:
        kit, public, size = _kit(Path(tmp), requests)
        rows = []
        for i in range(REPEATS):
            wall, cpu, rss, rc, errors = _audit(kit, public, Path(tmp))
            rows.append(
                {
                    "wall_s": round(wall, 3),
                    "cpu_s": round(cpu, 3),
                    "peak_rss_mb": round(rss, 1),
                    "exit": rc,
                }
            )
            print(
                f"audit {i + 1}/{REPEATS}: {requests} requests, evidence {size / 1e6:.1f} MB: "
                f"{wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss:.0f} MB, exit {rc}, "
                f"{errors} error finding(s)"
            )
    summary = {
        "requests": requests,
        "evidence_bytes": size,
        "median_wall_s": round(statistics.median(r["wall_s"] for r in rows), 3),
        "median_cpu_s": round(statistics.median(r["cpu_s"] for r in rows), 3),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "max_peak_rss_mb": max(r["peak_rss_mb"] for r in rows),
        "runs": rows,
    }
    print(
        f"median {summary['median_wall_s']:.2f} s wall, {summary['median_cpu_s']:.2f} s CPU "
        f"(load average {summary['load_average_1min']} on {os.cpu_count()} CPUs), "
        f"max peak RSS {summary['max_peak_rss_mb']:.0f} MB (target < 3 s, < 300 MB)"
    )
    out = ROOT / "benchmarks" / "results" / "audit_cli.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
