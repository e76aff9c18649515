"""A systemd unit: verify and preflight in ``ExecStartPre``; a template unit (one instance per
node rank) for a multi-node topology, shipped as ``NAME.template.service`` (kit paths allow no
``@``; ``k3kit render-site`` writes it back as ``NAME@.service``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k3kit.publish.deploy._base import Files, deploy_target


@deploy_target("systemd", "a systemd unit under `systemd/` (verify and preflight first)")
def files(ctx: Mapping[str, Any]) -> Files:
    return {f"systemd/{ctx['unit_kit_file']}": ("profile/systemd.service.j2", 0o644)}
