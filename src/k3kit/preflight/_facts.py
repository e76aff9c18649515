"""What a node is, read from one source into one normalised shape.

Sources: live NVML (``nvidia-ml-py``), ``nvidia-smi -q -x`` (live or a recorded file), and the OS
(``/dev/shm``, memlock limit, free disk). Reading and judging are separate so every judgement is
a pure function testable on recorded fixtures. A source that cannot be read yields ``None`` with
the reason, never an empty list that would look like "no GPUs, all fine".
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from k3kit._fs import program_on_path
from k3kit._immutable import EMPTY_MAPPING, NamedTuple

if TYPE_CHECKING:  # the XML parser (~13 ms of CPU to import) is imported where XML is parsed
    import xml.etree.ElementTree as ET

MAX_XML_BYTES = 8 * 1024 * 1024
SHM = "/dev/shm"  # noqa: S108 - the shared-memory mount NCCL uses, read with statvfs only
NVIDIA_SMI_TIMEOUT_S = 60.0
_MIB = 1024 * 1024


class GpuFacts(NamedTuple):
    #: the GPU's place in the source's list (0, 1, ...); not ``index``, which is tuple's method
    number: int
    name: str
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    compute_capability: str | None
    mig_enabled: bool | None
    nvlink_active: int | None


class NodeFacts(NamedTuple):
    """GPUs and driver as one source reported them; ``gpus is None`` means unreadable."""

    source: str
    gpus: list[GpuFacts] | None
    why_unreadable: str | None = None
    driver_version: str | None = None
    cuda_driver_api: int | None = None
    notes: tuple[str, ...] = ()


class OsFacts(NamedTuple):
    shm_bytes: int | None
    memlock_bytes: int | None  # -1 = unlimited, None = unknown
    disk_free_bytes: int | None
    disk_path: str | None
    # read-only empty default: a NamedTuple's default is shared by every instance
    unreadable: Mapping[str, str] = EMPTY_MAPPING


def _text(node: ET.Element | None, path: str) -> str | None:
    found = node.find(path) if node is not None else None
    value = (found.text or "").strip() if found is not None else ""
    return value if value and value not in ("N/A", "[N/A]") else None


def _mib(value: str | None) -> int | None:
    match = re.fullmatch(r"([0-9]+)\s*MiB", value or "")
    return int(match.group(1)) * _MIB if match else None


def _cuda_api(version: str | None) -> int | None:
    """``13.0`` -> 13000, NVML's encoding of the CUDA driver API version."""
    match = re.fullmatch(r"([0-9]+)\.([0-9]+)", version or "")
    return int(match.group(1)) * 1000 + int(match.group(2)) * 10 if match else None


def from_nvidia_smi_xml(data: bytes, *, source: str) -> NodeFacts:
    """Parse ``nvidia-smi -q -x`` output (nvsmi DTD v12 field names)."""
    if len(data) > MAX_XML_BYTES:
        return NodeFacts(source, None, f"{source}: larger than {MAX_XML_BYTES} bytes")
    if b"<!ENTITY" in data:
        return NodeFacts(source, None, f"{source}: entity declarations are not accepted")
    import xml.etree.ElementTree as ET  # only a node check that read nvidia-smi parses XML

    try:
        root = ET.fromstring(data)  # noqa: S314 - size-capped, no entities, local tool output
    except ET.ParseError as exc:
        return NodeFacts(source, None, f"{source}: not nvidia-smi XML ({exc})")
    if root.tag != "nvidia_smi_log":
        return NodeFacts(source, None, f"{source}: root element is {root.tag!r}")
    gpus = []
    for i, gpu in enumerate(root.findall("gpu")):
        links = gpu.findall("nvlink/link") or gpu.findall("nvlinks/nvlink")
        active = sum(1 for link in links if (_text(link, "state") or "").lower() == "active")
        mig = _text(gpu, "mig_mode/current_mig")
        gpus.append(
            GpuFacts(
                number=i,
                name=_text(gpu, "product_name") or "",
                memory_total_bytes=_mib(_text(gpu, "fb_memory_usage/total")),
                memory_used_bytes=_mib(_text(gpu, "fb_memory_usage/used")),
                compute_capability=_text(gpu, "compute_cap"),
                mig_enabled=None if mig is None else mig.lower() == "enabled",
                nvlink_active=active if links else None,
            )
        )
    return NodeFacts(
        source,
        gpus,
        driver_version=_text(root, "driver_version"),
        cuda_driver_api=_cuda_api(_text(root, "cuda_version")),
    )


