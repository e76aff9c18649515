"""The golden kit verifies through the real CLI, as a directory, with its weights."""

from __future__ import annotations

import json

from tests.conftest import GoldenKit, run_k3kit


def test_golden_kit_verifies_with_weights(golden: GoldenKit) -> None:
    proc = run_k3kit(
        "verify", golden.kit, "--trust", golden.key.public, "--weights", golden.snapshot, "--json"
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True
    assert [c["id"] for c in report["checks"]] == [
        "trust",
        "receipt_signature",
        "kit_checksum",
        "kit_files",
        "weights_lock",
        "weights",
    ]
    assert all(c["ok"] is True for c in report["checks"])
