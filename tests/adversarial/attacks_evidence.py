"""Evidence files a publisher brings to ``k3kit sign``: bounded however deep a real tool nests.

The nesting bound was raised from 8 to 32 for real GuideLLM reports (10 levels); these cases keep
the bound itself honest: a report padded past it is refused with a coded error, never parsed on.
"""

from __future__ import annotations

import json
from typing import Any

from tests.adversarial.corpus import Argv, Workbench, attack
from tests.benchgen import _toml_value
from tests.realcorpus import LIMITS, case


def _claims(w: Workbench, name: str, data: bytes) -> Any:
    wl, row, _ = case(name)
    (w.root / "pub" / "results").mkdir(parents=True)
    (w.root / "pub" / "results" / f"{row['id']}.json").write_bytes(data)
    lines = ['schema = "k3kit.claims/v1"', f"limitations = {_toml_value(LIMITS)}"]
    lines += ["[environment]", 'gpu = "NVIDIA B300"', "gpu_count = 8", "nodes = 1"]
    lines += ['engine = "vllm"', 'engine_version = "0.33.0"', f"[workloads.{row['workload']}]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in wl.items()]
    lines += ["[[runs]]"] + [
        f"{k} = {_toml_value(v)}" for k, v in row.items() if not isinstance(v, dict)
    ]
    path = w.root / "pub" / "claims.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@attack("EVIDENCE_MALFORMED", exit_code=3)
def evidence_report_nested_past_the_depth_bound(w: Workbench) -> Argv:
    """A real AIPerf export with 40 levels of padding in its configuration block."""
    name = "aiperf-qwen36-nvfp4-chatbot-c8.json.xz"
    _, _, data = case(name)
    obj = json.loads(data)
    deep: Any = 1
    for _ in range(40):
        deep = [deep]
    obj["input_config"]["extra"] = deep
    claims = _claims(w, name, json.dumps(obj).encode())
    return ["sign", w.kit(), "--key", w.golden.key.private, "--claims", claims, "--force"]


@attack("EVIDENCE_MALFORMED", exit_code=3)
def llmperf_summary_with_a_negative_token_mean(w: Workbench) -> Argv:
    """A real llmperf summary whose mean output tokens per request is made negative: the token
    total it implies (mean x completed) is no count, so sign refuses the file with a code."""
    from tests.unseencorpus import unseen_case

    name = "llmperf-gpt41nano-550-150-c10.json"
    wl, row, data = unseen_case(name)
    obj = json.loads(data)
    obj["results_number_output_tokens_mean"] = -171.1
    (w.root / "pub" / "results").mkdir(parents=True)
    (w.root / "pub" / row["evidence"]).write_bytes(json.dumps(obj).encode())
    lines = ['schema = "k3kit.claims/v1"', f"limitations = {_toml_value(LIMITS)}"]
    lines += ["[environment]", 'gpu = "NVIDIA B300"', "gpu_count = 8", "nodes = 1"]
    lines += ['engine = "vllm"', 'engine_version = "0.33.0"', f"[workloads.{row['workload']}]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in wl.items()]
    lines += ["[[runs]]"] + [
        f"{k} = {_toml_value(v)}" for k, v in row.items() if not isinstance(v, dict)
    ]
    claims = w.root / "pub" / "claims.toml"
    claims.write_text("\n".join(lines) + "\n")
    return ["sign", w.kit(), "--key", w.golden.key.private, "--claims", claims, "--force"]
