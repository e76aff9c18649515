"""build: determinism, no surprise overwrites, and exit 3 with file + field for malformed inputs."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, GoldenKit, run_k3kit


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_two_builds_are_byte_identical(golden: GoldenKit, tmp_path: Path) -> None:
    for name in ("a", "b"):
        proc = run_k3kit(
            "build", EXAMPLE / "package.toml", "--lock", golden.lock, "-o", tmp_path / name
        )
        assert proc.returncode == 0, proc.stderr
    a, b = _tree_digest(tmp_path / "a"), _tree_digest(tmp_path / "b")
    assert a == b
    assert "MANIFEST.json" in a and "profiles/batch/single-node-8gpu/serve.yaml" in a
    assert (tmp_path / "a/profiles/interactive/single-node-8gpu/run.sh").stat().st_mode & 0o100


def test_build_refuses_to_overwrite_without_force(golden: GoldenKit, tmp_path: Path) -> None:
    out = tmp_path / "kit"
    assert (
        run_k3kit("build", EXAMPLE / "package.toml", "--lock", golden.lock, "-o", out).returncode
        == 0
    )
    (out / "marker").write_text("keep me")
    proc = run_k3kit("build", EXAMPLE / "package.toml", "--lock", golden.lock, "-o", out)
    assert proc.returncode == 3 and "--force" in proc.stderr
    assert (out / "marker").read_text() == "keep me"
    forced = run_k3kit(
        "build", EXAMPLE / "package.toml", "--lock", golden.lock, "-o", out, "--force"
    )
    # A kit plus a file of the user's is not what k3kit wrote: --force keeps the user's file.
    assert forced.returncode == 3 and "neither empty nor a k3kit kit" in forced.stderr
    assert (out / "marker").read_text() == "keep me"
    (out / "marker").unlink()
    (out / "kit.json").chmod(0o600)  # changed in place: still the kit's entry, replaced
    forced = run_k3kit(
        "build", EXAMPLE / "package.toml", "--lock", golden.lock, "-o", out, "--force"
    )
    assert forced.returncode == 0, forced.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".kit.")]


def _package_with(tmp_path: Path, old: str, new: str) -> Path:
    text = (EXAMPLE / "package.toml").read_text()
    assert old in text
    path = tmp_path / "package.toml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('name = "kimi-k3-b300x8"', 'name = "kimi-k3-b300x8"\nflavour = "x"', "package.flavour"),
        ("gpus_per_node = 8", 'gpus_per_node = "eight"', "hardware.gpus_per_node"),
        ('repo = "moonshotai/Kimi-K3"\n', "", "model.repo"),
        ("max-num-seqs = 32", "max-num-seq = 32", "max-num-seq"),
        (
            'performance-mode = "interactivity"',
            'performance-mode = "fast"',
            "must be one of balanced, interactivity, throughput",
        ),
        ("max-model-len = 1048576", 'max-model-len = "1M"', "plain integer"),
        ('tool-call-parser = "kimi_k3"', 'tool-call-parser = "kimi_k9"', "tool-call-parser"),
        (
            "[profiles.batch.serve]",
            '[profiles.batch.env]\nVLLM_ALL2ALL_BACKEND = "x"\n\n[profiles.batch.serve]',
            "VLLM_ALL2ALL_BACKEND",
        ),
        ('schema = "k3kit.package/v1"', 'schema = "k3kit.package/v1"\n[[[', "not valid TOML"),
    ],
)
def test_malformed_package_is_exit_3_naming_file_and_field(
    golden: GoldenKit, tmp_path: Path, old: str, new: str, expected: str
) -> None:
    package = _package_with(tmp_path, old, new)
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", tmp_path / "kit")
    assert proc.returncode == 3, proc.stderr
    assert str(package) in proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "kit").exists()


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda s: re.sub(r'"total_bytes":\d+', '"total_bytes":1', s), "total_bytes 1 != sum"),
        (lambda s: s.replace('"total_bytes":', '"x":1,"total_bytes":'), "x: Extra inputs"),
        (lambda s: s[:-2], "not strict JSON"),
        (lambda s: s.replace('"commit":"', '"commit":"main', 1), "commit"),
        (lambda s: s.replace('"repo":', '"repo":"a/b","repo":', 1), "duplicate key"),
    ],
)
def test_malformed_lock_is_exit_3(golden: GoldenKit, tmp_path: Path, mutate, expected: str) -> None:  # type: ignore[no-untyped-def]
    lock = tmp_path / "weights.lock.json"
    lock.write_text(mutate(golden.lock.read_text()))
    proc = run_k3kit("build", EXAMPLE / "package.toml", "--lock", lock, "-o", tmp_path / "kit")
    assert proc.returncode == 3, proc.stderr
    assert str(lock) in proc.stderr and expected in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("concurrency = 8\n", 'concurrency = "eight"\n', "runs[1].concurrency"),
        ('workload = "headline"', 'workload = "nope"', "unknown workload"),
        ('profile = "batch"', 'profile = "turbo"', "not a profile of this kit"),
        ('schema = "k3kit.claims/v1"', "", "schema"),
        ("output_tok_s = 89.04", "output_tok_s = 1e999999", "magnitude outside"),
    ],
)
def test_malformed_claims_is_exit_3(
    kit: Path, golden: GoldenKit, tmp_path: Path, old: str, new: str, expected: str
) -> None:
    text = (EXAMPLE / "claims.toml").read_text()
    assert old in text
    claims = tmp_path / "claims.toml"
    claims.write_text(text.replace(old, new, 1))
    before = (kit / "receipt.dsse.json").read_bytes()
    proc = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", claims, "--force")
    assert proc.returncode == 3, proc.stderr
    assert str(claims) in proc.stderr and expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (kit / "receipt.dsse.json").read_bytes() == before


def test_sign_refuses_a_kit_that_drifted_from_its_manifest(kit: Path, golden: GoldenKit) -> None:
    (kit / "README.md").write_text("edited after build")
    proc = run_k3kit(
        "sign", kit, "--key", golden.key.private, "--claims", EXAMPLE / "claims.toml", "--force"
    )
    assert proc.returncode == 3
    assert "KIT_FILE_CHANGED README.md" in proc.stderr


def test_sign_refuses_a_receipt_verifiers_would_not_read(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    text = (EXAMPLE / "claims.toml").read_text()
    runs = "".join(
        f'[[runs]]\nid = "extra-{i}"\nprofile = "batch"\nworkload = "headline"\n'
        f'concurrency = 1\nrequests = 8\ncompleted = 8\nnotes = "{"x" * 300}"\n\n'
        for i in range(4000)
    )
    claims = tmp_path / "claims.toml"
    claims.write_text(text + "\n" + runs)
    before = (kit / "receipt.dsse.json").read_bytes()
    proc = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", claims, "--force")
    assert proc.returncode == 3, proc.stderr
    assert "limit verifiers enforce" in proc.stderr
    assert (kit / "receipt.dsse.json").read_bytes() == before
