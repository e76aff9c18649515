"""Attacks on the deploy targets a package selects (``[deploy] targets`` in package.toml).

Whoever can edit a package definition (a contributor to the publisher's repository, a CI job)
tries to make ``k3kit build`` write files outside the registered targets: a name k3kit has no
target for, or a path in place of a name. Both stop the build before anything is rendered.
"""

from __future__ import annotations

from tests.adversarial.corpus import Argv, Workbench, attack
from tests.conftest import EXAMPLE


def _build_choosing(w: Workbench, targets: str) -> Argv:
    package = w.root / "package.toml"
    package.write_text(
        (EXAMPLE / "package.toml").read_text() + f"\n[deploy]\ntargets = {targets}\n"
    )
    return ["build", package, "--lock", w.golden.lock, "-o", w.root / "out"]


@attack("DEPLOY_TARGET_UNKNOWN", exit_code=3)
def build_choosing_a_deploy_target_k3kit_does_not_have(w: Workbench) -> Argv:
    return _build_choosing(w, '["shell", "helm"]')


@attack("BAD_INPUT", exit_code=3)
def build_choosing_a_path_as_deploy_target(w: Workbench) -> Argv:
    return _build_choosing(w, '["../../../etc/cron.d/k3kit"]')
