"""The performance gate of ``make test``: start-up and hashing as RATIOS measured in one run.

Run: ``python benchmarks/perf_gate.py [--rounds 7] [--hash-mib 256] [--record]``

Absolute times on a shared 2-core machine move with other people's work (the same `k3kit
verify` took 0.36 s quiet and 2.1 s wall at a load of 8), so nothing here compares a time with a
number. Each round runs every contender in a rotating order, each run in a fresh process (the
start-up ones three times over, interleaved, each taking the median of its runs), and each
gate is a ratio of two contenders of the SAME round, then the median over the rounds: load
that slows one side of a ratio slows the other side too. Start-up is compared in CPU time (user +
system, from ``getrusage`` of the child), which waiting for a core does not inflate; hashing in
the time measured inside the child around the hashing only, since its point is using every core.

Contenders (a real kit and key from ``k3kit demo``; ``.pyc`` files compiled into a private
prefix by a warm-up round, as on a node where pip compiled them at install):

* ``version``: ``k3kit --version`` (the interpreter, click and the CLI group);
* ``import``: ``python -c 'import k3kit'``;
* ``verify``: ``k3kit verify KIT --trust KEY`` without weights (receipt, kit files, lock);
* ``launch``: ``k3kit launch --dry-run --no-preflight`` of the installed kit, weights warm in the
  verification cache, a stand-in engine answering ``--version``;
  both warm as on a node's every start after its first: the warm-up round filled their state
  folders, so the receipt's signature is recalled from the signature memo (k3kit.signing.memo);
* ``hash``: one file of ``--hash-mib`` MiB from the page cache, hashed in one process by k3kit's
  hashing engine (``k3kit.weights.hashpool.run_jobs``, blake3) with each of its readers, the
  copying one and the mapped one in its child (:mod:`k3kit.weights._mapped`, which ships for
  files of 1 GiB and more; here forced, so the child's start weighs more than it does there), and
  by blake3's own multi-threaded ``update_mmap`` with ``max_threads=AUTO`` (what ``b3sum`` does),
  in a rotating order, 5 rounds; each ratio is the median of the rounds' ratios (the digests
  must agree, and the mapped reader's child must have answered, not left the file to the copying
  reader).

With valgrind on PATH (``make tools`` installs it), ``version``, ``verify`` and ``launch`` also run
once each under cachegrind, which counts the instructions they execute in user space (the
children's included): the same count on a quiet or a busy machine, to a tenth of a percent, so
those ratios (:data:`INSTRUCTION_GATES`) hold tight limits. They leave out what the kernel does
for the process (page faults, file and process calls), which the CPU-time gates include. Without
valgrind they are reported "not measured", never "ok".

The thresholds (:data:`GATES`) come from measured figures with a wide margin (docs/performance.md,
"Performance gate"): they must never fail on a loaded machine when the code is fine, and they do
fail on the regressions that matter (verify importing huggingface_hub, a single-threaded hasher).
Figures go to ``benchmarks/results/perf-gate.json`` (git-ignored); ``--record`` also writes
``benchmarks/perf_figures.json`` (not from a run whose instruction counts were not measured: exit
2, the committed figures kept), the committed figures that ``scripts/gen_docs.py`` renders into
docs/performance.md. Exit 1 when a gate fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
FIGURES = HERE / "perf_figures.json"
MIB = 1 << 20
# Hashing pairs per round, k3kit and blake3 back to back in one process, so both see the same
# load (256 MiB take ~30 ms each on 2 quiet cores: separate processes moments apart did not).
HASH_PAIRS = 5
# Start-up contenders run this many times per round, interleaved, and each one's value in the
# round is the median of its runs (issue 23, fifth pass): `--version` costs about 0.09 s of CPU,
# and one run's jitter (other users on the core and its sibling thread, the accounting tick)
# moved a single round's verify/version ratio between 1.2 and 2.2 with the code unchanged.
# Three runs per side take most of that out; the verdict is still the median over the rounds of
# ratios between runs taken moments apart, so load cannot favour one side.
STARTUP_REPEATS = 3


@dataclass(frozen=True)
class Gate:
    """``numerator / denominator`` (medians of per-round ratios) must stay at or below ``limit``."""

    name: str
    numerator: str
    denominator: str
    limit: float
    why: str


# Each limit is >= 40 % above the worst median seen (docs/performance.md, "Performance gate").
# verify/version and verify/import: six gate runs after verify stopped importing pydantic (issue
# 23's third pass), the shared 2-core machine at a load average of 4.6-5.5 from other engineers'
# suites: medians 1.65-1.93 and 5.05-5.72, so 2.7 and 8.0 (they were 6.0 and 20 at 3.7-4.2 and
# 11.7-14.3). A verify that imports the pydantic models again scores about 3.4 and fails; a bare
# `import pydantic` (about 0.04 s of CPU) stays inside the noise: tests/test_startup.py pins it,
# deterministically. After the fourth pass (trust records, packaging, the reader's patterns) seven
# runs at a load of 2.5-16.8 gave 1.45-1.90, 4.66-5.67 and 3.92-4.83: the limits stay (1.4x the
# worst is 2.65, 7.94, 6.76); a verify that builds the receipt's models again scored 3.46 and 11.46.
# launch/version was 7.5 while launch read kit.json with pydantic (worst median 5.39 at the end of
# four fresh-clone `make test` runs). After the fifth pass (launch without pydantic) and with
# three runs per round (STARTUP_REPEATS), seven runs at a load of 4.1-8.2 gave launch/version
# medians of 2.21-2.55, so 3.6; launch reading kit.json with the pydantic models again scored
# 3.84 and 4.00 and failed; the verify limits stay (their worst, 1.77, is under 2.7 / 1.4).
# The hashing limit is wider (3.5): its two timings are 0.04-0.08 s each, and with the test
# suite running beside it the median was 1.96 (worst round 2.60), after it 2.07 (2.54): 1.75
# failed. It still catches a hasher that does extra work per byte (an added sha256 scored 4.17);
# it does not catch one that lost its second thread (~1.4x), which the hashing benchmarks show.
# On Python 3.13 (the venv's interpreter where one is found, Makefile): `import k3kit` is cheaper
# and the CLI's start-up dearer than on 3.11, so five quiet runs (load 0.9-1.6) gave medians of
# 1.60-1.81, 5.63-7.08 and 2.27-2.59: verify/import 8.0 -> 10.0 and launch/version 3.6 -> 3.7
# (1.4x the worst), verify/version stays 2.7. A verify that builds the receipt's models again
# scored 3.71, 14.04 and 4.63 there (launch verifies too) and failed all three.
# After the sixth pass (verify without hashlib, urllib.parse and base64; launch verifying the kit
# once, its engine and weights modules on use, no packaging), eleven runs on 3.13 (load 0.5-2.3,
# one at the end of a fresh-clone `make test`, one right after it) gave medians of 1.24-1.60,
# 4.79-5.52 and 1.63-2.00: 2.3, 8.0 and 2.8 (1.4x the worst, rounded up). A verify that builds
# the receipt's pydantic models again scored 3.23 / 11.05 / 3.83 and failed all three
# (docs/performance.md, "Sixth pass").
# After the seventh pass (launch's records without dataclasses, canonical JSON by the C encoder),
# fifteen runs on 3.13 at a load of 0.2-1.6 gave launch/version medians of 1.59-1.77: 2.5 (1.4x
# the worst, rounded up); the verify limits stay (worst medians 1.54 and 5.16). The receipt's
# pydantic models built again in verify scored 3.18 / 10.80 / 3.53 and failed all three.
# hash mapped/blake3 (the eleventh pass): the mapped reader forced on the 256 MiB file, so its
# child's start (10-60 ms) weighs against 30 ms of hashing: quiet medians 1.69 and 1.88 (worst
# round 1.95); 4.0 leaves room for a busy machine, where starting a process suffers more than
# hashing does. The regression its ratio cannot see (a child that never answers, so every large
# file is read twice) fails the gate by the child's own check, `mapped_answered`.
GATES = (
    Gate("verify/version", "verify", "version", 2.3, "verify start-up vs the bare CLI"),
    Gate("verify/import", "verify", "import", 8.0, "verify start-up vs `import k3kit`"),
    Gate("launch/version", "launch", "version", 2.5, "launch --dry-run vs the bare CLI"),
    Gate("hash k3kit/blake3", "hash", "", 3.5, "one file: k3kit's time / blake3's own"),
    Gate("hash mapped/blake3", "hash-mapped", "", 4.0, "the same, read through a mapping"),
)

# Deterministic, so the limits sit ~10 % above the measured ratios (docs/performance.md, "Eighth
# pass"): verify/version 1.438-1.441 on 3.13 and 1.449 on 3.11, launch/version 1.671-1.674 and
# 1.682 (through a venv's install or the source folder on PYTHONPATH; the pass's final code). Not
# tighter: a new release of click or cryptography moves the counts of both sides. A verify that
# imports the receipt's pydantic models again scored 3.156 and 3.379 and failed both (and the
# three CPU-time start-up gates, at 2.80, 9.50 and 3.06).
# After the ninth pass (the signature recalled from the node's memo, so a warm verify or launch
# loads no cryptography; a second gc.freeze as the verb returns): verify/version 1.334 on 3.13
# and 1.339 on 3.11, launch/version 1.560 and 1.571, so 1.47 and 1.73, again ~10 % above.
INSTRUCTION_GATES = (
    Gate("verify/version instructions", "verify", "version", 1.47, "verify vs the bare CLI"),
    Gate("launch/version instructions", "launch", "version", 1.73, "launch vs the bare CLI"),
)
INSTRUCTION_CONTENDERS = ("version", "verify", "launch")
_I_REFS = re.compile(r"I\s+refs:\s+([0-9,]+)")


class NotMeasured(Exception):
    """valgrind could not count a contender's instructions (why, in the message)."""


