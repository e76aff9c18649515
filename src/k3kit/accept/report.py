"""Evidence files in vLLM's result format, the measured runs as a receipt predicate, and the
signed acceptance report.

The buyer's evidence is written as a ``vllm bench serve --save-result --save-detailed`` file
(per-request ``ttfts``, ``itls``, ``output_lens``, ``latencies``, ``errors`` and vLLM's summary
keys), so the existing evidence adapter reads it into the normalized run model and the auditor's
rules recompute every statistic from the per-request data: the buyer's numbers are held to the
same standard as the publisher's. Statistics are computed the way vLLM computes them (numpy's
mean, population std, linear percentiles; TPOT per request over requests with more than one token).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from k3kit._canonical import dumps, model_bytes
from k3kit._fs import (
    MARKED,
    atomic_write,
    refuse_existing,
    remove_tree,
    replace_dir,
    staging_dir,
    write_output_marker,
)
from k3kit.accept._http import Sample
from k3kit.accept.workload import PointPlan
from k3kit.audit.acceptance import audit_measured
from k3kit.audit.findings import ERROR
from k3kit.audit.stats import mean, percentile, pstdev
from k3kit.evidence import parse_evidence, summarize
from k3kit.models import KIT_SUBJECT, STATEMENT_TYPE, WEIGHTS_SUBJECT, ReceiptPredicate, load
from k3kit.models.acceptance import (
    ACCEPTANCE_PAYLOAD_TYPE,
    ACCEPTANCE_PREDICATE_TYPE,
    RECEIPT_SUBJECT,
    AcceptancePredicate,
    AcceptanceStatement,
    Verdict,
)
from k3kit.signing.sign import sign_envelope
from k3kit.signing.signers import Signer

ACCEPTANCE_NAME = "acceptance.dsse.json"
TOOL_NOTE = "k3kit accept (client timed as vllm bench serve)"
#: What an acceptance run does not show, said in the report (the audit's R36 asks for each).
LIMITATIONS = (
    "Measured by k3kit accept on the buyer's node against the buyer's server; the node's "
    "hardware is described by the node facts, not checked against the receipt.",
    "Accuracy (output quality) was not measured: accept times the streamed tokens and checks "
    "their count against the verified tokenizer, and the profile's functional promises.",
    "Text-only measurements: prompts are text of an exact token length, no images.",
    "Percentiles from a small sample are descriptive; each verdict carries its own interval.",
)


@dataclass
class Measured:
    """One replayed point: its plan, the samples that finished, and the wall time."""

    point: PointPlan
    samples: list[Sample]
    duration_s: float
    interrupted: bool = False

    @property
    def ok(self) -> list[Sample]:
        return [s for s in self.samples if s.ok]

    def metric_ms(self, metric: str) -> list[float]:
        ok = self.ok
        if metric == "ttft":
            return [s.ttft_s * 1000 for s in ok]
        if metric == "e2el":
            return [s.latency_s * 1000 for s in ok]
        if metric == "itl":
            return [g * 1000 for s in ok for g in s.itl_s]
        return [
            (s.latency_s - s.ttft_s) / (s.output_len - 1) * 1000 for s in ok if s.output_len > 1
        ]

    def throughput(self) -> float:
        return sum(s.output_len for s in self.ok) / self.duration_s if self.duration_s > 0 else 0.0


def evidence_file(m: Measured, model: str) -> bytes:
    ok = m.ok
    duration = max(m.duration_s, 1e-9)
    total_in = sum(s.input_len for s in ok)
    total_out = sum(s.output_len for s in ok)
    obj: dict[str, Any] = {
        "backend": "openai",
        "endpoint_type": "openai",
        "label": TOOL_NOTE,
        "model_id": model,
        "num_prompts": m.point.requests,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": m.point.concurrency,
        "duration": duration,
        "completed": len(ok),
        "failed": len(m.samples) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "input_lens": [s.input_len for s in m.samples],
        "output_lens": [s.output_len if s.ok else 0 for s in m.samples],
        "ttfts": [s.ttft_s if s.ok else 0.0 for s in m.samples],
        "itls": [s.itl_s if s.ok else [] for s in m.samples],
        "latencies": [s.latency_s if s.ok else 0.0 for s in m.samples],
        "start_times": [s.start_s for s in m.samples],
        "errors": [s.error for s in m.samples],
    }
    for metric in ("ttft", "tpot", "itl", "e2el"):
        values = sorted(m.metric_ms(metric)) or [0.0]
        obj[f"mean_{metric}_ms"] = _tidy(mean(values))
        obj[f"median_{metric}_ms"] = _tidy(percentile(values, 50))
        obj[f"std_{metric}_ms"] = _tidy(pstdev(values))
        obj[f"p99_{metric}_ms"] = _tidy(percentile(values, 99))
    return dumps(obj)


def _tidy(value: float) -> float:
    """Rounding noise is zero: the std of equal gaps comes out as 5e-19, which the evidence
    model (decimals within 1e-18..1e18) refused with a crash after the whole measurement."""
    return 0.0 if abs(value) < 1e-12 else value


def _dec(value: float) -> Decimal:
    return Decimal(f"{value:.3f}")


def measured_run(m: Measured, evidence: bytes, model: str) -> dict[str, Any]:
    run_id = m.point.run.id
    result = parse_evidence(evidence, source=f"evidence/{run_id}.json")
    metrics: dict[str, Any] = {}
    if m.ok:
        out = m.throughput()
        metrics = {
            "output_tok_s": _dec(out),
            "output_tok_s_per_gpu": _dec(out / m.point.gpus),
            "request_rate": _dec(len(m.ok) / m.duration_s),
            "duration_s": _dec(m.duration_s),
        }
        for metric in ("ttft", "tpot", "itl", "e2el"):
            values = sorted(m.metric_ms(metric))
            if values:
                metrics[f"{metric}_ms"] = {
                    "p50": _dec(percentile(values, 50)),
                    "mean": _dec(mean(values)),
                }
    return {
        "id": run_id,
        "profile": m.point.run.profile,
        "workload": m.point.run.workload,
        "concurrency": m.point.concurrency,
        "requests": len(m.samples),
        "completed": len(m.ok),
        "failed": len(m.samples) - len(m.ok),
        "gpus": m.point.gpus,
        "metrics": metrics,
        "notes": "interrupted: fewer requests than planned" if m.interrupted else "",
        "evidence": f"evidence/{run_id}.json",
        "evidence_tool": "vllm bench serve",
        "evidence_level": "raw",
        "evidence_sha256": hashlib.sha256(evidence).hexdigest(),
        "evidence_bytes": len(evidence),
        "evidence_summary": summarize(result).model_dump(mode="json", exclude_none=True),
    }


def measured_predicate(
    signed: ReceiptPredicate, runs: list[dict[str, Any]], issued_at: str
) -> ReceiptPredicate:
    used = {r["workload"] for r in runs}
    workloads = {
        name: w.model_copy(update={"benchmark_tool": TOOL_NOTE, "warmups_per_point": 1})
        for name, w in signed.workloads.items()
        if name in used
    }
    body = {
        "environment": signed.environment.model_copy(
            update={"notes": "the buyer's node (see node facts); not the publisher's"}
        ),
        "workloads": workloads,
        "runs": runs,
        "limitations": list(LIMITATIONS),
        "kit": signed.kit,
        "weights": signed.weights,
        "issued_at": issued_at,
        "definitions": signed.definitions.model_validate({}),
        "definitions_declared": True,
    }
    data = {
        k: (v.model_dump(mode="json", by_alias=True) if hasattr(v, "model_dump") else v)
        for k, v in body.items()
    }
    data["workloads"] = {k: w.model_dump(mode="json") for k, w in workloads.items()}
    return load(ReceiptPredicate, data, source="acceptance runs", code="ACCEPTANCE_INTERNAL")


def _subjects(predicate: AcceptancePredicate) -> dict[str, str]:
    ref = predicate.receipt
    return {
        KIT_SUBJECT: ref.kit_sha256,
        WEIGHTS_SUBJECT: ref.weights_lock_sha256,
        RECEIPT_SUBJECT: ref.receipt_sha256,
    }


def audited(
    predicate: AcceptancePredicate, evidence: dict[str, bytes], signer_keyid: str
) -> AcceptancePredicate:
    """The predicate with one *not reproduced* verdict per error the audit finds in it.

    The audit's rules run on exactly what is about to be signed (the measured runs and the
    evidence bytes), so a report ``k3kit audit`` would reject is never signed as *reproduced*:
    the reasons go into the signed report instead, where the buyer and a seller both read them.
    """
    if predicate.measured is None:
        return predicate
    findings = audit_measured(
        predicate.measured,
        evidence,
        signer_keyid=signer_keyid,
        subjects=_subjects(predicate),
    )
    errors = [
        Verdict(
            run=(f.run or "audit")[:128],
            claim=f"audit {f.rule}",
            verdict="not reproduced",
            reason=f"the audit rejects the measurement: {f.message}"[:1000],
        )
        for f in findings
        if f.severity == ERROR
    ]
    if not errors:
        return predicate
    return predicate.model_copy(update={"verdicts": [*predicate.verdicts, *errors]})


def sign_report(predicate: AcceptancePredicate, key: Signer) -> bytes:
    """The DSSE envelope (own payloadType) around the acceptance Statement."""
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": digest}}
            for name, digest in _subjects(predicate).items()
        ],
        "predicateType": ACCEPTANCE_PREDICATE_TYPE,
        "predicate": predicate.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    checked = load(AcceptanceStatement, statement, source="acceptance", code="ACCEPTANCE_INTERNAL")
    return sign_envelope(model_bytes(checked), ACCEPTANCE_PAYLOAD_TYPE, key)


def check_output(out_dir: Path, force: bool) -> None:
    """Refuse ``-o`` before the first request, by the rule every folder output follows.

    accept writes one whole folder (:func:`write_report`), so the folder is what is checked:
    without ``--force`` it must not exist; with it, only an empty folder or one k3kit marked
    (an earlier report) is replaced (``OUTPUT_NOT_OURS`` otherwise). Checked again when the
    new folder takes its place, in case it changed during the measurement.
    """
    refuse_existing(out_dir, force=force, folder=MARKED)


def write_report(out_dir: Path, envelope: bytes, evidence: dict[str, bytes], force: bool) -> Path:
    """Write the evidence, the signed report and the output marker as one new folder.

    The files go into a staging folder beside ``out_dir`` that then replaces it whole, so no
    evidence file of an earlier run (another run id) survives beside the new report, and a
    failure part-way leaves the earlier folder as it was.
    """
    check_output(out_dir, force)
    stage = staging_dir(out_dir)
    try:
        for run_id, data in evidence.items():
            atomic_write(stage / "evidence" / f"{run_id}.json", data)
        atomic_write(stage / ACCEPTANCE_NAME, envelope)
        write_output_marker(stage, "accept")
    except BaseException:
        remove_tree(stage)
        raise
    replace_dir(stage, out_dir, force=force, folder=MARKED)
    return out_dir / ACCEPTANCE_NAME
