"""`render-site --kit-ref oci://…@sha256:…`: the Kubernetes workloads install the kit from the
registry by digest in a first init container, then verify and launch it as before; the
manifests still validate (kubernetes-validate, the LWS CRD schema), and without --kit-ref the
rendered files are the ones the kit always gave."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import GoldenKit, run_k3kit
from tests.test_deploy_targets import K8S_VERSION, LWS_SCHEMA, SITE

FOLDER = "kimi-k3-b300x8-1.0.0"
REF = "oci://registry.example.com/kits/kimi-k3@sha256:" + "c" * 64


def render(golden: GoldenKit, out: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    out.parent.mkdir(parents=True, exist_ok=True)
    site = out.parent / "site.env"
    site.write_text(SITE)
    proc = run_k3kit(
        "render-site",
        golden.kit,
        "--trust",
        golden.key.public,
        "--site",
        site,
        "-o",
        out,
        "--json",
        *extra,
    )
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads(proc.stdout or "{}"), proc.stderr


def pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if doc["kind"] == "Deployment":
        return [doc["spec"]["template"]["spec"]]
    template = doc["spec"]["leaderWorkerTemplate"]
    return [template[role]["spec"] for role in ("leaderTemplate", "workerTemplate")]


def test_kit_ref_adds_an_install_by_digest_before_verify_and_launch(
    golden: GoldenKit, tmp_path: Path
) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    jsonschema = pytest.importorskip("jsonschema")
    rc, _, stderr = render(golden, tmp_path / "out", "--kit-ref", REF)
    assert rc == 0, stderr
    workloads = [
        p for p in sorted((tmp_path / "out").rglob("k8s/*.yaml")) if p.name != "service.yaml"
    ]
    assert len(workloads) == 4  # two profiles x (Deployment, LeaderWorkerSet)
    for path in workloads:
        doc = yaml.safe_load(path.read_text())
        if doc["kind"] == "LeaderWorkerSet":
            jsonschema.validate(doc, json.loads(LWS_SCHEMA.read_text()))
        else:
            kv.validate(doc, K8S_VERSION, strict=True)
        for spec in pod_specs(doc):
            fetch, verify = spec["initContainers"]
            assert (fetch["name"], verify["name"]) == ("fetch-kit", "verify")
            assert fetch["command"][-1] == REF and "k3kit install" in fetch["command"][2]
            assert fetch["image"] == verify["image"]
            kit_volume = next(v for v in spec["volumes"] if v["name"] == "kit")
            assert kit_volume == {"name": "kit", "emptyDir": {}}
            for container in [verify, *spec["containers"]]:
                mount = next(m for m in container["volumeMounts"] if m["name"] == "kit")
                assert mount == {
                    "name": "kit",
                    "mountPath": "/kit",
                    "subPath": FOLDER,
                    "readOnly": True,
                }


def test_without_kit_ref_the_files_are_unchanged(golden: GoldenKit, tmp_path: Path) -> None:
    assert render(golden, tmp_path / "a" / "out")[0] == 0
    for path in (tmp_path / "a" / "out").rglob("k8s/*.yaml"):
        if path.name == "service.yaml":
            continue
        text = path.read_text()
        assert "fetch-kit" not in text and "hostPath" in text


def test_kit_ref_by_tag_is_refused(golden: GoldenKit, tmp_path: Path) -> None:
    rc, out, _ = render(golden, tmp_path / "out", "--kit-ref", "oci://r.example/kits/k:stable")
    assert rc == 3 and out["error"]["code"] == "OCI_TAG_NOT_PINNED"
    assert not (tmp_path / "out").exists()


def test_kit_ref_over_plain_http_off_this_machine_is_refused(
    golden: GoldenKit, tmp_path: Path
) -> None:
    ref = "oci+http://r.example/kits/k@sha256:" + "d" * 64
    rc, out, _ = render(golden, tmp_path / "out", "--kit-ref", ref)
    assert rc == 3 and out["error"]["code"] == "OCI_PLAIN_HTTP"
