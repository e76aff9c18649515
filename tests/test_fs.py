"""The filesystem primitives every writer and reader goes through, one row per refusal or failure.

A failure part-way (the disk fills during fsync, a rename fails after the old folder was moved
aside) must leave the previous state whole and no temporary file behind; a read of a document
must refuse what is not a small regular file before it reads a byte of it.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from k3kit import _fs
from k3kit.errors import EnvironmentProblem, InputError, VerificationError
from tests.cotenant import COTENANT_UID, needs_root


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _fail_on(monkeypatch: pytest.MonkeyPatch, name: str, *, after: int = 0) -> None:
    """Make ``os.<name>`` fail with ENOSPC from its ``after+1``-th call on."""
    real = getattr(os, name)
    calls = {"n": 0}

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > after:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, failing)


def test_a_full_disk_during_fsync_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "receipt.json"
    target.write_bytes(b"old")
    _fail_on(monkeypatch, "fsync")
    with pytest.raises(EnvironmentProblem, match="No space left on device"):
        _fs.atomic_write(target, b"new", force=True)
    assert target.read_bytes() == b"old" and _leftovers(tmp_path) == []


def test_a_name_that_appears_during_the_write_is_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The existence check comes first; if another writer creates the name before the link,
    ``link`` fails and the other writer's file stays (no silent overwrite, even in a race)."""
    target = tmp_path / "lock.json"
    real_link = os.link

    def racing_link(src: Any, dst: Any, **kwargs: Any) -> None:
        Path(dst).write_bytes(b"theirs")
        real_link(src, dst, **kwargs)

    monkeypatch.setattr(os, "link", racing_link)
    with pytest.raises(InputError, match="exists") as info:
        _fs.atomic_write(target, b"mine")
    assert info.value.code == "OUTPUT_EXISTS"
    assert target.read_bytes() == b"theirs" and _leftovers(tmp_path) == []


def test_a_parent_that_is_a_file_is_an_environment_problem(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x")
    # Not "out.json exists, pass --force": the file in the way is the folder's name.
    with pytest.raises(EnvironmentProblem, match="cannot make its folder: File exists"):
        _fs.atomic_write(tmp_path / "file" / "out.json", b"{}")
    with pytest.raises(EnvironmentProblem, match="cannot create a staging directory"):
        _fs.staging_dir(tmp_path / "file" / "kit")


def test_an_existing_folder_is_kept_without_force(tmp_path: Path) -> None:
    dest = tmp_path / "kit"
    dest.mkdir()
    (dest / "MANIFEST.json").write_bytes(b"old")
    (dest / _fs.OUTPUT_MARKER).write_bytes(b"")  # written by k3kit: --force may replace it
    staged = _fs.staging_dir(dest)
    (staged / "MANIFEST.json").write_bytes(b"new")
    with pytest.raises(InputError, match="exists"):
        _fs.replace_dir(staged, dest, force=False)
    assert not staged.exists() and (dest / "MANIFEST.json").read_bytes() == b"old"


def test_a_failed_rename_puts_the_old_folder_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "kit"
    dest.mkdir()
    (dest / "MANIFEST.json").write_bytes(b"old")
    (dest / _fs.OUTPUT_MARKER).write_bytes(b"")  # written by k3kit: --force may replace it
    staged = _fs.staging_dir(dest)
    (staged / "MANIFEST.json").write_bytes(b"new")
    real_replace = os.replace
    calls: list[tuple[str, str]] = []

    def second_fails(src: Any, dst: Any) -> None:
        calls.append((Path(src).name, Path(dst).name))
        if len(calls) == 2:  # old aside worked; staged -> dest fails
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", second_fails)
    with pytest.raises(OSError, match="cross-device"):
        _fs.replace_dir(staged, dest, force=True)
    assert (dest / "MANIFEST.json").read_bytes() == b"old"
    assert [c[1] for c in calls] == [f".kit.old-{os.getpid()}", "kit", "kit"]


def test_replace_dir_with_force_swaps_and_removes_the_old(tmp_path: Path) -> None:
    dest = tmp_path / "kit"
    dest.mkdir()
    (dest / "stale").write_bytes(b"old")
    (dest / _fs.OUTPUT_MARKER).write_bytes(b"")  # written by k3kit: --force may replace it
    staged = _fs.staging_dir(dest)
    (staged / "fresh").write_bytes(b"new")
    _fs.replace_dir(staged, dest, force=True)
    assert sorted(p.name for p in dest.iterdir()) == ["fresh"]
    assert _leftovers(tmp_path) == []


def test_replace_dir_with_force_keeps_a_folder_k3kit_did_not_write(tmp_path: Path) -> None:
    dest = tmp_path / "src"
    dest.mkdir()
    (dest / "main.py").write_bytes(b"mine")
    staged = _fs.staging_dir(dest)
    with pytest.raises(InputError) as info:
        _fs.replace_dir(staged, dest, force=True)
    assert info.value.code == "OUTPUT_NOT_OURS"
    assert (dest / "main.py").read_bytes() == b"mine"
    assert _leftovers(tmp_path) == []


def test_remove_tree_removes_a_read_only_install_but_never_follows_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"x")
    tree = tmp_path / "installed"
    (tree / "deploy").mkdir(parents=True)
    (tree / "deploy" / "serve.yaml").write_bytes(b"a: 1\n")
    (tree / "link").symlink_to(outside)
    for folder in (tree / "deploy", tree):
        folder.chmod(0o555)
    _fs.remove_tree(tree)
    assert not tree.exists() and (outside / "keep").exists()


