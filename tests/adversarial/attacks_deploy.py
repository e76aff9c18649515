"""Attacks on the deploy targets a package selects (``[deploy] targets`` in package.toml).

Whoever can edit a package definition (a contributor to the publisher's repository, a CI job)
tries to make ``k3kit build`` write files outside the registered targets: a name k3kit has no
target for, or a path in place of a name. Both stop the build before anything is rendered.
"""

from __future__ import annotations

from pathlib import Path

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


# preflight judges a node by the profile's signed serve.yaml. A hand-made kit may sign values
# build never writes; preflight did arithmetic on them before any rule looked at them. Both
# verbs now read serve.yaml through one strict reader and hold it to build's value rules
# (node.launch.serve_settings) before judging anything by it.
_PREFLIGHT_DATA = Path(__file__).resolve().parents[1] / "data" / "preflight"
_SERVE = "profiles/interactive/single-node-8gpu/serve.yaml"


def _sign_serve_value(w: Workbench, key: bytes, value: bytes) -> None:
    """The publisher's key signs a serve.yaml whose ``key`` line says ``value``."""
    from tests.launchkit import hand_signed

    def edit(data: bytes) -> bytes:
        kept = [line for line in data.split(b"\n") if line and not line.startswith(key + b":")]
        return b"\n".join([*kept, key + b": " + value]) + b"\n"

    hand_signed(w.kit(), w.golden.key, _SERVE, edit)


def _preflight_of_hand_signed(w: Workbench, key: bytes, value: bytes) -> Argv:
    _sign_serve_value(w, key, value)
    return _preflight_on_the_recorded_node(w)


def _preflight_on_the_recorded_node(w: Workbench) -> Argv:
    """`preflight` of the workbench's kit on the recorded B300 node's files."""
    return [
        "preflight",
        w.kit(),
        "--trust",
        w.trust,
        "--profile",
        "interactive",
        "--topology",
        "single-node-8gpu",
        "--nvidia-smi-xml",
        _PREFLIGHT_DATA / "b300x8.synthetic.xml",
        "--os-facts",
        _PREFLIGHT_DATA / "node-os.synthetic.json",
    ]


@attack("SERVE_CONFIG_MALFORMED")
def preflight_of_hand_signed_kit_claiming_infinite_gpu_memory_utilization(w: Workbench) -> Argv:
    # Python's json reads Infinity; the weights then "fit" any GPU: memory.weights passed
    return _preflight_of_hand_signed(w, b"gpu-memory-utilization", b"Infinity")


@attack("SERVE_CONFIG_MALFORMED")
def preflight_of_hand_signed_kit_whose_utilization_overflows_to_infinity(w: Workbench) -> Argv:
    return _preflight_of_hand_signed(w, b"gpu-memory-utilization", b"1e999")


@attack("ENGINE_SETTING_REFUSED")
def preflight_of_hand_signed_kit_whose_kv_cache_dtype_is_a_list(w: Workbench) -> Argv:
    # it ended preflight (and launch on a GPU node) in an internal error: unhashable list
    return _preflight_of_hand_signed(w, b"kv-cache-dtype", b"[1]")


@attack("SERVE_CONFIG_MALFORMED")
def launch_of_hand_signed_kit_whose_gpu_memory_utilization_is_nan(w: Workbench) -> Argv:
    # launch --dry-run said VERIFIED and would have handed the engine a NaN it never measured
    _sign_serve_value(w, b"gpu-memory-utilization", b"NaN")
    return w.launch("--dry-run", "--topology", "single-node-8gpu")


@attack("KIT_LOCK_MISMATCH")
def preflight_of_hand_signed_kit_whose_kit_json_says_the_weights_are_one_byte(
    w: Workbench,
) -> Argv:
    # preflight sizes the node by kit.json's weights.total_bytes; verify compared only the lock's
    # digest and commit, so a signed kit.json saying 1 byte made every GPU "fit" the weights
    import json

    from k3kit._canonical import dumps
    from tests.launchkit import hand_signed

    def edit(data: bytes) -> bytes:
        info = json.loads(data)
        info["weights"]["total_bytes"] = 1
        return dumps(info)

    hand_signed(w.kit(), w.golden.key, "kit.json", edit)
    return _preflight_on_the_recorded_node(w)


@attack("ENGINE_SETTING_REFUSED")
def preflight_of_hand_signed_kit_whose_serve_yaml_runs_tp1_where_kit_json_says_tp8(
    w: Workbench,
) -> Argv:
    # preflight divides the weights by kit.json's tp (8 GPUs share them) while the engine reads
    # serve.yaml's (one GPU holds them all): the node "fits" a launch that cannot load
    return _preflight_of_hand_signed(w, b"tensor-parallel-size", b"1")
