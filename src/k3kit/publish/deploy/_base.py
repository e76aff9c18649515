"""What a deploy target is, and the registry every target module joins with ``@deploy_target``.

A target turns one profile × topology into files a site's tooling runs (a shell wrapper, a
compose file, a systemd unit, Kubernetes objects, a Slurm batch script). It only names its files
and templates; the rendering context (names, ports, the engine's settings) is built once by
:func:`k3kit.publish.targets.render_target`, so every target sees the same signed values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from k3kit._registry import Registry

#: A profile folder's files of one target: kit-relative path -> (template, file mode).
Files = dict[str, tuple[str, int]]
FilesFn = Callable[[Mapping[str, Any]], Files]


@dataclass(frozen=True)
class DeployTarget:
    """One kind of deploy file set. ``default`` targets are rendered for a package that does
    not choose (``[deploy] targets`` absent), so kits built before the choice existed are
    unchanged; a new target is opt-in."""

    name: str
    about: str
    files: FilesFn
    default: bool
    #: Whether the target can run a prefill/decode-disaggregated package: one unit per pool,
    #: each started on its own nodes. A target that cannot is refused at build
    #: (``DEPLOY_TARGET_NO_PD``), never rendered as if the pools were one server.
    disaggregated: bool = True


#: Every deploy target, by the name ``[deploy] targets`` in package.toml uses.
TARGETS: Registry[DeployTarget] = Registry("deploy target", code="DEPLOY_TARGET_UNKNOWN")


def deploy_target(
    name: str, about: str, *, default: bool = True, disaggregated: bool = True
) -> Callable[[FilesFn], FilesFn]:
    """Register a function naming a target's files (given the rendering context)."""
    return TARGETS.decorator(
        name, lambda files: DeployTarget(name, about, files, default, disaggregated)
    )
