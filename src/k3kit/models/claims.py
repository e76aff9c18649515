"""``claims.toml``: what the publisher measured, exactly as published.

The claims file becomes the body of the signed receipt predicate. Figures are kept as decimals with
the precision they were published with, because the auditor derives rounding tolerances from the
number of decimals. Nothing here is "fixed up": a claim that does not add up is signed as stated
and left for ``k3kit audit`` to find.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Literal, cast

from pydantic import Field, model_validator

from k3kit.models import _rules as rules
from k3kit.models._base import Frozen, Measured, Name, NonNegInt, RelPath, Sha256Hex
from k3kit.models.evidence import Definitions, EvidenceLevel, EvidenceSummary, EvidenceTool

# In a receipt an evidence file is always ``evidence/<run id>.json`` inside the kit.
EVIDENCE_IN_KIT = rules.EVIDENCE_IN_KIT


class PoolEnvironment(Frozen):
    """One pool of a prefill/decode-disaggregated measurement: what served that phase."""

    gpu: str = Field(min_length=1, max_length=100)
    gpu_memory_gb: int | None = Field(default=None, ge=1)
    gpus_per_node: int = Field(ge=1, le=64)
    nodes: int = Field(default=1, ge=1, le=1024)

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes


class Environment(Frozen):
    """Where the runs were measured. On a CPU node (``accelerator = "cpu"``) there is no GPU:
    ``gpu`` is omitted and ``gpu_count`` is 1 per node, so per-GPU figures are per node."""

    accelerator: Literal["gpu", "cpu"] | None = Field(
        default=None, description="gpu (the default) or cpu, as the kit's [hardware]"
    )
    gpu: str | None = Field(default=None, min_length=1)
    gpu_count: int = Field(
        ge=1, description="GPUs serving the measured runs (per-GPU divisor); cpu: 1 per node"
    )
    gpu_memory_gb: int | None = Field(default=None, ge=1)
    nodes: int = Field(ge=1)
    engine: str = Field(min_length=1)
    engine_version: str = Field(min_length=1)
    modality: Literal["text", "text+image"] = "text"
    notes: str = ""
    pools: dict[Literal["prefill", "decode"], PoolEnvironment] | None = Field(
        default=None,
        description="a disaggregated run's prefill and decode pools; gpu_count is then every "
        "GPU of both (the per-GPU divisor) and nodes every node",
    )

    @property
    def per_gpu_divisor(self) -> int:
        """The GPUs a run's per-GPU figures divide by when the run states none: for a
        disaggregated run every GPU of both pools (prefill GPUs serve the same tokens)."""
        if self.pools:
            return sum(pool.gpus for pool in self.pools.values())
        return self.gpu_count

    # the rules are plain functions shared with the strict reader (k3kit.models._rules)
    _device_stated = model_validator(mode="after")(rules.environment_device_stated)

    @property
    def device(self) -> str:
        """What served the runs, in words: ``8 × B300``, ``CPU`` or both pools."""
        if self.pools:
            return " + ".join(
                f"{role} {p.nodes} node(s) × {p.gpus_per_node} {p.gpu}"
                for role, p in sorted(self.pools.items(), key=lambda kv: kv[0] != "prefill")
            )
        return (
            "CPU (per-GPU figures are per node)"
            if self.accelerator == "cpu"
            else (f"{self.gpu_count} × {self.gpu}")
        )


class Workload(Frozen):
    """What the requests were, and how they were offered: every audit rule reads this.

    Lengths are ``fixed`` (every prompt ``input_tokens`` long; every output ``output_tokens``
    long when ``ignore_eos``), ``ranged`` (vLLM ``--random-range-ratio r``: uniform in
    [L(1 - r), L(1 + r)]) or ``variable`` (a dataset such as ShareGPT: ``input_tokens`` and
    ``output_tokens`` are then the stated means, when known). Load is ``closed-loop`` (a fixed
    number of clients, each run's ``concurrency``) or ``open-loop`` (arrivals at each run's
    ``offered_rate``, Poisson or gamma with ``burstiness``, optionally capped by ``concurrency``).
    """

    description: str = Field(min_length=1)
    input_tokens: int | None = Field(default=None, ge=1, description="fixed length or mean")
    output_tokens: int | None = Field(default=None, ge=1, description="fixed length or mean")
    lengths: Literal["fixed", "ranged", "variable"] = "fixed"
    range_ratio: Measured | None = Field(default=None, description="ranged: --random-range-ratio")
    input_lengths: Literal["fixed", "ranged", "variable"] | None = Field(
        default=None, description="prompts only; default: lengths"
    )
    output_lengths: Literal["fixed", "ranged", "variable"] | None = Field(
        default=None, description="outputs only; default: lengths"
    )
    input_range_ratio: Measured | None = Field(default=None, description="default: range_ratio")
    output_range_ratio: Measured | None = Field(default=None, description="default: range_ratio")
    range_convention: Literal["vllm", "sglang"] = Field(
        default="vllm",
        description="vllm: [L(1 - r), L(1 + r)]; sglang: [max(floor(L r), 1), L] (outputs from "
        "floor(L r))",
    )
    dataset: str = Field(default="", max_length=200, description="random, sharegpt, burstgpt, ...")
    load: Literal["closed-loop", "open-loop"] = "closed-loop"
    multi_turn: bool = False
    speculative_decoding: bool | None = Field(
        default=None, description="several tokens per streamed chunk are expected"
    )
    temperature: Measured | None = None
    streaming: bool = True
    fixed_seed: bool = False
    warmups_per_point: NonNegInt = 0
    warmups_excluded: bool = True
    benchmark_tool: str = ""
    ignore_eos: bool | None = Field(
        default=None, description="every request generated exactly output_tokens tokens"
    )
    prefix_cache_policy: Literal["reset-before-each-point", "disabled", "warm"] | None = None

    _lengths_stated = model_validator(mode="after")(rules.workload_lengths_stated)

    def length_kind(self, what: str) -> Literal["fixed", "ranged", "variable"]:
        """How the prompt (``input``) or output lengths were drawn; each defaults to ``lengths``."""
        return cast('Literal["fixed", "ranged", "variable"]', rules.length_kind(self, what))

    def declared(self, what: str) -> int | None:
        value: int | None = getattr(self, f"{what}_tokens")
        return value

    def ratio(self, what: str) -> Decimal | None:
        return rules.length_ratio(self, what)

    def length_range(self, what: str) -> tuple[Fraction, Fraction] | None:
        """Every request's length lies here (before re-tokenization), or None (variable).

        The same flag means two things: vLLM's ``--random-range-ratio r`` draws uniformly from
        [L(1 - r), L(1 + r)] (``RandomDataset``); SGLang's ``--random-range-ratio r`` draws from
        [max(floor(L r), 1), L] for prompts and [floor(L r), L] for outputs
        (``sample_random_requests``), so r = 1 is fixed there and r = 0 is anything up to L.
        """
        kind, length, r = self.length_kind(what), self.declared(what), self.ratio(what)
        if kind == "variable" or length is None:
            return None
        if kind == "fixed" or r is None:
            return Fraction(length), Fraction(length)
        ratio = Fraction(r)
        if self.range_convention == "sglang":
            low = Fraction(int(length * ratio))
            return (max(low, Fraction(1)) if what == "input" else low), Fraction(length)
        return length * (1 - ratio), length * (1 + ratio)

    def mean_length(self, what: str) -> Fraction | None:
        """The mean length the workload implies: L, or the middle of SGLang's one-sided range."""
        span = self.length_range(what)
        length = self.declared(what)
        if span is None:
            return None if length is None else Fraction(length)  # a stated mean
        if self.length_kind(what) == "ranged" and self.range_convention == "sglang":
            return (span[0] + span[1]) / 2
        return Fraction(length) if length is not None else None


