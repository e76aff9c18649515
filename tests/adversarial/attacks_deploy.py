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


# render-site fills the deploy templates a kit signs; a hand-made kit may sign bytes that are not
# UTF-8. They are the artifact's fault (a named refusal, nothing written), never an internal
# error: every reader of a kit's text goes through formats.documents.utf8_text.
_SITE = "MODEL_DIR=/srv/models/kimi\nIMAGE=registry.example/vllm@sha256:" + "a" * 64 + "\n"


def _render_site_of_hand_signed(w: Workbench, name: str) -> Argv:
    from tests.launchkit import hand_signed

    kit = w.kit()
    rel = sorted(p.relative_to(kit).as_posix() for p in kit.rglob(name))[0]
    hand_signed(kit, w.golden.key, rel, lambda data: data + b"\n# caf\xe9 (latin-1)\n")
    site = w.root / "site.env"
    site.write_text(_SITE)
    return ["render-site", kit, "--trust", w.trust, "--site", site, "-o", w.root / "out"]


@attack("DEPLOY_FILE_MALFORMED")
def render_site_of_hand_signed_kit_whose_compose_template_is_not_utf8(w: Workbench) -> Argv:
    return _render_site_of_hand_signed(w, "compose.yaml")


@attack("SERVE_CONFIG_MALFORMED")
def render_site_of_hand_signed_kit_whose_serve_yaml_is_not_utf8(w: Workbench) -> Argv:
    # it used to be read with "replace": the locked names came from a line nobody signed
    return _render_site_of_hand_signed(w, "serve.yaml")
