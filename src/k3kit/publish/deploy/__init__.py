"""Deploy targets, one module each, chosen per package by ``[deploy] targets`` in package.toml.

Each public module here registers one target with ``@deploy_target`` (:mod:`k3kit._registry`)
and this package imports them all, so a new target is one module plus its template under
``templates/profile/`` (docs/extending.md). Used by :mod:`k3kit.publish.targets`, which renders
the chosen targets of every profile × topology at build time; nothing here runs at the node.
"""

from __future__ import annotations

from k3kit._registry import import_members
from k3kit.publish.deploy._base import TARGETS, DeployTarget, Files, deploy_target

import_members(__name__, __path__)

__all__ = ["TARGETS", "DeployTarget", "Files", "choose", "default_names", "deploy_target"]


def default_names() -> list[str]:
    """The targets a package gets when it does not choose (every target but the opt-in ones)."""
    return sorted(name for name, target in TARGETS.items() if target.default)


def choose(names: list[str] | None, *, where: str) -> list[DeployTarget]:
    """The targets ``names`` select (the defaults for ``None``); an unknown name is
    ``DEPLOY_TARGET_UNKNOWN`` naming its place in the package file and the known targets."""
    chosen = default_names() if names is None else names
    return [TARGETS.get_or_fail(n, where=f"{where}[{i}]") for i, n in enumerate(chosen)]
