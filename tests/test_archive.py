"""pack and archive verification: deterministic bytes, and a tampered member seen by the manifest.

The archive attacks themselves are named cases in ``tests/adversarial/attacks_archive.py``.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

from tests.conftest import GoldenKit, run_k3kit


def test_pack_is_deterministic_and_the_archive_verifies(golden: GoldenKit, tmp_path: Path) -> None:
    outs = []
    for name in ("a.kit.tar.gz", "b.kit.tar.gz"):
        proc = run_k3kit("pack", golden.kit, "-o", tmp_path / name, "--json")
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout))
    assert outs[0]["sha256"] == outs[1]["sha256"]
    assert (tmp_path / "a.kit.tar.gz").read_bytes() == (tmp_path / "b.kit.tar.gz").read_bytes()
    proc = run_k3kit(
        "verify",
        tmp_path / "a.kit.tar.gz",
        "--trust",
        golden.key.public,
        "--weights",
        golden.snapshot,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["checks"][0] == {
        "id": "archive",
        "ok": True,
        "status": "passed",
        "detail": f"sha256:{outs[0]['sha256']}",
    }
    refused = run_k3kit("pack", golden.kit, "-o", tmp_path / "a.kit.tar.gz")
    assert refused.returncode == 3


def _members_of(golden: GoldenKit) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    out: list[tuple[tarfile.TarInfo, bytes | None]] = []
    for path in sorted(golden.kit.rglob("*")):
        info = tarfile.TarInfo(str(path.relative_to(golden.kit)))
        if path.is_dir():
            info.type = tarfile.DIRTYPE
            out.append((info, None))
        else:
            data = path.read_bytes()
            info.size = len(data)
            out.append((info, data))
    return out


def _write_archive(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    path.write_bytes(gzip.compress(raw.getvalue()))


def test_archive_with_a_tampered_member_fails_the_manifest(
    golden: GoldenKit, tmp_path: Path
) -> None:
    members = []
    for info, data in _members_of(golden):
        if info.name == "README.md" and data is not None:
            data = data.replace(b"deployment kit", b"deployment KIT")
            info.size = len(data)
        members.append((info, data))
    archive = tmp_path / "tampered.kit.tar.gz"
    _write_archive(archive, members)
    proc = run_k3kit("verify", archive, "--trust", golden.key.public, "--json")
    assert proc.returncode == 1
    kit_files = next(c for c in json.loads(proc.stdout)["checks"] if c["id"] == "kit_files")
    assert kit_files["problems"] == [
        {
            "code": "KIT_FILE_CHANGED",
            "path": "README.md",
            "detail": kit_files["problems"][0]["detail"],
        }
    ]
