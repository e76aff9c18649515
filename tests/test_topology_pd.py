"""Prefill/decode disaggregation in the package: each pool is built, checked and rendered as its
own engine group, and every way a package can misstate its pools is refused at build (exit 3)
before anything is written. Builds run the real CLI on the golden kit's weights lock."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from k3kit.errors import InputError
from k3kit.models import KitInfo, PackageDef, load
from k3kit.preflight import requirements
from k3kit.publish.kit import load_toml
from k3kit.publish.targets import chosen_targets
from tests.auditkit import sign_generated
from tests.benchgen import standard_runs
from tests.conftest import GoldenKit, run_k3kit
from tests.pdkit import (
    LAYOUT,
    SGLANG_DECODE,
    VLLM_DECODE,
    VLLM_PREFILL,
    pd_claims,
    pd_package,
)
from tests.test_deploy_targets import K8S_VERSION, SITE

PREFLIGHT = Path(__file__).parent / "data" / "preflight"


def _build(golden: GoldenKit, package: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return run_k3kit("build", package, "--lock", golden.lock, "-o", out)


def _serve(kit: Path, profile: str, role: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        (kit / f"profiles/{profile}/{LAYOUT}/{role}/serve.yaml").read_text()
    )
    return loaded


def test_vllm_pools_build_one_engine_group_each(golden: GoldenKit, tmp_path: Path) -> None:
    out = tmp_path / "kit"
    proc = _build(golden, pd_package(tmp_path), out)
    assert proc.returncode == 0, proc.stderr
    info = json.loads((out / "kit.json").read_text())
    shapes = {(p["name"], p["topology"], p["role"], p["nodes"]) for p in info["profiles"]}
    assert ("batch", f"{LAYOUT}/prefill", "prefill", 1) in shapes
    assert ("batch", f"{LAYOUT}/decode", "decode", 2) in shapes
    assert len(shapes) == 4 and all(p["measured"] for p in info["profiles"])
    assert info["disaggregation"]["decode"]["nodes"] == 2
    prefill, decode = _serve(out, "batch", "prefill"), _serve(out, "batch", "decode")
    assert prefill["kv-transfer-config"]["kv_role"] == "kv_producer"
    assert decode["kv-transfer-config"]["kv_role"] == "kv_consumer"
    assert decode["data-parallel-size-local"] == 1 and "data-parallel-size-local" not in prefill
    # One unit per pool, named apart, so both can run on one systemd or in one namespace.
    units = sorted(p.name for p in out.rglob("profiles/batch/*/*/systemd/*"))
    assert units == [
        "k3kit-decode-kimi-k3-b300x8-batch.template.service",
        "k3kit-prefill-kimi-k3-b300x8-batch.service",
    ]
    lws = yaml.safe_load(
        (out / f"profiles/batch/{LAYOUT}/decode/k8s/leaderworkerset.yaml").read_text()
    )
    assert lws["metadata"]["name"] == "k3kit-decode-kimi-k3-b300x8-batch"
    assert (out / f"profiles/batch/{LAYOUT}/prefill/k8s/deployment.yaml").is_file()
    router = (out / f"profiles/batch/{LAYOUT}/router.md").read_text()
    assert "NixlConnector" in router and f"--topology {LAYOUT}/decode" in router


def test_sglang_pools_on_two_gpu_models(golden: GoldenKit, tmp_path: Path) -> None:
    out = tmp_path / "kit"
    package = pd_package(tmp_path, engine="sglang", decode_gpu=("NVIDIA H200", 141))
    proc = _build(golden, package, out)
    assert proc.returncode == 0, proc.stderr
    decode = _serve(out, "chat", "decode")
    assert decode["disaggregation-mode"] == "decode" and decode["nnodes"] == 2
    assert (
        "sglang_router.launch_router --pd-disaggregation"
        in (out / f"profiles/chat/{LAYOUT}/router.md").read_text()
    )
    # preflight on a decode node expects the decode pool's GPU, not [hardware]'s B300.
    info = load(KitInfo, json.loads((out / "kit.json").read_text()), source="kit.json")
    by_role = {p.role: p for p in info.profiles}
    need = requirements(info, by_role["decode"], decode)
    assert need.gpu_name_pattern == "NVIDIA\\ H200" and need.gpu_memory_bytes == 141 * 10**9
    assert requirements(info, by_role["prefill"], {}).gpu_name_pattern == "B300"


def _refused(golden: GoldenKit, tmp_path: Path, package: Path, *needles: str) -> str:
    out = tmp_path / "kit"
    proc = _build(golden, package, out)
    assert proc.returncode == 3, proc.stderr
    for needle in needles:
        assert needle in proc.stderr
    assert not out.exists()
    return proc.stderr


def test_decode_pool_without_its_role_flag_is_refused(golden: GoldenKit, tmp_path: Path) -> None:
    decode = {"tensor-parallel-size": 8, "data-parallel-size": 2}
    _refused(
        golden,
        tmp_path,
        pd_package(tmp_path, decode=decode),
        "decode pool's kv-transfer-config.kv_role not set",
    )


def test_prefill_pool_configured_as_consumer_is_refused(golden: GoldenKit, tmp_path: Path) -> None:
    prefill = {**VLLM_PREFILL, "kv-transfer-config": {**VLLM_DECODE["kv-transfer-config"]}}
    _refused(golden, tmp_path, pd_package(tmp_path, prefill=prefill), "prefill pool", "says decode")


def test_sglang_pool_with_the_other_mode_is_refused(golden: GoldenKit, tmp_path: Path) -> None:
    decode = {**SGLANG_DECODE, "disaggregation-mode": "prefill"}
    _refused(
        golden,
        tmp_path,
        pd_package(tmp_path, engine="sglang", decode=decode),
        "decode pool's disaggregation-mode says prefill",
    )


def test_pools_moving_kv_two_ways_are_refused(golden: GoldenKit, tmp_path: Path) -> None:
    decode = {
        **VLLM_DECODE,
        "kv-transfer-config": {"kv_connector": "P2pNcclConnector", "kv_role": "kv_consumer"},
    }
    _refused(
        golden, tmp_path, pd_package(tmp_path, decode=decode), "move KV differently", "P2pNccl"
    )


@pytest.mark.parametrize("form", ["table", "json string"])
def test_connector_module_path_smuggled_into_a_pool_is_refused(
    golden: GoldenKit, tmp_path: Path, form: str
) -> None:
    """The attacker's package makes the decode pool import its own module as the KV connector:
    code outside the kit's signature and the weights lock, run on every decode node."""
    config = {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_consumer",
        "kv_connector_module_path": "evil_connector.mod",
    }
    value = config if form == "table" else json.dumps(config)
    decode = {**VLLM_DECODE, "kv-transfer-config": value}
    _refused(
        golden,
        tmp_path,
        pd_package(tmp_path, decode=decode),
        "disaggregation.decode: `kv-transfer-config.kv_connector_module_path`",
        "[engine.loads]",
    )


