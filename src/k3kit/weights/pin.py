"""Pin a weight revision into ``weights.lock.json``.

Two ways, one lock format:

* ``pin_local`` hashes a local copy (a plain folder or a Hugging Face cache snapshot) of a
  revision the publisher names by its 40-hex commit.
* ``pin_hub`` asks a hub, through the small :class:`HubClient` protocol, which commit a branch,
  tag or short sha names, and lists every file there with its size and the sha256 the hub
  publishes for LFS files (its LFS oid). No LFS byte is downloaded, so pinning 1.56 TB costs a
  few HTTP calls. Small (non-LFS) files have no published sha256, so their bytes are fetched,
  checked against the git blob sha1 the listing gives, and hashed. With ``hash_local`` a local
  copy is hashed too: every sha256 is checked against the hub's and blake3 is added.

What a hub pin trusts is written into the lock (``source``): the endpoint, the time, and that
LFS sha256 values are what the uploader declared (``hub-lfs``) unless a local copy confirmed
them (``hub-lfs+local-hash``). The implementation of ``HubClient`` lives in ``k3kit.hub`` (the
one home of huggingface_hub); this module never imports it, the CLI passes one in.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from k3kit._canonical import model_bytes, sha256_of_model
from k3kit._digest import sha256_hex
from k3kit._fs import atomic_write, refuse_existing
from k3kit._policy import path_problem
from k3kit._text import shown
from k3kit._values import is_lower_hex
from k3kit.errors import EnvironmentProblem, InputError, VerificationError
from k3kit.formats.documents import MAX_DOCUMENT_BYTES
from k3kit.models import REPO_ID_PATTERN, PinSource, WeightsLock, load
from k3kit.weights import hash_tree, local_layout
from k3kit.weights.layouts import Layout, repo_folder_name

# The Hub refuses non-LFS files over 10 MB; anything bigger listed as non-LFS is a bad answer.
MAX_SMALL_FILE_BYTES = MAX_DOCUMENT_BYTES  # the one in-memory cap (k3kit.formats.documents)

_REPO_ID = re.compile(REPO_ID_PATTERN)


def check_repo_id(repo: str) -> None:
    """Refuse a repo id that is not ORG/NAME (``BAD_REPO_ID``, exit 3) before it is put into
    a hub URL or a lock: a ``..`` or ``/`` in it would address another path on the hub. Both
    front doors call this (``k3kit pin`` before anything else, the API through the pins)."""
    if not _REPO_ID.fullmatch(repo):  # not match: $ would pass org/name\n
        raise InputError(f"{repo!r} is not a repo id of the form ORG/NAME", code="BAD_REPO_ID")


def _check_snapshot(folder: Path, layout: Layout, repo: str, commit: str) -> None:
    """A cache snapshot names its repo (``models--ORG--NAME``) and its commit: both must be the
    ones the caller pins, or the lock would describe another repo's bytes."""
    if layout.kind != "snapshot":
        return
    repo_dir = layout.root.parent.parent.name
    if repo_dir != repo_folder_name(repo):
        raise InputError(
            f"{shown(folder)} is a snapshot of {shown(repo_dir)}, not of {repo}",
            code="REPO_MISMATCH",
        )
    if layout.root.name != commit:
        raise InputError(
            f"{shown(folder)} is the snapshot of commit {shown(layout.root.name)}, not {commit}",
            code="REVISION_MISMATCH",
        )


def local_selector(
    root: Path, include: Sequence[str] = (), exclude: Sequence[str] = ()
) -> Callable[[str], bool]:
    """Which files of a local copy a pin keeps, decided during the walk, before any hashing.

    ``.git/`` is always left out (a git clone's object store is not part of the weights); then
    ``--include``/``--exclude`` as for a hub pin; a kept name the lock's path policy refuses
    (a space, a non-UTF-8 byte, ``:``) stops the pin here with exit 3 naming the file, instead
    of after hours of hashing.
    """

    def keep(rel: str) -> bool:
        if rel == ".git" or rel.startswith(".git/"):
            return False
        if (include and not matches(rel, include)) or matches(rel, exclude):
            return False
        problem = path_problem(rel)
        if problem:
            raise InputError(
                f"{shown(root / rel)}: k3kit cannot lock this file name ({shown(problem)})",
                code="PATH_REFUSED",
                hint="rename it, or leave it out with --exclude",
            )
        return True

    return keep


def write_lock(lock: WeightsLock, path: Path, *, force: bool = False) -> str:
    """Write ``lock`` as its canonical (RFC 8785) bytes, atomically; returns its sha256 (the
    weight checksum a receipt signs). ``OUTPUT_EXISTS`` (exit 3) without ``force``."""
    atomic_write(path, model_bytes(lock), force=force)
    return sha256_of_model(lock)


def pin_into(output: Path, make: Callable[[], WeightsLock], *, force: bool = False) -> WeightsLock:
    """Pin into a lock file by the one rule both front doors follow: an existing ``output`` is
    refused before ``make`` hashes a byte or sends a request (not after hours of hashing), then
    the lock is written atomically."""
    refuse_existing(output, force=force)
    lock = make()
    write_lock(lock, output, force=force)
    return lock


