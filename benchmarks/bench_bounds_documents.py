"""What does `k3kit verify` pay for an oversized, unsigned document or evidence file?

Run: ``python benchmarks/bench_bounds_documents.py [--runs 3]``

Builds and signs a real kit (stand-in weights, the example package, generated evidence), then
runs the real CLI (`k3kit verify KIT --trust KEY --json`, a fresh process each time) on copies
where one file was replaced:

- ``MANIFEST.json`` by 16 MiB of empty objects (``[{},{},...]``, the size cap; unsigned), and by a
  1 GiB sparse file: both must be refused by digest or size, never parsed (the issue measured
  850 MB and 16 s for the first before documents were hashed before parsing);
- an evidence file by a 32 GiB sparse file: refused by its size, never read (108 s before);
- nothing (the genuine kit), as the baseline of start-up and signature checks.

Prints the median wall time, the peak RSS of the verifying process (GNU time's ``%M``)
and the error code; writes JSON under benchmarks/results/.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.auditkit import sign_generated  # noqa: E402
from tests.benchgen import make_claims, standard_runs  # noqa: E402
from tests.conftest import KeyFiles, make_kit, make_snapshot  # noqa: E402

from k3kit.signing.keys import write_keypair  # noqa: E402


def _codes(obj: object) -> list[str]:
    if isinstance(obj, dict):
        return [v for k, v in obj.items() if k == "code" and isinstance(v, str)] + [
            c for v in obj.values() for c in _codes(v)
        ]
    if isinstance(obj, list):
        return [c for v in obj for c in _codes(v)]
    return []


TIME = Path("/usr/bin/time") if Path("/usr/bin/time").exists() else None


def _run_verify(kit: Path, trust: Path) -> tuple[float, int | None, int, list[str]]:
    """Wall seconds, peak RSS (KiB, GNU time's %M: the verifier alone, not this process that
    forked it), exit code, error codes."""
    argv = [sys.executable, "-m", "k3kit", "verify", str(kit), "--trust", str(trust), "--json"]
    rss_file = kit.with_name(kit.name + ".rss")
    if TIME is not None:
        argv = [str(TIME), "-f", "%M", "-o", str(rss_file), *argv]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    rss = int(rss_file.read_text().split()[-1]) if TIME is not None else None
    codes = sorted(set(_codes(json.loads(proc.stdout)))) if proc.stdout.strip() else []
    return wall, rss, proc.returncode, [c for c in codes if c != "WEIGHTS_NOT_GIVEN"]


def _sparse(path: Path, size: int) -> None:
    path.unlink()
    with open(path, "wb") as handle:
        handle.truncate(size)


def _unsigned_manifest(kit: Path) -> None:
    n = (16 * 1024 * 1024 - 2) // 3
    (kit / "MANIFEST.json").write_bytes(b"[" + b"{}," * (n - 1) + b"{}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="k3kit-bench-bounds-"))
    try:
        paths, _ = write_keypair(work / "keys" / "publisher", None)
        key = KeyFiles(paths.private, paths.public)
        golden = make_kit(work / "golden", key, make_snapshot(work / "cache", shards=2))
        runs = standard_runs(output_len=16, input_len=64)[:1]
        claims = make_claims(runs, input_len=64, output_len=16)
        sign_generated(golden.kit, key, work / "pub", claims, runs)
        evidence = next((golden.kit / "evidence").iterdir()).relative_to(golden.kit)

        cases: dict[str, Callable[[Path], None]] = {
            "genuine kit (baseline)": lambda kit: None,
            "unsigned MANIFEST.json, 16 MiB of {}": _unsigned_manifest,
            "MANIFEST.json, 1 GiB sparse": lambda kit: _sparse(kit / "MANIFEST.json", 1 << 30),
            "evidence file, 32 GiB sparse": lambda kit: _sparse(kit / evidence, 32 << 30),
        }
        results = []
        for name, tamper in cases.items():
            walls: list[float] = []
            rss, rc, codes = 0, 0, []
            for i in range(args.runs):
                kit = work / f"case-{len(results)}-{i}"
                shutil.copytree(golden.kit, kit)
                tamper(kit)
                wall, peak, rc, codes = _run_verify(kit, key.public)
                walls.append(wall)
                rss = max(rss, peak or 0)
                shutil.rmtree(kit)
            row = {
                "case": name,
                "median_s": round(statistics.median(walls), 3),
                "max_s": round(max(walls), 3),
                "peak_rss_mib": round(rss / 1024, 1),
                "exit": rc,
                "codes": codes,
            }
            results.append(row)
            print(
                f"{name:<40} median {row['median_s']:>6.3f} s  max {row['max_s']:>6.3f} s  "
                f"peak RSS {row['peak_rss_mib']:>6.1f} MiB  exit {rc}  {','.join(codes)}"
            )
        out_dir = ROOT / "benchmarks" / "results"
        out_dir.mkdir(exist_ok=True)
        out = out_dir / f"bounds-documents-{time.strftime('%Y%m%dT%H%M%S')}.json"
        meta = {"python": platform.python_version(), "cpus": os.cpu_count(), "runs": args.runs}
        out.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
        print(f"wrote {out.relative_to(ROOT)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