def test_pool_parallel_sizes_must_fill_its_gpus(golden: GoldenKit, tmp_path: Path) -> None:
    decode = {**VLLM_DECODE, "data-parallel-size": 4}
    _refused(
        golden,
        tmp_path,
        pd_package(tmp_path, decode=decode),
        f"topology {LAYOUT}/decode",
        "needs 32 GPU(s)",
        "= 16",
    )


def test_hardware_must_count_both_pools_nodes(golden: GoldenKit, tmp_path: Path) -> None:
    _refused(
        golden,
        tmp_path,
        pd_package(tmp_path, hardware_nodes=2),
        "hardware.nodes is 2",
        "1 + 2 = 3",
    )


def test_pd_package_cannot_also_declare_topologies(golden: GoldenKit, tmp_path: Path) -> None:
    package = pd_package(tmp_path)
    package.write_text(
        package.read_text() + '\n[[topologies]]\nkind = "single-node"\ngpus_per_node = 8\n'
    )
    _refused(golden, tmp_path, package, "remove [[topologies]]")


def test_profile_rendered_for_one_pool_only_is_refused(golden: GoldenKit, tmp_path: Path) -> None:
    """A kit with only the prefill pool of a profile would serve nothing and still say measured."""
    package = pd_package(tmp_path)
    text = package.read_text().replace(
        "[profiles.batch]\n", f'[profiles.batch]\ntopologies = ["{LAYOUT}/prefill"]\n'
    )
    package.write_text(text)
    _refused(golden, tmp_path, package, "profiles.batch.topologies", "for both pools")


