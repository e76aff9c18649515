"""Judging a node against a profile: pure functions from facts and requirements to checks.

Every check is PASS, FAIL (expected vs actual) or NOT-CHECKED (with why). A check whose source is
missing is never PASS. A *required* check that is not checked fails the verdict too: "could not
look" is not "looked and it is fine".
"""

from __future__ import annotations

import re
from typing import Any

from k3kit._immutable import NamedTuple
from k3kit._values import compile_pattern, pattern_matches
from k3kit.errors import InputError
from k3kit.formats.vocab import PreflightStatus as Status
from k3kit.preflight._facts import GpuFacts, NodeFacts, OsFacts

GIB = 1024**3
#: Share of the advertised memory a GPU must report (B300: 288 GB advertised, 275040 MiB seen).
MEMORY_TOLERANCE = 0.95
KV_BYTES = {
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "nvfp4": 0.5,
    "float16": 2.0,
    "bfloat16": 2.0,
    "float32": 4.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "half": 2.0,
    "float": 4.0,
}


class Check(NamedTuple):
    name: str
    status: Status
    required: bool
    expected: str = ""
    actual: str = ""
    why: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "required": self.required,
            "expected": self.expected,
            "actual": self.actual,
            "why": self.why,
        }


class Requirements(NamedTuple):
    gpus_per_node: int
    gpu_name_pattern: str
    gpu_memory_bytes: int
    min_compute_capability: str
    min_cuda_driver_api: int | None
    min_shm_bytes: int
    weight_bytes: int
    tp: int
    pp: int
    memory_fraction: float | None
    context_length: int | None
    concurrency: int | None
    kv_dtype: str | None
    layers: int | None
    kv_heads: int | None
    head_dim: int | None
    model_dtype: str | None

    @property
    def gpu_pattern(self) -> re.Pattern[str]:
        """The GPU name pattern through the one bounded pattern helper; a kit.json whose
        pattern it refuses is an input error (exit 3), never a crash or a hang."""
        try:
            return compile_pattern(self.gpu_name_pattern)
        except ValueError as exc:
            raise InputError(
                f"kit.json hardware.gpu_name_pattern: {exc}",
                code="PATTERN_REFUSED",
                hint="a GPU name pattern is a short regex such as 'H200|H100'",
            ) from None


def _missing(name: str, why: str, required: bool = True) -> Check:
    return Check(name, Status.NOT_CHECKED, required, why=why)


def gpu_checks(req: Requirements, node: NodeFacts) -> list[Check]:
    """One check per GPU property, in the order the report prints them; without a GPU source
    every one is NOT-CHECKED (compute capability and NVLink advisory, the rest required)."""
    names = [
        "gpu.count",
        "gpu.model",
        "gpu.memory",
        "gpu.mig",
        "driver.cuda",
        "gpu.compute_capability",
        "gpu.nvlink",
    ]
    if node.gpus is None:
        why = node.why_unreadable or "no GPU source"
        return [_missing(n, why, n not in ("gpu.compute_capability", "gpu.nvlink")) for n in names]
    return [
        _count_check(req, node),
        _model_check(req, node.gpus),
        _memory_check(req, node.gpus),
        _mig_check(node.gpus),
        _cuda_check(req, node),
        _capability_check(req, node),
        _nvlink_check(req, node),
    ]


def _count_check(req: Requirements, node: NodeFacts) -> Check:
    count = len(node.gpus or [])
    return Check(
        "gpu.count",
        Status.of(count == req.gpus_per_node),
        True,
        f"{req.gpus_per_node} GPU(s)",
        f"{count} GPU(s) ({node.source})",
    )


def _model_check(req: Requirements, gpus: list[GpuFacts]) -> Check:
    wrong = sorted({g.name for g in gpus if not pattern_matches(req.gpu_pattern, g.name)})
    return Check(
        "gpu.model",
        Status.of(bool(gpus) and not wrong),
        True,
        f"name matching /{req.gpu_name_pattern}/",
        ", ".join(sorted({g.name for g in gpus})) or "none",
    )


def _memory_check(req: Requirements, gpus: list[GpuFacts]) -> Check:
    totals = [g.memory_total_bytes for g in gpus]
    floor = int(req.gpu_memory_bytes * MEMORY_TOLERANCE)
    if not gpus or any(t is None for t in totals):
        return _missing("gpu.memory", "the source lists no memory total for a GPU")
    low = min(t for t in totals if t is not None)
    return Check(
        "gpu.memory",
        Status.of(low >= floor),
        True,
        f">= {floor / GIB:.1f} GiB per GPU",
        f"{low / GIB:.1f} GiB (smallest)",
    )