def instructions(argv: list[str], env: dict[str, str], work: Path) -> int | None:
    """User-space instructions of ``argv`` and its children by cachegrind (None without valgrind).

    ``PYTHONHASHSEED`` fixed: string hashes decide dict probing, so a random seed moves the count
    by a few tenths of a percent from run to run; with it fixed, repeated runs agree to 0.1 %."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    logs = Path(tempfile.mkdtemp(prefix="cachegrind-", dir=work))
    cmd = [
        valgrind,
        "--tool=cachegrind",
        "--cache-sim=no",
        "--trace-children=yes",
        "--cachegrind-out-file=/dev/null",
        f"--log-file={logs}/%p.log",
        *argv,
    ]
    proc = subprocess.run(
        cmd, env={**env, "PYTHONHASHSEED": "0"}, capture_output=True, timeout=600, check=False
    )
    counts = [
        int(m.replace(",", ""))
        for log in sorted(logs.iterdir())
        for m in _I_REFS.findall(log.read_text(errors="replace"))
    ]
    if proc.returncode != 0 or not counts:
        # The same command ran cleanly in every CPU round: this is the tool failing (an
        # instruction it cannot emulate, say), reported as not measured rather than as a verdict.
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise NotMeasured(f"valgrind exited {proc.returncode} on {argv[1:4]}: {tail[0][:200]}")
    if sum(counts) <= 0:  # a log that says nothing ran: a ratio of 0 would pass any limit
        raise NotMeasured(f"valgrind counted no instruction for {argv[1:4]}")
    return sum(counts)


def count_instructions(setup: Setup, work: Path) -> dict[str, Any]:
    """Each contender once under cachegrind (after the warm-up: the .pyc files exist), and the
    instruction gates' ratios; ``{"measured": False}`` without valgrind."""
    counts: dict[str, int] = {}
    for name in INSTRUCTION_CONTENDERS:
        env = setup.launch_env if name == "launch" else setup.env
        try:
            count = instructions(setup.commands[name], env, work)
        except NotMeasured as exc:
            return {"measured": False, "why": str(exc)}
        if count is None:
            return {"measured": False, "why": "valgrind is not on PATH (`make tools`)"}
        counts[name] = count
    gates = []
    for g in INSTRUCTION_GATES:
        value = counts[g.numerator] / counts[g.denominator]
        gates.append(
            {
                "name": g.name,
                "why": g.why,
                "limit": g.limit,
                "ratio": round(value, 3),
                "ok": value <= g.limit,
            }
        )
    return {"measured": True, "counts": counts, "gates": gates}


