"""Every deploy target of the built-in example is accepted by the tool that will read it.

YAML parses; Kubernetes manifests validate against the Kubernetes schemas (kubernetes-validate)
and the LeaderWorkerSet CRD schema (tests/data/k8s, with its source); every systemd unit passes
`systemd-analyze verify`; every shell file passes `shellcheck`. Both the signed files (with
`${...}` site placeholders) and the files `k3kit render-site` writes are checked.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import GoldenKit, run_k3kit

ROOT = Path(__file__).resolve().parents[1]
LWS_SCHEMA = ROOT / "tests" / "data" / "k8s" / "leaderworkerset-v1.schema.json"
K8S_VERSION = "1.33.0"
SITE = """MODEL_DIR=/srv/models/kimi
KIT_DIR=/opt/k3kit/kits/kimi-k3-b300x8-1.0.0
K3KIT_TRUST_KEY=/etc/k3kit/publisher.pub
IMAGE=registry.example/k3kit-vllm@sha256:{digest}
NAMESPACE=inference
HOST=0.0.0.0
LEADER_ADDRESS=10.0.0.1
""".format(digest="a" * 64)


@pytest.fixture(scope="module")
def rendered(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "out"
    site = out.parent / "site.env"
    site.write_text(SITE)
    proc = run_k3kit(
        "render-site", golden.kit, "--trust", golden.key.public, "--site", site, "-o", out
    )
    assert proc.returncode == 0, proc.stderr
    return out


def _files(root: Path, pattern: str) -> list[Path]:
    found = sorted(root.rglob(pattern))
    assert found, f"no {pattern} under {root}"
    return found


def test_kit_has_every_target_for_both_topologies(golden: GoldenKit) -> None:
    info = json.loads((golden.kit / "kit.json").read_text())
    shapes = {(p["name"], p["topology"], p["measured"]) for p in info["profiles"]}
    assert shapes == {
        ("interactive", "single-node-8gpu", True),
        ("batch", "single-node-8gpu", True),
        ("interactive", "multi-node-8x8gpu", False),
        ("batch", "multi-node-8x8gpu", False),
    }
    for prof in info["profiles"]:
        files = {f.split("/", 3)[3] for f in prof["files"]}
        k8s = "k8s/leaderworkerset.yaml" if prof["nodes"] > 1 else "k8s/deployment.yaml"
        assert {
            "serve.yaml",
            "engine.env",
            "run.sh",
            "compose.yaml",
            k8s,
            "k8s/service.yaml",
        } <= files
        assert any(f.startswith("systemd/") for f in files)
    multi = (golden.kit / "profiles/batch/multi-node-8x8gpu/serve.yaml").read_text()
    assert "NOT measured" in multi and "data-parallel-size: 8\n" in multi
    assert "data-parallel-size-local: 1\n" in multi


def test_every_yaml_parses(golden: GoldenKit, rendered: Path) -> None:
    for root in (golden.kit, rendered):
        for path in _files(root, "*.yaml"):
            doc = yaml.safe_load(path.read_text())
            assert isinstance(doc, dict), path


def _k8s_docs(root: Path) -> list[tuple[Path, dict[str, object]]]:
    return [
        (p, yaml.safe_load(p.read_text()))
        for p in _files(root / "", "*.yaml")
        if p.parent.name == "k8s"
    ]


def test_kubernetes_manifests_validate(golden: GoldenKit, rendered: Path) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    jsonschema = pytest.importorskip("jsonschema")
    lws_schema = json.loads(LWS_SCHEMA.read_text())
    kinds = set()
    for root in (golden.kit, rendered):
        for _path, doc in _k8s_docs(root):
            kinds.add(doc["kind"])
            if doc["kind"] == "LeaderWorkerSet":
                jsonschema.validate(doc, lws_schema)
                template = doc["spec"]["leaderWorkerTemplate"]  # type: ignore[index]
                assert template["restartPolicy"] == "RecreateGroupOnPodRestart"
                for role in ("leaderTemplate", "workerTemplate"):
                    pod = {
                        "apiVersion": "v1",
                        "kind": "PodTemplate",
                        "metadata": {"name": "t"},
                        "template": template[role],
                    }
                    kv.validate(pod, K8S_VERSION, strict=True)
                    spec = template[role]["spec"]
                    assert [c["name"] for c in spec["initContainers"]] == ["verify"]
                    assert spec["initContainers"][0]["command"][:2] == ["k3kit", "verify"]
                    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
                    assert shm["emptyDir"]["medium"] == "Memory"
            else:
                kv.validate(doc, K8S_VERSION, strict=True)
    assert kinds == {"Deployment", "Service", "LeaderWorkerSet"}


def test_lws_schema_catches_a_typo() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    doc = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "x"},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 2,
                "restartPolicy": "RecreateGroup",
                "workerTemplate": {"spec": {}},
            }
        },
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, json.loads(LWS_SCHEMA.read_text()))


def test_probes_and_wiring(rendered: Path) -> None:
    lws_path = rendered / "batch/multi-node-8x8gpu/k8s/leaderworkerset.yaml"
    lws = yaml.safe_load(lws_path.read_text())
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert leader["readinessProbe"]["httpGet"]["path"] == "/v1/models"
    assert leader["livenessProbe"]["httpGet"]["path"] == "/health"
    assert leader["command"][:2] == ["k3kit", "launch"]
    assert "$(LWS_WORKER_INDEX)" in leader["command"]
    assert "$(LWS_LEADER_ADDRESS)" in leader["command"]
    assert lws["metadata"]["namespace"] == "inference"
    assert leader["image"].endswith("@sha256:" + "a" * 64)
    compose = yaml.safe_load((rendered / "interactive/single-node-8gpu/compose.yaml").read_text())
    server = compose["services"]["server"]
    assert server["depends_on"]["verify"]["condition"] == "service_completed_successfully"
    assert compose["services"]["verify"]["command"][:2] == ["k3kit", "verify"]
    assert "/srv/models/kimi:/weights:ro" in server["volumes"]
    assert (
        rendered / "batch/multi-node-8x8gpu/systemd/k3kit-kimi-k3-b300x8-batch@.service"
    ).is_file()


def test_systemd_units_verify(golden: GoldenKit, rendered: Path, tmp_path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (scripts/ensure-tools.sh installs it)")
    units = _files(rendered, "*.service")
    assert len(units) == 4
    for unit in units:
        proc = subprocess.run(
            [tool, "verify", "--man=no", str(unit)], capture_output=True, text=True, check=False
        )
        problems = [
            line
            for line in proc.stderr.splitlines()
            if unit.name in line or "Unknown" in line or "not executable" in line
        ]
        assert proc.returncode == 0 and not problems, proc.stderr
    text = units[0].read_text()
    assert "ExecStartPre=/usr/bin/env k3kit verify" in text
    assert "ExecStartPre=/usr/bin/env k3kit preflight" in text
    assert "Restart=on-failure" in text and "ExecStartPost=" in text


def test_shell_files_pass_shellcheck(golden: GoldenKit) -> None:
    tool = shutil.which("shellcheck")
    if tool is None:
        pytest.skip("shellcheck is not installed (scripts/ensure-tools.sh installs it)")
    scripts = _files(golden.kit, "*.sh")
    assert len(scripts) == 4
    proc = subprocess.run(
        [tool, "--severity=style", *map(str, scripts)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_systemd_check_can_fail(tmp_path: Path) -> None:
    """The verifier used above does refuse a broken unit (so its pass means something)."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (scripts/ensure-tools.sh installs it)")
    bad = tmp_path / "bad.service"
    bad.write_text("[Service]\nExecStart=/nonexistent/k3kit launch\n")
    proc = subprocess.run(
        [tool, "verify", "--man=no", str(bad)], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0 and "not executable" in proc.stderr
