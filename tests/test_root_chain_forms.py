"""One kit, one verdict: the same ``root/`` chain shapes as a kit FOLDER and as a ``.kit.tar.gz``.

The attack: a kit whose ``root/`` holds something the folder reader refuses is shipped as an
archive instead, hoping the archive reader judges ``root/`` by another rule (it did: a root file
past the walk's reach was ignored before extraction, so the node accepted and remembered the
roots before it, and a stray ``root/notes.txt`` was ``ARCHIVE_NOT_A_KIT`` in the archive but
``ROOT_CHAIN_MALFORMED`` in the folder). Each shape is written into a real kit, packed by the
real packer (or by tarfile where the packer refuses: a link, a duplicate), and run through the
real CLI: ``verify`` and ``install`` on both forms and ``launch`` on the folder, with a pinned
root (``--root``) and with plain keys (``--trust``).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from k3kit._fs import walk
from k3kit.archive import pack
from k3kit.signing.trust.edit import add_key
from k3kit.signing.trust.root import MAX_ROOT_BYTES, MAX_ROOTS
from tests.conftest import GoldenKit, KeyFiles, run_k3kit
from tests.launchkit import engine_env, make_fake_engine
from tests.trustkit import attach, keypair, pub, root_v1, write_root


def refusal(*args: str | Path, env: dict[str, str] | None = None) -> tuple[int, str | None]:
    """Exit code and, for a refusal, the first failed check's code (a report) or the error's."""
    proc = run_k3kit(*args, "--json", env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == 0:
        return 0, None
    out = json.loads(proc.stdout)
    if "checks" in out:
        return proc.returncode, next(c["code"] for c in out["checks"] if c["status"] == "failed")
    return proc.returncode, out["error"]["code"]


def _tar_as_is(
    kit: Path, out: Path, extra: Callable[[tarfile.TarFile], None] | None = None
) -> Path:
    """A ustar archive of ``kit`` exactly as it is, links included (the packer refuses them)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for entry in sorted(walk(kit), key=lambda e: e.rel):
            tar.add(kit / entry.rel, arcname=entry.rel, recursive=False)
        if extra is not None:
            extra(tar)
    out.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    return out


Shape = Callable[[Path, Path], None]  # (kit folder, root 2 signed by root 1's key)


def _write(rel: str, data: bytes = b"{}") -> Shape:
    def shape(kit: Path, _root2: Path) -> None:
        (kit / rel).parent.mkdir(parents=True, exist_ok=True)
        (kit / rel).write_bytes(data)

    return shape


def _folder(rel: str) -> Shape:
    def shape(kit: Path, _root2: Path) -> None:
        (kit / rel).mkdir(parents=True)

    return shape


def _gap_past_reach(kit: Path, root2: Path) -> None:
    """A genuine root 2, then a root far past what the walk can reach from the pinned root."""
    attach(kit, root2)
    (kit / "root" / f"{MAX_ROOTS + 10}.root.json").write_bytes(root2.read_bytes())


def _too_many(kit: Path, _root2: Path) -> None:
    for v in range(100, 101 + MAX_ROOTS):
        (kit / "root" / f"{v}.root.json").write_bytes(b"{}")


def _root_is_a_file(kit: Path, _root2: Path) -> None:
    shutil.rmtree(kit / "root")
    (kit / "root").write_bytes(b"not a folder")


SHAPES: dict[str, tuple[Shape, str]] = {
    "gap_within_reach": (_write("root/3.root.json"), "ROOT_CHAIN_GAP"),
    "gap_past_the_walks_reach": (_gap_past_reach, "ROOT_CHAIN_GAP"),
    "a_non_root_file": (_write("root/notes.txt", b"x"), "ROOT_CHAIN_MALFORMED"),
    "a_leading_zero_name": (_write("root/02.root.json"), "ROOT_CHAIN_MALFORMED"),
    "a_name_without_root": (_write("root/2.json"), "ROOT_CHAIN_MALFORMED"),
    "a_nested_root": (_write("root/sub/2.root.json"), "ROOT_CHAIN_MALFORMED"),
    "a_folder_named_like_a_root": (_folder("root/2.root.json"), "ROOT_CHAIN_MALFORMED"),
    "an_empty_subfolder": (_folder("root/sub"), "ROOT_CHAIN_MALFORMED"),
    "an_oversized_root_past_reach": (
        _write("root/900.root.json", b" " * (MAX_ROOT_BYTES + 1)),
        "ROOT_CHAIN_MALFORMED",
    ),
    "more_roots_than_the_cap": (_too_many, "ROOT_CHAIN_MALFORMED"),
    "root_is_a_file": (_root_is_a_file, "ROOT_CHAIN_MALFORMED"),
}


