"""Build the receipt's in-toto Statement from a claims file and the kit it measured.

The Statement's two subjects are the kit checksum (sha256 of ``MANIFEST.json``) and the weight
checksum (sha256 of ``weights.lock.json``): a receipt is about *this* kit with *these* weights and
cannot be moved to another. The claims are copied as published; consistency with the kit (profiles,
engine) is checked here because a receipt for a profile the kit does not have is a publisher error.
"""

from __future__ import annotations

from typing import Any

from k3kit._canonical import dumps
from k3kit.errors import InputError
from k3kit.models import (
    KIT_SUBJECT,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    WEIGHTS_SUBJECT,
    Claims,
    KitInfo,
    ReceiptPredicate,
    load,
)


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
    if (env.engine, env.engine_version) != (kit.engine.name, kit.engine.version):
        problems.append(
            f"{source}: environment: measured with {env.engine} {env.engine_version}, "
            f"but the kit pins {kit.engine.name} {kit.engine.version}"
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
) -> bytes:
    """Canonical bytes of the in-toto Statement that ``k3kit sign`` wraps in DSSE."""
    _check_claims_match_kit(claims, kit, source)
    body: dict[str, Any] = claims.model_dump(mode="json", by_alias=True, exclude_none=True)
    body.pop("schema")
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