HASH_CHILD = r"""
import json, statistics, sys, time
from pathlib import Path
import blake3
from k3kit.weights._mapped import digest_mapped
from k3kit.weights.hashpool import HashJob, run_jobs
path, pairs = Path(sys.argv[1]), int(sys.argv[2])
job = HashJob(path.name, path, path.stat().st_size, "0" * 64)
def engine(mapped_min):
    result = run_jobs([job], "blake3", stop_on_first=False, mapped_min=mapped_min).results[0]
    return result.digest.digests["blake3"]
hashers = {
    "k3kit": lambda: engine(job.size + 1),  # the copying reader, whatever the file's size
    "mapped": lambda: engine(0),  # the mapped reader in its child, start-up included
    "blake3": lambda: blake3.blake3(max_threads=blake3.blake3.AUTO).update_mmap(path).hexdigest(),
}
seconds, digests = {name: [] for name in hashers}, set()
for i in range(pairs + 1):  # round 0 starts threads and faults in buffers: not counted
    k = i % len(hashers)
    for name in list(hashers)[k:] + list(hashers)[:k]:
        t = time.perf_counter()
        digests.add(hashers[name]())
        if i:
            seconds[name].append(time.perf_counter() - t)
print(json.dumps({
    **{name: statistics.median(seconds[name]) for name in hashers},
    "ratio": statistics.median(k / b for k, b in zip(seconds["k3kit"], seconds["blake3"])),
    "mapped_ratio": statistics.median(
        m / b for m, b in zip(seconds["mapped"], seconds["blake3"])
    ),
    "digests_agree": len(digests) == 1,
    # a child that never answers would still "hash" (the pool reads the file again): say so
    "mapped_answered": digest_mapped(path) is not None,
}))
"""


