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


SECRET = "regcred-kits"


def workload_texts(out: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out)): p.read_text()
        for p in sorted(out.rglob("k8s/*.yaml"))
        if p.name != "service.yaml"
    }


def test_kit_pull_secret_logs_fetch_kit_in_with_the_secret_mounted_read_only(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A registry that needs a login: the Secret (kubernetes.io/dockerconfigjson, as
    ``kubectl create secret docker-registry`` makes it) is mounted read-only, mode 0400, into
    ``fetch-kit`` only, and REGISTRY_AUTH_FILE names it; the manifests still validate."""
    kv = pytest.importorskip("kubernetes_validate")
    jsonschema = pytest.importorskip("jsonschema")
    rc, _, stderr = render(golden, tmp_path / "out", "--kit-ref", REF, "--kit-pull-secret", SECRET)
    assert rc == 0, stderr
    texts = workload_texts(tmp_path / "out")
    assert len(texts) == 4
    for text in texts.values():
        doc = yaml.safe_load(text)
        if doc["kind"] == "LeaderWorkerSet":
            jsonschema.validate(doc, json.loads(LWS_SCHEMA.read_text()))
        else:
            kv.validate(doc, K8S_VERSION, strict=True)
        for spec in pod_specs(doc):
            fetch, verify = spec["initContainers"]
            assert fetch["env"] == [
                {"name": "REGISTRY_AUTH_FILE", "value": "/registry-auth/config.json"}
            ]
            assert {"name": "registry-auth", "mountPath": "/registry-auth", "readOnly": True} in (
                fetch["volumeMounts"]
            )
            assert {"name": "registry-auth", "secret": {
                "secretName": SECRET, "defaultMode": 0o400,
                "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
            }} in spec["volumes"]  # fmt: skip
            for other in [verify, *spec["containers"]]:  # the server never sees the login
                assert all(m["name"] != "registry-auth" for m in other["volumeMounts"])


def test_kit_pull_secret_only_adds_its_lines_and_without_it_nothing_changes(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Byte for byte: the files rendered with the secret, less the lines that name it, are the
    files rendered without it."""
    assert render(golden, tmp_path / "a" / "out", "--kit-ref", REF)[0] == 0
    rc, _, stderr = render(golden, tmp_path / "b" / "out", "--kit-ref", REF,
                           "--kit-pull-secret", SECRET)  # fmt: skip
    assert rc == 0, stderr
    plain, login = workload_texts(tmp_path / "a" / "out"), workload_texts(tmp_path / "b" / "out")
    assert plain.keys() == login.keys()
    added = ("REGISTRY_AUTH_FILE", "registry-auth", "  env:\n", f"secretName: {SECRET},")
    for rel, text in login.items():
        kept = [ln for ln in text.splitlines(keepends=True) if not any(a in ln for a in added)]
        assert "".join(kept) == plain[rel] and text != plain[rel]
        assert SECRET not in plain[rel] and "REGISTRY_AUTH_FILE" not in plain[rel]


@pytest.mark.parametrize(
    "name",
    [
        "Regcred",  # Kubernetes refuses capitals
        "regcred}, items: [{key: x, path: ../../etc/passwd}], x: {a",  # breaks out of the YAML
        "regcred\n        - name: host\n          hostPath: {path: /}",
        "-regcred",
        "r" * 254,
    ],
)
def test_attack_a_pull_secret_name_that_breaks_out_of_the_yaml_is_refused(
    golden: GoldenKit, tmp_path: Path, name: str
) -> None:
    rc, out, _ = render(golden, tmp_path / "out", "--kit-ref", REF, "--kit-pull-secret", name)
    assert rc == 2 and out["error"]["code"] == "USAGE"
    assert not (tmp_path / "out").exists()


def test_kit_pull_secret_without_kit_ref_is_refused(golden: GoldenKit, tmp_path: Path) -> None:
    rc, out, _ = render(golden, tmp_path / "out", "--kit-pull-secret", SECRET)
    assert rc == 2 and out["error"]["code"] == "USAGE" and "--kit-ref" in out["error"]["message"]
    assert not (tmp_path / "out").exists()


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
