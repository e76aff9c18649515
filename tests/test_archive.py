"""pack and archive verification: deterministic bytes, and the extraction policy's refusals."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from tests.conftest import GoldenKit, run_k3kit


def test_pack_is_deterministic_and_the_archive_verifies(golden: GoldenKit, tmp_path: Path) -> None:
    outs = []
    for name in ("a.kit.tar.gz", "b.kit.tar.gz"):
        proc = run_k3kit("pack", golden.kit, "-o", tmp_path / name, "--json")
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout))
    assert outs[0]["sha256"] == outs[1]["sha256"]
    assert (tmp_path / "a.kit.tar.gz").read_bytes() == (tmp_path / "b.kit.tar.gz").read_bytes()
    proc = run_k3kit("verify", tmp_path / "a.kit.tar.gz", "--trust", golden.key.public,
                     "--weights", golden.snapshot, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["checks"][0] == {"id": "archive", "ok": True, "status": "passed",
                                   "detail": f"sha256:{outs[0]['sha256']}"}
    refused = run_k3kit("pack", golden.kit, "-o", tmp_path / "a.kit.tar.gz")
    assert refused.returncode == 3


def _members_of(golden: GoldenKit) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    out = []
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
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    path.write_bytes(gzip.compress(raw.getvalue()))


def _regular(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def _setuid(name: str) -> tuple[tarfile.TarInfo, bytes]:
    info, data = _regular(name)
    info.mode = 0o4755
    return info, data


ATTACKS = {
    "archive_member_dotdot": [_regular("../evil.sh")],
    "archive_member_nested_dotdot": [_regular("profiles/../../evil.sh")],
    "archive_member_absolute": [_regular("/etc/cron.d/evil")],
    "archive_member_symlink": [_special("evil-link", tarfile.SYMTYPE, "/etc/passwd")],
    "archive_member_hardlink": [_special("evil-hard", tarfile.LNKTYPE, "README.md")],
    "archive_member_fifo": [_special("evil-fifo", tarfile.FIFOTYPE)],
    "archive_member_setuid": [_setuid("evil-suid")],
    "archive_member_duplicate": [_regular("README.md", b"second copy")],
    "archive_member_case_collision": [_regular("readme.md")],
    "archive_member_backslash": [_regular("profiles\\evil")],
    "archive_member_nfd_name": [_regular("cafe\u0301.txt")],
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_archive_attack_is_rejected_before_anything_is_used(
        attack: str, golden: GoldenKit, tmp_path: Path) -> None:
    archive = tmp_path / f"{attack}.kit.tar.gz"
    _write_archive(archive, _members_of(golden) + ATTACKS[attack])
    proc = run_k3kit("verify", archive, "--trust", golden.key.public, "--json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["checks"][0]["id"] == "archive"
    assert report["checks"][0]["code"] == "ARCHIVE_MEMBER_UNSAFE"
    assert len(report["checks"]) == 1  # nothing from the archive was read as a kit
    assert not (tmp_path / "evil.sh").exists() and not (tmp_path.parent / "evil.sh").exists()


def test_archive_that_is_not_gzip_is_rejected(golden: GoldenKit, tmp_path: Path) -> None:
    fake = tmp_path / "fake.kit.tar.gz"
    fake.write_bytes(b"PK\x03\x04 a zip file pretending")
    proc = run_k3kit("verify", fake, "--trust", golden.key.public, "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["checks"][0]["code"] == "ARCHIVE_FORMAT"


def test_archive_with_a_tampered_member_fails_the_manifest(golden: GoldenKit,
                                                          tmp_path: Path) -> None:
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
    assert kit_files["problems"] == [{"code": "KIT_FILE_CHANGED", "path": "README.md",
                                      "detail": kit_files["problems"][0]["detail"]}]