def child_env(pyc: Path) -> dict[str, str]:
    """This environment, with bytecode written to a private prefix (compiled once, by warm-up)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pyc)
    return env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``argv`` to completion: (CPU seconds of it and its children, wall seconds, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"perf gate: {argv[1:4]} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, proc.stdout


@dataclass(frozen=True)
class Setup:
    """The commands of one gate run, built on a demo kit in ``work``."""

    commands: dict[str, list[str]]
    env: dict[str, str]
    launch_env: dict[str, str]
    big: Path


def write_big_file(path: Path, mib: int) -> None:
    """``mib`` MiB of a seeded blake3 stream: incompressible, the same bytes on every run."""
    import blake3

    xof = blake3.blake3(b"k3kit perf gate")
    with path.open("wb") as f:
        for i in range(mib // 16):
            f.write(xof.digest(length=16 * MIB, seek=i * 16 * MIB))


def prepare(work: Path, hash_mib: int) -> Setup:
    """A kit, key, installed kit and stand-in engine from `k3kit demo`; the file to hash."""
    py = sys.executable
    env = child_env(work / "pyc")
    demo = work / "demo"
    timed([py, "-m", "k3kit", "demo", "--workdir", str(demo)], env)
    kit = next((demo / "kit").iterdir())
    installed = next((demo / "installed").iterdir())
    snapshot = next((demo / "hf-cache").glob("models--*/snapshots/*"))
    pub = demo / "keys" / "demo.pub"
    launch_env = {**env, "PATH": f"{demo / 'bin'}:/usr/bin:/bin"}
    cli, verify_state = [py, "-m", "k3kit"], str(work / "verify-state")
    commands = {
        "version": [py, "-m", "k3kit", "--version"],
        "import": [py, "-c", "import k3kit"],
        "verify": [*cli, "verify", str(kit), "--trust", str(pub), "--state-dir", verify_state],
        "launch": [
            *cli,
            "launch",
            str(installed),
            *("--profile", "interactive", "--weights", str(snapshot), "--trust", str(pub)),
            *("--no-preflight", "--dry-run", "--state-dir", str(work / "launch-state")),
        ],
    }
    big = work / "big.bin"
    write_big_file(big, hash_mib)
    commands["hash"] = [py, "-c", HASH_CHILD, str(big), str(HASH_PAIRS)]
    return Setup(commands, env, launch_env, big)


def one_round(
    setup: Setup, order: list[str], repeats: int = STARTUP_REPEATS
) -> dict[str, dict[str, Any]]:
    """Every contender in ``order``, the start-up ones ``repeats`` times over, interleaved: its
    CPU and wall seconds, the medians of its runs (hashing: once, inner seconds)."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in order}
    out: dict[str, dict[str, Any]] = {}
    for rep in range(repeats):
        for name in order:
            if name == "hash" and rep:
                continue
            env = setup.launch_env if name == "launch" else setup.env
            cpu, wall, stdout = timed(setup.commands[name], env)
            samples[name].append((cpu, wall))
            if name == "hash":
                out[name] = {"cpu": cpu, "wall": wall, **json.loads(stdout)}
    for name, runs in samples.items():
        if name != "hash":
            cpus, walls = zip(*runs, strict=True)
            out[name] = {"cpu": statistics.median(cpus), "wall": statistics.median(walls)}
    return out