def pin_local(
    folder: Path,
    *,
    repo: str,
    revision: str,
    pinned_at: str,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    workers: int | None = None,
    on_file_done: Callable[[str, int], None] | None = None,
) -> WeightsLock:
    """Hash the selected files of ``folder`` and describe them as ``repo`` at ``revision``.

    The patterns are not recorded in the lock (a local pin's ``source`` has none): the lock's
    file list is the whole statement of what was pinned.
    """
    check_repo_id(repo)
    if not is_lower_hex(revision, 40):
        raise InputError(
            f"--revision {revision!r} is not a 40-hex commit sha",
            code="REVISION_NOT_COMMIT",
            hint="a local pin must name the exact commit; branches and tags move",
        )
    layout = local_layout(folder)
    _check_snapshot(folder, layout, repo, revision)
    try:
        files = hash_tree(
            layout,
            workers=workers,
            on_file_done=on_file_done,
            keep=local_selector(folder, include, exclude),
        )
    except VerificationError as exc:
        # Here the folder is the publisher's own input, not a node's weights under test: what
        # the verifier calls a failed check (a FIFO, an unreadable folder) is bad input, exit 3.
        raise InputError(exc.message, code=exc.code, hint=exc.hint) from exc
    return load(
        WeightsLock,
        {
            "repo": repo,
            "commit": revision,
            "source": PinSource(
                kind="local",
                requested_revision=revision,
                pinned_at=pinned_at,
                sha256_source="local-hash",
            ),
            "files": files,
            "file_count": len(files),
            "total_bytes": sum(f.size for f in files),
        },
        source="pin arguments",
        error=InputError,
    )


