"""What to replay: the signed runs of one profile, their workload, and what the profile promises.

Everything here comes from verified bytes: the kit and weights are verified first (a failed verdict
raises :class:`KitNotVerified`), the receipt is read through the same signature check, and the
profile's ``serve.yaml`` is read against the verified manifest (``launch``'s helpers, so there is
one way to read a verified kit file). Only closed-loop runs with fixed or ranged lengths can be
replayed exactly; the others are listed as skipped with their reason, never silently dropped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k3kit.errors import InputError, VerificationError
from k3kit.formats.documents import parse_serve_config, read_kit_documents, read_listed
from k3kit.formats.manifest import RECEIPT_NAME
from k3kit.formats.names import LOCK_NAME
from k3kit.models import Run, Statement, WeightsLock, Workload
from k3kit.node.launch import MAX_KIT_DOC_BYTES, pick_profile
from k3kit.node.verify import KitNotVerified, verify_dir
from k3kit.signing.keys import PublicKey
from k3kit.signing.sign import MAX_ENVELOPE_BYTES, read_receipt
from k3kit.weights import WeightsOptions


@dataclass(frozen=True)
class Promises:
    """The functional promises of a profile's serve configuration."""

    served_model_name: str
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    max_model_len: int | None = None


@dataclass(frozen=True)
class PointPlan:
    run: Run
    workload: Workload
    concurrency: int
    requests: int
    gpus: int


@dataclass
class Plan:
    statement: Statement
    receipt_sha256: str
    publisher_keyid: str
    kit_sha256: str
    lock: WeightsLock
    weights_root: Path
    profile: str
    promises: Promises
    points: list[PointPlan]
    skipped: list[str] = field(default_factory=list)


def _promises(config: dict[str, Any], default_name: str) -> Promises:
    def text(key: str) -> str | None:
        value = config.get(key)
        return value if isinstance(value, str) and value else None

    length = config.get("max-model-len")
    return Promises(
        served_model_name=text("served-model-name") or default_name,
        # vLLM returns structured tool calls only with auto tool choice enabled.
        tool_call_parser=(
            text("tool-call-parser") if config.get("enable-auto-tool-choice") else None
        ),
        reasoning_parser=text("reasoning-parser"),
        max_model_len=length if isinstance(length, int) and not isinstance(length, bool) else None,
    )


def _choose_profile(statement: Statement, profile: str | None) -> str:
    with_runs = sorted({r.profile for r in statement.predicate.runs})
    if profile is None:
        if len(with_runs) != 1:
            raise InputError(
                f"the receipt has runs for several profiles ({', '.join(with_runs)}): "
                "choose one with --profile",
                code="PROFILE_REQUIRED",
            )
        return with_runs[0]
    if profile not in with_runs:
        raise InputError(
            f"the receipt has no runs for profile {profile!r} (it has: {', '.join(with_runs)})",
            code="PROFILE_UNKNOWN",
        )
    return profile


def select_points(
    statement: Statement, profile: str, points: list[int] | None, requests: int | None
) -> tuple[list[PointPlan], list[str]]:
    """The profile's replayable runs at the chosen concurrencies, and why others were skipped."""
    pred = statement.predicate
    plans, skipped = [], []
    for run in pred.runs:
        if run.profile != profile:
            continue
        workload = pred.workloads[run.workload]
        c = run.concurrency
        if points is not None and c not in points:
            continue
        if workload.load != "closed-loop" or c is None:
            skipped.append(f"{run.id}: open-loop runs are not replayed (closed loop only)")
            continue
        if workload.lengths == "variable" or workload.input_tokens is None:
            skipped.append(f"{run.id}: dataset-driven lengths cannot be rebuilt from the receipt")
            continue
        if workload.output_tokens is None:
            skipped.append(f"{run.id}: no output length in the workload")
            continue
        # The same request count or more; five waves where the receipt did not publish one.
        count = requests if requests is not None else max(run.requests or 0, 5 * c)
        plans.append(PointPlan(run, workload, c, count, run.gpus_in(pred.environment)))
    if not plans:
        raise InputError(
            f"no replayable run of profile {profile!r} at the chosen points"
            + (f" ({'; '.join(skipped)})" if skipped else ""),
            code="NO_POINTS",
        )
    return plans, skipped


def load_plan(
    kit_dir: Path,
    trusted: list[PublicKey],
    *,
    weights: Path,
    profile: str | None,
    points: list[int] | None,
    requests: int | None,
    weights_options: WeightsOptions | None = None,
) -> Plan:
    """Verify the kit and weights, then read the plan from the verified receipt and profile."""
    if not kit_dir.is_dir():
        raise InputError(
            "accept needs an installed kit directory (k3kit install), not an archive",
            code="KIT_NOT_A_DIRECTORY",
        )
    report = verify_dir(kit_dir, trusted, weights=weights, weights_options=weights_options)
    if not report.ok or "weights" not in report.facts:
        raise KitNotVerified(report)
    kit_sha256 = report.kit_sha256
    receipt_path = kit_dir / RECEIPT_NAME
    verified = read_receipt(receipt_path, trusted)
    statement = verified.statement
    if statement.predicate.kit.kit_sha256 != kit_sha256:
        raise VerificationError(
            "the receipt changed after it was verified", code="KIT_FILE_CHANGED"
        )
    receipt_bytes = receipt_path.read_bytes()[: MAX_ENVELOPE_BYTES + 1]
    manifest, info = read_kit_documents(
        kit_dir,
        max_bytes=MAX_KIT_DOC_BYTES,
        kit_sha256=kit_sha256,
        mismatch_code="KIT_FILE_CHANGED",
    )
    chosen = _choose_profile(statement, profile)
    kit_profile = pick_profile(info, chosen, None)
    folder = kit_profile.folder
    serve = f"{folder}/serve.yaml"
    config = parse_serve_config(
        read_listed(kit_dir, manifest, serve, max_bytes=MAX_KIT_DOC_BYTES), source=serve
    )
    lock_bytes = read_listed(kit_dir, manifest, LOCK_NAME, max_bytes=MAX_KIT_DOC_BYTES)
    lock = WeightsLock.model_validate_json(lock_bytes)
    plans, skipped = select_points(statement, chosen, points, requests)
    return Plan(
        statement=statement,
        receipt_sha256=hashlib.sha256(receipt_bytes).hexdigest(),
        publisher_keyid=verified.signer_keyid,
        kit_sha256=kit_sha256,
        lock=lock,
        weights_root=Path(report.facts["weights"]["root"]),
        profile=chosen,
        promises=_promises(config, kit_profile.served_model_name),
        points=plans,
        skipped=skipped,
    )
