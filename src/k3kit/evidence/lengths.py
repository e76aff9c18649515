"""What each benchmark tool's length-spread option means, and what its file records of it.

"Range ratio" is one word for two distributions: vLLM's ``--random-range-ratio r`` draws every
length uniformly from [L(1 - r), L(1 + r)], SGLang's from [max(floor(L r), 1), L] for prompts and
[floor(L r), L] for outputs, so r = 0 is "exactly L" in one and "anything up to L" in the other.
The other tools spread lengths by a standard deviation around a mean instead. A receipt's
workload names its convention (``range_convention``); this table is what the audit holds that to,
tool by tool, with the source each meaning was read from (docs/audit.md has the same table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Convention = Literal["vllm", "sglang"]


@dataclass(frozen=True)
class LengthSpread:
    """One tool's way of spreading request lengths around the stated one."""

    option: str
    convention: Convention | None  # the range_convention its ratio follows; None: no ratio
    meaning: str
    source: str


LENGTH_SPREAD: dict[str, LengthSpread] = {
    "vllm bench serve": LengthSpread(
        "--random-range-ratio r (with --random-input-len / --random-output-len L)",
        "vllm",
        "uniform in [L(1 - r), L(1 + r)]; r = 0 is exactly L",
        "vllm/benchmarks/datasets.py, RandomDataset.sample",
    ),
    "sglang bench_serving": LengthSpread(
        "--random-range-ratio r (with --random-input-len / --random-output-len L)",
        "sglang",
        "prompts uniform in [max(floor(L r), 1), L], outputs in [floor(L r), L]; r = 1 is "
        "exactly L; the file records random_input_len, random_output_len, random_range_ratio",
        "python/sglang/bench_serving.py, sample_random_requests",
    ),
    "aiperf": LengthSpread(
        "--isl / --isl-stddev, --osl / --osl-stddev (development versions: "
        "--random-range-ratio with --random-corpus-style vllm)",
        "vllm",
        "normal around the mean with the given standard deviation; the range ratio of the vLLM "
        "corpus style reproduces vLLM's [L(1 - r), L(1 + r)]",
        "aiperf docs/tutorials/synthetic-dataset.md; reference 'Validating ISL/OSL distributions'",
    ),
    "guidellm": LengthSpread(
        "synthetic data prompt_tokens / prompt_tokens_stdev / _min / _max (output_tokens alike)",
        None,
        "normal around the mean, clipped to [min, max]; no range ratio",
        "guidellm dataset/synthetic.py, SyntheticDatasetConfig",
    ),
    "llmperf": LengthSpread(
        "--mean-input-tokens / --stddev-input-tokens, --mean-output-tokens / "
        "--stddev-output-tokens",
        None,
        "normal around the mean (positive integers); no range ratio",
        "llmperf token_benchmark_ray.py, sample_random_positive_int",
    ),
}
