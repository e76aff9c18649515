"""``MANIFEST.json``: build it from a kit directory, and diff a directory against it.

The manifest lists every kit file except itself, the receipt (which signs the manifest's digest)
and benchmark evidence under ``evidence/`` (whose digests the receipt carries), so the kit checksum
stays that of the kit that was measured. :func:`diff_tree` reports *every* difference rather than
the first, because an operator fixing a broken kit needs the whole list.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from k3kit._canonical import model_bytes, sha256_of_model
from k3kit._digest import hash_file, sha256_hex
from k3kit._fs import walk
from k3kit._immutable import NamedTuple
from k3kit._policy import path_problem
from k3kit._text import shown
from k3kit.errors import InputError, VerificationError
from k3kit.formats.documents import read_bounded
from k3kit.formats.names import MANIFEST_NAME as MANIFEST_NAME  # their home; re-exported
from k3kit.formats.names import MANIFEST_SIG_NAME
from k3kit.formats.names import RECEIPT_NAME as RECEIPT_NAME
from k3kit.formats.vocab import Problem
from k3kit.models import lite

if TYPE_CHECKING:  # the pydantic model is built by the publisher only (build_manifest)
    from k3kit.models import Manifest

EVIDENCE_DIR = "evidence"
# The root chain (root/<N>.root.json, checked by k3kit.signing.trust.root) and the SSHSIG of
# MANIFEST.json are signed documents of their own, added after the build: listing them would change
# the kit checksum each time the publisher rotates a key.
ROOT_DIR = "root"
UNLISTED = frozenset({MANIFEST_NAME, RECEIPT_NAME, MANIFEST_SIG_NAME})


def is_unlisted(rel: str) -> bool:
    """True for the files the manifest deliberately does not list."""
    return rel in UNLISTED or rel.startswith((EVIDENCE_DIR + "/", ROOT_DIR + "/"))


def build_manifest(root: Path) -> Manifest:
    """Hash every listed file of a freshly built kit; refuse anything that is not a regular file."""
    from k3kit.models import Manifest, ManifestEntry

    entries = []
    for entry in walk(root):
        if entry.kind == "dir" or is_unlisted(entry.rel):
            continue
        if entry.kind != "file":
            raise InputError(
                f"{shown(root / entry.rel)}: a kit may hold only regular files, not a {entry.kind}",
                code="KIT_SOURCE_NOT_REGULAR",
            )
        problem = path_problem(entry.rel)
        if problem:
            raise InputError(
                f"{shown(entry.rel)}: unsafe kit path: {shown(problem)}",
                code="KIT_SOURCE_PATH_UNSAFE",
            )
        digests, size = hash_file(root / entry.rel)
        entries.append(ManifestEntry(path=entry.rel, size=size, sha256=digests["sha256"]))
    entries.sort(key=lambda e: e.path)
    return Manifest(files=entries)


def manifest_bytes(manifest: Manifest) -> bytes:
    return model_bytes(manifest)


def kit_checksum(manifest: Manifest) -> str:
    """sha256 of the manifest's canonical bytes: the kit's identity in the receipt."""
    return sha256_of_model(manifest)


Difference = Problem  # the one problem record (k3kit.formats.vocab); the old name stays importable


# Value records on verify's start-up path are NamedTuples, not frozen dataclasses: a frozen
# dataclass costs ~0.7 ms of CPU to create at import (it execs six methods), a NamedTuple ~0.1 ms
# (docs/performance.md, "Start-up").
class TreeDiff(NamedTuple):
    differences: list[Difference]
    evidence: list[str]


class ExpectedEvidence(NamedTuple):
    """An evidence file as the receipt lists it."""

    path: str
    size: int
    sha256: str


def read_bound_evidence(root: Path, entry: ExpectedEvidence) -> bytes:
    """The bytes of one evidence file, only if they are the ones the receipt signs.

    The one home for evidence binding outside the tree diff: ``audit`` parses evidence only
    through this. The read is capped at the signed size (a bigger file is refused by its size
    before a byte is read) and goes through the bounded document reader (no link, no FIFO).
    Raises ``VerificationError`` ``EVIDENCE_FILE_MISSING`` or ``EVIDENCE_FILE_CHANGED``.
    """
    data = read_bounded(
        root / entry.path,
        entry.size,
        what=entry.path,
        error=VerificationError,
        code="EVIDENCE_FILE_MISSING",
        too_large_code="EVIDENCE_FILE_CHANGED",
    )
    digest = sha256_hex(data)
    if len(data) != entry.size or digest != entry.sha256:
        raise VerificationError(
            f"{shown(entry.path)}: sha256 {digest[:16]}… ({len(data)} bytes) is not the "
            f"receipt's {entry.sha256[:16]}… ({entry.size} bytes)",
            code="EVIDENCE_FILE_CHANGED",
        )
    return data


def diff_evidence(
    root: Path, found: list[str], expected: list[ExpectedEvidence], *, skip: frozenset[str]
) -> list[Difference]:
    """Compare the files under ``evidence/`` with the receipt's list: changed, missing, extra.

    ``found`` is :attr:`TreeDiff.evidence` (regular files only); ``skip`` holds paths already
    reported as something worse (a symlink in place of an evidence file).
    """
    want = {e.path: e for e in expected}
    diffs: list[Difference] = []
    for rel in found:
        entry = want.get(rel)
        if entry is None:
            diffs.append(
                Difference("EVIDENCE_FILE_EXTRA", rel, "evidence file not listed in the receipt")
            )
            continue
        # Size first, from lstat: a 32 GiB sparse file in place of a 2 MB result is refused
        # without reading it.
        size = os.lstat(root / rel).st_size
        if size != entry.size:
            diffs.append(
                Difference(
                    "EVIDENCE_FILE_CHANGED",
                    rel,
                    f"size {size} bytes != receipt's {entry.size} bytes (not hashed)",
                )
            )
            continue
        digests, size = hash_file(root / rel)  # a buffer fitted to the file (hash_file)
        sha256 = digests["sha256"]
        if size != entry.size or sha256 != entry.sha256:
            diffs.append(
                Difference(
                    "EVIDENCE_FILE_CHANGED",
                    rel,
                    f"sha256 {sha256[:16]}… ({size} bytes) != receipt's "
                    f"{entry.sha256[:16]}… ({entry.size} bytes)",
                )
            )
    for path in sorted(set(want) - set(found) - skip):
        diffs.append(Difference("EVIDENCE_FILE_MISSING", path, "listed in the receipt but absent"))
    return diffs


def diff_tree(root: Path, manifest: Manifest | lite.Manifest) -> TreeDiff:
    """Compare ``root`` with ``manifest``: changed, missing, extra, symlinked or special files."""
    listed = {e.path: e for e in manifest.files}
    seen: set[str] = set()
    diffs: list[Difference] = []
    evidence: list[str] = []
    # A directory is expected only as the parent of a listed file (or the evidence folder); an
    # empty or unexplained one is reported, so a verified kit is exactly what was built.
    parents = {p.rsplit("/", 1)[0] for p in listed if "/" in p}
    expected_dirs = {
        "/".join(d.split("/")[: i + 1]) for d in parents for i in range(d.count("/") + 1)
    } | {EVIDENCE_DIR, ROOT_DIR}
    # joined as text, as walk joins: a pathlib join per file was a third of a kit's diff (0.35
    # of 1.05 ms for 32 files on 3.13), paid on every verify and twice by launch
    base = os.fspath(root)
    for entry in walk(root):
        if entry.rel.startswith(ROOT_DIR + "/"):
            continue  # k3kit.signing.trust.root.kit_roots admits only regular <N>.root.json files
        if entry.kind == "dir":
            if entry.rel not in expected_dirs and not entry.rel.startswith(EVIDENCE_DIR + "/"):
                diffs.append(
                    Difference(
                        "KIT_FILE_EXTRA",
                        entry.rel + "/",
                        "directory holds no file of MANIFEST.json",
                    )
                )
            continue
        if entry.kind != "file":
            code = "KIT_SYMLINK" if entry.kind == "symlink" else "KIT_SPECIAL_FILE"
            diffs.append(
                Difference(code, entry.rel, f"{entry.kind} in kit; only regular files are allowed")
            )
            seen.add(entry.rel)
            continue
        if entry.rel.startswith(EVIDENCE_DIR + "/"):
            evidence.append(entry.rel)
            continue
        if entry.rel in UNLISTED:
            continue
        want = listed.get(entry.rel)
        if want is None:
            diffs.append(Difference("KIT_FILE_EXTRA", entry.rel, "file is not in MANIFEST.json"))
            continue
        seen.add(entry.rel)
        if entry.size != want.size:
            diffs.append(
                Difference(
                    "KIT_FILE_CHANGED", entry.rel, f"size {entry.size} != listed {want.size}"
                )
            )
            continue
        sha256 = hash_file(f"{base}/{entry.rel}")[0]["sha256"]
        if sha256 != want.sha256:
            diffs.append(
                Difference(
                    "KIT_FILE_CHANGED",
                    entry.rel,
                    f"sha256 {sha256[:16]}… != listed {want.sha256[:16]}…",
                )
            )
    for path in sorted(set(listed) - seen):
        diffs.append(Difference("KIT_FILE_MISSING", path, "listed in MANIFEST.json but absent"))
    diffs.sort(key=lambda d: (d.path, d.code))
    return TreeDiff(diffs, sorted(evidence))
