"""Reading a node: NVML, ``nvidia-smi`` and the OS, each failure a stated reason.

This machine has no GPU, so the live NVML path is driven two ways: for real (it must say why it
cannot read, never report "no GPUs"), and with a recorded NVML answer in the shape of
``nvidia-ml-py``'s API (the names below are pynvml's), which the normaliser turns into the same
facts the recorded ``nvidia-smi -q -x`` fixture gives. ``nvidia-smi`` itself is a real executable
on PATH in these tests (a script that prints the SYNTHETIC fixture, fails, or hangs), run by the
real :func:`from_live_node` in a real subprocess.
"""

from __future__ import annotations

import os
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from k3kit.preflight import _facts
from tests.conftest import ROOT
from tests.cotenant import cotenant_python, needs_root, shared_folder

DATA = ROOT / "tests" / "data" / "preflight"
B300_MIB = 275040
# PATH holds only the stand-in nvidia-smi, so the tools its script runs are named absolutely.
CAT, SLEEP = shutil.which("cat"), shutil.which("sleep")


class RecordedNvml:
    """pynvml's calls, answering as a 2-GPU node would (bytes names, as older bindings return)."""

    NVML_NVLINK_MAX_LINKS = 18
    NVML_FEATURE_ENABLED = 1

    class NVMLError(Exception):
        pass

    def __init__(self, *, mig_supported: bool = True, links_up: int = 18) -> None:
        self.mig_supported, self.links_up = mig_supported, links_up
        self.calls: list[str] = []

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return types.SimpleNamespace(total=B300_MIB * 1024 * 1024, used=(h + 1) * 1024 * 1024)

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return (10, 3)

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:
        if not self.mig_supported:
            raise self.NVMLError("Not Supported")
        return (0, 0)

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        if link >= self.links_up:
            raise self.NVMLError("Invalid Argument")
        return 1

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"NVIDIA B300 SXM6 AC"

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"580.95.05"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 13000


def test_recorded_nvml_normalises_like_nvidia_smi() -> None:
    nvml = _facts._read_nvml(RecordedNvml(mig_supported=False, links_up=4))
    assert nvml.source == "nvml" and nvml.driver_version == "580.95.05"
    assert nvml.cuda_driver_api == 13000
    assert nvml.gpus is not None and len(nvml.gpus) == 2
    gpu = nvml.gpus[1]
    assert gpu.name == "NVIDIA B300 SXM6 AC" and gpu.compute_capability == "10.3"
    assert gpu.memory_total_bytes == B300_MIB * 1024 * 1024 and gpu.memory_used_bytes == 2 * 2**20
    # No MIG support means not in MIG mode; links are counted until NVML says there are no more.
    assert gpu.mig_enabled is False and gpu.nvlink_active == 4
    smi = _facts.from_nvidia_smi_xml((DATA / "b300x8.synthetic.xml").read_bytes(), source="xml")
    assert smi.gpus is not None
    same = ("name", "memory_total_bytes", "mig_enabled")
    assert {k: getattr(gpu, k) for k in same} == {k: getattr(smi.gpus[1], k) for k in same}
    assert (nvml.driver_version, nvml.cuda_driver_api) == (smi.driver_version, smi.cuda_driver_api)


def _with_pynvml(monkeypatch: pytest.MonkeyPatch, module: Any) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", module)


