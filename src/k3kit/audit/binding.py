"""R01-R05: is this receipt bound to what is audited, and does it say how it measured?"""

from __future__ import annotations

from k3kit.audit.context import Context
from k3kit.audit.findings import Out, rule
from k3kit.models import KIT_SUBJECT, WEIGHTS_SUBJECT


@rule("R01", "Signature", "DSSE v1.0.2, Ed25519 (k3kit signing design)")
def signature(ctx: Context, out: Out) -> None:
    # The audit verifies the signature before any rule runs; an unverifiable receipt never
    # reaches this point but is reported as an R01 error by the engine.
    out.passed("receipt", f"Ed25519 signature verifies with trusted key {ctx.signer_keyid[:16]}")


@rule("R02", "Subject binding", "in-toto Statement subjects (k3kit receipt design)")
def subject_binding(ctx: Context, out: Out) -> None:
    if ctx.kit is None:
        out.not_checkable(
            "kit", "receipt audited without its kit: kit and weight checksums cannot be compared"
        )
        return
    pred = ctx.predicate
    pairs = (
        ("kit checksum (sha256 of MANIFEST.json)", KIT_SUBJECT, pred.kit.kit_sha256),
        (
            "weight checksum (sha256 of weights.lock.json)",
            WEIGHTS_SUBJECT,
            pred.weights.lock_sha256,
        ),
    )
    for what, subject, signed in pairs:
        actual = ctx.kit.manifest_sha256 if subject == KIT_SUBJECT else ctx.kit.lock_sha256
        if ctx.subjects.get(subject) != signed:
            out.error(
                "kit",
                f"{what}: the Statement subject and the predicate disagree",
                f"sha256:{signed}",
                f"subject {subject}: {ctx.subjects.get(subject)}",
            )
        elif actual is None:
            out.error("kit", f"{what}: file missing from the kit", signed, "absent")
        elif actual != signed:
            out.error(
                "kit",
                f"{what}: the receipt covers another kit",
                f"sha256:{signed}",
                f"sha256:{actual}",
            )
        else:
            out.passed("kit", f"{what} matches the receipt")


@rule("R03", "Raw-evidence binding", "k3kit receipt design: evidence sha256 in the receipt")
def evidence_binding(ctx: Context, out: Out) -> None:
    with_files = [rv for rv in ctx.runs if rv.run.evidence is not None]
    evidence = ctx.evidence
    if not with_files and (evidence is None or not evidence.extra):
        out.info(
            "evidence", "no evidence files: every run is summary-level (published numbers only)"
        )
        return
    for rv in with_files:
        if evidence is None:
            out.not_checkable(rv.id, f"{rv.run.evidence} not available (receipt without its kit)")
            continue
        status = evidence.status.get(rv.id, "not read")
        if status == "ok":
            out.passed(rv.id, f"{rv.run.evidence} matches its signed sha256")
        else:
            out.error(
                rv.id,
                f"{rv.run.evidence}: {status}",
                f"sha256:{rv.run.evidence_sha256} ({rv.run.evidence_bytes} bytes)",
                status,
            )
    for rel in evidence.extra if evidence else []:
        out.error(
            "evidence", f"{rel}: evidence file not listed in the receipt", "absent", "present"
        )


@rule("R04", "Provenance complete", "MLPerf SystemCheck; vLLM bench serve result header")
def provenance(ctx: Context, out: Out) -> None:
    env = ctx.predicate.environment
    out.passed(
        "kit",
        f"{env.gpu_count}x {env.gpu} on {env.nodes} node(s), {env.engine} {env.engine_version}; "
        "server settings are kit files covered by the kit checksum",
    )
    for name, workload in sorted(ctx.predicate.workloads.items()):
        runs = [rv for rv in ctx.runs if rv.run.workload == name]
        if workload.benchmark_tool or (runs and all(rv.summary is not None for rv in runs)):
            out.passed(f"workload:{name}", "benchmark tool named or evidenced by its result files")
        else:
            out.warning(
                f"workload:{name}",
                "benchmark tool not named and no result file attached: TTFT/TPOT/ITL mean "
                "different things in different tools",
                "workloads.benchmark_tool or evidence files",
                "neither",
            )
    if ctx.kit is None or ctx.kit.info is None:
        out.not_checkable(
            "kit",
            "engine container image digest: kit.json absent or not the one the signed "
            "MANIFEST.json lists",
        )
    elif ctx.kit.info.engine.image is None:
        out.warning(
            "kit",
            "the kit pins no engine container image by digest: the software stack that was "
            "measured is identified by engine version only",
            "engine.image = <name>@sha256:<digest>",
            "none",
        )
    else:
        out.passed("kit", f"engine image pinned: {ctx.kit.info.engine.image}")


@rule("R05", "Definitions declared", "vLLM docs 'Understanding the Latency Metrics'")
def definitions(ctx: Context, out: Out) -> None:
    pred = ctx.predicate
    defs = pred.definitions
    if not pred.definitions_declared:
        out.warning(
            "definitions",
            "the claims declare no metric definitions; k3kit assumes vLLM's "
            f"(TPOT = {defs.tpot}; percentiles {defs.percentile_method}; "
            f"per-GPU = {defs.per_gpu} of the {defs.per_gpu_throughput} throughput)",
            "[definitions] in the claims",
            "none declared",
        )
        return
    short = [
        name
        for name in ("ttft", "tpot", "itl", "e2el", "output_tokens", "per_gpu")
        if len(getattr(defs, name).split()) < 2
    ]
    if short:
        out.warning(
            "definitions",
            f"definitions given by name only, not as formulas: {', '.join(short)} "
            "(vLLM's TPOT is GuideLLM's ITL)",
            "a formula per metric",
            ", ".join(f"{n} = {getattr(defs, n)!r}" for n in short),
        )
    else:
        out.passed("definitions", f"definitions declared; percentiles by {defs.percentile_method}")
