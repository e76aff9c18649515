"""``k3kit accept``: does the buyer's node deliver what the signed receipt says?

Pipeline: verify kit and weights and read the plan (``workload``), build exact-length prompts with
the model's tokenizer (``prompts``), replay each point with one warmup and a closed loop of
``concurrency`` streaming clients (``_http``), hold each request's reported token count against
the text it streamed (``tokens``: a server's self-report is a claim, not a measurement), judge
each signed claim with an interval (``compare``), check the profile's functional promises
(``functional``), run the audit's rules on the report and sign it with the buyer's key
(``report``): a report the audit rejects is never signed as *reproduced*. A Ctrl-C stops the
run where it is; what was measured is still judged and signed, with ``partial: true`` in the
signed bytes.

Used by the CLI (``k3kit accept``) only; it stands above ``card``, ``audit`` and ``node`` and
nothing imports it back.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from k3kit.accept._http import Clock, Sample, Timeouts, run_closed_loop
from k3kit.accept.compare import Policy, dec, judge_latency, judge_throughput
from k3kit.accept.functional import check_promises
from k3kit.accept.prompts import PromptBuilder
from k3kit.accept.report import (
    ACCEPTANCE_NAME,
    Measured,
    audited,
    evidence_file,
    measured_predicate,
    measured_run,
    sign_report,
    write_report,
)
from k3kit.accept.tokens import MIN_TOKEN_TIME_MS, check_sample
from k3kit.accept.workload import Plan, PointPlan, load_plan
from k3kit.models.acceptance import AcceptancePredicate, PointOutcome, ReceiptRef, Verdict
from k3kit.signing.keys import keyid
from k3kit.signing.signers import Signer

__all__ = [
    "ACCEPTANCE_NAME",
    "AcceptanceResult",
    "Policy",
    "Timeouts",
    "load_plan",
    "run_accept",
    "write_report",
]

LATENCY_CLAIMS = ("ttft", "tpot", "itl", "e2el")
#: Per-token times have a physical floor; TTFT and E2E include the prompt and the network.
FLOORS_MS = {"ttft": 0.0, "tpot": MIN_TOKEN_TIME_MS, "itl": MIN_TOKEN_TIME_MS, "e2el": 0.0}


@dataclass
class AcceptanceResult:
    predicate: AcceptancePredicate
    envelope: bytes
    evidence: dict[str, bytes] = field(default_factory=dict)
    signer_keyid: str = ""

    @property
    def verdict(self) -> str:
        kinds = {v.verdict for v in [*self.predicate.verdicts, *self.predicate.functional]}
        if "not reproduced" in kinds:
            return "not reproduced"
        if "inconclusive" in kinds or self.predicate.partial or not kinds:
            return "inconclusive"
        return "reproduced"


def _bodies(
    point: PointPlan, model: str, builder: PromptBuilder, count: int, seed: int
) -> list[tuple[dict[str, Any], int]]:
    w = point.workload
    rng = random.Random(f"{seed}:{point.run.id}")  # noqa: S311 (reproducible prompts, not secrets)
    assert w.input_tokens is not None and w.output_tokens is not None
    out = []
    for _ in range(count):
        lin, lout = w.input_tokens, w.output_tokens
        if w.lengths == "ranged" and w.range_ratio is not None:
            r = float(w.range_ratio)
            lin = rng.randint(max(1, int(lin * (1 - r))), int(lin * (1 + r)))
            lout = rng.randint(max(1, int(lout * (1 - r))), int(lout * (1 + r)))
        body: dict[str, Any] = {
            "model": model,
            "prompt": builder.prompt(lin, rng),
            "max_tokens": lout,
            "stream": True,
            "stream_options": {"include_usage": True},
            # Every generated token in the text, special ones too, without added spaces: the
            # text is what the reported token count is checked against (accept.tokens).
            "skip_special_tokens": False,
            "spaces_between_special_tokens": False,
            # The generated ids with each chunk (vLLM >= 0.10.2; other servers ignore it): when
            # they decode to the streamed text they are the count's witness (accept.tokens).
            "return_token_ids": True,
        }
        if w.temperature is not None:
            body["temperature"] = float(w.temperature)
        if w.fixed_seed:
            body["seed"] = seed
        if w.ignore_eos or (w.ignore_eos is None and w.lengths == "fixed"):
            body["ignore_eos"] = True  # fixed output lengths need it, as vLLM's random dataset
        out.append((body, lin))
    return out


def _judge(m: Measured, policy: Policy) -> list[Verdict]:
    run, out = m.point.run, []
    for metric in LATENCY_CLAIMS:
        stats = getattr(run.metrics, f"{metric}_ms")
        if stats is None:
            continue
        samples = m.metric_ms(metric)
        for kind in ("mean", "p50", "p90", "p95", "p99"):
            claimed = getattr(stats, kind)
            if claimed is not None:
                out.append(
                    judge_latency(
                        run.id, f"{metric}_ms.{kind}", claimed, samples, policy, FLOORS_MS[metric]
                    )
                )
    # Little's law over the time each request held its client slot, not its E2E (see Sample)
    rows = [(float(s.output_len), s.held_s) for s in m.ok]
    c = m.point.concurrency
    for name, scale in (("output_tok_s", c), ("output_tok_s_per_gpu", c / m.point.gpus)):
        claimed = getattr(run.metrics, name)
        if claimed is not None:
            out.append(judge_throughput(run.id, name, claimed, rows, scale, policy))
    failed = len(m.samples) - len(m.ok)
    if failed:
        out.append(
            Verdict(
                run=run.id,
                claim="completed",
                verdict="not reproduced",
                claimed=dec(run.completed if run.completed is not None else run.requests or 0),
                measured=dec(len(m.ok)),
                n=len(m.samples),
                reason=f"{failed} of {len(m.samples)} requests failed",
            )
        )
    return out


def _outcome(m: Measured) -> PointOutcome:
    errors: dict[str, int] = {}
    for s in m.samples:
        if not s.ok:
            errors[s.error] = errors.get(s.error, 0) + 1
    return PointOutcome(
        run=m.point.run.id,
        concurrency=m.point.concurrency,
        requests=len(m.samples),
        completed=len(m.ok),
        failed=len(m.samples) - len(m.ok),
        errors=dict(sorted(errors.items())[:20]),
        interrupted=m.interrupted,
    )


def run_accept(
    plan: Plan,
    *,
    url: str,
    builder: PromptBuilder,
    key: Signer,
    policy: Policy,
    timeouts: Timeouts,
    issued_at: str,
    node: dict[str, str],
    on_progress: Callable[[str], None] | None = None,
    clock: Clock = time.perf_counter,
) -> AcceptanceResult:
    """Replay every point, judge, check promises, audit and sign; interrupted runs are signed
    partial. ``clock`` times the requests (tests inject one; see ``_http``)."""
    say = on_progress or (lambda _t: None)

    def check(sample: Sample) -> None:
        check_sample(sample, builder.count, builder.decode)

    base = url.rstrip("/")
    endpoint = f"{base}/v1/completions"
    model = plan.promises.served_model_name
    measured: list[Measured] = []
    functional: list[Verdict] = []
    partial = False
    try:
        for i, point in enumerate(plan.points, 1):
            say(f"[{i}/{len(plan.points)}] {point.run.id}: c={point.concurrency}, building prompts")
            bodies = _bodies(point, model, builder, point.requests + 1, policy.seed)
            asyncio.run(  # warmup
                run_closed_loop(endpoint, bodies[:1], 1, timeouts, [], check=check, clock=clock)
            )
            collected: list[Sample] = []
            m = Measured(point, collected, 0.0, interrupted=True)
            measured.append(m)

            def done(
                sample: Sample, got: list[Sample] = collected, total: int = point.requests
            ) -> None:
                say(f"{len(got)}/{total} requests" + ("" if sample.ok else " (one failed)"))

            m.duration_s = asyncio.run(
                run_closed_loop(
                    endpoint,
                    bodies[1:],
                    point.concurrency,
                    timeouts,
                    collected,
                    done,
                    check=check,
                    clock=clock,
                )
            )
            m.interrupted = False
        say("functional checks")
        functional = check_promises(base, plan.promises, builder, timeouts)
    except KeyboardInterrupt:
        partial = True
    for m in measured:
        if m.interrupted and m.samples:
            m.duration_s = max(s.start_s + max(s.latency_s, s.held_s) for s in m.samples) - min(
                s.start_s for s in m.samples
            )
    kept = [m for m in measured if m.samples and m.duration_s > 0]
    evidence = {m.point.run.id: evidence_file(m, model) for m in kept}
    runs = [measured_run(m, evidence[m.point.run.id], model) for m in kept]
    verdicts = [v for m in kept for v in _judge(m, policy)]
    signed = plan.statement.predicate
    predicate = AcceptancePredicate.model_validate(
        {
            "schema": "k3kit.acceptance/v1",
            "partial": partial or any(m.interrupted for m in measured),
            "profile": plan.profile,
            "url": url,
            "tolerance_percent": dec(policy.tolerance * 100),
            "confidence": dec(policy.confidence),
            "receipt": ReceiptRef(
                receipt_sha256=plan.receipt_sha256,
                publisher_keyid=plan.publisher_keyid,
                kit_sha256=plan.kit_sha256,
                weights_lock_sha256=signed.weights.lock_sha256,
            ),
            "node": node,
            "points": [_outcome(m) for m in measured],
            "verdicts": verdicts,
            "functional": functional,
            "measured": measured_predicate(signed, runs, issued_at) if runs else None,
        }
    )
    signer = keyid(key.public_key())
    predicate = audited(predicate, evidence, signer)
    envelope = sign_report(predicate, key)
    return AcceptanceResult(predicate, envelope, evidence, signer)