def test_nvml_answer_is_read_and_shut_down(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = RecordedNvml()
    _with_pynvml(monkeypatch, recorded)
    facts = _facts.from_nvml()
    assert facts.gpus is not None and [g.number for g in facts.gpus] == [0, 1]
    assert facts.gpus[0].nvlink_active == 18 and facts.gpus[0].mig_enabled is False
    assert recorded.calls == ["init", "shutdown"]


class _BrokenInit(RecordedNvml):
    def nvmlInit(self) -> None:
        raise self.NVMLError("Driver Not Loaded")


class _BrokenQuery(RecordedNvml):
    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        raise self.NVMLError("GPU is lost")


@pytest.mark.parametrize(
    ("module", "reason", "shut_down"),
    [
        (None, "nvidia-ml-py is not installed", False),
        (_BrokenInit(), "NVML unavailable: Driver Not Loaded", False),
        (_BrokenQuery(), "NVML query failed: GPU is lost", True),
    ],
    ids=["no library", "no driver", "a GPU fell off the bus"],
)
def test_nvml_failures_are_reasons_never_an_empty_list(
    monkeypatch: pytest.MonkeyPatch, module: Any, reason: str, shut_down: bool
) -> None:
    _with_pynvml(monkeypatch, module)  # None in sys.modules makes the import fail
    facts = _facts.from_nvml()
    assert facts.gpus is None and facts.why_unreadable == reason
    if module is not None:
        assert ("shutdown" in module.calls) is shut_down


def test_live_nvml_on_this_machine_says_why_or_reads_gpus() -> None:
    facts = _facts.from_nvml()
    if facts.gpus is None:
        assert facts.why_unreadable  # a reason, not "no GPUs, all fine"
    else:
        assert facts.gpus and all(g.name for g in facts.gpus)


def _fake_smi(tmp_path: Path, script: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    tool = folder / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\n{script}\n")
    tool.chmod(0o755)
    return folder


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_pynvml(monkeypatch, _BrokenInit())


@pytest.mark.usefixtures("no_nvml")
def test_nvidia_smi_is_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xml = DATA / "b300x8.synthetic.xml"
    monkeypatch.setenv(
        "PATH", str(_fake_smi(tmp_path, f'[ "$*" = "-q -x" ] && exec {CAT} "{xml}"'))
    )
    facts = _facts.from_live_node()
    assert facts.source == "nvidia-smi -q -x"
    assert facts.gpus is not None and len(facts.gpus) == 8
    assert facts.driver_version == "580.95.05"


@pytest.mark.usefixtures("no_nvml")
@pytest.mark.parametrize(
    ("script", "timeout", "reason"),
    [
        (
            "echo 'NVIDIA-SMI has failed because it could not reach the driver' >&2; exit 9",
            60.0,
            "Driver Not Loaded; nvidia-smi exited 9: NVIDIA-SMI has failed because it could not",
        ),
        ("exit 3", 60.0, "nvidia-smi exited 3: no message"),
        (f"exec {SLEEP} 30", 0.5, "nvidia-smi failed: Command"),
        ("echo '<html/>'", 60.0, "root element is 'html'"),
    ],
    ids=[
        "exits non-zero with its reason",
        "exits non-zero silently",
        "hangs",
        "prints something else",
    ],
)
def test_nvidia_smi_failures_are_reasons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, timeout: float, reason: str
) -> None:
    monkeypatch.setenv("PATH", str(_fake_smi(tmp_path, script)))
    monkeypatch.setattr(_facts, "NVIDIA_SMI_TIMEOUT_S", timeout)
    facts = _facts.from_live_node()
    assert facts.gpus is None and facts.why_unreadable is not None
    assert reason in facts.why_unreadable


@pytest.mark.usefixtures("no_nvml")
def test_neither_source_gives_both_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    facts = _facts.from_live_node()
    assert facts.source == "none" and facts.gpus is None
    assert facts.why_unreadable == (
        "NVML unavailable: Driver Not Loaded; nvidia-smi is not on PATH"
    )


def test_os_facts_of_this_machine(tmp_path: Path) -> None:
    facts = _facts.os_facts(tmp_path)
    assert facts.disk_path == str(tmp_path) and (facts.disk_free_bytes or 0) > 0
    assert facts.memlock_bytes is not None and facts.memlock_bytes >= -1
    if os.path.isdir(_facts.SHM):
        assert facts.shm_bytes is not None and "shm" not in facts.unreadable


def test_os_facts_of_an_unreadable_disk_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_facts, "SHM", str(tmp_path / "no-shm"))
    facts = _facts.os_facts(tmp_path / "gone")
    assert facts.disk_free_bytes is None and facts.shm_bytes is None
    assert set(facts.unreadable) == {"disk", "shm"}
    assert "No such file" in facts.unreadable["disk"]
    assert _facts.os_facts(None).disk_path is None


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            {"shm_bytes": 1, "memlock_bytes": -1, "disk_free_bytes": 2, "disk_path": "/w"},
            (1, -1, 2, "/w"),
        ),
        (
            {
                "shm_bytes": True,
                "memlock_bytes": "unlimited",
                "disk_free_bytes": 2.5,
                "disk_path": 7,
            },
            (None, None, None, None),
        ),
        ({}, (None, None, None, None)),
    ],
    ids=["well-formed", "wrong types are unknown, not zero", "empty"],
)
def test_recorded_os_facts_take_only_integers(
    doc: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    facts = _facts.os_facts_from_json(doc)
    assert (
        facts.shm_bytes,
        facts.memlock_bytes,
        facts.disk_free_bytes,
        facts.disk_path,
    ) == expected


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b" " * (_facts.MAX_XML_BYTES + 1), "larger than"),
        (b'<!DOCTYPE x [<!ENTITY a "a">]><nvidia_smi_log/>', "entity declarations"),
        (b"<nvidia_smi_log>", "not nvidia-smi XML"),
    ],
    ids=["oversized", "entity declaration", "truncated"],
)
def test_nvidia_smi_xml_refusals(data: bytes, reason: str) -> None:
    facts = _facts.from_nvidia_smi_xml(data, source="x")
    assert facts.gpus is None and reason in (facts.why_unreadable or "")


def test_na_values_and_nvlinks_are_read_as_unknown_or_counted() -> None:
    xml = b"""<nvidia_smi_log><driver_version>N/A</driver_version><cuda_version>12.9</cuda_version>
    <gpu><product_name>NVIDIA H200</product_name><compute_cap>9.0</compute_cap>
    <fb_memory_usage><total>[N/A]</total><used>5 MiB</used></fb_memory_usage>
    <mig_mode><current_mig>Enabled</current_mig></mig_mode>
    <nvlink><link><state>Active</state></link><link><state>Inactive</state></link></nvlink>
    </gpu></nvidia_smi_log>"""
    facts = _facts.from_nvidia_smi_xml(xml, source="x")
    assert facts.driver_version is None and facts.cuda_driver_api == 12090
    assert facts.gpus is not None
    (gpu,) = facts.gpus
    assert gpu.memory_total_bytes is None and gpu.memory_used_bytes == 5 * 2**20
    assert gpu.mig_enabled is True and gpu.nvlink_active == 1 and gpu.compute_capability == "9.0"


