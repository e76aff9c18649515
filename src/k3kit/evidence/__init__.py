"""Benchmark evidence: one adapter per tool into one normalized run model (:class:`RunData`).

Adapters are modules of this package; each registers itself under its tool's name with
``@adapter`` when imported (the registry :data:`ADAPTERS`, :mod:`k3kit._registry`), and this
package imports every one of them, so a new tool is a new module plus its name in the claims
schema's ``EvidenceTool`` (a test fails until the two agree).
Which adapter reads a file is the claims' ``evidence_tool`` if given, else the first whose
``detect`` recognises the record (most specific formats first: SGLang's keys are a superset of
vLLM's). The receipt records the tool's own numbers (:func:`summarize`), never recomputed ones.
Used by ``formats`` (the receipt's evidence), ``publish``, ``audit`` and ``accept``.
"""

from __future__ import annotations

from decimal import Decimal

from k3kit._registry import import_members
from k3kit.errors import InputError, K3kitError
from k3kit.evidence._base import ADAPTERS, METRICS, Adapter, Request, RunData
from k3kit.evidence._json import MAX_EVIDENCE_BYTES, load_document
from k3kit.models import EvidenceSummary, LatencyStats, load

import_members(__name__, __path__)

VllmResult = RunData  # the name before other tools were read

__all__ = [
    "ADAPTERS",
    "MAX_EVIDENCE_BYTES",
    "METRICS",
    "Adapter",
    "Request",
    "RunData",
    "VllmResult",
    "parse_evidence",
    "parse_vllm_result",
    "summarize",
    "tools",
]


def tools() -> list[str]:
    """Every tool an adapter exists for, in the order they are tried."""
    return [a.tool for a in sorted(ADAPTERS.values(), key=lambda a: (a.priority, a.tool))]


def parse_evidence(
    data: bytes,
    *,
    source: str,
    tool: str | None = None,
    record: int | None = None,
    error: type[K3kitError] = InputError,
    code: str = "EVIDENCE_MALFORMED",
) -> RunData:
    """Read one result file (one run, or the ``record``-th of several) with its tool's adapter."""
    doc = load_document(data, source=source, error=error, code=code)
    if tool is not None:
        chosen = ADAPTERS.get(tool)
        if chosen is None:
            raise error(
                f"{source}: no evidence adapter for {tool!r} ({', '.join(tools())})", code=code
            )
    else:
        first = doc.records[0]
        found = [ADAPTERS[t] for t in tools() if ADAPTERS[t].detect(first)]
        if not found:
            raise error(
                f"{source}: not a result of a known benchmark tool ({', '.join(tools())})",
                code=code,
            )
        chosen = found[0]
    return chosen.parse(doc, record)


def parse_vllm_result(
    data: bytes,
    *,
    source: str,
    error: type[K3kitError] = InputError,
    code: str = "EVIDENCE_MALFORMED",
) -> RunData:
    """Any supported tool's single-run file (kept under its first name for callers)."""
    return parse_evidence(data, source=source, error=error, code=code)


def _dec(value: float | int | str | None) -> Decimal | None:
    """The shortest decimal that round-trips to the same float (``repr``), never a rounding."""
    if value is None or isinstance(value, str):
        return None
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _int(value: float | int | str | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_DECIMALS = (
    "burstiness",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "spec_decode_acceptance_length",
    "spec_decode_acceptance_rate",
    "mean_concurrency",
)
_INTS = (
    "num_prompts",
    "max_concurrency",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "max_concurrent_requests",
    "spec_decode_num_drafts",
    "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
    "total_output_tokens_retokenized",
)


def summarize(result: RunData) -> EvidenceSummary:
    """The tool's own numbers in the receipt's vocabulary (nothing recomputed)."""
    v = result.values
    stats = {
        f"{metric}_ms": LatencyStats(
            mean=_dec(s.get("mean")),
            median=_dec(s.get("median")),
            std=_dec(s.get("std")),
            percentiles={k[1:]: Decimal(repr(x)) for k, x in s.items() if k.startswith("p")},
        )
        for metric, s in result.stats.items()
        if s
    }
    rate = v.get("request_rate")
    data = {
        "tool": result.tool,
        "record": result.record,
        "notes": result.notes,
        "unmapped": result.unmapped,
        "date": v.get("date"),
        "model_id": v.get("model_id"),
        "backend": v.get("backend"),
        "request_rate": rate if isinstance(rate, str) else None,
        "duration_s": _dec(v.get("duration")),
        "records": None if result.requests is None else len(result.requests),
        **{k: _dec(v.get(k)) for k in _DECIMALS},
        **{k: _int(v.get(k)) for k in _INTS},
        **stats,
    }
    return load(EvidenceSummary, data, source=result.source, code="EVIDENCE_MALFORMED")
