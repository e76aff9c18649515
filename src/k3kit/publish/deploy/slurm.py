"""``slurm.sbatch``: a Slurm batch script, ``sbatch`` directives for the topology's nodes and GPUs
per node, one ``k3kit launch`` task per node (node rank from Slurm, leader = the job's first
node). Opt-in (``[deploy] targets``): kits that do not choose it are unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k3kit.publish.deploy._base import Files, deploy_target


# One batch job is one engine group: the two pools of a disaggregated package would be two jobs
# that must learn each other's addresses, which this script cannot wire (refused at build).
@deploy_target(
    "slurm",
    "`slurm.sbatch`, a Slurm batch script (`sbatch`)",
    default=False,
    disaggregated=False,
)
def files(ctx: Mapping[str, Any]) -> Files:
    return {"slurm.sbatch": ("profile/slurm.sbatch.j2", 0o755)}
