"""Write the SYNTHETIC preflight fixtures in this folder (run: python make_fixtures.py).

No GPU was available when these were made. They follow the element names of `nvidia-smi -q -x`
(nvsmi_device_v12.dtd: nvidia_smi_log, driver_version, cuda_version, attached_gpus, gpu/@id,
product_name, product_architecture, uuid, persistence_mode, mig_mode/current_mig,
fb_memory_usage/total|used|free) with values from public nvidia-smi output quoted in
shared/notes/deploy.md §11 (B300: "NVIDIA B300 SXM6 AC, 275040 MiB, 580.95.05"; H200:
"NVIDIA H200, 143771 MiB"). Serial numbers and UUIDs are made up. See PROVENANCE.md.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def nvsmi(
    name: str,
    count: int,
    mib: int,
    driver: str,
    cuda: str,
    *,
    mig: str = "Disabled",
    arch: str = "Blackwell",
) -> str:
    gpus = []
    for i in range(count):
        gpus.append(f"""\t<gpu id="00000000:{0x18 + 0x10 * i:02X}:00.0">
\t\t<product_name>{name}</product_name>
\t\t<product_brand>NVIDIA</product_brand>
\t\t<product_architecture>{arch}</product_architecture>
\t\t<persistence_mode>Enabled</persistence_mode>
\t\t<mig_mode>
\t\t\t<current_mig>{mig}</current_mig>
\t\t\t<pending_mig>{mig}</pending_mig>
\t\t</mig_mode>
\t\t<uuid>GPU-00000000-0000-4000-8000-{i:012d}</uuid>
\t\t<minor_number>{i}</minor_number>
\t\t<fb_memory_usage>
\t\t\t<total>{mib} MiB</total>
\t\t\t<reserved>0 MiB</reserved>
\t\t\t<used>0 MiB</used>
\t\t\t<free>{mib} MiB</free>
\t\t</fb_memory_usage>
\t\t<compute_mode>Default</compute_mode>
\t</gpu>
""")
    return f"""<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
\t<timestamp>Sun Nov  1 00:00:00 2026</timestamp>
\t<driver_version>{driver}</driver_version>
\t<cuda_version>{cuda}</cuda_version>
\t<attached_gpus>{count}</attached_gpus>
{"".join(gpus)}</nvidia_smi_log>
"""


FIXTURES = {
    "b300x8.synthetic.xml": nvsmi("NVIDIA B300 SXM6 AC", 8, 275040, "580.95.05", "13.0"),
    "h200x1.synthetic.xml": nvsmi("NVIDIA H200", 1, 143771, "580.95.05", "13.0", arch="Hopper"),
    "b300x8-mig.synthetic.xml": nvsmi(
        "NVIDIA B300 SXM6 AC", 8, 275040, "580.95.05", "13.0", mig="Enabled"
    ),
    "b300x8-cuda12.synthetic.xml": nvsmi("NVIDIA B300 SXM6 AC", 8, 275040, "570.86.10", "12.8"),
}
OS = {
    "node-os.synthetic.json": {
        "shm_bytes": 64 * 1024**3,
        "memlock_bytes": -1,
        "disk_free_bytes": 4 * 10**12,
        "disk_path": "/srv/models",
    },
    "node-os-small-shm.synthetic.json": {
        "shm_bytes": 64 * 1024**2,
        "memlock_bytes": 65536,
        "disk_free_bytes": 4 * 10**12,
        "disk_path": "/srv",
    },
}

if __name__ == "__main__":
    for name, text in FIXTURES.items():
        (HERE / name).write_text(text)
    for name, doc in OS.items():
        (HERE / name).write_text(json.dumps(doc, indent=2) + "\n")
