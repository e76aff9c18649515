"""`k3kit install`: work is budgeted before it is done; a killed install leaves nothing for good.

Issue 19, class 7. The attacker hands over a small archive that inflates into many files or many
bytes; before, they were written into the staging folder and only then refused. Now the whole tar
index is read and admitted first, so a refused archive writes nothing. What the install writes is
observed from inside the real CLI process with Python's own audit hooks (``sys.addaudithook``:
every ``open`` for writing and every ``mkdir`` under ``--into``), not by patching k3kit. The stated
budget of a refused archive: the staging holder ``.k3kit-install-*`` and its lock file, nothing
else. A SIGKILL'd install (a real process, paused by the same hook mid-extraction) leaves its
staging folder, which the next install into the same folder removes; a look-alike folder that
k3kit did not make, or whose install is still running, is left alone.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from k3kit.archive import pack
from tests.archivekit import gzip_parts, tar_parts
from tests.conftest import GoldenKit, run_k3kit
from tests.cotenant import cotenant_python, needs_root, shared_folder

FOLDER = "kimi-k3-b300x8-1.0.0"
STAGING = ".k3kit-install-"
MARKER = ".k3kit-staging"

# Runs the real CLI in-process with an audit hook that records what it creates under --into;
# with a pause file, it stops at the first file extracted from the archive (for SIGKILL).
_WATCHED_CLI = r"""
import atexit, json, os, sys, time
into, report, pause = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3]
made = []
def _under(path):
    try:
        return os.path.realpath(os.path.dirname(os.fsdecode(path))).startswith(into)
    except (TypeError, ValueError):
        return False
def hook(event, args):
    if event == "os.mkdir" and _under(args[0]):
        made.append(["dir", os.fsdecode(args[0])])
    elif event == "open" and not isinstance(args[0], int) and args[2] & os.O_CREAT \
            and _under(args[0]):
        path = os.fsdecode(args[0])
        made.append(["file", path])
        if pause and not os.path.basename(path).startswith(".k3kit-staging"):
            open(pause, "w").close()
            time.sleep(600)
atexit.register(lambda: open(report, "w").write(json.dumps(made)))
sys.addaudithook(hook)
sys.argv = ["k3kit", *sys.argv[4:]]
from k3kit.cli import main
main()
"""


@pytest.fixture(scope="module")
def archive(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("archive") / f"{FOLDER}.kit.tar.gz"
    pack(golden.kit, out)
    return out


def _watched(
    tmp_path: Path, kit: Path, trust: Path, into: Path, pause: Path | None = None
) -> subprocess.Popen[str]:
    script = tmp_path / "watched_cli.py"
    script.write_text(_WATCHED_CLI)
    argv = ["install", str(kit), "--trust", str(trust), "--into", str(into), "--json"]
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1793491200"}
    watch = [str(into), str(tmp_path / "made.json"), str(pause or "")]
    return subprocess.Popen(
        [sys.executable, str(script), *watch, *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _install_watched(tmp_path: Path, kit: Path, trust: Path, into: Path) -> tuple[dict, list]:  # type: ignore[type-arg]
    proc = _watched(tmp_path, kit, trust, into)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr
    made = json.loads((tmp_path / "made.json").read_text())
    return json.loads(stdout), made


def _beyond_budget(made: list[list[str]], into: Path) -> list[str]:
    """What was created besides the staging holder and its lock file."""
    root = os.path.realpath(into)
    out = []
    for _kind, path in made:
        rel = os.path.relpath(os.path.realpath(path), root).split(os.sep)
        holder_only = len(rel) == 1 and rel[0].startswith(STAGING)
        marker = len(rel) == 2 and rel[0].startswith(STAGING) and rel[1].startswith(MARKER)
        if not (holder_only or marker):
            out.append("/".join(rel))
    return out


def _tar_gz(out: Path, members: list[tuple[str, int]]) -> Path:
    """A plain ustar archive of ``members`` (name, size of zeros), gzip'd at level 9 (the zeros
    compressed once a MiB: :func:`tests.archivekit.gzip_parts`)."""
    out.write_bytes(gzip_parts(tar_parts(list(members))))
    return out


class _Zeros(io.RawIOBase):
    """``size`` zero bytes as a stream, for ``tarfile`` (the builder's own check below)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def test_the_bomb_builder_writes_what_tarfile_and_gzip_write() -> None:
    """The bombs below are built a MiB of compressed zeros at a time; what they decompress to is
    byte for byte what ``tarfile`` over ``gzip`` writes for the same members (a document, zeros
    over and under a MiB, an empty file), so the tests attack with the archive they name."""
    files: list[tuple[str, bytes | int]] = [
        ("MANIFEST.json", b'{"files":[]}'),
        ("z0.bin", 3 * 1024 * 1024 + 700),
        ("z1.bin", 5),
        ("empty.txt", 0),
    ]
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, filename="", mode="wb", compresslevel=9, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar,
    ):
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = data if isinstance(data, int) else len(data)
            tar.addfile(info, _Zeros(data) if isinstance(data, int) else io.BytesIO(data))
    fast = gzip_parts(tar_parts(files))
    assert gzip.decompress(fast) == gzip.decompress(raw.getvalue())
    assert len(fast) < 20_000