@pytest.fixture(scope="module")
def publisher(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The publisher's pinned root 1 (release key: the golden kit's) and a genuine root 2."""
    folder = tmp_path_factory.mktemp("publisher")
    key: KeyFiles = keypair(folder, "root-a")
    body = root_v1([key], [golden.key])
    pinned = write_root(folder / "1.root.json", body, [key])
    two = add_key(body, "release", pub(keypair(folder, "release-2")), expires=body.expires)
    return pinned, write_root(folder / "2.root.json", two, [key])


@pytest.mark.parametrize("anchor", ["root", "trust"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_root_chain_shape_gets_one_verdict_as_a_folder_and_as_an_archive(
    golden: GoldenKit, publisher: tuple[Path, Path], tmp_path: Path, shape: str, anchor: str
) -> None:
    pinned, root2 = publisher
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    attach(kit, pinned)
    build, expected = SHAPES[shape]
    build(kit, root2)
    archive = tmp_path / "kimi.kit.tar.gz"
    pack(kit, archive)
    trust = ["--root", str(pinned)] if anchor == "root" else ["--trust", str(golden.key.public)]
    verdicts: dict[str, tuple[int, str | None]] = {}
    for form, target in (("folder", kit), ("archive", archive)):
        state = tmp_path / f"state-{form}"
        verdicts[f"verify {form}"] = refusal("verify", target, *trust, "--state-dir", state)
        verdicts[f"install {form}"] = refusal(
            "install", target, *trust, "--state-dir", state, "--into", tmp_path / f"into-{form}"
        )
    fake = make_fake_engine(tmp_path / "engine")
    verdicts["launch folder"] = refusal(
        "launch", kit, "--no-preflight", "--profile", "interactive", *trust,
        "--state-dir", tmp_path / "state-launch", "--weights", golden.snapshot, "--dry-run",
        env=engine_env(fake),
    )  # fmt: skip
    if anchor == "trust" and expected == "ROOT_CHAIN_GAP":
        expected_verdict: tuple[int, str | None] = (0, None)  # plain keys never walk the chain
    else:
        expected_verdict = (1, expected)
    assert set(verdicts.values()) == {expected_verdict}, verdicts


def test_an_archive_refused_for_a_root_past_reach_leaves_the_node_state_as_the_folder_does(
    golden: GoldenKit, publisher: tuple[Path, Path], tmp_path: Path
) -> None:
    """Before, the archive's check from its tar index walked to the genuine root 2 and recorded
    it among the node's accepted roots, then the extracted copy failed ROOT_CHAIN_GAP: the same
    refused kit changed the node's trust as an archive and not as a folder."""
    pinned, root2 = publisher
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    attach(kit, pinned)
    _gap_past_reach(kit, root2)
    archive = tmp_path / "kimi.kit.tar.gz"
    pack(kit, archive)
    for form, target in (("folder", kit), ("archive", archive)):
        state = tmp_path / f"state-{form}"
        assert refusal("install", target, "--root", pinned, "--state-dir", state,
                       "--into", tmp_path / "into") == (1, "ROOT_CHAIN_GAP")  # fmt: skip
        held = sorted(p.name for p in state.rglob("*.root.json")) if state.exists() else []
        assert held == [], (form, held)
    assert not (tmp_path / "into").exists() or not any((tmp_path / "into").iterdir())


def test_a_link_under_root_is_refused_in_both_forms_before_anything_is_read(
    golden: GoldenKit, publisher: tuple[Path, Path], tmp_path: Path
) -> None:
    """A link cannot be the same bytes in both forms: the folder's ``root/2.root.json`` pointing
    at a root elsewhere is ``ROOT_CHAIN_MALFORMED`` (the one root rule), the tar member that is a
    link is refused by the archive reader's member policy (``ARCHIVE_MEMBER_UNSAFE``) before any
    rule about names runs, wherever it sits. Neither is followed."""
    pinned, root2 = publisher
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    attach(kit, pinned)
    os.symlink(root2, kit / "root" / "2.root.json")
    archive = _tar_as_is(kit, tmp_path / "linked.kit.tar.gz")
    for verb in ("verify", "install"):
        extra = ["--into", str(tmp_path / "into")] if verb == "install" else []
        folder = refusal(verb, kit, "--root", pinned, "--state-dir", tmp_path / "s1", *extra)
        packed = refusal(verb, archive, "--root", pinned, "--state-dir", tmp_path / "s2", *extra)
        assert folder == (1, "ROOT_CHAIN_MALFORMED"), folder
        assert packed == (1, "ARCHIVE_MEMBER_UNSAFE"), packed
    assert not (tmp_path / "s2").exists() or not list((tmp_path / "s2").rglob("2.root.json"))


def test_an_archive_carrying_one_root_version_twice_is_refused_not_resolved_by_order(
    golden: GoldenKit, publisher: tuple[Path, Path], tmp_path: Path
) -> None:
    """A duplicate has no folder form (one name, one file): in a tar the second member of the
    same name would overwrite the first on extraction, so the check from the index and the
    extracted copy could see different roots. The reader refuses the name twice."""
    pinned, root2 = publisher
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    attach(kit, pinned, root2)

    def second_root2(tar: tarfile.TarFile) -> None:
        data = pinned.read_bytes()
        info = tarfile.TarInfo("root/2.root.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    archive = _tar_as_is(kit, tmp_path / "twice.kit.tar.gz", second_root2)
    state = tmp_path / "state"
    assert refusal("verify", archive, "--root", pinned, "--state-dir", state) == (
        1,
        "ARCHIVE_MEMBER_UNSAFE",
    )
    assert not state.exists() or not list(state.rglob("2.root.json"))
