"""The memory budget: do the weights fit, and how much KV cache is left for the concurrency.

Per GPU: usable = memory × the profile's utilisation; weights = weight bytes / (TP × PP) (data-
parallel replicas each hold a copy; with expert parallelism over DP ranks this is an upper bound).
KV bytes per token per GPU = 2 (K and V) × layers / PP × max(KV heads / TP, 1) × head size × KV
dtype bytes. Activations and CUDA graphs are not modelled, so a pass is necessary, not sufficient;
a fail is certain. Models whose attention is not plain multi-head/GQA (MLA, linear attention) are
over-estimated; the numbers are printed so an operator can judge.
"""

from __future__ import annotations

from k3kit.formats.vocab import PreflightStatus as Status
from k3kit.preflight._checks import GIB, KV_BYTES, Check, Requirements
from k3kit.preflight._facts import NodeFacts


def budget_checks(req: Requirements, node: NodeFacts) -> list[Check]:
    gpus = node.gpus
    if not gpus or any(g.memory_total_bytes is None for g in gpus):
        why = node.why_unreadable or "no GPU memory total from the source"
        return [
            Check("memory.weights", Status.NOT_CHECKED, True, why=why),
            Check("memory.kv_cache", Status.NOT_CHECKED, True, why=why),
        ]
    if req.memory_fraction is None:
        why = "the engine sizes its memory share at start (no utilisation in the profile)"
        return [
            Check("memory.weights", Status.NOT_CHECKED, True, why=why),
            Check("memory.kv_cache", Status.NOT_CHECKED, False, why=why),
        ]
    total = min(g.memory_total_bytes or 0 for g in gpus)
    usable = total * req.memory_fraction
    per_gpu = req.weight_bytes / max(req.tp * req.pp, 1)
    left = usable - per_gpu
    weights = Check(
        "memory.weights",
        Status.of(left > 0),
        True,
        f"weights/GPU < {usable / GIB:.1f} GiB ({total / GIB:.1f} GiB × {req.memory_fraction})",
        f"{per_gpu / GIB:.1f} GiB/GPU ({req.weight_bytes} bytes / TP {req.tp} × PP {req.pp})",
    )
    return [weights, _kv_check(req, left)]


def _kv_check(req: Requirements, left: float) -> Check:
    dtype = req.kv_dtype if req.kv_dtype not in (None, "auto") else req.model_dtype
    unit = KV_BYTES.get(dtype or "")
    facts = (req.layers, req.kv_heads, req.head_dim, req.context_length)
    if None in facts or unit is None:
        return Check(
            "memory.kv_cache",
            Status.NOT_CHECKED,
            False,
            why="needs layers, KV heads and head size from the weights' config.json "
            "(build --model-config) and a known KV dtype",
        )
    layers, kv_heads, head_dim, context = (int(f or 0) for f in facts)
    heads_per_gpu = max(kv_heads / req.tp, 1.0)
    per_token = 2 * (layers / req.pp) * heads_per_gpu * head_dim * unit
    tokens = int(max(left, 0) / per_token)
    per_seq = tokens // req.concurrency if req.concurrency else tokens
    actual = (
        f"{tokens} tokens of KV cache/GPU ({max(left, 0) / GIB:.2f} GiB / {per_token:.0f} "
        f"bytes per token); {per_seq} per sequence at concurrency {req.concurrency}"
    )
    return Check(
        "memory.kv_cache",
        Status.of(tokens >= context),
        True,
        f">= {context} tokens (one sequence at the profile's context length)",
        actual,
    )