def test_a_62_kb_archive_of_10000_empty_files_writes_none_of_them(
    golden: GoldenKit, tmp_path: Path
) -> None:
    bomb = _tar_gz(tmp_path / "files.kit.tar.gz", [(f"f{i:05d}.txt", 0) for i in range(10_000)])
    assert bomb.stat().st_size < 100_000  # a few dozen KB on the wire
    into = tmp_path / "kits"
    out, made = _install_watched(tmp_path, bomb, golden.key.public, into)
    assert out["error"]["code"] == "ARCHIVE_NOT_A_KIT"
    assert _beyond_budget(made, into) == []
    assert os.listdir(into) == []


def test_a_105_kb_archive_of_100_mib_of_zeros_writes_none_of_it(
    golden: GoldenKit, tmp_path: Path
) -> None:
    # Four 25 MiB members: each under the 64 MiB member cap, which the headers alone enforce.
    shards = [(f"shard-{i}.bin", 25 * 1024 * 1024) for i in range(4)]
    bomb = _tar_gz(tmp_path / "zeros.kit.tar.gz", shards)
    assert bomb.stat().st_size < 200_000
    into = tmp_path / "kits"
    out, made = _install_watched(tmp_path, bomb, golden.key.public, into)
    assert out["error"]["code"] == "ARCHIVE_NOT_A_KIT"
    assert _beyond_budget(made, into) == []
    assert os.listdir(into) == []


