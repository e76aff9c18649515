"""Attacks on the files the operator tells k3kit to trust: a ``--trust`` key, a ``--root``, a
``--site`` file that another user can write.

Whoever can rewrite the trusted key chooses which kits are VERIFIED; whoever can rewrite the site
file chooses the trust key and the listen address. Each case leaves one such file writable by
others (as a shared folder or a careless ``chmod`` leaves it; the co-tenant's own steps are in
``tests/test_trust_anchor.py``) and runs one k3kit call, which must refuse it with
``TRUST_ANCHOR_UNSAFE`` (exit 4) before any verdict.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.adversarial.corpus import Argv, Workbench, attack
from tests.trustkit import keypair, root_v1, write_root


def _writable_by_others(path: Path) -> Path:
    path.chmod(0o666)
    return path


@attack("TRUST_ANCHOR_UNSAFE", exit_code=4)
def verify_trusting_a_key_file_anyone_can_rewrite(w: Workbench) -> Argv:
    key = shutil.copyfile(w.trust, w.root / "publisher.pub")
    return ["verify", w.kit(), "--trust", _writable_by_others(key)]


@attack("TRUST_ANCHOR_UNSAFE", exit_code=4)
def verify_pinning_a_root_file_anyone_can_rewrite(w: Workbench) -> Argv:
    root_key = keypair(w.root, "root-a")
    pinned = write_root(
        w.root / "pinned.root.json", root_v1([root_key], [w.golden.key]), [root_key]
    )
    return ["verify", w.kit(), "--root", _writable_by_others(pinned), "--state-dir", w.root / "st"]


@attack("TRUST_ANCHOR_UNSAFE", exit_code=4)
def render_site_from_a_site_file_anyone_can_rewrite(w: Workbench) -> Argv:
    site = w.root / "site.env"
    site.write_text("MODEL_DIR=/srv/models\nHOST=0.0.0.0\n")
    return [
        "render-site", w.kit(), "--trust", w.trust, "--site", _writable_by_others(site),
        "-o", w.root / "out",
    ]  # fmt: skip