def _missing(p: Path) -> Path:
    return p


def _symlink(p: Path) -> Path:
    p.with_name("real").write_bytes(b"{}")
    p.symlink_to("real")
    return p


def _fifo(p: Path) -> Path:
    os.mkfifo(p)
    return p


def _folder(p: Path) -> Path:
    p.mkdir()
    return p


def _big(p: Path) -> Path:
    with open(p, "wb") as handle:
        handle.truncate(1 << 30)  # sparse: refused by size before a byte is read
    return p


READ_REFUSALS = [
    ("missing", _missing, "doc not found", "C"),
    ("symlink", _symlink, "cannot be opened (symlink or unreadable)", "C"),
    ("fifo (must not hang)", _fifo, "is not a regular file", "C"),
    ("folder", _folder, "is not a regular file", "C"),
    ("1 GiB sparse file", _big, "more than the 64-byte limit", "TOO_LARGE"),
]


@pytest.mark.parametrize(
    ("make", "message", "code"),
    [case[1:] for case in READ_REFUSALS],
    ids=[case[0] for case in READ_REFUSALS],
)
def test_read_capped_refuses(
    tmp_path: Path, make: Callable[[Path], Path], message: str, code: str
) -> None:
    path = make(tmp_path / "doc.json")
    with pytest.raises(VerificationError, match=re.escape(message)) as info:
        _fs.read_capped(
            path, 64, what="doc", error=VerificationError, code="C", too_large_code="TOO_LARGE"
        )
    assert info.value.code == code


