"""How long `k3kit audit` takes on raw evidence of growing size (in memory, no signing).

Generates `vllm bench serve --save-detailed` results with tests/benchgen.py (speculative decoding,
~2 tokens per chunk), then times parsing the evidence and running every rule, and reports the
process's peak resident memory after each size (sizes run smallest first, so the last peak is the
10,000-request one). Target: a 10,000-request raw result audits (parse + rules) in < 3 s and
< 300 MB. Prints one line per size and writes benchmarks/results/audit.json.
Run: python benchmarks/bench_audit.py
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import tomllib  # noqa: E402
from decimal import Decimal  # noqa: E402

from benchgen import GenRun, ServerModel, make_claims, simulate  # noqa: E402
from k3kit.audit import run_rules  # noqa: E402
from k3kit.audit.context import EvidenceFacts, build_context  # noqa: E402
from k3kit.evidence import parse_vllm_result  # noqa: E402
from k3kit.formats.receipt import build_statement  # noqa: E402
from k3kit.models import Claims, KitInfo, Statement, load  # noqa: E402


def _kit_info() -> KitInfo:
    """The golden kit's kit.json (the example package rendered; its profiles carry topologies)."""
    path = ROOT / "tests" / "vectors" / "golden" / "kit.json"
    return load(KitInfo, json.loads(path.read_text()), source=str(path))


def main() -> None:
    info = _kit_info()
    rows = []
    for requests, tokens in ((64, 256), (1024, 2048), (10_000, 256)):
        result = simulate(
            1,
            concurrency=32,
            num_prompts=requests,
            output_len=tokens,
            model=ServerModel(decode_s_per_token=0.006, chunk_tokens=(1, 3)),
        )
        data = json.dumps(result).encode()
        runs = [GenRun("interactive-c32", "interactive", 32, requests, result)]
        made = make_claims(runs, input_len=2048, output_len=tokens)
        made.workload["speculative_decoding"] = True
        claims = load(Claims, tomllib.loads(made.render(), parse_float=Decimal), source="claims")
        t0 = time.perf_counter()
        payload = build_statement(
            claims,
            info,
            kit_sha256="0" * 64,
            lock_sha256="1" * 64,
            issued_at="2026-11-01T00:00:00Z",
            evidence={"interactive-c32": data},
        )
        t1 = time.perf_counter()
        statement = Statement.model_validate_json(payload)
        parsed = parse_vllm_result(data, source="bench")
        t2 = time.perf_counter()
        ctx = build_context(
            statement.predicate,
            signer_keyid="bench",
            kit=None,
            evidence=EvidenceFacts(status={"interactive-c32": "ok"}),
            results={"interactive-c32": parsed},
            subjects={},
        )
        findings = run_rules(ctx)
        t3 = time.perf_counter()
        row = {
            "requests": requests,
            "output_tokens": tokens,
            "evidence_bytes": len(data),
            "itl_samples": result.itl_samples,
            "sign_statement_s": round(t1 - t0, 4),
            "parse_evidence_s": round(t2 - t1, 4),
            "rules_s": round(t3 - t2, 4),
            "audit_s": round(t3 - t1, 4),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "errors": sum(1 for f in findings if f.severity == "error"),
        }
        rows.append(row)
        print(
            f"{requests:>5} requests x {tokens:>4} tokens, {len(data) / 1e6:6.1f} MB: "
            f"statement {row['sign_statement_s']:.3f} s, parse {row['parse_evidence_s']:.3f} s, "
            f"rules {row['rules_s']:.3f} s, audit {row['audit_s']:.3f} s, "
            f"peak RSS {row['peak_rss_mb']} MB, errors {row['errors']}"
        )
    out = ROOT / "benchmarks" / "results" / "audit.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
