"""Helpers for audit tests: sign generated claims into a real kit, or audit them in memory."""

from __future__ import annotations

import json
import tomllib
from decimal import Decimal
from pathlib import Path

from k3kit._canonical import strict_loads
from k3kit.audit import AuditReport, audit_path, run_rules
from k3kit.audit.context import EvidenceFacts, build_context
from k3kit.evidence import parse_vllm_result
from k3kit.formats.receipt import build_statement
from k3kit.models import Claims as ClaimsModel
from k3kit.models import KitInfo, Statement, load
from k3kit.publish.kit import sign
from k3kit.signing.keys import load_private, load_public
from tests.benchgen import Claims, GenRun, write_bundle
from tests.conftest import FIXED_TIME, KeyFiles


def sign_generated(
    kit: Path, key: KeyFiles, bundle: Path, claims: Claims, runs: list[GenRun]
) -> Path:
    """Write the publisher's folder, then ``k3kit sign`` the kit with it (replacing a receipt)."""
    claims_path = write_bundle(bundle, claims, runs)
    sign(kit, load_private(key.private, None), claims_path, issued_at=FIXED_TIME, force=True)
    return claims_path


def audit_kit(kit: Path, key: KeyFiles) -> AuditReport:
    return audit_path(kit, [load_public(key.public)])


def errors(report: AuditReport) -> set[str]:
    return {f.rule for f in report.findings if f.severity == "error"}


def audit_in_memory(claims: Claims, runs: list[GenRun], kit_info: KitInfo) -> AuditReport:
    """Sign-free audit of generated claims: same statement building and rules, no files.

    The statement goes through canonical bytes and the strict parser as a signed one would.
    """
    text = claims.render()
    model = load(ClaimsModel, tomllib.loads(text, parse_float=Decimal), source="claims.toml")
    evidence = {run.id: json.dumps(run.result).encode() for run in runs}
    payload = build_statement(
        model,
        kit_info,
        kit_sha256="0" * 64,
        lock_sha256="1" * 64,
        issued_at=FIXED_TIME,
        evidence=evidence,
    )
    statement = load(
        Statement, strict_loads(payload, source="payload", max_bytes=len(payload)), source="payload"
    )
    results = {rid: parse_vllm_result(data, source=rid) for rid, data in evidence.items()}
    ctx = build_context(
        statement.predicate,
        signer_keyid="test",
        kit=None,
        evidence=EvidenceFacts({rid: "ok" for rid in results}),
        results=results,
        subjects={},
    )
    return AuditReport("memory", run_rules(ctx))
