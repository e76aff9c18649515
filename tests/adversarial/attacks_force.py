"""`--force` aimed at what k3kit did not write (issue 19, class 9): each must be refused, exit 3.

The trap is a mistyped or planted output path; tests/test_force.py checks that nothing of the
user's was lost. Here the runner checks the refusal and its code.
"""

from __future__ import annotations

from pathlib import Path

from tests.adversarial.corpus import Argv, Workbench, attack
from tests.conftest import EXAMPLE

SITE = "MODEL_DIR=/srv/models/kimi\nIMAGE=r.example/k3kit@sha256:" + "b" * 64 + "\n"


def _checkout(w: Workbench) -> Path:
    repo = w.root / "src"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "main.py").write_text("print('mine')\n")
    return repo


@attack("OUTPUT_NOT_OURS", exit_code=3)
def render_site_force_over_a_git_checkout(w: Workbench) -> Argv:
    site = w.root / "site.env"
    site.write_text(SITE)
    return [
        "render-site",
        w.golden.kit,
        "--trust",
        w.trust,
        "--site",
        site,
        "-o",
        _checkout(w),
        "--force",
    ]


@attack("OUTPUT_NOT_A_KIT", exit_code=3)
def build_force_over_a_git_checkout(w: Workbench) -> Argv:
    return [
        "build", EXAMPLE / "package.toml", "--lock", w.golden.lock, "-o", _checkout(w), "--force"
    ]  # fmt: skip


@attack("OUTPUT_NOT_OURS", exit_code=3)
def pack_force_through_a_symlink_to_a_user_file(w: Workbench) -> Argv:
    target = w.root / "precious.bin"
    target.write_bytes(b"mine")
    link = w.root / "out.kit.tar.gz"
    link.symlink_to(target)
    return ["pack", w.golden.kit, "-o", link, "--force"]


@attack("OUTPUT_NOT_A_KIT", exit_code=3)
def build_force_over_a_checkout_holding_a_kits_two_documents(w: Workbench) -> Argv:
    """kit.json and MANIFEST.json of a real kit committed beside .git/ and the user's files: the
    two documents alone used to pass for a kit, and --force wiped the checkout."""
    repo = _checkout(w)
    for name in ("kit.json", "MANIFEST.json"):
        (repo / name).write_bytes((w.golden.kit / name).read_bytes())
    return [
        "build", EXAMPLE / "package.toml", "--lock", w.golden.lock, "-o", repo, "--force"
    ]  # fmt: skip
