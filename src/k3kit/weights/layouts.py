"""What a weights folder is, decided from its path alone, and which symlinks it may contain.

A folder given as weights is exactly one of four kinds, decided from its own name and its
parents' names (its canonical real path, with ``lstat``), never from what it happens to contain:

* **snapshot folder**: ``…/models--ORG--NAME/snapshots/<commit>``;
* **repo folder**: named ``models--ORG--NAME``; its ``snapshots/<commit>`` is what is checked;
* **cache root**: holds ``models--ORG--NAME/`` and nothing but Hugging Face cache entries
  (:data:`CACHE_ROOT_ENTRY`); its ``models--ORG--NAME/snapshots/<commit>`` is what is checked;
* **plain folder**: anything else that holds no cache entry and lies inside no ``models--*``
  folder.

Contents are then only used to *refuse*: a folder that could be read two ways (a plain folder or a
snapshot holding a ``models--*`` folder, a cache root holding loose model files, a repo folder
holding anything besides ``blobs``/``refs``/``snapshots``/``.no_exist``) is refused with
``WEIGHTS_AMBIGUOUS``, because the verifier would hash one folder while an engine started on the
same path loads another.

``Layout.root`` is a guarantee: the canonical real path (no symlink component) of the folder whose
files are checked. ``launch`` execs the engine on exactly that path.

In a snapshot, a symlink may resolve only into the repo's own ``blobs/``, which must itself be a
real directory (``lstat``); the link is read once (``readlink``) and its target may not be a link
again. Nothing here trusts a byte inside the folder; it only decides where to look.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from k3kit._immutable import NamedTuple
from k3kit.errors import VerificationError

if TYPE_CHECKING:  # the model or its record (k3kit.models.lite): fields only, no pydantic
    from k3kit.models import WeightsLock, lite

# What huggingface_hub's ``local_dir`` mode writes beside the weights (``_local_folder.py``): a
# .gitignore and its lock, a CACHEDIR.TAG, per-file download/upload metadata, locks and partial
# downloads. Nothing else under .cache/huggingface/ is excused, so no file can hide there.
# This and CACHE_ROOT_ENTRY are patterns re compiles (and caches) on first use: only a plain
# folder and a cache root are judged by them, not the snapshot a node launches from.
_HF_LOCAL_META = (
    r"^\.cache/huggingface/(\.gitignore(\.lock)?|CACHEDIR\.TAG"
    r"|(download|upload)/.+\.(metadata|lock|incomplete))$"
)

# Top-level names a Hugging Face cache root holds (huggingface_hub ``constants``/``file_download``):
# one folder per repo, its ``.locks`` folder, a CACHEDIR.TAG and a version marker.
CACHE_REPO_ENTRY = re.compile(r"^(models|datasets|spaces)--.+$")
CACHE_ROOT_ENTRY = r"^((models|datasets|spaces)--.+|\.locks|CACHEDIR\.TAG|version\.txt)$"
# What huggingface_hub keeps inside a repo folder.
REPO_FOLDER_ENTRIES = frozenset({"blobs", "refs", "snapshots", ".no_exist"})

# Its bookkeeping files are a few hundred bytes; a big file under one of those names is not one.
HF_LOCAL_META_MAX_BYTES = 64 * 1024


def is_hf_local_metadata(rel: str, kind: str, size: int) -> bool:
    """True for huggingface_hub's own bookkeeping in a ``local_dir`` download: the exact names it
    writes, as small regular files (a FIFO there would hang its next run; a symlink proves nothing).
    """
    small = kind == "file" and size <= HF_LOCAL_META_MAX_BYTES
    return small and re.fullmatch(_HF_LOCAL_META, rel) is not None


class Layout(NamedTuple):
    """Where the lock's relative paths live, and which link targets are allowed there.

    ``root`` is the canonical real path of the folder that is checked (see the module docstring);
    ``kind`` is "plain" or "snapshot"; ``given_as`` says how the caller named it.

    A NamedTuple, not a frozen dataclass: immutable all the same, read by attribute, and ~0.5 ms
    less CPU to create on every verify with weights and every launch (docs/performance.md).
    """

    root: Path
    kind: str  # "plain" or "snapshot"
    allowed_link_roots: tuple[Path, ...] = ()
    given_as: str = ""  # plain | snapshot | repo | cache-root


def repo_folder_name(repo: str) -> str:
    org, name = repo.split("/", 1)
    return f"models--{org}--{name}"


def _ambiguous(path: Path, detail: str) -> VerificationError:
    return VerificationError(
        f"{path} can be read two ways: {detail}",
        code="WEIGHTS_AMBIGUOUS",
        hint="give the snapshot folder itself (…/models--ORG--NAME/snapshots/<commit>) or a "
        "plain folder that holds only the model's files",
    )


def _real_dir(path: Path) -> bool:
    """True when ``path`` itself (not what a link points to) is a directory."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _top_level(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        raise VerificationError(
            f"cannot list the weights folder {path}: {exc.strerror}", code="WEIGHTS_WALK_FAILED"
        ) from exc


