"""Verifier tests through the real CLI that need more than the corpus's one code per case.

The kit, receipt and weights attacks live in the named corpus (``tests/adversarial/``).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import GoldenKit, KeyFiles, run_k3kit

SERVE = "profiles/interactive/single-node-8gpu/serve.yaml"


def verify_json(kit: Path, trust: Path, *extra: str | Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    proc = run_k3kit("verify", kit, "--trust", trust, "--json", *extra)
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def check(report: dict, check_id: str) -> dict:  # type: ignore[type-arg]
    return next(c for c in report["checks"] if c["id"] == check_id)


def problem_codes(report: dict, check_id: str) -> dict[str, str]:  # type: ignore[type-arg]
    return {p["path"]: p["code"] for p in check(report, check_id).get("problems", [])}


def test_nothing_downstream_of_a_failed_signature_is_passed(kit: Path,
                                                          other_key: KeyFiles) -> None:
    rc, report = verify_json(kit, other_key.public)
    assert rc == 1
    assert check(report, "receipt_signature")["code"] == "RECEIPT_UNTRUSTED_KEY"
    # Nothing downstream of the signature is claimed to have passed.
    assert check(report, "kit_checksum")["ok"] is None


def test_receipt_wrong_keyid_hint_is_still_verified(kit: Path, golden: GoldenKit) -> None:
    env = json.loads((kit / "receipt.dsse.json").read_text())
    env["signatures"][0]["keyid"] = "not-the-key"
    env["payload"] = env["payload"].replace("+", "-").replace("/", "_")  # URL-safe base64 too
    (kit / "receipt.dsse.json").write_text(json.dumps(env))
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 0, report


def test_weights_not_checked_when_the_kit_failed(kit: Path, weights: Path,
                                                 golden: GoldenKit) -> None:
    (kit / "README.md").write_text("changed")
    rc, report = verify_json(kit, golden.key.public, "--weights", weights)
    assert rc == 1
    assert check(report, "weights")["ok"] is None
    assert check(report, "weights")["status"] == "not checked"


def test_verify_without_weights_says_weights_not_checked(kit: Path, golden: GoldenKit) -> None:
    proc = run_k3kit("verify", kit, "--trust", golden.key.public)
    assert proc.returncode == 0
    assert "not checked: no --weights" in proc.stderr
    assert "weights not checked" in proc.stderr


def test_lock_naming_a_path_outside_the_weights_is_refused(kit: Path, golden: GoldenKit,
                                                           tmp_path: Path) -> None:
    from k3kit._canonical import dumps

    lock = json.loads((kit / "weights.lock.json").read_text())
    lock["files"][0]["path"] = "../victim.txt"
    lock["files"].sort(key=lambda f: f["path"])
    evil = tmp_path / "evil.lock.json"
    evil.write_bytes(dumps(lock))
    victim = tmp_path / "victim.txt"
    victim.write_text("do not touch")
    proc = run_k3kit("pull", evil, "--dir", tmp_path / "weights", "--layout", "plain",
                     "--endpoint", "http://127.0.0.1:9")
    assert proc.returncode == 3, proc.stderr
    assert "unsafe relative path" in proc.stderr
    assert victim.read_text() == "do not touch"
    build = run_k3kit("build", Path(__file__).parents[1] / "examples/kimi-k3-b300x8/package.toml",
                      "--lock", evil, "-o", tmp_path / "kit")
    assert build.returncode == 3 and "unsafe relative path" in build.stderr


def test_audit_kit_json_edited_engine_image_is_not_a_pass(kit: Path, golden: GoldenKit) -> None:
    """An edited engine image digest in kit.json (not the bytes the signed manifest lists) must
    not turn R04's warning into a pass: audit reads kit.json only when it verifies.

    Not a corpus case: an audit's JSON findings carry no error code for the runner to match."""
    from k3kit._canonical import dumps

    def r04_kit() -> list[tuple[str, str]]:
        proc = run_k3kit("audit", kit, "--trust", golden.key.public, "--json")
        assert "Traceback" not in proc.stderr
        findings = json.loads(proc.stdout)["findings"]
        return [(f["severity"], f["message"]) for f in findings
                if f["rule"] == "R04" and f["run"] == "kit" and "image" in f["message"]]

    assert [s for s, _ in r04_kit()] == ["warning"]  # the genuine kit pins no image
    info = json.loads((kit / "kit.json").read_text())
    info["engine"]["image"] = "vllm/vllm-openai@sha256:" + "ab" * 32
    (kit / "kit.json").write_bytes(dumps(info))
    edited = r04_kit()
    assert [s for s, _ in edited] == ["not-checkable"], edited
    assert "not the one the signed MANIFEST.json lists" in edited[0][1]