def _mig_check(gpus: list[GpuFacts]) -> Check:
    if any(g.mig_enabled is None for g in gpus) or not gpus:
        return _missing("gpu.mig", "the source does not report MIG mode")
    on = [g.number for g in gpus if g.mig_enabled]
    return Check(
        "gpu.mig",
        Status.of(not on),
        True,
        "MIG disabled",
        f"enabled on GPU {on}" if on else "disabled",
    )


def _capability_check(req: Requirements, node: NodeFacts) -> Check:
    gpus = node.gpus or []
    caps = [g.compute_capability for g in gpus]
    if not gpus or any(c is None for c in caps):
        why = f"{node.source} does not report compute capability (NVML does)"
        return _missing("gpu.compute_capability", why, False)
    read = [(_version(c or ""), c) for c in caps]
    unreadable = [c for parsed, c in read if parsed is None]
    if unreadable:
        # read whole or not at all: "12..0" or "9x.0" read part by part was another number
        why = f"{node.source} reports compute capability {unreadable[0]!r}, not dotted numbers"
        return _missing("gpu.compute_capability", why)
    lowest, low_cc = min((parsed or (), c) for parsed, c in read)
    # a kit's minimum that does not read (its model's pattern refuses one) is met by no GPU
    ok = lowest >= (_version(req.min_compute_capability) or (1 << 30,))
    return Check(
        "gpu.compute_capability",
        Status.of(ok),
        True,
        f">= {req.min_compute_capability}",
        str(low_cc),
    )


def _nvlink_check(req: Requirements, node: NodeFacts) -> Check:
    gpus = node.gpus or []
    if req.gpus_per_node == 1:
        return Check("gpu.nvlink", Status.PASS, False, "not needed for 1 GPU", "-")
    if any(g.nvlink_active is None for g in gpus):
        why = f"{node.source} does not report NVLink state; check `nvidia-smi nvlink -s`"
        return _missing("gpu.nvlink", why, False)
    dead = [g.number for g in gpus if not g.nvlink_active]
    return Check(
        "gpu.nvlink",
        Status.of(not dead),
        False,
        "active NVLinks on every GPU",
        f"none on GPU {dead}" if dead else "ok",
    )


def _version(text: str) -> tuple[int, ...] | None:
    """Dotted ASCII numbers, every part of them ("²" passed ``isdigit()`` and crashed ``int()``;
    a part that is not a number was once skipped, so "12..0" read as 12.0); None otherwise."""
    parts = text.split(".")
    if not all(p.isascii() and p.isdigit() and len(p) <= 9 for p in parts):
        return None
    return tuple(int(p) for p in parts)


def _cuda_check(req: Requirements, node: NodeFacts) -> Check:
    if req.min_cuda_driver_api is None:
        return Check("driver.cuda", Status.PASS, False, "no minimum set", str(node.cuda_driver_api))
    if node.cuda_driver_api is None:
        return _missing("driver.cuda", f"{node.source} does not report the CUDA driver API")
    ok = node.cuda_driver_api >= req.min_cuda_driver_api
    return Check(
        "driver.cuda",
        Status.of(ok),
        True,
        f"CUDA driver API >= {req.min_cuda_driver_api}",
        f"{node.cuda_driver_api} (driver {node.driver_version})",
    )


def os_checks(req: Requirements, osf: OsFacts) -> list[Check]:
    out = []
    if osf.shm_bytes is None:
        out.append(_missing("os.shm", osf.unreadable.get("shm", "not read")))
    else:
        out.append(
            Check(
                "os.shm",
                Status.of(osf.shm_bytes >= req.min_shm_bytes),
                True,
                f">= {req.min_shm_bytes / GIB:.0f} GiB",
                f"{osf.shm_bytes / GIB:.1f} GiB",
            )
        )
    if osf.memlock_bytes is None:
        out.append(_missing("os.memlock", "not read", False))
    else:
        unlimited = osf.memlock_bytes < 0
        out.append(
            Check(
                "os.memlock",
                Status.of(unlimited),
                False,
                "unlimited (RDMA)",
                "unlimited" if unlimited else f"{osf.memlock_bytes} bytes",
            )
        )
    if osf.disk_free_bytes is None:
        why = osf.unreadable.get("disk", "no weights folder given (--weights)")
        out.append(_missing("os.disk", why, False))
    else:
        # The weights are in place already when verified; what must fit is caches and JIT.
        need = 20 * GIB
        out.append(
            Check(
                "os.disk",
                Status.of(osf.disk_free_bytes >= need),
                False,
                f">= {need // GIB} GiB free at {osf.disk_path}",
                f"{osf.disk_free_bytes / GIB:.1f} GiB",
            )
        )
    return out
