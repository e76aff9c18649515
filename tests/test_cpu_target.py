"""A kit whose node serves on its CPUs: schema, build, preflight on this machine, launch.

``[hardware] accelerator = "cpu"`` states cores, memory and instruction-set features instead of a
GPU; preflight reads them from this machine's kernel (``sched_getaffinity``, ``/proc/meminfo``,
``/proc/cpuinfo``) or from recorded ``/proc`` files; claims on such a node count one engine per
node. GPU kits are unchanged (the golden kit, built from the GPU example, still builds and signs).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from k3kit.models import PackageDef
from k3kit.models.claims import Environment
from k3kit.models.package import HardwareTarget
from k3kit.preflight import cpu_facts, run_preflight
from k3kit.signing.keys import load_public
from tests.conftest import EXAMPLE, GoldenKit, KeyFiles, make_kit, run_k3kit
from tests.launchkit import FakeEngine, engine_env, make_fake_engine

AVX2_ONLY = "fpu vme de pse tsc msr pae mce cx8 apic sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma"
GPU_ENV = '[environment]\ngpu = "NVIDIA B300"\ngpu_count = 8\ngpu_memory_gb = 288\nnodes = 1\n'
CPU_ENV = '[environment]\naccelerator = "cpu"\ngpu_count = 1\nnodes = 1\n'


def cpu_hardware(cores: int = 1, memory_gib: int = 1, features: str = '"fpu"') -> str:
    return (
        '[hardware]\naccelerator = "cpu"\ngpus_per_node = 1\nnodes = 1\n'
        f"cpu_cores = {cores}\nmemory_gib = {memory_gib}\ncpu_features = [{features}]\n"
        "min_shm_gib = 0\n\n"
    )


def cpu_package(tmp: Path, hardware: str) -> Path:
    """The GPU example made a CPU kit: its [hardware] and topologies replaced, TP 1."""
    text = (EXAMPLE / "package.toml").read_text()
    start, end = text.index("[hardware]\n"), text.index("[engine]\n")
    text = text[:start] + hardware + text[end:]
    text = text.replace("tensor-parallel-size = 8\n", "")
    path = tmp / "package.toml"
    path.write_text(text)
    return path


def cpu_claims(tmp: Path) -> Path:
    text = (EXAMPLE / "claims.toml").read_text()
    assert GPU_ENV in text
    text = re.sub(r"(?m)^gpus = 8\n", "", text.replace(GPU_ENV, CPU_ENV))
    path = tmp / "claims.toml"
    path.write_text(text)
    return path


def test_a_cpu_target_states_cores_memory_and_isa_features() -> None:
    hw = HardwareTarget.model_validate(
        {
            "accelerator": "cpu",
            "gpus_per_node": 1,
            "nodes": 1,
            "cpu_cores": 2,
            "memory_gib": 16,
            "cpu_features": ["avx2"],
        }
    )
    assert hw.is_cpu and hw.device == "CPU (2+ cores, 16+ GiB, avx2)"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"gpu": "NVIDIA B300"}, "gpu: not a fact of a cpu target"),
        ({"min_compute_capability": "9.0"}, "min_compute_capability: not a fact"),
        ({"min_cuda_driver_api": 13000}, "min_cuda_driver_api: not a fact"),
        ({"cpu_cores": None}, "a cpu target needs cpu_cores"),
        ({"gpus_per_node": 8}, "one engine per node"),
        ({"cpu_features": ["AVX2; rm -rf"]}, "not a /proc/cpuinfo flag name"),
    ],
)
def test_a_cpu_target_refuses_gpu_facts_and_missing_cpu_ones(extra: dict, message: str) -> None:  # type: ignore[type-arg]
    data = {"accelerator": "cpu", "gpus_per_node": 1, "nodes": 1, "cpu_cores": 2}
    data |= {"memory_gib": 16, **extra}
    with pytest.raises(ValidationError, match=re.escape(message)):
        HardwareTarget.model_validate(data)


def test_a_gpu_target_still_needs_its_gpu_facts_and_takes_no_cpu_ones() -> None:
    gpu = {"gpu": "H100", "gpu_memory_gb": 80, "gpus_per_node": 8, "nodes": 1}
    with pytest.raises(ValidationError, match="a gpu target needs min_compute_capability"):
        HardwareTarget.model_validate(gpu)
    with pytest.raises(ValidationError, match="cpu_cores: not a fact of a gpu target"):
        HardwareTarget.model_validate({**gpu, "min_compute_capability": "9.0", "cpu_cores": 8})
    ok = HardwareTarget.model_validate({**gpu, "min_compute_capability": "9.0"})
    assert not ok.is_cpu and ok.device == "H100 (80 GB)"


def test_claims_on_a_cpu_node_are_per_node() -> None:
    env = Environment.model_validate(
        {"accelerator": "cpu", "gpu_count": 1, "nodes": 1, "engine": "vllm", "engine_version": "x"}
    )
    assert env.gpu is None and env.device.startswith("CPU")
    with pytest.raises(ValidationError, match="gpu_count = 1"):
        Environment.model_validate({**env.model_dump(), "gpu_count": 8})
    with pytest.raises(ValidationError, match="gpu is required"):
        Environment.model_validate({**env.model_dump(), "accelerator": None})


def test_the_gpu_example_is_still_a_gpu_package() -> None:
    import tomllib

    pkg = PackageDef.model_validate(tomllib.loads((EXAMPLE / "package.toml").read_text()))
    assert not pkg.hardware.is_cpu and pkg.hardware.accelerator is None


# --- build, preflight and launch of a CPU kit with the real CLI ---------------------------------


@pytest.fixture
def cpu_kit(golden: GoldenKit, signing_key: KeyFiles, tmp_path: Path) -> GoldenKit:
    return cpu_kit_with(tmp_path, golden, signing_key, cpu_hardware())


def cpu_kit_with(tmp: Path, golden: GoldenKit, key: KeyFiles, hardware: str) -> GoldenKit:
    """A CPU kit signed over the golden stand-in weights, through the real build and sign."""
    root = tmp / "cpu"
    root.mkdir()
    package = cpu_package(root, hardware)
    kit = root / "kit"
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", kit)
    assert proc.returncode == 0, proc.stderr
    claims = cpu_claims(root)
    proc = run_k3kit("sign", kit, "--key", key.private, "--claims", claims)
    assert proc.returncode == 0, proc.stderr
    return GoldenKit(kit, golden.lock, golden.snapshot, key)


def test_build_writes_the_cpu_target_into_the_kit(cpu_kit: GoldenKit) -> None:
    info = json.loads((cpu_kit.kit / "kit.json").read_text())
    assert info["hardware"]["accelerator"] == "cpu"
    assert info["hardware"]["cpu_features"] == ["fpu"]
    assert "gpu" not in info["hardware"]


def _preflight(kit: GoldenKit) -> tuple[int, dict]:  # type: ignore[type-arg]
    proc = run_k3kit(
        "preflight", kit.kit, "--trust", kit.key.public, "--profile", "interactive", "--json"
    )
    return proc.returncode, json.loads(proc.stdout)


def test_preflight_passes_a_cpu_kit_on_this_node(cpu_kit: GoldenKit) -> None:
    rc, report = _preflight(cpu_kit)
    checks = {c["name"]: c for c in report["checks"]}
    assert rc == 0 and report["ok"], report
    assert {"cpu.cores", "cpu.memory", "cpu.features"} <= set(checks)
    assert not any(name.startswith("gpu.") for name in checks)


def test_preflight_refuses_a_node_short_of_cores_memory_or_an_isa_feature(
    golden: GoldenKit, signing_key: KeyFiles, tmp_path: Path
) -> None:
    hardware = cpu_hardware(cores=65536, memory_gib=1048576, features='"fpu", "no_such_isa"')
    kit = cpu_kit_with(tmp_path, golden, signing_key, hardware)
    rc, report = _preflight(kit)
    checks = {c["name"]: c for c in report["checks"]}
    assert rc == 1 and not report["ok"]
    assert checks["cpu.cores"]["status"] == "fail"
    assert checks["cpu.memory"]["status"] == "fail"
    assert checks["cpu.features"]["actual"] == "missing no_such_isa"
    assert "SIGILL" in checks["cpu.features"]["why"]


def _proc(tmp: Path, flags: str, meminfo: str | None = "MemTotal:       24578764 kB\n") -> Path:
    proc = tmp / "proc"
    proc.mkdir()
    (proc / "cpuinfo").write_text(f"processor\t: 0\nmodel name\t: AVX2 box\nflags\t\t: {flags}\n")
    if meminfo is not None:
        (proc / "meminfo").write_text(meminfo)
    return proc


def test_an_avx2_node_fails_a_kit_built_for_avx512(
    golden: GoldenKit, signing_key: KeyFiles, tmp_path: Path
) -> None:
    kit = cpu_kit_with(tmp_path, golden, signing_key, cpu_hardware(features='"avx2", "avx512f"'))
    trusted = [load_public(kit.key.public)]
    report = run_preflight(
        kit.kit, "interactive", trusted=trusted, cpu=cpu_facts(_proc(tmp_path, AVX2_ONLY))
    )
    checks = {c.name: c for c in report.checks}
    assert not report.ok
    assert checks["cpu.features"].actual == "missing avx512f"
    assert checks["cpu.memory"].status == "pass" and checks["cpu.memory"].actual == "23.4 GiB"


def test_a_node_whose_memory_cannot_be_read_is_not_passed(
    golden: GoldenKit, signing_key: KeyFiles, tmp_path: Path
) -> None:
    kit = cpu_kit_with(tmp_path, golden, signing_key, cpu_hardware(features='"avx2"'))
    facts = cpu_facts(_proc(tmp_path, AVX2_ONLY, meminfo=None))
    report = run_preflight(kit.kit, "interactive", trusted=[load_public(kit.key.public)], cpu=facts)
    checks = {c.name: c for c in report.checks}
    assert not report.ok
    assert checks["cpu.memory"].status == "not-checked"
    assert "cannot read" in checks["cpu.memory"].why
    assert checks["cpu.features"].status == "pass"


def test_launch_runs_the_node_check_of_a_cpu_kit_and_starts_the_engine(
    cpu_kit: GoldenKit, weights: Path, tmp_path: Path
) -> None:
    """No --no-preflight: on this GPU-less machine a CPU kit's node check passes."""
    fake: FakeEngine = make_fake_engine(tmp_path / "engine")
    proc = run_k3kit(
        "launch",
        cpu_kit.kit,
        "--profile",
        "interactive",
        "--trust",
        cpu_kit.key.public,
        "--weights",
        weights,
        "--state-dir",
        tmp_path / "state",
        env=engine_env(fake),
    )
    assert proc.returncode == 0, proc.stderr
    assert "checking the node (preflight)" in proc.stderr
    assert fake.record()["argv"][1] == "serve"


