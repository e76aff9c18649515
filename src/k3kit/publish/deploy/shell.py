"""``run.sh``: a thin wrapper around ``k3kit launch`` for a shell on the node itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k3kit.publish.deploy._base import Files, deploy_target


@deploy_target("shell", "`run.sh`, a thin wrapper around `k3kit launch`")
def files(ctx: Mapping[str, Any]) -> Files:
    return {"run.sh": ("profile/run.sh.j2", 0o755)}
