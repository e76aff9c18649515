"""Where a weights folder keeps the lock's files, and which symlinks it may contain.

Three layouts occur on a buyer's node: a plain folder (as ``pull --layout plain`` or
huggingface_hub's ``local_dir`` writes it), a Hugging Face cache snapshot
(``…/models--org--name/snapshots/<commit>/``, entries symlinked into ``../../blobs/``), and a cache
root or repo folder holding that snapshot. In a snapshot a symlink may only resolve into the repo's
``blobs/`` or the cache's shared ``blobs/`` store: a link to anywhere else is a swap, not a cache.
Nothing here trusts a byte inside the folder; it only decides where to look.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from k3kit.errors import VerificationError
from k3kit.models import WeightsLock

# What huggingface_hub's ``local_dir`` mode writes beside the weights (``_local_folder.py``): a
# .gitignore and its lock, a CACHEDIR.TAG, per-file download/upload metadata, locks and partial
# downloads. Nothing else under .cache/huggingface/ is excused, so no file can hide there.
_HF_LOCAL_META = re.compile(
    r"^\.cache/huggingface/(\.gitignore(\.lock)?|CACHEDIR\.TAG"
    r"|(download|upload)/.+\.(metadata|lock|incomplete))$"
)


# Its bookkeeping files are a few hundred bytes; a big file under one of those names is not one.
HF_LOCAL_META_MAX_BYTES = 64 * 1024


def is_hf_local_metadata(rel: str, kind: str, size: int) -> bool:
    """True for huggingface_hub's own bookkeeping in a ``local_dir`` download: the exact names it
    writes, as small regular files (a FIFO there would hang its next run; a symlink proves nothing).
    """
    return kind == "file" and size <= HF_LOCAL_META_MAX_BYTES and bool(_HF_LOCAL_META.match(rel))


@dataclass(frozen=True)
class Layout:
    """Where the lock's relative paths live, and which link targets are allowed there."""

    root: Path
    kind: str  # "plain" or "snapshot"
    allowed_link_roots: tuple[Path, ...] = ()


def repo_folder_name(repo: str) -> str:
    org, name = repo.split("/", 1)
    return f"models--{org}--{name}"


def _snapshot(snapshot: Path, cache_root: Path) -> Layout:
    repo_dir = snapshot.parent.parent
    roots = (
        Path(os.path.realpath(repo_dir / "blobs")),
        Path(os.path.realpath(cache_root / "blobs")),
    )
    return Layout(snapshot, "snapshot", roots)


def locate(path: Path, lock: WeightsLock) -> Layout:
    """Work out which layout ``path`` is, without trusting anything inside it yet."""
    path = Path(os.path.abspath(path))
    repo_dir_name = repo_folder_name(lock.repo)
    candidates: list[tuple[Path, Path]] = []  # (snapshot dir, cache root)
    if (path / repo_dir_name).is_dir():
        candidates.append((path / repo_dir_name / "snapshots" / lock.commit, path))
    if path.name == repo_dir_name:
        candidates.append((path / "snapshots" / lock.commit, path.parent))
    if path.parent.name == "snapshots" and path.parent.parent.name == repo_dir_name:
        if path.name != lock.commit:
            raise VerificationError(
                f"{path} is a snapshot of commit {path.name}, but the lock pins {lock.commit}",
                code="WEIGHTS_WRONG_REVISION",
            )
        candidates.append((path, path.parent.parent.parent))
    for snapshot, cache_root in candidates:
        if snapshot.is_dir():
            return _snapshot(snapshot, cache_root)
        raise VerificationError(
            f"no snapshot of {lock.repo} at commit {lock.commit} under {path}",
            code="WEIGHTS_MISSING_SNAPSHOT",
            hint="run `k3kit pull` for this kit first",
        )
    if not path.is_dir():
        raise VerificationError(f"weights folder not found: {path}", code="WEIGHTS_NOT_FOUND")
    return Layout(path, "plain")


def local_layout(path: Path) -> Layout:
    """Layout of a folder being pinned: a cache snapshot if inside ``snapshots/``, else plain."""
    path = Path(os.path.abspath(path))
    if not path.is_dir():
        raise VerificationError(f"weights folder not found: {path}", code="WEIGHTS_NOT_FOUND")
    if path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
        return _snapshot(path, path.parent.parent.parent)
    return Layout(path, "plain")


class LinkPolicyViolation(Exception):
    """A symlink in a snapshot that resolves outside the blobs the layout allows."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def resolve_file(layout: Layout, rel: str) -> Path:
    """The real file behind ``rel``, applying the symlink policy of the layout.

    In a plain layout the path itself is returned (callers refuse a symlink there outright).
    """
    path = layout.root / rel
    if layout.kind == "plain" or not path.is_symlink():
        return path
    real = Path(os.path.realpath(path))
    if not any(real == r or r in real.parents for r in layout.allowed_link_roots):
        raise LinkPolicyViolation(
            "WEIGHTS_SYMLINK_ESCAPE", f"symlink resolves outside the repo's blobs/: {real}"
        )
    return real
