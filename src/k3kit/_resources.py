"""Locate data shipped beside the code: ``templates/`` and ``examples/``.

In a wheel they are packaged inside ``k3kit/``; in a source checkout (editable install, tests) they
live at the repository root. Looking in both places keeps one source of truth in the repo.
"""

from __future__ import annotations

from pathlib import Path

from k3kit.errors import EnvironmentProblem

_PKG = Path(__file__).resolve().parent


def shipped_dir(name: str) -> Path:
    for candidate in (_PKG / name, _PKG.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise EnvironmentProblem(
        f"k3kit installation is incomplete: no {name}/ directory", code="INSTALL_INCOMPLETE"
    )
