"""Build the receipt's in-toto Statement from a claims file and the kit it measured.

The Statement's two subjects are the kit checksum (sha256 of ``MANIFEST.json``) and the weight
checksum (sha256 of ``weights.lock.json``): a receipt is about *this* kit with *these* weights and
cannot be moved to another. The claims are copied as published; consistency with the kit (profiles,
engine) is checked here because a receipt for a profile the kit does not have is a publisher error.

Evidence files (one benchmark tool's result per run: vLLM, SGLang, llmperf, AIPerf, GuideLLM,
read by the adapters of :mod:`k3kit.evidence`) are parsed here, their tool
summary, sha256 and size recorded in the run, and their kit path fixed to
``evidence/<run id>.json``; the bytes themselves are written into the kit by ``kit.sign``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from k3kit._canonical import dumps
from k3kit.errors import InputError
from k3kit.evidence import parse_evidence, summarize
from k3kit.models import (
    KIT_SUBJECT,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    WEIGHTS_SUBJECT,
    Claims,
    Definitions,
    KitInfo,
    ReceiptPredicate,
    Run,
    load,
)


def evidence_kit_path(run_id: str) -> str:
    """Where a run's evidence file lives inside the kit (fixed, so no publisher path is trusted)."""
    return f"evidence/{run_id}.json"


def _run_with_evidence(
    index: int, run: Run, evidence: Mapping[str, bytes], source: str
) -> dict[str, Any]:
    out: dict[str, Any] = run.model_dump(mode="json", by_alias=True, exclude_none=True)
    where = f"{source}: runs[{index}]"
    if run.evidence is None:
        if run.evidence_level == "raw":
            raise InputError(
                f"{where}: evidence_level = raw needs an evidence file", code="EVIDENCE_MISSING"
            )
        out["evidence_level"] = "summary"
        return out
    data = evidence.get(run.id)
    if data is None:
        raise InputError(f"{where}: evidence {run.evidence} was not read", code="EVIDENCE_MISSING")
    result = parse_evidence(
        data,
        source=f"{where}.evidence ({run.evidence})",
        tool=run.evidence_tool,
        record=run.evidence_record,
    )
    if run.evidence_level is not None and run.evidence_level != result.level:
        raise InputError(
            f"{where}: evidence_level is {run.evidence_level!r}, but {run.evidence} is "
            f"{result.level} evidence"
            + (" (run vllm bench serve with --save-detailed)" if result.level == "summary" else ""),
            code="EVIDENCE_LEVEL_MISMATCH",
        )
    out.update(
        evidence=evidence_kit_path(run.id),
        evidence_level=result.level,
        evidence_sha256=hashlib.sha256(data).hexdigest(),
        evidence_bytes=len(data),
        evidence_summary=summarize(result).model_dump(mode="json", exclude_none=True),
    )
    return out


def _check_claims_match_kit(claims: Claims, kit: KitInfo, source: str) -> None:
    profiles = {p.name for p in kit.profiles}
    problems = [
        f"{source}: runs[{i}].profile: {run.profile!r} is not a profile of this kit "
        f"(has {', '.join(sorted(profiles))})"
        for i, run in enumerate(claims.runs)
        if run.profile not in profiles
    ]
    for i, comp in enumerate(claims.comparisons):
        for field in ("subject_profile", "baseline_profile"):
            if getattr(comp, field) not in profiles:
                problems.append(f"{source}: comparisons[{i}].{field}: not a profile of this kit")
    env = claims.environment
    # The pin's own rule (exact, or same-release): the one launch applies to the engine it runs.
    if env.engine != kit.engine.name or not kit.engine.accepts(env.engine_version):
        problems.append(
            f"{source}: environment: measured with {env.engine} {env.engine_version}, "
            f"but the kit pins {kit.engine.name} {kit.engine.version} "
            f"({kit.engine.match_rule})"
        )
    if problems:
        raise InputError("\n".join(problems), code="CLAIMS_KIT_MISMATCH")


def build_statement(
    claims: Claims,
    kit: KitInfo,
    *,
    kit_sha256: str,
    lock_sha256: str,
    issued_at: str,
    source: str = "claims",
    evidence: Mapping[str, bytes] | None = None,
) -> bytes:
    """Canonical bytes of the in-toto Statement that ``k3kit sign`` wraps in DSSE.

    ``evidence`` maps run ids to the bytes of their evidence files (those whose claims name one).
    """
    _check_claims_match_kit(claims, kit, source)
    body: dict[str, Any] = claims.model_dump(mode="json", by_alias=True, exclude_none=True)
    body.pop("schema")
    body["runs"] = [
        _run_with_evidence(i, run, evidence or {}, source) for i, run in enumerate(claims.runs)
    ]
    body["definitions"] = (claims.definitions or Definitions()).model_dump(mode="json")
    body["definitions_declared"] = claims.definitions is not None
    predicate = load(
        ReceiptPredicate,
        {
            **body,
            "kit": {
                "name": kit.package.name,
                "version": kit.package.version,
                "sequence": kit.package.sequence,
                "channel": kit.package.channel,
                "kit_sha256": kit_sha256,
            },
            "weights": {
                "repo": kit.weights.repo,
                "commit": kit.weights.commit,
                "lock_sha256": lock_sha256,
            },
            "issued_at": issued_at,
        },
        source=source,
    )
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": KIT_SUBJECT, "digest": {"sha256": kit_sha256}},
            {"name": WEIGHTS_SUBJECT, "digest": {"sha256": lock_sha256}},
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    return dumps(statement)