class RemoteFile(Protocol):
    """One file of a hub listing, as declared by the hub (nothing checked yet)."""

    @property
    def path(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def blob_id(self) -> str: ...
    @property
    def lfs_sha256(self) -> str | None: ...
    @property
    def lfs_size(self) -> int | None: ...
    @property
    def xet_hash(self) -> str | None: ...


class HubClient(Protocol):
    """What pinning needs from a hub; ``k3kit.hub.HfHub`` implements it with huggingface_hub."""

    @property
    def endpoint(self) -> str: ...
    def resolve(self, repo: str, revision: str) -> str: ...
    def list_files(self, repo: str, commit: str) -> Sequence[RemoteFile]: ...
    def read_file(self, repo: str, commit: str, path: str, max_bytes: int) -> bytes: ...


def matches(path: str, patterns: Iterable[str]) -> bool:
    """fnmatch on the whole path (``*`` crosses ``/``); ``dir/`` means everything under dir."""
    return any(
        fnmatch.fnmatchcase(path, pat + "*" if pat.endswith("/") else pat) for pat in patterns
    )


def select(paths: Iterable[str], include: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """The paths kept by ``--include`` (all when none) minus ``--exclude``; sorted."""
    paths = list(paths)
    chosen = sorted(
        p for p in paths if (not include or matches(p, include)) and not matches(p, exclude)
    )
    for pat in include:
        if not any(matches(p, [pat]) for p in paths):
            raise InputError(f"--include {pat!r} matches no file", code="PATTERN_MATCHES_NOTHING")
    if not chosen:
        raise InputError("--include/--exclude leave no file to pin", code="NOTHING_TO_PIN")
    return chosen


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob: what the hub lists as ``oid`` for a non-LFS file."""
    header = b"blob %d\0" % len(data)
    return hashlib.sha1(header + data, usedforsecurity=False).hexdigest()


def _bad_answer(message: str, hint: str | None = None) -> EnvironmentProblem:
    return EnvironmentProblem(message, code="HUB_BAD_ANSWER", hint=hint)


def _check_listing(files: Sequence[RemoteFile], repo: str, commit: str) -> dict[str, RemoteFile]:
    by_path: dict[str, RemoteFile] = {}
    for f in files:
        if f.path in by_path:
            raise _bad_answer(f"the listing of {repo}@{commit[:12]} repeats {f.path!r}")
        by_path[f.path] = f
    if not by_path:
        raise _bad_answer(f"{repo}@{commit[:12]} has no files")
    return by_path


def _lfs_entry(f: RemoteFile) -> dict[str, Any]:
    sha = f.lfs_sha256 or ""
    if not is_lower_hex(sha, 64) or f.lfs_size != f.size:
        raise _bad_answer(
            f"{f.path}: LFS metadata without a valid sha256 or with a size that disagrees "
            f"(oid {sha[:20]!r}, lfs size {f.lfs_size}, size {f.size})"
        )
    entry: dict[str, Any] = {"path": f.path, "size": f.size, "sha256": sha, "lfs": True}
    if is_lower_hex(f.xet_hash, 64):
        entry["xet_hash"] = f.xet_hash
    return entry


def _small_entry(client: HubClient, repo: str, commit: str, f: RemoteFile) -> dict[str, Any]:
    """Fetch a non-LFS file and check it against the listing before trusting its sha256."""
    if f.size > MAX_SMALL_FILE_BYTES:
        raise _bad_answer(
            f"{f.path}: listed as a non-LFS file of {f.size} bytes; refusing to fetch it to pin",
            hint="exclude it with --exclude, or pin from a local copy",
        )
    data = client.read_file(repo, commit, f.path, MAX_SMALL_FILE_BYTES)
    blob = git_blob_sha1(data)
    if len(data) != f.size or blob != f.blob_id:
        raise _bad_answer(
            f"{f.path}: the hub served {len(data)} bytes with git blob sha1 {blob[:12]}…, but "
            f"its listing says {f.size} bytes, {f.blob_id[:12]}…"
        )
    return {
        "path": f.path,
        "size": f.size,
        "sha256": sha256_hex(data),
        "git_blob_sha1": blob,
        "lfs": False,
    }


def _check_local(
    folder: Path,
    repo: str,
    commit: str,
    entries: list[dict[str, Any]],
    listed: set[str],
    *,
    workers: int | None,
    on_file_done: Callable[[str, int], None] | None,
) -> list[dict[str, Any]]:
    """Hash a local copy of the commit; every pinned sha256 must match. Adds blake3."""
    layout = local_layout(folder)
    _check_snapshot(folder, layout, repo, commit)
    hashed = hash_tree(
        layout, workers=workers, on_file_done=on_file_done, keep=local_selector(folder)
    )
    local = {f.path: f for f in hashed}
    pinned = {str(e["path"]) for e in entries}
    problems = [f"{shown(p)}: not in the local copy" for p in sorted(pinned - set(local))]
    problems += [
        f"{shown(p)}: not a file of {commit[:12]} on the hub" for p in sorted(set(local) - listed)
    ]
    if problems:
        raise InputError(
            f"{shown(folder)} is not a copy of this revision:\n  " + "\n  ".join(problems),
            code="HASH_LOCAL_FILE_SET",
        )
    out = []
    mismatches = []
    for entry in entries:
        mine = local[str(entry["path"])]
        if mine.size != entry["size"] or mine.sha256 != entry["sha256"]:
            mismatches.append(
                f"{mine.path}: local {mine.size} bytes sha256 {mine.sha256[:16]}…, hub "
                f"{entry['size']} bytes {str(entry['sha256'])[:16]}…"
            )
        out.append({**entry, "blake3": mine.blake3})
    if mismatches:
        raise VerificationError(
            "the local copy disagrees with the hub's sha256:\n  " + "\n  ".join(mismatches),
            code="HASH_LOCAL_MISMATCH",
        )
    return out


def pin_hub(
    client: HubClient,
    *,
    repo: str,
    revision: str,
    pinned_at: str,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    hash_local: Path | None = None,
    workers: int | None = None,
    fetch_workers: int = 8,
    on_file_done: Callable[[str, int], None] | None = None,
) -> WeightsLock:
    """Pin ``repo`` at the commit ``revision`` names now, from the hub's own metadata."""
    check_repo_id(repo)
    commit = client.resolve(repo, revision)
    if not is_lower_hex(commit, 40):
        raise _bad_answer(f"the hub resolved {revision!r} to {commit!r}, not a 40-hex commit")
    listing = _check_listing(client.list_files(repo, commit), repo, commit)
    chosen = select(listing, include, exclude)
    for path in chosen:
        problem = path_problem(path)
        if problem:  # the hub is fine; k3kit's policy refuses the name, so the caller must act
            raise InputError(
                f"{repo}@{commit[:12]} has a file k3kit refuses to pin ({problem}): {path!r}",
                code="PATH_REFUSED",
                hint="leave it out with --exclude if the deployment does not need it",
            )
    small = [listing[p] for p in chosen if listing[p].lfs_sha256 is None]
    entries = {p: _lfs_entry(listing[p]) for p in chosen if listing[p].lfs_sha256 is not None}
    with ThreadPoolExecutor(max_workers=max(1, fetch_workers)) as pool:
        for entry in pool.map(lambda f: _small_entry(client, repo, commit, f), small):
            entries[str(entry["path"])] = entry
    files = [entries[p] for p in chosen]
    if hash_local is not None:
        files = _check_local(
            hash_local,
            repo,
            commit,
            files,
            set(listing),
            workers=workers,
            on_file_done=on_file_done,
        )
    return load(
        WeightsLock,
        {
            "repo": repo,
            "commit": commit,
            "source": {
                "kind": "hub",
                "endpoint": client.endpoint,
                "requested_revision": revision,
                "pinned_at": pinned_at,
                "sha256_source": "hub-lfs+local-hash" if hash_local else "hub-lfs",
                "include": list(include),
                "exclude": list(exclude),
            },
            "files": files,
            "file_count": len(files),
            "total_bytes": sum(int(f["size"]) for f in files),
        },
        source=f"hub listing of {repo}@{commit}",
        error=EnvironmentProblem,
        code="HUB_BAD_ANSWER",
    )
