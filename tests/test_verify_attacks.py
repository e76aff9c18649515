"""Verifier tests through the real CLI, each asserting the exit code and the specific error code
(see docs/verification.md for the list). Attacks on a weights folder moved to the named corpus,
tests/adversarial/attacks_weights.py."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path

from tests.conftest import GoldenKit, KeyFiles, make_kit, make_snapshot, run_k3kit

SERVE = "profiles/interactive/single-node-8gpu/serve.yaml"


def verify_json(kit: Path, trust: Path, *extra: str | Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    proc = run_k3kit("verify", kit, "--trust", trust, "--json", *extra)
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def check(report: dict, check_id: str) -> dict:  # type: ignore[type-arg]
    return next(c for c in report["checks"] if c["id"] == check_id)


def problem_codes(report: dict, check_id: str) -> dict[str, str]:  # type: ignore[type-arg]
    return {p["path"]: p["code"] for p in check(report, check_id).get("problems", [])}


def test_manifest_changed_file(kit: Path, golden: GoldenKit) -> None:
    path = kit / SERVE
    path.write_bytes(path.read_bytes().replace(b"max-num-seqs: 32", b"max-num-seqs: 64"))
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1 and report["ok"] is False
    assert problem_codes(report, "kit_files") == {SERVE: "KIT_FILE_CHANGED"}


def test_manifest_missing_file(kit: Path, golden: GoldenKit) -> None:
    (kit / "README.md").unlink()
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1
    assert problem_codes(report, "kit_files") == {"README.md": "KIT_FILE_MISSING"}


def test_manifest_extra_file(kit: Path, golden: GoldenKit) -> None:
    (kit / "profiles" / "interactive" / "sitecustomize.py").write_text("import os\n")
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1
    assert problem_codes(report, "kit_files") == {
        "profiles/interactive/sitecustomize.py": "KIT_FILE_EXTRA"}


def test_manifest_lists_every_difference_at_once(kit: Path, golden: GoldenKit) -> None:
    (kit / "README.md").unlink()
    (kit / "site.example.env").write_text("MODEL_DIR=/tmp\n")
    (kit / ".env").write_text("LD_PRELOAD=/tmp/x.so\n")
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1
    assert problem_codes(report, "kit_files") == {
        "README.md": "KIT_FILE_MISSING", "site.example.env": "KIT_FILE_CHANGED",
        ".env": "KIT_FILE_EXTRA"}
    assert check(report, "kit_files")["code"] == "KIT_FILES_DIFFER"


def test_kit_file_replaced_by_symlink(kit: Path, golden: GoldenKit) -> None:
    target = kit / SERVE
    shutil.copy(target, kit / "serve.copy")
    target.unlink()
    target.symlink_to(kit / "serve.copy")
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1
    assert problem_codes(report, "kit_files")[SERVE] == "KIT_SYMLINK"


def test_receipt_signed_by_untrusted_key(kit: Path, other_key: KeyFiles) -> None:
    rc, report = verify_json(kit, other_key.public)
    assert rc == 1
    assert check(report, "receipt_signature")["code"] == "RECEIPT_UNTRUSTED_KEY"
    # Nothing downstream of the signature is claimed to have passed.
    assert check(report, "kit_checksum")["ok"] is None


def test_receipt_swapped_between_kits(kit: Path, golden: GoldenKit, tmp_path: Path) -> None:
    other = make_kit(tmp_path / "other", golden.key,
                     make_snapshot(tmp_path / "other-cache", shards=2, shard_bytes=1024))
    shutil.copy(other.kit / "receipt.dsse.json", kit / "receipt.dsse.json")
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1
    assert check(report, "receipt_signature")["ok"] is True  # a genuine receipt...
    assert check(report, "kit_checksum")["code"] == "RECEIPT_KIT_MISMATCH"  # ...of another kit


def test_weights_lock_changed(kit: Path, golden: GoldenKit) -> None:
    lock = kit / "weights.lock.json"
    data = json.loads(lock.read_text())
    data["files"][0]["sha256"] = "0" * 64
    from k3kit._canonical import dumps

    lock.write_bytes(dumps(data))
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1
    assert problem_codes(report, "kit_files") == {"weights.lock.json": "KIT_FILE_CHANGED"}
    assert check(report, "weights_lock")["code"] == "RECEIPT_WEIGHTS_MISMATCH"


def test_receipt_payload_type_changed(kit: Path, golden: GoldenKit) -> None:
    env = json.loads((kit / "receipt.dsse.json").read_text())
    env["payloadType"] = "application/json"
    (kit / "receipt.dsse.json").write_text(json.dumps(env))
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1
    assert check(report, "receipt_signature")["code"] == "RECEIPT_UNTRUSTED_KEY"  # PAE binds it


def test_receipt_signature_bit_flip(kit: Path, golden: GoldenKit) -> None:
    env = json.loads((kit / "receipt.dsse.json").read_text())
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[5] ^= 1
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    (kit / "receipt.dsse.json").write_text(json.dumps(env))
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1 and check(report, "receipt_signature")["code"] == "RECEIPT_UNTRUSTED_KEY"


def test_receipt_duplicate_keys_in_envelope(kit: Path, golden: GoldenKit) -> None:
    raw = (kit / "receipt.dsse.json").read_text()
    smuggled = raw.replace('{"payload":', '{"payload":"e30=","payload":', 1)
    (kit / "receipt.dsse.json").write_text(smuggled)
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1 and check(report, "receipt_signature")["code"] == "RECEIPT_MALFORMED"


def test_receipt_wrong_keyid_hint_is_still_verified(kit: Path, golden: GoldenKit) -> None:
    env = json.loads((kit / "receipt.dsse.json").read_text())
    env["signatures"][0]["keyid"] = "not-the-key"
    env["payload"] = env["payload"].replace("+", "-").replace("/", "_")  # URL-safe base64 too
    (kit / "receipt.dsse.json").write_text(json.dumps(env))
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 0, report


def test_receipt_missing(kit: Path, golden: GoldenKit) -> None:
    (kit / "receipt.dsse.json").unlink()
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1 and check(report, "receipt_signature")["code"] == "RECEIPT_MISSING"


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


def test_manifest_extra_empty_directory(kit: Path, golden: GoldenKit) -> None:
    (kit / "profiles" / "evil" / "empty").mkdir(parents=True)
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1
    assert problem_codes(report, "kit_files") == {"profiles/evil/": "KIT_FILE_EXTRA",
                                                  "profiles/evil/empty/": "KIT_FILE_EXTRA"}


def test_receipt_replaced_by_a_fifo_does_not_hang_verify(kit: Path, golden: GoldenKit) -> None:
    (kit / "receipt.dsse.json").unlink()
    os.mkfifo(kit / "receipt.dsse.json")
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1
    assert check(report, "receipt_signature")["code"] == "RECEIPT_MISSING"
    assert "not a regular file" in check(report, "receipt_signature")["detail"]


def test_kit_json_replaced_by_a_directory(kit: Path, golden: GoldenKit) -> None:
    (kit / "kit.json").unlink()
    (kit / "kit.json").mkdir()
    rc, report = verify_json(kit, golden.key.public)
    assert rc == 1
    assert check(report, "weights_lock")["code"] == "KIT_INFO_MALFORMED"
    assert problem_codes(report, "kit_files")["kit.json"] == "KIT_FILE_MISSING"


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


def test_duplicate_trust_key_is_a_caller_mistake(kit: Path, golden: GoldenKit) -> None:
    proc = run_k3kit("verify", kit, "--trust", golden.key.public, "--trust", golden.key.public)
    assert proc.returncode == 3 and "given twice" in proc.stderr