class Percentiles(Frozen):
    """Summary statistics of one latency metric, in milliseconds; keys are the percentile names."""

    mean: Measured | None = None
    p50: Measured | None = None
    p90: Measured | None = None
    p95: Measured | None = None
    p99: Measured | None = None
    p99_9: Measured | None = Field(default=None, alias="p99.9")
    max: Measured | None = None


class RunMetrics(Frozen):
    output_tok_s_per_gpu: Measured | None = None
    output_tok_s: Measured | None = None
    total_tok_s: Measured | None = None
    request_rate: Measured | None = Field(default=None, description="completed requests per second")
    duration_s: Measured | None = None
    ttft_ms: Percentiles | None = None
    tpot_ms: Percentiles | None = None
    itl_ms: Percentiles | None = None
    e2el_ms: Percentiles | None = None


class Run(Frozen):
    id: Name
    profile: Name
    workload: Name
    concurrency: int | None = Field(
        default=None, ge=1, description="closed loop: clients; open loop: the cap, if any"
    )
    offered_rate: Measured | None = Field(
        default=None, description="open loop: requests/s offered (vLLM --request-rate)"
    )
    burstiness: Measured | None = Field(default=None, description="open loop: gamma shape")
    requests: NonNegInt | None = Field(default=None, description="None: not published")
    completed: NonNegInt | None = None
    failed: NonNegInt | None = None
    gpus: int | None = Field(
        default=None, ge=1, description="overrides environment.gpu_count (the per-GPU divisor)"
    )
    metrics: RunMetrics = Field(default_factory=RunMetrics)
    notes: str = ""
    evidence: RelPath | None = Field(
        default=None,
        description="claims: the tool's result JSON, relative to the claims file; "
        "receipt: its copy in the kit, evidence/<run id>.json",
    )
    evidence_tool: EvidenceTool | None = Field(
        default=None, description="the tool that wrote the file (default: recognised from it)"
    )
    evidence_record: NonNegInt | None = Field(
        default=None, description="which run of a multi-run file (JSON Lines line, benchmark)"
    )
    evidence_level: EvidenceLevel | None = Field(
        default=None, description="summary: numbers only; raw: per-request data attached"
    )
    evidence_sha256: Sha256Hex | None = None
    evidence_bytes: NonNegInt | None = None
    evidence_summary: EvidenceSummary | None = None

    def gpus_in(self, env: Environment) -> int:
        """The GPUs this run's per-GPU figures divide by: its own count, else the
        environment's (every card, cost and audit rule divides by this one number)."""
        return self.gpus or env.per_gpu_divisor