def test_an_archive_over_the_member_cap_is_refused_from_its_headers(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """10,001 members: the cap used to trip only after 10,000 files had been written."""
    bomb = _tar_gz(tmp_path / "many.kit.tar.gz", [(f"f{i:05d}", 0) for i in range(10_001)])
    into = tmp_path / "kits"
    out, made = _install_watched(tmp_path, bomb, golden.key.public, into)
    assert out["error"]["code"] == "ARCHIVE_TOO_LARGE"
    assert _beyond_budget(made, into) == []


def test_a_kit_archive_with_a_file_its_manifest_does_not_list_writes_nothing(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The genuine kit plus one extra member: refused from the index, against its own manifest."""
    raw = io.BytesIO(gzip.decompress(archive.read_bytes()))
    out_tar = io.BytesIO()
    with (
        tarfile.open(fileobj=raw, mode="r:") as src,
        tarfile.open(fileobj=out_tar, mode="w", format=tarfile.USTAR_FORMAT) as dst,
    ):
        for member in src.getmembers():
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        extra = tarfile.TarInfo("sitecustomize.py")
        extra.size = 10
        dst.addfile(extra, io.BytesIO(b"import os\n"))
    bad = tmp_path / "extra.kit.tar.gz"
    bad.write_bytes(gzip.compress(out_tar.getvalue(), mtime=0))
    into = tmp_path / "kits"
    out, made = _install_watched(tmp_path, bad, golden.key.public, into)
    assert out["error"]["code"] == "ARCHIVE_NOT_A_KIT"
    assert "sitecustomize.py" in out["error"]["message"]
    assert _beyond_budget(made, into) == []


def test_a_kit_folder_of_10001_files_is_refused_before_anything_is_copied(
    golden: GoldenKit, tmp_path: Path
) -> None:
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    for i in range(10_001):
        (kit / f"f{i:05d}.txt").touch()
    into = tmp_path / "kits"
    out, made = _install_watched(tmp_path, kit, golden.key.public, into)
    assert out["error"]["code"] == "ARCHIVE_TOO_LARGE"
    assert _beyond_budget(made, into) == []


def test_a_kit_folder_with_a_65_mib_sparse_file_is_refused_before_anything_is_copied(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Costs the attacker no disk (a sparse file); the copy used to write all 65 MiB."""
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    with open(kit / "blob.bin", "wb") as blob:
        blob.truncate(65 * 1024 * 1024)
    into = tmp_path / "kits"
    out, made = _install_watched(tmp_path, kit, golden.key.public, into)
    assert out["error"]["code"] == "ARCHIVE_TOO_LARGE"
    assert "nothing was copied" in out["error"]["message"]
    assert _beyond_budget(made, into) == []


def test_a_genuine_kit_with_empty_evidence_and_root_folders_still_installs(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The admission never refuses what the verifier accepts: empty evidence/ and root/."""
    raw = io.BytesIO(gzip.decompress(archive.read_bytes()))
    out_tar = io.BytesIO()
    with (
        tarfile.open(fileobj=raw, mode="r:") as src,
        tarfile.open(fileobj=out_tar, mode="w", format=tarfile.USTAR_FORMAT) as dst,
    ):
        for member in src.getmembers():
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        for name in ("evidence", "root"):
            if name not in src.getnames():
                folder = tarfile.TarInfo(name)
                folder.type, folder.mode = tarfile.DIRTYPE, 0o755
                dst.addfile(folder)
    kit = tmp_path / "empty-folders.kit.tar.gz"
    kit.write_bytes(gzip.compress(out_tar.getvalue(), mtime=0))
    proc = run_k3kit("install", kit, "--trust", golden.key.public, "--into", tmp_path / "kits")
    assert proc.returncode == 0, proc.stderr


def _staging_in(into: Path) -> list[str]:
    return sorted(n for n in os.listdir(into) if n.startswith(STAGING))


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    for _ in range(3000):  # polls until the install pauses; no assertion on how long it took
        if path.exists() or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert path.exists(), proc.communicate()[1] if proc.poll() is not None else "never paused"


def test_a_sigkilled_install_leaves_staging_that_the_next_install_removes(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    into = tmp_path / "kits"
    paused = tmp_path / "paused"
    first = _watched(tmp_path, archive, golden.key.public, into, pause=paused)
    try:
        _wait_for(paused, first)
        (left,) = _staging_in(into)
        # While it runs, its staging is not stale: another install leaves it alone.
        proc = run_k3kit("install", archive, "--trust", golden.key.public, "--into", into)
        assert proc.returncode == 0, proc.stderr
        assert _staging_in(into) == [left]
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
    assert first.returncode == -signal.SIGKILL
    assert _staging_in(into) == [left]  # no finally ran: this is what a kill leaves
    assert (into / left / MARKER).is_file()
    proc = run_k3kit("install", archive, "--trust", golden.key.public, "--into", into)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(into)) == [FOLDER]


def test_a_look_alike_staging_folder_without_the_marker_is_kept(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    into = tmp_path / "kits"
    mine = into / f"{STAGING}notes"
    mine.mkdir(parents=True)
    (mine / "draft.txt").write_text("mine\n")
    proc = run_k3kit("install", archive, "--trust", golden.key.public, "--into", into)
    assert proc.returncode == 0, proc.stderr
    assert (mine / "draft.txt").read_text() == "mine\n"


@needs_root
def test_a_cotenants_staging_look_alike_with_a_marker_is_kept(
    archive: Path, golden: GoldenKit
) -> None:
    """In a sticky shared --into, another user plants a folder named and marked like staging,
    its lock free: it is not this user's, so it is not removed."""
    with shared_folder() as into:
        cotenant_python(
            "import os, sys; d = os.path.join(sys.argv[1], '.k3kit-install-bait'); os.mkdir(d); "
            "open(os.path.join(d, '.k3kit-staging'), 'w').close(); "
            "open(os.path.join(d, 'precious'), 'w').write('theirs')",
            str(into),
        )
        proc = run_k3kit("install", archive, "--trust", golden.key.public, "--into", into)
        assert proc.returncode == 0, proc.stderr
        assert (into / ".k3kit-install-bait" / "precious").read_text() == "theirs"


def _forged_manifest(golden: GoldenKit, members: list[tuple[str, int]]) -> bytes:
    """The genuine kit's MANIFEST.json with its file list replaced by ``members`` (zeros), in the
    canonical form a real manifest has: the forger writes it, no key needed."""
    manifest = json.loads((golden.kit / "MANIFEST.json").read_bytes())
    zeros = {size: hashlib.sha256(bytes(size)).hexdigest() for _, size in members}
    manifest["files"] = [
        {"path": name, "sha256": zeros[size], "size": size} for name, size in members
    ]
    return json.dumps(manifest, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def _bomb_with_foreign_receipt(
    golden: GoldenKit, out: Path, members: list[tuple[str, int]], *, receipt: bool = True
) -> Path:
    """The attack as the outside pass made it: the bomb's own MANIFEST.json lists exactly its
    members (so the index admits them against it), and beside it sits a *genuine* receipt,
    signed by the trusted key, of another kit (the publisher's own, from any public archive);
    ``receipt=False`` leaves the receipt out."""
    documents = {"MANIFEST.json": _forged_manifest(golden, members)}
    if receipt:
        documents["receipt.dsse.json"] = (golden.kit / "receipt.dsse.json").read_bytes()
    files: list[tuple[str, bytes | int]] = [*documents.items(), *members]
    out.write_bytes(gzip_parts(tar_parts(files)))
    return out


@pytest.mark.parametrize(
    "members",
    [
        [(f"z{i}.bin", 64 * 1024 * 1024) for i in range(7)],
        [(f"f{i:05d}.txt", 0) for i in range(9_990)],
    ],
    ids=["7 files of 64 MiB of zeros", "9,990 empty files"],
)
def test_a_bomb_whose_own_manifest_admits_it_beside_a_foreign_genuine_receipt_writes_nothing(
    golden: GoldenKit, tmp_path: Path, members: list[tuple[str, int]]
) -> None:
    """Finding 2 of the outside pass: the bomb's budget used to be checked against the
    attacker's own manifest, so 461 KB of archive put 448 MiB into --into before the receipt was
    found to sign another kit. Now the receipt's signature and the signed kit checksum
    (sha256 of MANIFEST.json) are checked from the index, by verify's own steps: the forged
    manifest is refused (RECEIPT_KIT_MISMATCH, exit 1) with nothing beyond the staging holder
    written."""
    bomb = _bomb_with_foreign_receipt(golden, tmp_path / "bomb.kit.tar.gz", members)
    assert bomb.stat().st_size < 1_000_000
    into = tmp_path / "kits"
    out, made = _install_watched(tmp_path, bomb, golden.key.public, into)
    checks = {c["id"]: c for c in out["checks"]}
    assert checks["receipt_signature"]["ok"] is True  # the receipt is genuine...
    assert checks["kit_checksum"]["code"] == "RECEIPT_KIT_MISMATCH"  # ...but not this kit's
    assert out["installed"] is None
    assert _beyond_budget(made, into) == []
    assert os.listdir(into) == []


def test_a_bomb_with_no_receipt_is_refused_from_its_index(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Without a receipt there is nothing to check the manifest against: refused before a byte."""
    members = [(f"z{i}.bin", 16 * 1024 * 1024) for i in range(4)]
    bomb = _bomb_with_foreign_receipt(golden, tmp_path / "bomb.kit.tar.gz", members, receipt=False)
    into = tmp_path / "kits"
    out, made = _install_watched(tmp_path, bomb, golden.key.public, into)
    checks = {c["id"]: c for c in out["checks"]}
    assert checks["receipt_signature"]["code"] == "RECEIPT_MISSING"
    assert _beyond_budget(made, into) == []


def test_verify_of_the_same_bomb_reads_its_receipt_before_extracting(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """`verify` of an archive takes the same path as install: the forged manifest is refused from
    the index (the report's archive check passed, the kit checksum names the mismatch)."""
    members = [(f"z{i}.bin", 16 * 1024 * 1024) for i in range(4)]
    bomb = _bomb_with_foreign_receipt(golden, tmp_path / "bomb.kit.tar.gz", members)
    proc = run_k3kit("verify", bomb, "--trust", golden.key.public, "--json")
    assert proc.returncode == 1, proc.stderr
    checks = {c["id"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["archive"]["ok"] is True
    assert checks["kit_checksum"]["code"] == "RECEIPT_KIT_MISMATCH"
    assert "kit_files" not in checks  # never extracted, so never compared