def measure(setup: Setup, rounds: int) -> list[dict[str, dict[str, Any]]]:
    """A warm-up round (compiles the .pyc files, fills the page cache), then ``rounds`` rounds."""
    names = list(setup.commands)
    one_round(setup, names)
    runs = []
    for i in range(rounds):
        k = i % len(names)
        runs.append(one_round(setup, names[k:] + names[:k]))
    return runs


def ratio(gate: Gate, row: dict[str, dict[str, Any]]) -> float:
    """One round's value of ``gate``: CPU time over CPU time, or the hashing child's ratio."""
    if gate.numerator == "hash":
        return float(row["hash"]["ratio"])
    if gate.numerator == "hash-mapped":
        return float(row["hash"]["mapped_ratio"])
    return float(row[gate.numerator]["cpu"]) / float(row[gate.denominator]["cpu"])


def summarise(runs: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Medians per contender, each gate's median per-round ratio and its verdict."""
    medians = {
        name: {
            k: statistics.median(float(r[name][k]) for r in runs)
            for k in row
            if k not in ("digests_agree", "mapped_answered")
        }
        for name, row in runs[0].items()
    }
    gates = []
    for g in GATES:
        per_round = [ratio(g, r) for r in runs]
        value = statistics.median(per_round)
        gates.append(
            {
                "name": g.name,
                "why": g.why,
                "limit": g.limit,
                "median": round(value, 3),
                "worst_round": round(max(per_round), 3),
                "ok": value <= g.limit,
            }
        )
    agree = all(r["hash"]["digests_agree"] for r in runs)
    answered = all(r["hash"]["mapped_answered"] for r in runs)
    return {"medians": medians, "gates": gates, "digests_agree": agree, "mapped_answered": answered}


def machine() -> dict[str, Any]:
    """Where the figures were taken, and how busy the machine was meanwhile."""
    return {
        "cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_1min_after": os.getloadavg()[0],
    }


def render(data: dict[str, Any]) -> str:
    """The figures as the Markdown that docs/performance.md carries between its markers."""
    m, lines = data["summary"]["medians"], []
    lines += [
        f"`benchmarks/perf_gate.py --rounds {data['rounds']} --hash-mib {data['hash_mib']}`, "
        f"{data['machine']['cpus']} CPUs, Python {data['machine']['python']}, load average "
        f"{data['machine']['loadavg_1min_after']:.2f} at the end of the run "
        "(`benchmarks/perf_figures.json`). Medians over the rounds:",
        "",
        "| contender | CPU s | wall s |",
        "|---|---:|---:|",
    ]
    for name in ("version", "import", "verify", "launch"):
        lines.append(f"| `{name}` | {m[name]['cpu']:.3f} | {m[name]['wall']:.3f} |")
    big = data["hash_mib"] * MIB / 1e9
    for name in ("k3kit", "mapped", "blake3"):
        s = m["hash"][name]
        lines.append(
            f"| hashing one {data['hash_mib']} MiB file, {name} (inner {big / s:.2f} GB/s) "
            f"| – | {s:.3f} |"
        )
    lines += ["", "| gate | median ratio | worst round | limit | |", "|---|---:|---:|---:|---|"]
    for g in data["summary"]["gates"]:
        verdict = "ok" if g["ok"] else "**FAILS**"
        lines.append(
            f"| {g['name']} ({g['why']}) | {g['median']:.2f} | {g['worst_round']:.2f} "
            f"| {g['limit']:.2f} | {verdict} |"
        )
    counted = data.get("instructions") or {"measured": False, "why": "not recorded"}
    lines.append("")
    if not counted["measured"]:
        lines.append(f"Instruction counts: **not measured** ({counted['why']}).")
        return "\n".join(lines) + "\n"
    c = counted["counts"]
    lines += [
        "Instructions executed in user space, children included (cachegrind, one run each, "
        "`PYTHONHASHSEED=0`): "
        + ", ".join(f"`{n}` {c[n] / 1e6:.1f} M" for n in INSTRUCTION_CONTENDERS)
        + ".",
        "",
        "| gate | ratio | limit | |",
        "|---|---:|---:|---|",
    ]
    for g in counted["gates"]:
        verdict = "ok" if g["ok"] else "**FAILS**"
        lines.append(
            f"| {g['name']} ({g['why']}) | {g['ratio']:.3f} | {g['limit']:.2f} | {verdict} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--hash-mib", type=int, default=256)
    parser.add_argument("--out", type=Path, default=RESULTS / "perf-gate.json")
    parser.add_argument("--record", action="store_true", help=f"also write {FIGURES.name}")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="k3kit-perf-") as tmp:
        setup = prepare(Path(tmp), args.hash_mib)
        runs = measure(setup, args.rounds)
        counted = count_instructions(setup, Path(tmp))
    data = {
        "rounds": args.rounds,
        "hash_mib": args.hash_mib,
        "machine": machine(),
        "summary": summarise(runs),
        "instructions": counted,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(render(data))
    if args.record and not counted["measured"]:
        # the committed figures keep the counts they have rather than a run that has none
        print(
            f"perf gate: not recording {FIGURES.name}: instruction counts not measured "
            f"({counted['why']}); figures of this run in {args.out}",
            file=sys.stderr,
        )
        return 2
    if args.record:
        FIGURES.write_text(json.dumps(data, indent=2) + "\n")
    failed = [g["name"] for g in data["summary"]["gates"] if not g["ok"]]
    failed += [g["name"] for g in counted.get("gates", []) if not g["ok"]]
    if not data["summary"]["digests_agree"]:
        failed.append("k3kit's blake3 digest differs from blake3's own")
    if not data["summary"]["mapped_answered"]:
        failed.append("the mapped reader's child gave no answer (every large file read twice)")
    if failed:
        print(f"perf gate FAILED: {', '.join(failed)} (figures in {args.out})", file=sys.stderr)
        return 1
    unmeasured = "" if counted["measured"] else "; instruction counts NOT measured"
    print(f"perf gate ok (figures in {args.out}{unmeasured})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