class ComparisonPoint(Frozen):
    concurrency: int = Field(ge=1)
    stated_percent: Measured
    subject_run: Name | None = None
    baseline_run: Name | None = None


class Comparison(Frozen):
    """``stated_percent`` = (subject - baseline) / baseline x 100 of ``metric``."""

    id: Name
    description: str = Field(min_length=1)
    metric: Literal["output_tok_s_per_gpu", "output_tok_s", "request_rate"]
    subject_profile: Name
    baseline_profile: Name
    points: list[ComparisonPoint] = Field(min_length=1)
    repeats: int | None = Field(default=None, ge=1, description="runs per arm and point")
    order: Literal["back-to-back", "interleaved", "randomized"] | None = None
    aa_control: Name | None = Field(default=None, description="id of an A/A control")


class Control(Frozen):
    id: Name
    kind: Literal["negative", "positive"] = Field(
        description="negative: identical setups that should agree; positive: a known difference"
    )
    description: str = Field(min_length=1)
    metric: str = Field(min_length=1)
    agreement_percent: Measured | None = None
    agree: NonNegInt | None = None
    total: NonNegInt | None = None
    threshold_percent: Measured | None = Field(
        default=None, description="agreement needed to call the two setups equivalent"
    )
    passed: bool | None = Field(
        default=None, description="negative: agreement >= threshold; positive: below it"
    )


class ClaimsBody(Frozen):
    """Fields shared by ``claims.toml`` and the receipt predicate."""

    environment: Environment
    workloads: dict[Name, Workload] = Field(min_length=1)
    runs: list[Run] = Field(min_length=1)
    comparisons: list[Comparison] = Field(default_factory=list)
    controls: list[Control] = Field(default_factory=list)
    limitations: list[str] = Field(min_length=1)
    definitions: Definitions | None = None

    # every id a run or comparison names exists, and each run fits its workload's load
    _references_resolve = model_validator(mode="after")(rules.claims_references_resolve)


class Claims(ClaimsBody):
    schema_: Literal["k3kit.claims/v1"] = Field(alias="schema")

    @model_validator(mode="after")
    def _no_signing_outputs(self) -> Claims:
        """Digests and summaries of evidence are computed by ``k3kit sign``, never claimed."""
        for run in self.runs:
            given = [
                name
                for name in ("evidence_sha256", "evidence_bytes", "evidence_summary")
                if getattr(run, name) is not None
            ]
            if given:
                raise ValueError(
                    f"run {run.id!r}: {', '.join(given)} are computed by k3kit sign; "
                    "give only evidence (the file) and optionally evidence_level"
                )
        return self