def test_read_capped_cuts_a_file_that_grows_while_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fstat says 10 bytes, the read finds more: cut at cap + 1 and refused, never read on."""
    path = tmp_path / "doc.json"
    path.write_bytes(b"x" * 10_000)
    real_fstat = os.fstat

    def small_fstat(fd: int) -> Any:
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, *st[1:6], 10, *st[7:]))

    monkeypatch.setattr(os, "fstat", small_fstat)
    with pytest.raises(InputError, match="grew past 64 bytes"):
        _fs.read_capped(path, 64, what="doc", error=InputError, code="C")


def test_read_capped_reads_exactly_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(b"y" * 64)
    assert _fs.read_capped(path, 64, what="doc", error=InputError, code="C") == b"y" * 64


OPEN_REFUSALS = [
    ("missing", _missing, FileNotFoundError),
    ("symlink (ELOOP, never followed)", _symlink, OSError),
    ("fifo (must not hang)", _fifo, _fs.NotRegularFile),
    ("folder", _folder, _fs.NotRegularFile),
]


@pytest.mark.parametrize(
    ("make", "refusal"),
    [case[1:] for case in OPEN_REFUSALS],
    ids=[case[0] for case in OPEN_REFUSALS],
)
def test_open_regular_refuses(
    tmp_path: Path, make: Callable[[Path], Path], refusal: type[OSError]
) -> None:
    """The one safe open every reader of a planted file uses (read_capped, install's copy, the
    trust memory, the verification cache, the read lease, pull's SafeDir)."""
    path = make(tmp_path / "doc.json")
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(refusal) as info:
        _fs.open_regular(path)
    assert refusal is _fs.NotRegularFile or not isinstance(info.value, _fs.NotRegularFile)
    assert len(os.listdir("/proc/self/fd")) == before  # a refused file leaves no descriptor open


def test_open_regular_gives_the_descriptor_and_its_stat(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(b"{}")
    fd, st = _fs.open_regular(path)
    try:
        assert os.read(fd, 10) == b"{}"
        assert (st.st_ino, st.st_size) == (path.stat().st_ino, 2)
        assert not os.get_inheritable(fd)  # close-on-exec: never leaks into a launched engine
    finally:
        os.close(fd)


def test_walk_of_an_unlistable_root(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    with pytest.raises(EnvironmentProblem, match="cannot list"):
        list(_fs.walk(missing))
    seen: list[tuple[str, int | None]] = []
    assert list(_fs.walk(missing, on_error=lambda rel, exc: seen.append((rel, exc.errno)))) == []
    assert seen == [("", errno.ENOENT)]


def test_walk_reports_an_entry_it_cannot_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").write_bytes(b"1")
    (tmp_path / "b").write_bytes(b"2")
    real_lstat = os.lstat

    def lstat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path).name == "a":
            raise OSError(errno.ENAMETOOLONG, "File name too long")
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    with pytest.raises(OSError, match="File name too long"):
        list(_fs.walk(tmp_path))
    seen: list[str] = []
    entries = list(_fs.walk(tmp_path, on_error=lambda rel, exc: seen.append(rel)))
    assert [e.rel for e in entries] == ["b"] and seen == ["a"]


@pytest.mark.parametrize(
    ("mode", "unsafe"),
    [(0o755, False), (0o700, False), (0o1777, False), (0o775, True), (0o777, True), (0o757, True)],
    ids=["0755", "0700", "sticky 1777", "group-writable", "world-writable", "others-writable"],
)
def test_replaceable_by_others(tmp_path: Path, mode: int, unsafe: bool) -> None:
    folder = tmp_path / "kits"
    folder.mkdir()
    folder.chmod(mode)
    assert _fs.replaceable_by_others(folder) == (folder if unsafe else None)


def test_replaceable_by_others_looks_above(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    (tmp_path / "a").chmod(0o777)
    try:
        assert _fs.replaceable_by_others(folder) == tmp_path / "a"
    finally:
        (tmp_path / "a").chmod(0o755)


def test_a_folder_owned_by_another_user_is_replaceable(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a folder to another user")
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    os.chown(folder, 65534, 65534)
    assert _fs.replaceable_by_others(folder) == folder


def _tree(root: Path) -> Path:
    """A tree as ``install`` leaves it: ours, files 0444, folders 0555."""
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "file").write_text("x")
    (root / "sub" / "file").chmod(0o444)
    (root / "sub").chmod(0o555)
    root.chmod(0o555)
    return root


def test_foreign_entry_accepts_a_read_only_tree_of_ours(tmp_path: Path) -> None:
    from k3kit._fs import foreign_entry

    assert foreign_entry(_tree(tmp_path / "kit"), read_only=True) is None


def _while_open(root: Path, change: Callable[[Path], object]) -> None:
    """Make ``change`` inside a read-only tree, then put the folders back as install leaves them
    (a change to a folder's own mode stays)."""
    modes = {p: p.stat().st_mode & 0o777 for p in (root, root / "sub")}
    for folder in modes:
        folder.chmod(0o755)
    change(root)
    for folder, mode in modes.items():
        if folder.stat().st_mode & 0o777 == 0o755:
            folder.chmod(mode)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda r: (r / "sub" / "file").chmod(0o644), "sub/file is writable (mode 0644)"),
        (lambda r: (r / "sub").chmod(0o775), "sub is writable (mode 0775)"),
        (lambda r: r.chmod(0o757), "the folder itself is writable (mode 0757)"),
        (lambda r: os.mkfifo(r / "sub" / "pipe"), "sub/pipe is not a regular file"),
        (lambda r: (r / "sub" / "link").symlink_to("file"), "sub/link is not a regular file"),
    ],
    ids=["writable file", "group-writable folder", "world-writable root", "fifo", "link"],
)
def test_foreign_entry_names_what_install_cannot_have_left(
    tmp_path: Path, change: Callable[[Path], object], why: str
) -> None:
    from k3kit._fs import foreign_entry

    root = _tree(tmp_path / "kit")
    _while_open(root, change)
    assert foreign_entry(root, read_only=True) == why


def test_foreign_entry_refuses_a_link_in_place_of_the_folder(tmp_path: Path) -> None:
    from k3kit._fs import foreign_entry

    real = _tree(tmp_path / "real")
    (tmp_path / "kit").symlink_to(real)
    assert foreign_entry(tmp_path / "kit", read_only=True) == "the folder itself is not a folder"


@needs_root
def test_foreign_entry_names_another_owner(tmp_path: Path) -> None:
    from k3kit._fs import foreign_entry

    root = _tree(tmp_path / "kit")
    os.chown(root / "sub" / "file", COTENANT_UID, COTENANT_UID)
    assert foreign_entry(root, read_only=True) == f"sub/file is owned by uid {COTENANT_UID}"


def test_program_on_path_looks_a_bare_name_up_and_never_takes_a_path(tmp_path: Path) -> None:
    """The one lookup of programs run by name (engine, nvidia-smi, credential helpers): a name
    with a ``/`` is no lookup (``shutil.which`` would run ``../x`` as a path); a bare name is
    found on the given PATH, with the verdict of :func:`_fs.placeable_by_others`."""
    program = tmp_path / "prog"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    real = Path(os.path.realpath(program))
    assert _fs.program_on_path("prog", str(tmp_path)) == (real, None)
    assert _fs.program_on_path(str(program), str(tmp_path)) is None
    assert _fs.program_on_path("../" + tmp_path.name + "/prog", str(tmp_path)) is None
    assert _fs.program_on_path("absent-k3kit-program", str(tmp_path)) is None
    program.chmod(0o757)  # others may change it
    assert _fs.program_on_path("prog", str(tmp_path)) == (real, real)