def from_nvml() -> NodeFacts:
    """Live NVML; any failure (no library, no driver, no GPU) is a reason, not an empty list."""
    try:
        import pynvml
    except ImportError:
        return NodeFacts("nvml", None, "nvidia-ml-py is not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return NodeFacts("nvml", None, f"NVML unavailable: {exc}")
    try:
        return _read_nvml(pynvml)
    except pynvml.NVMLError as exc:
        return NodeFacts("nvml", None, f"NVML query failed: {exc}")
    finally:
        pynvml.nvmlShutdown()


def _read_nvml(nvml: Any) -> NodeFacts:
    gpus = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
        try:
            mig = bool(nvml.nvmlDeviceGetMigMode(h)[0])
        except nvml.NVMLError:
            mig = False  # NVML_ERROR_NOT_SUPPORTED: a GPU without MIG cannot be in MIG mode
        active = 0
        for link in range(nvml.NVML_NVLINK_MAX_LINKS):
            try:
                active += int(nvml.nvmlDeviceGetNvLinkState(h, link) == nvml.NVML_FEATURE_ENABLED)
            except nvml.NVMLError:
                break
        name = nvml.nvmlDeviceGetName(h)
        gpus.append(
            GpuFacts(
                i,
                name.decode() if isinstance(name, bytes) else str(name),
                int(mem.total),
                int(mem.used),
                f"{major}.{minor}",
                mig,
                active,
            )
        )
    driver = nvml.nvmlSystemGetDriverVersion()
    return NodeFacts(
        "nvml",
        gpus,
        driver_version=driver.decode() if isinstance(driver, bytes) else str(driver),
        cuda_driver_api=int(nvml.nvmlSystemGetCudaDriverVersion_v2()),
    )


def from_live_node() -> NodeFacts:
    """NVML first; then ``nvidia-smi -q -x``; else unreadable with both reasons."""
    nvml = from_nvml()
    if nvml.gpus is not None:
        return nvml
    found = program_on_path("nvidia-smi")
    if found is None:
        return NodeFacts("none", None, f"{nvml.why_unreadable}; nvidia-smi is not on PATH")
    smi, unsafe = str(found[0]), found[1]
    if unsafe is not None:
        # Another user's program on PATH is never run: it would run as this user and could
        # describe any node it likes.
        return NodeFacts(
            "none",
            None,
            f"{nvml.why_unreadable}; {smi} could have been placed by another user "
            f"({unsafe} is not owned by root or you, or others can write it)",
        )
    try:
        proc = subprocess.run(
            [smi, "-q", "-x"], capture_output=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return NodeFacts("nvidia-smi", None, f"{nvml.why_unreadable}; nvidia-smi failed: {exc}")
    if proc.returncode != 0:
        # Its own first line says why (NVIDIA-SMI has failed because it couldn't communicate
        # with the NVIDIA driver...), and NVML's reason is kept beside it: both sources failed.
        said = (
            proc.stderr.decode("utf-8", "replace").strip()
            or proc.stdout.decode("utf-8", "replace").strip()
        )
        first = said.splitlines()[0][:200] if said else "no message"
        return NodeFacts(
            "nvidia-smi",
            None,
            f"{nvml.why_unreadable}; nvidia-smi exited {proc.returncode}: {first}",
        )
    return from_nvidia_smi_xml(proc.stdout, source="nvidia-smi -q -x")


def os_facts(disk_path: Path | None) -> OsFacts:
    unreadable: dict[str, str] = {}
    shm: int | None = None
    try:
        st = os.statvfs(SHM)
        shm = st.f_frsize * st.f_blocks
    except OSError as exc:
        unreadable["shm"] = f"{SHM}: {exc.strerror or exc}"
    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    memlock = -1 if soft == resource.RLIM_INFINITY else int(soft)
    free: int | None = None
    if disk_path is not None:
        try:
            free = shutil.disk_usage(disk_path).free
        except OSError as exc:
            unreadable["disk"] = f"{disk_path}: {exc.strerror or exc}"
    return OsFacts(shm, memlock, free, str(disk_path) if disk_path else None, unreadable)


def os_facts_from_json(doc: dict[str, Any]) -> OsFacts:
    """A recorded OS reading (tests, or a node captured elsewhere)."""

    def num(key: str) -> int | None:
        value = doc.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    path = doc.get("disk_path")
    return OsFacts(
        num("shm_bytes"),
        num("memlock_bytes"),
        num("disk_free_bytes"),
        path if isinstance(path, str) else None,
    )