def test_aggregated_server_configured_as_prefill_only_is_refused(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Without pools a kv_producer would wait for a decode peer the kit never starts."""
    from tests.conftest import EXAMPLE

    text = (
        (EXAMPLE / "package.toml")
        .read_text()
        .replace(
            "[profiles.batch.serve]\n",
            '[profiles.batch.serve]\nkv-transfer-config = { kv_connector = "NixlConnector", '
            'kv_role = "kv_producer" }\n',
        )
    )
    package = tmp_path / "package.toml"
    package.write_text(text)
    _refused(golden, tmp_path, package, "makes this a prefill instance", "[disaggregation]")


def test_slurm_cannot_run_pools_and_says_so(golden: GoldenKit, tmp_path: Path) -> None:
    package = pd_package(tmp_path, targets=["shell", "slurm"])
    with pytest.raises(InputError) as caught:
        chosen_targets(load_toml(package, PackageDef))
    assert caught.value.code == "DEPLOY_TARGET_NO_PD"
    _refused(
        golden,
        tmp_path,
        package,
        "slurm cannot express",
        "one unit per pool: compose, k8s, shell, systemd",
    )


@pytest.fixture(scope="module")
def signed_pd(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PD kit signed with honest PD claims (a real ``sign``), as a buyer receives it."""
    root = tmp_path_factory.mktemp("signed-pd")
    out = root / "kit"
    package = pd_package(root, decode_gpu=("NVIDIA H200", 141))
    assert _build(golden, package, out).returncode == 0
    runs = standard_runs(save_detailed=False)
    claims = pd_claims(runs, decode_gpu="NVIDIA H200")
    sign_generated(out, golden.key, root / "bundle", claims, runs)
    return out


def _preflight(kit: Path, golden: GoldenKit, role: str, xml: str) -> dict[str, str]:
    proc = run_k3kit(
        "preflight",
        kit,
        "--trust",
        golden.key.public,
        "--profile",
        "batch",
        "--topology",
        f"{LAYOUT}/{role}",
        "--nvidia-smi-xml",
        PREFLIGHT / xml,
        "--os-facts",
        PREFLIGHT / "node-os.synthetic.json",
        "--json",
    )
    assert "Traceback" not in proc.stderr
    return {c["name"]: c["status"] for c in json.loads(proc.stdout)["checks"]}


def test_preflight_judges_each_pool_by_its_own_gpu(signed_pd: Path, golden: GoldenKit) -> None:
    """Prefill runs on B300 and decode on H200: a B300 node passes for prefill and fails for
    decode, an H200 node the other way round (its one GPU still fails the pool's count of 8)."""
    prefill_on_b300 = _preflight(signed_pd, golden, "prefill", "b300x8.synthetic.xml")
    assert prefill_on_b300["gpu.model"] == "pass" and prefill_on_b300["gpu.count"] == "pass"
    assert _preflight(signed_pd, golden, "decode", "b300x8.synthetic.xml")["gpu.model"] == "fail"
    decode_on_h200 = _preflight(signed_pd, golden, "decode", "h200x1.synthetic.xml")
    assert decode_on_h200["gpu.model"] == "pass" and decode_on_h200["gpu.count"] == "fail"


def test_pd_kit_renders_for_a_site_and_every_file_validates(
    signed_pd: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """render-site verifies the PD kit and fills each pool's files; Kubernetes objects validate
    against the Kubernetes schemas, units with systemd-analyze, scripts with shellcheck."""
    site = tmp_path / "site.env"
    site.write_text(SITE)
    out = tmp_path / "out"
    proc = run_k3kit(
        "render-site", signed_pd, "--trust", golden.key.public, "--site", site, "-o", out
    )
    assert proc.returncode == 0, proc.stderr
    decode = out / f"batch/{LAYOUT}/decode"
    lws = yaml.safe_load((decode / "k8s/leaderworkerset.yaml").read_text())
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert leader["command"][leader["command"].index("--topology") + 1] == f"{LAYOUT}/decode"
    assert (decode / "systemd/k3kit-decode-kimi-k3-b300x8-batch@.service").is_file()
    kv = pytest.importorskip("kubernetes_validate")
    for path in sorted(out.rglob("k8s/*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc["kind"] != "LeaderWorkerSet":
            kv.validate(doc, K8S_VERSION, strict=True)
    tools = {name: shutil.which(name) for name in ("systemd-analyze", "shellcheck")}
    if tools["systemd-analyze"]:
        for unit in sorted(out.rglob("*.service")):
            check = subprocess.run(
                [tools["systemd-analyze"], "verify", "--man=no", str(unit)],
                capture_output=True,
                text=True,
                check=False,
            )
            assert check.returncode == 0, check.stderr
    if tools["shellcheck"]:
        scripts = sorted(str(p) for p in signed_pd.rglob("*.sh"))
        assert len(scripts) == 4  # a run.sh per pool and profile
        check = subprocess.run(
            [tools["shellcheck"], "--severity=style", *scripts],
            capture_output=True,
            text=True,
            check=False,
        )
        assert check.returncode == 0, check.stdout


def test_card_of_a_pd_kit_names_both_pools(
    signed_pd: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    out = tmp_path / "card.md"
    proc = run_k3kit(
        "card",
        signed_pd,
        "--trust",
        golden.key.public,
        "-o",
        tmp_path / "card.html",
        "--markdown",
        out,
        "--gpu-hour-usd",
        "2",
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    measured = "prefill 1 node(s) × 8 NVIDIA B300 + decode 2 node(s) × 8 NVIDIA H200"
    assert f"| measured on | 3 node(s), {measured}, vllm 0.33.0, text |" in text
    assert "| hardware | prefill 1 node(s) × 8 NVIDIA B300 (288 GB) + decode 2 node(s)" in text
    # One section per profile (the two pools are one server), per-GPU cost over all 24 GPUs.
    assert text.count("## Profile batch") == 1
    assert f"--profile batch --topology {LAYOUT}/prefill --trust" in text
    assert "| batch-c32 | 32 | 24 | 2951.98 | $4.52 |" in text


def test_release_notes_show_the_move_to_pools(signed_pd: Path, golden: GoldenKit) -> None:
    """From one aggregated node to prefill and decode pools: each pool is a hardware change."""
    result = run_k3kit(
        "release-notes", golden.kit, signed_pd, "--trust", golden.key.public, "--json"
    )
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)["changes"]
    changes = {(c["section"], c["item"]): (c["old"], c["new"]) for c in listed}
    assert changes[("hardware", "prefill pool")] == (None, "1 x 8 NVIDIA B300 (288 GB)")
    assert changes[("hardware", "decode pool")] == (None, "2 x 8 NVIDIA H200 (141 GB)")
    assert changes[("hardware", "nodes")] == ("1", "3")


@pytest.mark.parametrize("verb", ["launch", "preflight"])
def test_profile_of_pools_is_never_started_as_one_pool_by_default(
    verb: str, signed_pd: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """Without --topology the plain invocation used to mean "the one-node shape": here the
    prefill pool, which would start half a server. Both verbs refuse and name the pools."""
    extra = ["--no-preflight"] if verb == "launch" else []
    proc = run_k3kit(
        verb,
        *extra,
        signed_pd,
        "--profile",
        "batch",
        "--trust",
        golden.key.public,
        "--weights",
        golden.snapshot,
        "--state-dir",
        tmp_path / "state",
    )
    assert proc.returncode == 3, proc.stderr
    assert f"pass --topology {LAYOUT}/decode or {LAYOUT}/prefill" in proc.stderr
