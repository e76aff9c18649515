"""Differential test: an archive k3kit accepts means the same tree to GNU tar and to tarfile.

For every archive in the corpus (the genuine one, every named archive attack, and
hypothesis-generated variants) either the strict reader refuses it, or the set of
(path, bytes) it extracted is exactly what GNU ``tar -xzf`` (the real binary) and Python's
non-stream ``tarfile.open(mode="r:gz")`` extract. A refusal is always allowed; a disagreement
after acceptance is the "verified one tree, deployed another" bug this exists to rule out.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from k3kit.archive import extract_safely, pack
from k3kit.errors import VerificationError
from tests.adversarial.corpus import Workbench, discover
from tests.archivekit import directory, finish, gz, member
from tests.conftest import GoldenKit, KeyFiles

TAR = shutil.which("tar")
Tree = dict[str, bytes | None]  # path -> bytes (file) or None (directory)


def _tree(root: Path) -> Tree:
    out: Tree = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            out[rel] = b"<special>"
        else:
            out[rel] = None if path.is_dir() else path.read_bytes()
    return out


def k3kit_tree(archive: Path) -> Tree | None:
    """What the strict reader extracts, or None when it refuses."""
    try:
        staging, _ = extract_safely(archive)
    except VerificationError:
        return None
    try:
        return _tree(staging)
    finally:
        shutil.rmtree(staging)


def gnu_tar_tree(archive: Path) -> Tree | str:
    assert TAR is not None
    with tempfile.TemporaryDirectory() as dest:
        proc = subprocess.run(
            [TAR, "-xzf", str(archive), "-C", dest, "--no-same-owner", "--no-same-permissions"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            return f"GNU tar failed: {proc.stderr.decode(errors='replace')[-300:]}"
        return _tree(Path(dest))


def tarfile_tree(archive: Path) -> Tree | str:
    out: Tree = {}
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            for info in tar.getmembers():
                name = info.name.rstrip("/")
                parts = name.split("/")
                for i in range(1, len(parts)):
                    out.setdefault("/".join(parts[:i]), None)
                if info.isdir():
                    out[name] = None
                elif info.isreg():
                    handle = tar.extractfile(info)
                    assert handle is not None
                    out[name] = handle.read()
                else:
                    out[name] = b"<special>"
    except (tarfile.TarError, EOFError, OSError) as exc:
        return f"tarfile failed: {exc}"
    return out


def assert_same_meaning(archive: Path) -> bool:
    """True when k3kit accepted the archive (and the three readers agree); False on refusal."""
    ours = k3kit_tree(archive)
    if ours is None:
        return False
    assert tarfile_tree(archive) == ours, f"{archive.name}: tarfile extracts another tree"
    if TAR is not None:
        assert gnu_tar_tree(archive) == ours, f"{archive.name}: GNU tar extracts another tree"
    return True


@pytest.fixture(scope="module")
def genuine(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("differential") / "genuine.kit.tar.gz"
    pack(golden.kit, out)
    return out


def _attack_archives(
    golden: GoldenKit, genuine: Path, other: KeyFiles, root: Path
) -> Iterator[tuple[str, Path]]:
    for name, case in sorted(discover().items()):
        if case.area != "archive":
            continue
        bench = Workbench(golden, genuine, other, root / name)
        bench.root.mkdir(parents=True)
        argv = case.build(bench)
        yield name, Path(argv[1])


@pytest.mark.skipif(TAR is None, reason="GNU tar is not installed")
def test_genuine_archive_means_the_same_tree_to_all_three_readers(genuine: Path) -> None:
    assert assert_same_meaning(genuine)


def test_every_archive_attack_is_refused_or_means_one_tree(
    golden: GoldenKit, genuine: Path, other_key: KeyFiles, tmp_path: Path
) -> None:
    names = []
    for name, archive in _attack_archives(golden, genuine, other_key, tmp_path):
        accepted = assert_same_meaning(archive)
        assert not accepted, f"{name}: an attack archive was accepted"
        names.append(name)
    assert len(names) >= 40


_VALID = ["a", "b.txt", "d", "d/x", "d/y", "e/f/g", "run.sh", "profiles/p/run.sh", "c-1_2.json"]
_ODD = ["D/x", "A", "a/", "./a", "d//x", "..", "d/../x", "caf\u00e9"]
_DATA = st.binary(max_size=1200)


@st.composite
def _members(draw: st.DrawFn) -> bytes:
    names = draw(st.lists(st.sampled_from(_VALID), unique=True, max_size=5))
    names += draw(st.lists(st.sampled_from(_ODD), max_size=1))
    parts = []
    for name in draw(st.permutations(names)):
        kind = draw(st.sampled_from(["file", "file", "dir", "exec"]))
        if kind == "dir":
            parts.append(directory(name))
        else:
            mode = 0o755 if kind == "exec" else 0o644
            parts.append(member(name, draw(_DATA), mode=mode))
    return b"".join(parts)


@pytest.mark.skipif(TAR is None, reason="GNU tar is not installed")
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    members=_members(),
    flip=st.sampled_from([None, None, None])
    | st.tuples(st.integers(0, 10**6), st.integers(1, 255)),
)
def test_generated_archives_are_refused_or_mean_one_tree(
    members: bytes, flip: tuple[int, int] | None
) -> None:
    tar = bytearray(finish(members))
    if flip is not None:
        at, mask = flip
        tar[at % len(tar)] ^= mask
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "generated.kit.tar.gz"
        archive.write_bytes(gz(bytes(tar)))
        assert_same_meaning(archive)


@pytest.mark.skipif(TAR is None, reason="GNU tar is not installed")
def test_a_hand_built_archive_is_accepted_and_means_one_tree(tmp_path: Path) -> None:
    """The generated test is not vacuous: archives of this shape are accepted and compared."""
    archive = tmp_path / "hand.kit.tar.gz"
    body = directory("d") + member("d/x", b"one") + member("e/f/run.sh", b"#!", mode=0o755)
    archive.write_bytes(gz(finish(body)))
    assert assert_same_meaning(archive)
    assert k3kit_tree(archive) == {
        "d": None,
        "d/x": b"one",
        "e": None,
        "e/f": None,
        "e/f/run.sh": b"#!",
    }
