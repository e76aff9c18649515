"""A weight file replaced by a huge sparse file is refused by its size, without being read.

Run: ``python benchmarks/bench_bounds_weights.py [--gib 32] [--runs 5]``

Makes a small plain weights folder (the demo's stand-in shards), pins it, then replaces one shard
with a sparse file of ``--gib`` GiB (no blocks on disk) and runs the weights check
(:func:`k3kit.weights.check_weights`, what ``verify --weights`` calls) in a fresh process per
run. Reports the median wall time, the bytes the check says it hashed, and the bytes the process
actually read from files (``rchar`` in ``/proc/self/io``, Linux only), next to a genuine folder
as the baseline. The check must stop at the size comparison: bytes read stay at the size of the
small files only (and zero of the sparse file), whatever ``--gib`` is.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from k3kit._canonical import model_bytes
from k3kit._fs import atomic_write
from k3kit.demo import stand_in_files
from k3kit.weights.pin import pin_local

CHILD = r"""
import json, sys, time
from pathlib import Path
from k3kit.publish.kit import load_lock
from k3kit.weights import check_weights

def rchar():
    try:
        for line in open("/proc/self/io"):
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        return -1
    return -1

lock = load_lock(Path(sys.argv[1]))
before, t0 = rchar(), time.perf_counter()
report = check_weights(Path(sys.argv[2]), lock)
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "rchar": rchar() - before, "bytes_hashed": report.bytes_hashed,
                  "codes": sorted({p.code for p in report.problems})}))
"""


def run_once(lock: Path, folder: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(lock), str(folder)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=int, default=32)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="k3kit-bench-bounds-") as tmp:
        root = Path(tmp)
        folder = root / "weights"
        folder.mkdir()
        for name, data in stand_in_files().items():
            (folder / name).write_bytes(data)
        lock = pin_local(
            folder, repo="bench/bounds", revision="0" * 40, pinned_at="2026-01-01T00:00:00Z"
        )
        lock_path = root / "weights.lock.json"
        atomic_write(lock_path, model_bytes(lock))
        small = sum(f.size for f in lock.files)
        results: dict[str, list[dict[str, object]]] = {"genuine": [], "sparse": []}
        for _ in range(args.runs):
            results["genuine"].append(run_once(lock_path, folder))
        shard = sorted(folder.glob("*.safetensors"))[0]
        os.truncate(shard, args.gib * (1 << 30))
        on_disk = os.stat(shard).st_blocks * 512
        for _ in range(args.runs):
            results["sparse"].append(run_once(lock_path, folder))
        print(
            f"locked files: {len(lock.files)}, {small} bytes; sparse shard: {args.gib} GiB "
            f"apparent, {on_disk} bytes on disk"
        )
        for label, runs in results.items():
            wall = statistics.median(float(r["wall_s"]) for r in runs)  # type: ignore[arg-type]
            print(
                f"{label:8s} median {wall * 1000:8.1f} ms over {len(runs)} runs; "
                f"bytes hashed {runs[0]['bytes_hashed']}; bytes read (rchar) "
                f"{statistics.median(int(r['rchar']) for r in runs)}; codes {runs[0]['codes']}"  # type: ignore[call-overload]
            )


if __name__ == "__main__":
    main()