def _canonical(path: Path) -> Path:
    try:
        real = Path(os.path.realpath(path, strict=True))
    except (OSError, RuntimeError) as exc:
        raise VerificationError(
            f"weights folder not found: {path}", code="WEIGHTS_NOT_FOUND"
        ) from exc
    if not _real_dir(real):
        raise VerificationError(f"weights folder not found: {path}", code="WEIGHTS_NOT_FOUND")
    return real


def _blobs_roots(repo_dir: Path) -> tuple[Path, ...]:
    blobs = repo_dir / "blobs"
    return (blobs,) if _real_dir(blobs) else ()


def _descend(base: Path, *names: str) -> Path:
    """``base/names…``, each component a real directory (a link there is not a cache)."""
    here = base
    for name in names:
        nxt = here / name
        try:
            st = os.lstat(nxt)
        except OSError as exc:
            raise FileNotFoundError(str(nxt)) from exc
        if stat.S_ISLNK(st.st_mode):
            raise VerificationError(
                f"{nxt} is a symlink; the folders of a cache are real directories",
                code="WEIGHTS_SYMLINK_ESCAPE",
            )
        if not stat.S_ISDIR(st.st_mode):
            raise FileNotFoundError(str(nxt))
        here = nxt
    return here


def _snapshot_layout(snapshot: Path, given_as: str) -> Layout:
    entries = _top_level(snapshot)
    nested = [n for n in entries if CACHE_REPO_ENTRY.match(n)]
    if nested:
        raise _ambiguous(snapshot, f"a snapshot folder that also holds a cache ({nested[0]}/)")
    return Layout(snapshot, "snapshot", _blobs_roots(snapshot.parent.parent), given_as)


def _from_repo(
    repo_dir: Path, lock: WeightsLock | lite.WeightsLock, given_as: str, asked: Path
) -> Layout:
    extra = [n for n in _top_level(repo_dir) if n not in REPO_FOLDER_ENTRIES]
    if extra:
        raise _ambiguous(repo_dir, f"a cache repo folder that also holds {extra[0]!r}")
    try:
        snapshot = _descend(repo_dir, "snapshots", lock.commit)
    except FileNotFoundError:
        raise VerificationError(
            f"no snapshot of {lock.repo} at commit {lock.commit} under {asked}",
            code="WEIGHTS_MISSING_SNAPSHOT",
            hint="run `k3kit pull` for this kit first",
        ) from None
    return _snapshot_layout(snapshot, given_as)


