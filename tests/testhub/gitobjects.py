"""Git and git-lfs objects as the Hugging Face Hub publishes them, for the test hub.

The hashes are real (blob sha1 of the content or of the LFS pointer text, git tree hashes,
git commit hashes) so that what k3kit pins against the test hub has the same shape and meaning as
what it would pin against huggingface.co; ``tests/test_testhub.py`` checks them against ``git``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

LFS_SUFFIXES = frozenset(
    {".safetensors", ".bin", ".pt", ".pth", ".onnx", ".h5", ".msgpack", ".ot", ".gguf"}
)
LFS_MIN_SIZE = 10 * 1024 * 1024
CHUNK = 1024 * 1024
AUTHOR = "k3kit test hub <testhub@localhost>"


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer text that git stores in place of an LFS file."""
    spec = "https://git-lfs.github.com/spec/v1"
    return f"version {spec}\noid sha256:{sha256}\nsize {size}\n".encode()


def git_hash(kind: str, body: bytes) -> str:
    """Git object id: sha1 over ``"<kind> <len>\\0" + body``."""
    return hashlib.sha1(b"%s %d\0" % (kind.encode(), len(body)) + body).hexdigest()


def folder_files(folder: Path) -> dict[str, Path]:
    """Map every file under ``folder`` (``.git/`` excluded) to its repo path, for a commit."""
    return {
        p.relative_to(folder).as_posix(): p
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(folder).parts
    }


@dataclass(frozen=True)
class Blob:
    """File content (bytes, or a file streamed from disk) with the hashes the Hub publishes.

    LFS rule of the notes (§9): weight-like suffixes or >= 10 MiB.
    """

    source: bytes | Path
    size: int
    sha256: str
    oid: str  # git blob sha1 of what git stores: the content, or the LFS pointer text
    lfs: bool

    @classmethod
    def create(cls, path_in_repo: str, source: bytes | Path) -> Blob:
        """Hash ``source`` once, in 1 MiB reads (the git sha1 only when git stores the bytes)."""
        size = len(source) if isinstance(source, bytes) else source.stat().st_size
        lfs = Path(path_in_repo).suffix.lower() in LFS_SUFFIXES or size >= LFS_MIN_SIZE
        sha256, sha1 = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size)
        for chunk in cls(source, size, "", "", lfs).chunks(0, size):
            sha256.update(chunk)
            if not lfs:
                sha1.update(chunk)
        digest = sha256.hexdigest()
        oid = git_hash("blob", lfs_pointer(digest, size)) if lfs else sha1.hexdigest()
        return cls(source, size, digest, oid, lfs)

    @property
    def pointer_size(self) -> int:
        return len(lfs_pointer(self.sha256, self.size))

    def chunks(self, start: int, end: int) -> Iterator[bytes]:
        """Yield bytes ``[start, end)`` in pieces of at most 1 MiB."""
        if isinstance(self.source, bytes):
            for pos in range(start, end, CHUNK):
                yield self.source[pos : min(pos + CHUNK, end)]
            return
        with self.source.open("rb") as f:
            f.seek(start)
            while start < end and (chunk := f.read(min(CHUNK, end - start))):
                start += len(chunk)
                yield chunk


def git_trees(files: Mapping[str, Blob]) -> dict[str, str]:
    """Git tree hashes of every directory ("" = root), bottom-up as ``git write-tree`` does."""
    entries: dict[str, list[tuple[str, str, str]]] = {"": []}  # dir -> (name, mode, sha1)
    for path, blob in files.items():
        parts = path.split("/")
        if "" in parts or "." in parts or ".." in parts:
            raise ValueError(f"invalid path in repo: {path!r}")
        for i in range(1, len(parts)):
            entries.setdefault("/".join(parts[:i]), [])
        entries[path.rpartition("/")[0]].append((parts[-1], "100644", blob.oid))
    if clash := sorted(set(entries) & set(files)):
        raise ValueError(f"paths used both as file and directory: {clash}")
    trees: dict[str, str] = {}
    for d in sorted(entries, key=lambda p: p.count("/") + bool(p), reverse=True):
        rows = sorted(entries[d], key=lambda e: e[0] + ("/" if e[1] == "40000" else ""))
        trees[d] = git_hash(
            "tree",
            b"".join(
                f"{mode} {name}".encode() + b"\0" + bytes.fromhex(sha) for name, mode, sha in rows
            ),
        )
        if d:
            parent, _, name = d.rpartition("/")
            entries[parent].append((name, "40000", trees[d]))
    return trees


@dataclass(frozen=True)
class Commit:
    """An immutable full snapshot; ``trees`` maps each directory ("" = root) to its git tree."""

    sha: str
    title: str
    date: str  # ISO 8601, as the Hub writes it
    files: Mapping[str, Blob]
    trees: Mapping[str, str]

    @classmethod
    def create(
        cls, files: Mapping[str, Blob], parent: str | None, title: str, stamp: int
    ) -> Commit:
        """A git commit (fixed author, time ``stamp``), so equal inputs give equal shas."""
        trees = git_trees(files)
        who = f"{AUTHOR} {stamp} +0000"
        text = f"tree {trees['']}\n" + (f"parent {parent}\n" if parent else "")
        text += f"author {who}\ncommitter {who}\n\n{title}\n"
        date = datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        return cls(git_hash("commit", text.encode()), title, date, dict(files), trees)
