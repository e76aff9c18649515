"""A local stand-in for an OpenAI-compatible engine (a dev tool): `k3kit accept` without a GPU.

Why: `k3kit accept` replays a kit's signed workload against a running server and judges every
claim. On a machine without the kit's GPUs and engine there is nothing to replay against; this
serves ``/v1/completions`` and ``/v1/chat/completions`` (streamed, with a usage chunk and
``[DONE]``, as vLLM does) on 127.0.0.1, so the whole of `accept` runs end to end:

    python3 scripts/standin_server.py --tokenizer WEIGHTS/tokenizer.json --port-file engine.port

It is the stand-in k3kit's own tests use (``tests/standin_server.py``). It waits ``--ttft-ms``
before each answer's first token and ``--tpot-ms`` before each next one, and streams words that
are one token each under the demo's stand-in tokenizer. Its figures say nothing about any real
engine: a verdict against it shows that `accept` runs, not that a kit reproduces. The port is
chosen by the system and written to ``--port-file`` once it listens; Ctrl-C (or SIGTERM) stops
it. Needs the ``tokenizers`` package (k3kit's own dependency) when ``--tokenizer`` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the clone's tests/ package

from tests.portfile import check_port_file, write_port_file
from tests.standin_server import Knobs, StandInServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/standin_server.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tokenizer", type=Path, help="tokenizer.json to count prompts with")
    parser.add_argument("--ttft-ms", type=float, default=5.0, help="wait before the first token")
    parser.add_argument("--tpot-ms", type=float, default=0.0, help="wait before each next token")
    parser.add_argument("--port-file", type=Path, help="write the port here once listening")
    args = parser.parse_args(argv)
    if args.port_file is not None:  # before any work: a refused file leaves nothing running
        check_port_file("standin_server", args.port_file)
    knobs = Knobs(ttft_s=args.ttft_ms / 1000, tpot_s=args.tpot_ms / 1000, tokenizer=args.tokenizer)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with StandInServer(knobs) as server:
        print(f"stand-in engine (not a real model) at {server.url}  (Ctrl-C stops it)", flush=True)
        if args.port_file is not None:
            write_port_file("standin_server", args.port_file, server.port)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