def locate(path: Path, lock: WeightsLock | lite.WeightsLock) -> Layout:
    """Decide what ``path`` is (see the module docstring); refuse it when that is not one thing."""
    real = _canonical(Path(path))
    want = repo_folder_name(lock.repo)
    parent = real.parent
    if parent.name == "snapshots" and parent.parent.name.startswith("models--"):
        if parent.parent.name != want:
            raise VerificationError(
                f"{real} is a snapshot of {parent.parent.name}, but the lock pins {want}",
                code="WEIGHTS_WRONG_REPO",
            )
        if real.name != lock.commit:
            raise VerificationError(
                f"{real} is a snapshot of commit {real.name}, but the lock pins {lock.commit}",
                code="WEIGHTS_WRONG_REVISION",
            )
        return _snapshot_layout(real, "snapshot")
    if real.name.startswith("models--"):
        if real.name != want:
            raise VerificationError(
                f"{real} is the cache folder of {real.name}, but the lock pins {want}",
                code="WEIGHTS_WRONG_REPO",
            )
        return _from_repo(real, lock, "repo", Path(path))
    inside = next((p for p in real.parents if p.name.startswith("models--")), None)
    if inside is not None:
        raise _ambiguous(
            real, f"a folder inside the cache repo folder {inside} that is not a snapshot"
        )
    entries = _top_level(real)
    cache_entries = [n for n in entries if CACHE_REPO_ENTRY.match(n)]
    if not cache_entries:
        if "snapshots" in entries and "blobs" in entries:
            raise _ambiguous(real, "a plain folder laid out like a cache repo folder")
        return Layout(real, "plain", (), "plain")
    # fullmatch: with match, $ let CACHEDIR.TAG\n (a loose file) pass for CACHEDIR.TAG
    loose = [n for n in entries if not re.fullmatch(CACHE_ROOT_ENTRY, n)]
    if loose:
        raise _ambiguous(
            real, f"a cache root (holds {cache_entries[0]}/) that also holds {loose[0]!r}"
        )
    if want not in entries:
        raise VerificationError(
            f"no snapshot of {lock.repo} at commit {lock.commit} under {path}",
            code="WEIGHTS_MISSING_SNAPSHOT",
            hint="run `k3kit pull` for this kit first",
        )
    try:
        repo_dir = _descend(real, want)
    except FileNotFoundError:
        raise _ambiguous(real, f"{want} is not a directory") from None
    return _from_repo(repo_dir, lock, "cache-root", Path(path))


def local_layout(path: Path) -> Layout:
    """Layout of a folder being pinned: a cache snapshot if inside ``snapshots/``, else plain.

    A folder that holds a cache (``models--*``) is refused as ambiguous, as in :func:`locate`.
    """
    real = _canonical(Path(path))
    if real.parent.name == "snapshots" and real.parent.parent.name.startswith("models--"):
        return _snapshot_layout(real, "snapshot")
    nested = [n for n in _top_level(real) if CACHE_REPO_ENTRY.match(n)]
    if nested:
        raise _ambiguous(real, f"a folder to pin that holds a cache ({nested[0]}/)")
    return Layout(real, "plain", (), "plain")


class LinkPolicyViolation(Exception):
    """A symlink in a snapshot that resolves outside the blobs the layout allows."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def _usable_root(root: Path) -> bool:
    """An allowed link root must be a real directory named ``blobs`` with no link on its path:
    a planted ``blobs -> /`` would otherwise make every file on the machine an allowed target."""
    return (
        root.is_absolute()
        and root.name == "blobs"
        and _real_dir(root)
        and os.path.realpath(root) == str(root)
    )


def resolve_file(layout: Layout, rel: str) -> Path:
    """The real file behind ``rel``, applying the symlink policy of the layout.

    In a plain layout the path itself is returned (callers refuse a symlink there outright). In a
    snapshot a link is read once; its target, taken lexically from the link's real folder, must
    lie inside an allowed root (:func:`_usable_root`), with no link on the way and no link at the
    end. The returned path therefore has no symlink component: it is what an engine opening the
    link reads.
    """
    path = layout.root / rel
    if layout.kind == "plain" or not path.is_symlink():
        return path
    try:
        target = os.readlink(path)
    except OSError as exc:
        raise LinkPolicyViolation("WEIGHTS_SYMLINK_ESCAPE", f"unreadable link: {exc}") from exc
    folder = os.path.realpath(path.parent)  # where the kernel starts a relative target from
    lexical = Path(os.path.normpath(os.path.join(folder, target)))
    root = next(
        (r for r in layout.allowed_link_roots if r in lexical.parents and _usable_root(r)), None
    )
    if root is None:
        raise LinkPolicyViolation(
            "WEIGHTS_SYMLINK_ESCAPE",
            f"symlink resolves outside the repo's real blobs/ directory: {lexical}",
        )
    here = root
    for part in lexical.relative_to(root).parts:
        here = here / part
        try:
            is_link = stat.S_ISLNK(os.lstat(here).st_mode)
        except OSError:
            return here  # missing: the caller's stat reports it
        if is_link:
            raise LinkPolicyViolation(
                "WEIGHTS_SYMLINK_CHAIN", f"symlink points to another symlink: {here}"
            )
    return lexical