def test_a_gpu_kit_made_on_purpose_is_unchanged(tmp_path: Path, signing_key: KeyFiles) -> None:
    """make_kit (the GPU example) builds and signs as before: the golden path is untouched."""
    from tests.conftest import make_snapshot

    made = make_kit(tmp_path, signing_key, make_snapshot(tmp_path / "hf"))
    info = json.loads((made.kit / "kit.json").read_text())
    assert "accelerator" not in info["hardware"] and info["hardware"]["gpu"] == "NVIDIA B300"


def test_build_refuses_a_profile_env_setting_what_k3kit_always_renders(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Found by `make test-engine`: a profile env with HF_HUB_OFFLINE rendered it twice into
    engine.env, and launch refuses a key set twice (ENGINE_ENV_MALFORMED): the build made a kit
    its own launch could not start. Now the build says so instead."""
    package = cpu_package(tmp_path, cpu_hardware())
    package.write_text(
        package.read_text().replace(
            "[profiles.batch]\n",
            '[profiles.interactive.env]\nHF_HUB_OFFLINE = "1"\n\n[profiles.batch]\n',
        )
    )
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", tmp_path / "out")
    assert proc.returncode == 3, proc.stderr
    assert "HF_HUB_OFFLINE is always set by k3kit (HF_HUB_OFFLINE=1); omit it" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["VLLM_\u00c9", "1ABC", "VLLM_\uff21", "_", "vllm_x", "A-B"])
def test_build_refuses_a_profile_env_name_that_launch_would_refuse(
    golden: GoldenKit, tmp_path: Path, name: str
) -> None:
    """The build's name rule was str.isalnum and isupper, which take VLLM_\u00c9, 1ABC and a
    full-width letter; launch refuses each in engine.env (ENGINE_ENV_MALFORMED), so the kit
    verified and started on no node. The build refuses them now, nothing written."""
    package = cpu_package(tmp_path, cpu_hardware())
    package.write_text(
        package.read_text().replace(
            "[profiles.batch]\n",
            f'[profiles.interactive.env]\n"{name}" = "1"\n\n[profiles.batch]\n',
        )
    )
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", tmp_path / "out")
    assert proc.returncode == 3, proc.stderr
    assert "must be UPPER_SNAKE_CASE" in proc.stderr
    assert not (tmp_path / "out").exists()
