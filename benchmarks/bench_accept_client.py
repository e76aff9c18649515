"""The acceptance client's own overhead: measured TTFT and TPOT against a stand-in server with
known delays, at concurrency 1, 32 and 256, reported as error in milliseconds.

    .venv/bin/python benchmarks/bench_accept_client.py [--tokens 32]

The server sleeps exactly ``ttft`` before the first token and ``tpot`` before each next one, so
any excess in the client's medians is the client's (and the event loops') overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.standin_server import Knobs, StandInServer

from k3kit.accept._http import Sample, Timeouts, run_closed_loop


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--ttft", type=float, default=0.2)
    parser.add_argument("--tpot", type=float, default=0.02)
    args = parser.parse_args()
    print(
        f"server: ttft {args.ttft * 1000:.0f} ms, tpot {args.tpot * 1000:.0f} ms, "
        f"{args.tokens} tokens"
    )
    print(
        f"{'concurrency':>11} {'requests':>8} {'TTFT err ms':>11} {'TPOT err ms':>11} {'failed':>6}"
    )
    with StandInServer(Knobs(ttft_s=args.ttft, tpot_s=args.tpot)) as server:
        for c in (1, 32, 256):
            n = max(8, 2 * c)
            body = {"model": "m", "prompt": "x", "max_tokens": args.tokens, "stream": True}
            got: list[Sample] = []
            asyncio.run(
                run_closed_loop(f"{server.url}/v1/completions", [(body, 1)] * n, c, Timeouts(), got)
            )
            ok = [s for s in got if s.ok]
            ttft = statistics.median(s.ttft_s for s in ok) * 1000 - args.ttft * 1000
            tpot = (
                statistics.median((s.latency_s - s.ttft_s) / (s.output_len - 1) for s in ok) * 1000
                - args.tpot * 1000
            )
            print(f"{c:>11} {n:>8} {ttft:>11.2f} {tpot:>11.2f} {len(got) - len(ok):>6}")


if __name__ == "__main__":
    main()
