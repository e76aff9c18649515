"""Engines as data: shipped snapshots, strict validation with suggestions, multi-node wiring.

One test per pitfall of docs/deploy.md, each through the real `k3kit build` (exit 3, the file,
the key and a suggestion in the message, nothing written).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from k3kit.engines import (
    ADAPTERS,
    Parallel,
    Runtime,
    shipped_versions,
    snapshot,
    validate_env,
    validate_settings,
)
from tests.conftest import EXAMPLE, GoldenKit, run_k3kit


def test_shipped_snapshots_have_provenance() -> None:
    versions = shipped_versions()
    assert versions["vllm"] == ["0.32.0", "0.33.0"]
    assert versions["sglang"] == ["0.5.23"]
    for engine, vs in versions.items():
        for version in vs:
            snap = snapshot(engine, version)
            assert "wheel" in snap.provenance and len(snap.options) > 300
            assert snap.env_vars and snap.registries["tool_call_parsers"]
    assert "kimi_k3" in snapshot("sglang", "0.5.23").registries["reasoning_parsers"]
    assert "performance-mode" in snapshot("vllm", "0.32.0").options


def test_each_shipped_flag_is_read_as_the_snapshot_writes_it() -> None:
    """snapshot() builds ~400 records on every launch, by a loop tuned for it: held here to the
    plain reading of the file, every long flag of every shipped snapshot, field by field."""
    import json

    import k3kit.data

    folder = Path(k3kit.data.__file__).parent
    for engine, versions in shipped_versions().items():
        for version in versions:
            doc = json.loads((folder / f"{engine}-{version}-serve-flags.json").read_text())
            expected = {
                flag[2:]: (
                    flag,
                    opt["action"],
                    opt["type"],
                    tuple(str(c) for c in opt["choices"]) if opt["choices"] else None,
                    opt["deprecated"],
                    opt.get("nargs"),
                    opt.get("dest", flag[2:]),
                )
                for opt in doc["options"]
                for flag in opt["flags"]
                if flag.startswith("--")
            }
            options = snapshot(engine, version).options
            assert {k: tuple(v) for k, v in options.items()} == expected
            assert list(options) == list(expected)  # the snapshot's order, which hints follow


def _build(tmp_path: Path, golden: GoldenKit, old: str, new: str) -> tuple[int, str, Path]:
    text = (EXAMPLE / "package.toml").read_text()
    assert old in text, old
    package = tmp_path / "package.toml"
    package.write_text(text.replace(old, new, 1))
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", tmp_path / "kit")
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "kit").exists()
    return proc.returncode, proc.stderr, package


@pytest.mark.parametrize(
    ("old", "new", "key", "suggestion"),
    [
        # argparse would accept this prefix and silently mean --max-num-seqs
        (
            "max-num-seqs = 32",
            "max-num-seq = 32",
            "profiles.interactive.serve.max-num-seq",
            "did you mean `--max-num-seqs`?",
        ),
        (
            'performance-mode = "interactivity"',
            'performance-mode = "interactive"',
            "profiles.interactive.serve.performance-mode",
            "did you mean 'interactivity'?",
        ),
        (
            "[profiles.batch.serve]",
            '[profiles.batch.env]\nVLLM_ALL2ALL_BACKND = "x"\n\n[profiles.batch.serve]',
            "profiles.batch.env.VLLM_ALL2ALL_BACKND",
            "it would be ignored",
        ),
        (
            "tensor-parallel-size = 8\nenable-expert-parallel = true\nmax-model-len = 1048576\n"
            'performance-mode = "throughput"',
            "tensor-parallel-size = 16\nenable-expert-parallel = true\nmax-model-len = 1048576\n"
            'performance-mode = "throughput"',
            "profiles.batch.serve (topology single-node-8gpu)",
            "needs 16 GPU(s)",
        ),
        (
            'max-model-len = 1048576\nperformance-mode = "interactivity"',
            'max-model-len = 2097152\nperformance-mode = "interactivity"',
            "max-model-len",
            "set max-model-len <= 1048576",
        ),
        (
            'served_model_name = "kimi-k3"\n\n[profiles.batch.serve]',
            'served_model_name = "kimi-k3"\n\n[profiles.batch.serve]\nport = 9000',
            "profiles.batch.serve.port",
            "set by k3kit's launcher",
        ),
    ],
)
def test_each_pitfall_is_refused_with_file_key_and_fix(
    tmp_path: Path, golden: GoldenKit, old: str, new: str, key: str, suggestion: str
) -> None:
    code, stderr, package = _build(tmp_path, golden, old, new)
    assert code == 3, stderr
    assert str(package) in stderr and key in stderr and suggestion in stderr, stderr


def test_unknown_env_var_suggests_the_known_name() -> None:
    eng, snap = ADAPTERS["vllm"], snapshot("vllm", "0.33.0")
    problems = validate_env(eng, snap, {"VLLM_CACHE_ROT": "/x", "NCCL_DEBUG": "INFO"}, "env")
    assert len(problems) == 1 and "did you mean VLLM_CACHE_ROOT?" in problems[0]


def test_sglang_rules_are_sglangs() -> None:
    eng, snap = ADAPTERS["sglang"], snapshot("sglang", "0.5.23")
    assert (
        validate_settings(
            eng, snap, {"tp-size": 8, "context-length": 131072, "tool-call-parser": "kimi_k3"}, "s"
        )
        == []
    )
    # SGLang's own LWS example uses this prefix; in 0.5.23 it is ambiguous (a parse error)
    [ambiguous] = validate_settings(eng, snap, {"cuda-graph-max-bs": 256}, "s")
    assert "not a sglang 0.5.23 server flag" in ambiguous and "did you mean" in ambiguous
    [deprecated] = validate_settings(eng, snap, {"enable-dp-attention": True}, "s")
    assert "deprecated" in deprecated
    [choice] = validate_settings(eng, snap, {"reasoning-parser": "kimi_k4"}, "s")
    assert "did you mean 'kimi_k3'?" in choice
    [runtime] = validate_settings(eng, snap, {"node-rank": 1}, "s")
    assert "launcher" in runtime


def test_unknown_engine_version_names_what_ships(tmp_path: Path, golden: GoldenKit) -> None:
    code, stderr, _ = _build(tmp_path, golden, 'version = "0.33.0"', 'version = "0.31.0"')
    assert code == 3 and "no flag snapshot for vllm 0.31.0" in stderr
    assert "vllm 0.32.0, 0.33.0" in stderr


def test_earlier_vllm_version_builds(tmp_path: Path, golden: GoldenKit) -> None:
    text = (
        (EXAMPLE / "package.toml")
        .read_text()
        .replace('version = "0.33.0"', 'version = "0.32.0"', 1)
    )
    package = tmp_path / "package.toml"
    package.write_text(text)
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", tmp_path / "kit")
    assert proc.returncode == 0, proc.stderr
    assert (
        "vLLM 0.32.0 server config"
        in (tmp_path / "kit/profiles/batch/single-node-8gpu/serve.yaml").read_text()
    )


def test_multi_node_runtime_flags() -> None:
    vllm, sglang = ADAPTERS["vllm"], ADAPTERS["sglang"]
    dp = Parallel(tp=8, pp=1, dp=8, world=64, nodes=8, gpus_per_node=8)
    assert vllm.topology_settings(dp) == {"data-parallel-size-local": 1}
    assert vllm.runtime_argv(dp, Runtime(0, "10.0.0.1")) == [
        "--data-parallel-address",
        "10.0.0.1",
        "--data-parallel-rpc-port",
        "13345",
        "--data-parallel-start-rank",
        "0",
    ]
    assert vllm.runtime_argv(dp, Runtime(3, "10.0.0.1"))[-3:] == [
        "--data-parallel-start-rank",
        "3",
        "--headless",
    ]
    spread = Parallel(tp=8, pp=2, dp=1, world=16, nodes=2, gpus_per_node=8)
    assert vllm.topology_settings(spread) == {"nnodes": 2}
    assert vllm.runtime_argv(spread, Runtime(1, "h0", 29501)) == [
        "--node-rank",
        "1",
        "--master-addr",
        "h0",
        "--master-port",
        "29501",
        "--headless",
    ]
    tp16 = Parallel(tp=16, pp=1, dp=1, world=16, nodes=2, gpus_per_node=8)
    assert sglang.topology_settings(tp16) == {"nnodes": 2}
    assert sglang.runtime_argv(tp16, Runtime(1, "h0")) == [
        "--node-rank",
        "1",
        "--dist-init-addr",
        "h0:20102",
    ]
    assert sglang.parse_version("sglang version: 0.5.23\ngit revision: abc1234\n") == "0.5.23"
