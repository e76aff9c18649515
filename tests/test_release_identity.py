"""The receipt names the release kit.json describes, in one spelling (second outside pass).

The rollback and equivocation memory keys on the receipt's ``package@version``; a release key
that signs ``"1.0.0 "``, ``"01.0.0"`` or ``"1.0.0\\u200b"`` beside ``"1.0.0"`` got a second kit
verified under what reads as the same version, and the receipt's version was never compared with
kit.json's. Each such receipt is refused now.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from k3kit._canonical import dumps, sha256_of_model
from k3kit._fs import atomic_write
from k3kit.formats.manifest import RECEIPT_NAME, build_manifest, kit_checksum
from k3kit.formats.receipt import build_statement
from k3kit.models import PAYLOAD_TYPE, Claims, KitInfo, WeightsLock, load
from k3kit.publish.kit import load_toml
from k3kit.signing.keys import load_private
from k3kit.signing.sign import sign_envelope
from tests.conftest import FIXED_TIME, GoldenKit, run_k3kit
from tests.launchkit import CLAIMS


def _resigned(golden: GoldenKit, tmp_path: Path, **kit_fields: object) -> Path:
    """A copy of the golden kit whose receipt the release key signs again with ``kit_fields``
    changed in the predicate's ``kit`` (what a hand-made or older signer could write)."""
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    info = load(KitInfo, json.loads((kit / "kit.json").read_bytes()), source="kit.json")
    lock = load(WeightsLock, json.loads((kit / "weights.lock.json").read_bytes()), source="lock")
    statement = json.loads(
        build_statement(
            load_toml(CLAIMS, Claims),
            info,
            kit_sha256=kit_checksum(build_manifest(kit)),
            lock_sha256=sha256_of_model(lock),
            issued_at=FIXED_TIME,
            source=str(CLAIMS),
            evidence={},
        )
    )
    statement["predicate"]["kit"].update(kit_fields)
    envelope = sign_envelope(dumps(statement), PAYLOAD_TYPE, load_private(golden.key.private, None))
    atomic_write(kit / RECEIPT_NAME, envelope, force=True)
    return kit


@pytest.mark.parametrize("version", ["1.0.0 ", "01.0.0", "1.0.0\u200b", "v1.0.0", "\u0661.0.0"])
def test_a_version_in_another_spelling_is_a_malformed_receipt(
    golden: GoldenKit, tmp_path: Path, version: str
) -> None:
    kit = _resigned(golden, tmp_path, version=version)
    proc = run_k3kit("verify", kit, "--trust", golden.key.public, "--json")
    assert proc.returncode == 1, proc.stderr
    assert "VERIFIED" not in proc.stderr.replace("NOT VERIFIED", "")
    codes = {c.get("code") for c in json.loads(proc.stdout)["checks"]}
    assert "RECEIPT_MALFORMED" in codes, proc.stdout


@pytest.mark.parametrize(
    "fields", [{"version": "1.0.1"}, {"sequence": 7}, {"channel": "beta"}], ids=str
)
def test_a_receipt_naming_another_release_than_kit_json_is_refused(
    golden: GoldenKit, tmp_path: Path, fields: dict[str, object]
) -> None:
    kit = _resigned(golden, tmp_path, **fields)
    proc = run_k3kit("verify", kit, "--trust", golden.key.public, "--json")
    assert proc.returncode == 1, proc.stderr
    codes = {c.get("code") for c in json.loads(proc.stdout)["checks"]}
    assert "KIT_RELEASE_MISMATCH" in codes, proc.stdout


def test_the_genuine_receipt_still_verifies(golden: GoldenKit, tmp_path: Path) -> None:
    kit = _resigned(golden, tmp_path)
    proc = run_k3kit("verify", kit, "--trust", golden.key.public)
    assert proc.returncode == 0, proc.stderr
