"""pack and archive verification: deterministic bytes, and a tampered member seen by the manifest.

The archive attacks themselves are named cases in ``tests/adversarial/attacks_archive.py``.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from k3kit.archive import ArchiveIndex, extract_safely
from k3kit.errors import VerificationError
from tests.archivekit import finish, gz, member
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


def _swap_after_index(archive: Path, replacement: bytes) -> Callable[[ArchiveIndex], None]:
    """An admission hook that rewrites the archive in place right after it was indexed: the
    window a writer racing the reader would use (same inode, so the open handle sees it)."""

    def admit(index: ArchiveIndex) -> None:
        with open(archive, "r+b") as out:
            out.write(replacement)
            out.truncate()

    return admit


def test_an_archive_grown_between_index_and_write_writes_no_more_than_indexed(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "race.kit.tar.gz"
    archive.write_bytes(gz(finish(member("a.txt", b"small"))))
    bigger = gz(finish(member("a.txt", b"small") + member("b.bin", bytes(8 * 1024 * 1024))))
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(VerificationError) as info:
        extract_safely(archive, dest, admit=_swap_after_index(archive, bigger))
    assert info.value.code == "KIT_CHANGED"
    assert os.listdir(dest) == []


def test_an_archive_with_the_same_index_but_other_bytes_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "race.kit.tar.gz"
    archive.write_bytes(gz(finish(member("a.txt", b"genuine"))))
    dest = tmp_path / "dest"
    dest.mkdir()
    forged = gz(finish(member("a.txt", b"forged!")))
    with pytest.raises(VerificationError) as info:
        extract_safely(archive, dest, admit=_swap_after_index(archive, forged))
    assert info.value.code == "KIT_CHANGED"
    assert os.listdir(dest) == []
