"""How vLLM's own benchmark client is run beside ``k3kit accept`` (the optional agreement test and
``benchmarks/accept_client.py``): ``vllm bench serve`` by its own parser and ``main()``, without
the ``vllm`` entry point's server-side imports, which the bench client does not need."""

from __future__ import annotations

VLLM_BENCH_SNIPPET = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
)
