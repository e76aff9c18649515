"""What a weights folder is (k3kit.weights.layouts): one meaning per folder, a canonical root, link
policy.

Refusals through the real CLI live in the adversarial corpus (tests/adversarial/attacks_weights.py);
these tests pin the accepted cases and the guarantees other modules rely on, on real folders.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from k3kit.errors import VerificationError
from k3kit.models import WeightsLock
from k3kit.publish.kit import load_lock
from k3kit.weights import check_file_set
from k3kit.weights.layouts import Layout, LinkPolicyViolation, locate, resolve_file
from tests.conftest import GoldenKit, run_k3kit


@pytest.fixture
def lock(golden: GoldenKit) -> WeightsLock:
    return load_lock(golden.lock)


@pytest.fixture
def cache(golden: GoldenKit, tmp_path: Path) -> Path:
    """A private copy of the golden cache root (snapshot links into blobs/ kept as links)."""
    return Path(shutil.copytree(golden.snapshot.parents[2], tmp_path / "hub", symlinks=True))


def _snapshot(cache: Path, lock: WeightsLock) -> Path:
    return cache / ("models--" + lock.repo.replace("/", "--")) / "snapshots" / lock.commit


def _no_link_on_path(path: Path) -> bool:
    return os.path.realpath(path) == str(path) and path.is_absolute()


def test_each_kind_is_named_and_all_resolve_to_the_same_real_snapshot(
    cache: Path, lock: WeightsLock
) -> None:
    snap = _snapshot(cache, lock).resolve()
    for given, kind in ((cache, "cache-root"), (snap.parent.parent, "repo"), (snap, "snapshot")):
        layout = locate(given, lock)
        assert (layout.kind, layout.given_as, layout.root) == ("snapshot", kind, snap)
        assert layout.allowed_link_roots == (snap.parent.parent / "blobs",)


def test_a_plain_folder_is_plain(golden: GoldenKit, lock: WeightsLock, weights: Path) -> None:
    layout = locate(weights, lock)
    assert (layout.kind, layout.given_as, layout.allowed_link_roots) == ("plain", "plain", ())


def test_root_is_the_canonical_real_path_even_when_given_through_links(
    cache: Path, lock: WeightsLock, weights: Path, tmp_path: Path
) -> None:
    """The documented guarantee launch relies on: Layout.root has no symlink component."""
    (tmp_path / "via").mkdir()
    (tmp_path / "via" / "hub").symlink_to(cache)
    (tmp_path / "via" / "snap").symlink_to(_snapshot(cache, lock))
    (tmp_path / "via" / "plain").symlink_to(weights)
    for given in ("hub", "snap", "plain"):
        root = locate(tmp_path / "via" / given, lock).root
        assert _no_link_on_path(root), root
    assert locate(tmp_path / "via" / "snap", lock).root == _snapshot(cache, lock).resolve()
    assert locate(tmp_path / "via" / "plain", lock).root == weights.resolve()


def test_verify_reports_the_real_folder_it_hashed(
    kit: Path, golden: GoldenKit, cache: Path, lock: WeightsLock, tmp_path: Path
) -> None:
    link = tmp_path / "models-here"
    link.symlink_to(cache)
    proc = run_k3kit("verify", kit, "--trust", golden.key.public, "--weights", link, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = json.loads(proc.stdout)["weights"]
    assert facts["root"] == str(_snapshot(cache, lock).resolve())
    assert facts["layout"] == "snapshot"


def test_weights_from_cache_root_repo_folder_and_snapshot_all_verify(
    kit: Path, golden: GoldenKit
) -> None:
    """Moved from tests/test_verify_attacks.py, with the repo folder added."""
    for where in (golden.snapshot.parents[2], golden.snapshot.parents[1], golden.snapshot):
        proc = run_k3kit("verify", kit, "--trust", golden.key.public, "--weights", where, "--json")
        assert proc.returncode == 0, proc.stdout
        assert json.loads(proc.stdout)["weights"]["layout"] == "snapshot"


def test_cache_root_bookkeeping_and_other_repos_are_not_ambiguous(
    cache: Path, lock: WeightsLock
) -> None:
    (cache / ".locks" / "models--x--y").mkdir(parents=True)
    (cache / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    (cache / "version.txt").write_text("1")
    (cache / "models--other--model" / "snapshots").mkdir(parents=True)
    (cache / "datasets--some--data").mkdir()
    repo = _snapshot(cache, lock).parent.parent
    (repo / ".no_exist").mkdir()
    assert locate(cache, lock).root == _snapshot(cache, lock).resolve()


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda c, r: (r / "config.json").write_text("{}"), "WEIGHTS_AMBIGUOUS"),
        (lambda c, r: (c / "config.json").write_text("{}"), "WEIGHTS_AMBIGUOUS"),
        (lambda c, r: shutil.rmtree(r / "snapshots"), "WEIGHTS_MISSING_SNAPSHOT"),
    ],
    ids=["repo-folder-with-loose-file", "cache-root-with-loose-file", "repo-without-snapshot"],
)
def test_cache_root_refusals(cache: Path, lock: WeightsLock, make: object, code: str) -> None:
    repo = _snapshot(cache, lock).parent.parent
    make(cache, repo)  # type: ignore[operator]
    with pytest.raises(VerificationError) as info:
        locate(cache, lock)
    assert info.value.code == code


def test_a_folder_inside_a_repo_folder_is_not_plain(cache: Path, lock: WeightsLock) -> None:
    with pytest.raises(VerificationError) as info:
        locate(_snapshot(cache, lock).parent, lock)  # snapshots/ itself
    assert info.value.code == "WEIGHTS_AMBIGUOUS"


def test_a_snapshot_of_another_repo_is_refused(
    cache: Path, lock: WeightsLock, tmp_path: Path
) -> None:
    other = tmp_path / "models--other--model" / "snapshots" / lock.commit
    other.parent.mkdir(parents=True)
    shutil.copytree(_snapshot(cache, lock), other, symlinks=False)
    with pytest.raises(VerificationError) as info:
        locate(other, lock)
    assert info.value.code == "WEIGHTS_WRONG_REPO"


def test_a_linked_snapshots_folder_in_a_cache_is_refused(
    cache: Path, lock: WeightsLock, tmp_path: Path
) -> None:
    snap = _snapshot(cache, lock)
    elsewhere = Path(shutil.copytree(snap, tmp_path / "elsewhere", symlinks=False))
    shutil.rmtree(snap)
    snap.symlink_to(elsewhere)
    with pytest.raises(VerificationError) as info:
        locate(cache, lock)
    assert info.value.code == "WEIGHTS_SYMLINK_ESCAPE"


def test_missing_folder(tmp_path: Path, lock: WeightsLock) -> None:
    with pytest.raises(VerificationError) as info:
        locate(tmp_path / "absent", lock)
    assert info.value.code == "WEIGHTS_NOT_FOUND"


def test_resolved_link_targets_have_no_link_on_their_path(cache: Path, lock: WeightsLock) -> None:
    layout = locate(cache, lock)
    for f in lock.files:
        real = resolve_file(layout, f.path)
        assert _no_link_on_path(real)
        assert real.parent == layout.allowed_link_roots[0]


def test_an_allowed_root_that_is_a_link_allows_nothing(cache: Path, lock: WeightsLock) -> None:
    """A caller (pull) that builds its Layout from realpath(DIR/blobs) with a planted
    ``DIR/blobs -> /`` passes "/" as an allowed root: it is not a real ``blobs`` folder."""
    layout = locate(cache, lock)
    rel = lock.files[0].path
    for roots in ((Path("/"),), (Path(os.path.realpath(cache)),)):
        with pytest.raises(LinkPolicyViolation) as info:
            resolve_file(Layout(layout.root, "snapshot", roots), rel)
        assert info.value.code == "WEIGHTS_SYMLINK_ESCAPE"


def test_hf_local_dir_bookkeeping_is_excused(kit: Path, weights: Path, golden: GoldenKit) -> None:
    meta = weights / ".cache" / "huggingface"
    (meta / "download").mkdir(parents=True)
    (meta / "download" / "config.json.metadata").write_text("sha\netag\n0\n")
    (meta / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    proc = run_k3kit("verify", kit, "--trust", golden.key.public, "--weights", weights, "--json")
    assert proc.returncode == 0, proc.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a folder whatever its mode")
def test_an_unreadable_subfolder_is_a_named_problem(weights: Path, lock: WeightsLock) -> None:
    sub = weights / "locked"
    sub.mkdir()
    sub.chmod(0)
    try:
        _, problems, _ = check_file_set(weights, lock)
    finally:
        sub.chmod(0o700)
    assert {(p.code, p.path) for p in problems} == {("WEIGHTS_WALK_FAILED", "locked")}