def _requirements(**overrides: Any) -> Any:
    from k3kit.preflight._checks import Requirements

    base: dict[str, Any] = dict(
        gpus_per_node=2,
        gpu_name_pattern="B300",
        gpu_memory_bytes=270 * 2**30,
        min_compute_capability="10.0",
        min_cuda_driver_api=12080,
        min_shm_bytes=2**30,
        weight_bytes=2**30,
        tp=2,
        pp=1,
        memory_fraction=None,
        context_length=None,
        concurrency=None,
        kv_dtype=None,
        layers=None,
        kv_heads=None,
        head_dim=None,
        model_dtype=None,
    )
    base.update(overrides)
    return Requirements(**base)


@pytest.mark.parametrize(
    ("recorded", "overrides", "name", "status", "actual"),
    [
        (RecordedNvml(), {}, "gpu.compute_capability", "pass", "10.3"),
        (
            RecordedNvml(),
            {"min_compute_capability": "10.10"},
            "gpu.compute_capability",
            "fail",
            "10.3",
        ),
        (RecordedNvml(), {}, "gpu.nvlink", "pass", "ok"),
        (RecordedNvml(links_up=0), {}, "gpu.nvlink", "fail", "none on GPU [0, 1]"),
        (RecordedNvml(links_up=0), {"gpus_per_node": 1}, "gpu.nvlink", "pass", "-"),
        (
            RecordedNvml(),
            {"min_cuda_driver_api": 13010},
            "driver.cuda",
            "fail",
            "13000 (driver 580.95.05)",
        ),
        (RecordedNvml(), {"min_cuda_driver_api": None}, "driver.cuda", "pass", "13000"),
    ],
    ids=[
        "capability met",
        "10.3 is below 10.10 (not a string compare)",
        "links up",
        "no active link",
        "one GPU needs no NVLink",
        "driver too old",
        "no driver minimum",
    ],
)
def test_nvml_facts_are_judged(
    recorded: RecordedNvml,
    overrides: dict[str, Any],
    name: str,
    status: str,
    actual: str,
) -> None:
    """What only NVML reports (compute capability, NVLink state) is judged, not just read."""
    from k3kit.preflight._checks import gpu_checks

    checks = {
        c.name: c for c in gpu_checks(_requirements(**overrides), _facts._read_nvml(recorded))
    }
    assert (checks[name].status, checks[name].actual) == (status, actual), checks[name]
    assert checks["gpu.count"].status == (
        "pass" if overrides.get("gpus_per_node", 2) == 2 else "fail"
    )


@pytest.mark.parametrize("reported", ["12..0", "9x.0", "10.3\n", "1\u00b2.0", "10.", ""])
def test_a_compute_capability_that_is_not_dotted_numbers_is_not_judged(reported: str) -> None:
    """Read whole or not at all: parts that were not numbers were skipped, so "12..0" read as
    12.0 and passed a 10.0 minimum. Now the check is NOT-CHECKED and required: the node is not
    shown to run the profile (docs/preflight.md: could not look is not a pass)."""
    from k3kit.preflight._checks import gpu_checks

    facts = _facts._read_nvml(RecordedNvml())
    gpus = [g._replace(compute_capability=reported) for g in facts.gpus or []]
    checks = {c.name: c for c in gpu_checks(_requirements(), facts._replace(gpus=gpus))}
    check = checks["gpu.compute_capability"]
    assert (check.status, check.required) == ("not-checked", True), check
    assert repr(reported) in check.why


@needs_root
@pytest.mark.usefixtures("no_nvml")
def test_an_nvidia_smi_a_cotenant_planted_on_path_is_never_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real second user puts an `nvidia-smi` describing 8 B300s in a shared folder on PATH."""
    with shared_folder() as shared:
        marker = shared / "ran"
        xml = DATA / "b300x8.synthetic.xml"
        plant = (
            "import os, sys; p = os.path.join(sys.argv[1], 'nvidia-smi'); "
            "body = '#!/bin/sh\\ntouch ' + sys.argv[2] + '\\ncat ' + sys.argv[3] + '\\n'; "
            "open(p, 'w').write(body); "
            "os.chmod(p, 0o755)"
        )
        cotenant_python(plant, str(shared), str(marker), str(xml))
        monkeypatch.setenv("PATH", str(shared))
        facts = _facts.from_live_node()
        assert facts.gpus is None and facts.why_unreadable is not None
        assert "could have been placed by another user" in facts.why_unreadable
        assert not marker.exists(), "the planted nvidia-smi ran"
