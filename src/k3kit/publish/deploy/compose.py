"""``compose.yaml``: a one-shot ``k3kit verify`` service the server waits on (Docker Compose)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k3kit.publish.deploy._base import Files, deploy_target


@deploy_target("compose", "`compose.yaml`, a one-shot `verify` service the server waits on")
def files(ctx: Mapping[str, Any]) -> Files:
    return {"compose.yaml": ("profile/compose.yaml.j2", 0o644)}
