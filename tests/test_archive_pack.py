"""pack: only a kit that verifies against its own manifest and receipt is packed, named from
kit.json; an unsigned kit only with --unsigned, under a name that says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from k3kit._canonical import dumps
from k3kit.archive import extract_safely
from k3kit.errors import K3kitError
from k3kit.publish.kitpack import pack_kit
from k3kit.signing.keys import load_public
from tests.conftest import GoldenKit, KeyFiles, run_k3kit

NAME = "kimi-k3-b300x8-1.0.0"
SERVE = "profiles/interactive/single-node-8gpu/serve.yaml"


def _refused(
    kit: Path, out: Path, code: str, exit_code: int, *cli: str | Path, **kw: object
) -> None:
    """Refused in-process with ``code``, and by the real CLI with ``exit_code``; nothing written.

    (The CLI's JSON error object on failures is another change; the code is checked in-process.)
    """
    with pytest.raises(K3kitError) as caught:
        pack_kit(kit, out, **kw)  # type: ignore[arg-type]
    assert caught.value.code == code, caught.value.message
    assert int(caught.value.exit_code) == exit_code
    proc = run_k3kit("pack", kit, "-o", out, *cli)
    assert proc.returncode == exit_code, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("error: ")
    assert not (out.is_file() or (out.is_dir() and list(out.glob("*.kit.tar.gz"))))


def _copy(golden: GoldenKit, tmp_path: Path) -> Path:
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    return kit


def test_default_name_comes_from_kit_json_and_the_archive_verifies(
    golden: GoldenKit, tmp_path: Path
) -> None:
    kit = _copy(golden, tmp_path)
    proc = run_k3kit("pack", kit, "--trust", golden.key.public, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    archive = tmp_path / f"{NAME}.kit.tar.gz"
    assert out["archive"] == str(archive) and out["signed"] is True
    assert "receipt signature" in out["checked"]
    verdict = run_k3kit("verify", archive, "--trust", golden.key.public, "--json")
    assert verdict.returncode == 0, verdict.stderr
    staging, digest = extract_safely(archive)
    shutil.rmtree(staging)
    assert digest == out["sha256"]


def test_output_folder_gets_the_default_name_and_no_trust_checks_consistency(
    golden: GoldenKit, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    dest.mkdir()
    proc = run_k3kit("pack", golden.kit, "-o", dest, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["archive"] == str(dest / f"{NAME}.kit.tar.gz")
    assert "signature not checked" in out["checked"]


def test_tampered_kit_is_not_packed(golden: GoldenKit, tmp_path: Path) -> None:
    kit = _copy(golden, tmp_path)
    (kit / SERVE).write_bytes((kit / SERVE).read_bytes() + b"# edited\n")
    out = tmp_path / "x.kit.tar.gz"
    _refused(kit, out, "KIT_FILE_CHANGED", 1)
    trust = golden.key.public
    _refused(kit, out, "KIT_FILE_CHANGED", 1, "--trust", trust, trusted=[load_public(trust)])


def test_receipt_of_another_kit_is_not_packed(golden: GoldenKit, tmp_path: Path) -> None:
    """A kit whose MANIFEST.json was rebuilt to cover an edit: the tree matches the manifest,
    but the receipt names the old manifest."""
    kit = _copy(golden, tmp_path)
    manifest = json.loads((kit / "MANIFEST.json").read_bytes())
    manifest["files"] = [f for f in manifest["files"] if f["path"] != SERVE]
    (kit / SERVE).unlink()
    (kit / "MANIFEST.json").write_bytes(dumps(manifest))
    _refused(kit, tmp_path / "x.kit.tar.gz", "RECEIPT_KIT_MISMATCH", 1)


def test_untrusted_signature_is_not_packed(
    golden: GoldenKit, other_key: KeyFiles, tmp_path: Path
) -> None:
    other = other_key.public
    _refused(
        golden.kit,
        tmp_path / "x.kit.tar.gz",
        "RECEIPT_UNTRUSTED_KEY",
        1,
        "--trust",
        other,
        trusted=[load_public(other)],
    )


def test_weights_folder_is_refused(golden: GoldenKit, tmp_path: Path) -> None:
    _refused(golden.snapshot, tmp_path / "w.kit.tar.gz", "PACK_NOT_A_KIT", 3)


def test_unsigned_kit_needs_the_flag_and_is_named_as_such(
    golden: GoldenKit, tmp_path: Path
) -> None:
    kit = _copy(golden, tmp_path)
    (kit / "receipt.dsse.json").unlink()
    _refused(kit, tmp_path / "r.kit.tar.gz", "RECEIPT_MISSING", 1)
    _refused(kit, tmp_path / "r.kit.tar.gz", "PACK_UNSIGNED_NAME", 3, "--unsigned", unsigned=True)
    proc = run_k3kit("pack", kit, "--unsigned")
    assert proc.returncode == 0, proc.stderr
    assert "UNSIGNED" in proc.stderr
    archive = tmp_path / f"{NAME}.unsigned.kit.tar.gz"
    assert archive.is_file() and not (tmp_path / f"{NAME}.kit.tar.gz").exists()
    verdict = run_k3kit("verify", archive, "--trust", golden.key.public, "--json")
    assert verdict.returncode == 1


def test_unsigned_flag_on_a_signed_kit_is_refused(golden: GoldenKit, tmp_path: Path) -> None:
    _refused(golden.kit, tmp_path, "PACK_UNSIGNED_HAS_RECEIPT", 3, "--unsigned", unsigned=True)
