"""What a receipt records about benchmark evidence: definitions, and each evidence file's summary.

A published figure means nothing without its definition (vLLM's TPOT is GuideLLM's ITL), so the
receipt states the formulas, the percentile method and the per-GPU divisor. The summary of an
evidence file is what the *tool* reported, copied without recomputation: recomputing it from the
per-request data is the auditor's job, and a summary that k3kit had recomputed at signing time
could never disagree with its evidence. Floats from the tool travel as decimal strings of their
shortest round-trip form, so the exact float can be recovered and nothing is rounded.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from k3kit.models._base import Frozen, Measured, NonNegInt

EvidenceLevel = Literal["summary", "raw"]
EvidenceTool = Literal[
    "vllm bench serve", "sglang bench_serving", "llmperf", "aiperf", "guidellm"
]
PercentileMethod = Literal[
    "numpy-linear", "nearest-rank", "lower", "higher", "nearest", "midpoint", "loadgen"
]

# vLLM `vllm bench serve` definitions (vllm/benchmarks/serve.py, lib/endpoint_request_func.py).
VLLM_TTFT = "first streamed chunk with choices - send time (send after the client semaphore)"
VLLM_TPOT = (
    "(e2el - ttft) / (output_tokens - 1) per request with output_tokens > 1, then over requests"
)
VLLM_ITL = "gap between consecutive streamed chunks, pooled over requests (one sample per chunk)"
VLLM_E2EL = "last token chunk - send time"
VLLM_OUTPUT_TOKENS = "server usage.completion_tokens"
PER_GPU_FORMULA = "throughput_tok_s / gpus (run.gpus, else environment.gpu_count)"


class Definitions(Frozen):
    """How the published numbers were computed; the defaults are vLLM's."""

    ttft: str = Field(default=VLLM_TTFT, min_length=1, max_length=500)
    tpot: str = Field(default=VLLM_TPOT, min_length=1, max_length=500)
    itl: str = Field(default=VLLM_ITL, min_length=1, max_length=500)
    e2el: str = Field(default=VLLM_E2EL, min_length=1, max_length=500)
    output_tokens: str = Field(default=VLLM_OUTPUT_TOKENS, min_length=1, max_length=500)
    percentile_method: PercentileMethod = "numpy-linear"
    std: Literal["population", "sample"] = "population"
    per_gpu_throughput: Literal["output", "total"] = Field(
        default="output", description="which throughput the per-GPU figures divide"
    )
    per_gpu: str = Field(default=PER_GPU_FORMULA, min_length=1, max_length=500)


class LatencyStats(Frozen):
    """One latency metric as the tool reported it, in milliseconds."""

    mean: Measured | None = None
    median: Measured | None = None
    std: Measured | None = None
    percentiles: dict[str, Measured] = Field(
        default_factory=dict, description='keys as the tool writes them: "50", "99", "99.9"'
    )


class EvidenceSummary(Frozen):
    """The numbers of one benchmark result file, as the tool wrote them, under vLLM's names.

    Units are fixed whatever the tool: seconds, requests/s, tokens/s, latency statistics in ms.
    """

    tool: EvidenceTool = "vllm bench serve"
    record: NonNegInt | None = Field(
        default=None, description="which record of a multi-run file (JSON Lines line, benchmark)"
    )
    notes: list[str] = Field(
        default_factory=list, description="tolerated version drift: legacy keys, missing fields"
    )
    unmapped: list[str] = Field(
        default_factory=list, description="keys of the file that no adapter field maps"
    )
    date: str | None = Field(default=None, max_length=64)
    model_id: str | None = Field(default=None, max_length=500)
    backend: str | None = Field(default=None, max_length=100)
    num_prompts: NonNegInt | None = None
    request_rate: str | None = Field(default=None, max_length=64, description='"inf" or a number')
    burstiness: Measured | None = None
    max_concurrency: NonNegInt | None = None
    duration_s: Measured | None = None
    completed: NonNegInt | None = None
    failed: NonNegInt | None = None
    total_input_tokens: NonNegInt | None = None
    total_output_tokens: NonNegInt | None = None
    total_output_tokens_retokenized: NonNegInt | None = None
    request_throughput: Measured | None = None
    request_goodput: Measured | None = None
    output_throughput: Measured | None = None
    total_token_throughput: Measured | None = None
    max_output_tokens_per_s: Measured | None = None
    max_concurrent_requests: NonNegInt | None = None
    mean_concurrency: Measured | None = Field(
        default=None, description="mean requests in flight (SGLang's concurrency)"
    )
    spec_decode_acceptance_length: Measured | None = None
    spec_decode_acceptance_rate: Measured | None = Field(default=None, description="percent")
    spec_decode_num_drafts: NonNegInt | None = None
    spec_decode_draft_tokens: NonNegInt | None = None
    spec_decode_accepted_tokens: NonNegInt | None = None
    ttft_ms: LatencyStats | None = None
    tpot_ms: LatencyStats | None = None
    itl_ms: LatencyStats | None = None
    e2el_ms: LatencyStats | None = None
    records: NonNegInt | None = Field(
        default=None, description="per-request records in the file (raw evidence only)"
    )
