"""One rule for what a path given to a verb is, and one way to open a kit from it.

Why: ``verify``, ``audit``, ``pull`` and ``install`` each used to decide "directory, archive,
lock or receipt" with their own rule (a ``.json`` suffix here, a ``.tar.gz`` suffix there, "any
file" elsewhere), so the same path could be a kit to one verb and a receipt to another, and a
FIFO hung one of them. :func:`classify` is the only rule; each verb then says which kinds it
accepts (:func:`require`). :func:`open_kit` turns a directory or an archive into a kit folder:
an archive is read by the one strict reader (:func:`extract_kit`) into a fresh staging folder
that is removed when the ``with`` block ends, so no caller forgets to clean up; an archive whose
members are not the files its manifest lists is refused from its index, before a byte is written.

The rule, decided from what the path *is* and its name, never from its contents:

* not there (not even a dangling link): ``KIT_NOT_FOUND`` (exit 3);
* a directory: ``"directory"``;
* neither a directory nor a regular file (a FIFO, a device): ``KIT_NOT_RECOGNISED`` (exit 3);
* a regular file named ``*.dsse.json``: ``"receipt"``; any other ``*.json``: ``"lock"``;
* any other regular file: ``"archive"`` (its bytes then decide, under the archive reader).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from k3kit._text import shown
from k3kit.archive import ArchiveIndex, extract_safely
from k3kit.errors import InputError, VerificationError
from k3kit.formats.documents import MAX_DOCUMENT_BYTES, parse_document
from k3kit.formats.manifest import EVIDENCE_DIR, MANIFEST_NAME, ROOT_DIR, UNLISTED
from k3kit.models import Manifest

TargetKind = Literal["directory", "archive", "lock", "receipt"]
KIT_KINDS: tuple[TargetKind, ...] = ("directory", "archive")
RECEIPT_SUFFIX = ".dsse.json"
MAX_MANIFEST_BYTES = MAX_DOCUMENT_BYTES  # as verify reads it
# The unlisted files a kit may carry besides UNLISTED: evidence/<run id>.json, root/<N>.root.json.
_UNLISTED_NAMES = re.compile(
    rf"^(?:{EVIDENCE_DIR}/[a-z0-9][a-z0-9._-]{{0,63}}\.json|{ROOT_DIR}/[1-9][0-9]{{0,8}}\.root\.json)$"
)


def classify(target: Path) -> TargetKind:
    """What ``target`` is: ``"directory"``, ``"archive"``, ``"lock"`` or ``"receipt"``.

    Raises :class:`InputError` ``KIT_NOT_FOUND`` when nothing is there and
    ``KIT_NOT_RECOGNISED`` for anything that is neither a directory nor a regular file.
    """
    if not target.exists():
        raise InputError(f"kit not found: {shown(target)}", code="KIT_NOT_FOUND")
    if target.is_dir():
        return "directory"
    if not target.is_file():
        raise InputError(
            f"{shown(target)} is neither a kit directory nor a file "
            "(a .kit.tar.gz, a lock or a receipt)",
            code="KIT_NOT_RECOGNISED",
        )
    if target.name.endswith(RECEIPT_SUFFIX):
        return "receipt"
    if target.name.endswith(".json"):
        return "lock"
    return "archive"


def require(target: Path, accepted: tuple[TargetKind, ...], *, verb: str) -> TargetKind:
    """:func:`classify`, refusing a kind ``verb`` cannot use (``KIT_NOT_RECOGNISED``, exit 3)."""
    kind = classify(target)
    if kind not in accepted:
        raise InputError(
            f"{shown(target)} is a {kind}; {verb} takes a " + " or ".join(accepted),
            code="KIT_NOT_RECOGNISED",
        )
    return kind


@dataclass(frozen=True)
class OpenedKit:
    """A kit folder to read: ``path`` is the folder itself or the staging copy of an archive.

    ``label`` is what the caller named (shown in reports); ``archive_sha256`` is the sha256 of
    the archive's bytes, or None for a directory. Nothing here says the kit verified.
    """

    path: Path
    label: str
    kind: TargetKind
    archive_sha256: str | None = None


@contextmanager
def open_kit(target: Path) -> Iterator[OpenedKit]:
    """Open a kit directory or ``.kit.tar.gz`` for reading; an archive's copy lasts the block.

    Raises :class:`InputError` ``KIT_NOT_FOUND`` / ``KIT_NOT_RECOGNISED`` (see :func:`classify`;
    a lock or a receipt is not a kit), and the archive reader's ``VerificationError``
    (``ARCHIVE_FORMAT``, ``ARCHIVE_TOO_LARGE``, ``ARCHIVE_MEMBER_*``: exit 1) for an archive it
    refuses.
    """
    kind = require(target, KIT_KINDS, verb="this command")
    if kind == "directory":
        yield OpenedKit(target, str(target), kind)
        return
    staging, digest = extract_kit(target)
    try:
        yield OpenedKit(staging, str(target), kind, digest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def extract_kit(archive: Path, dest_parent: Path | None = None) -> tuple[Path, str]:
    """:func:`k3kit.archive.extract_safely` for a kit: admitted by :func:`admit_kit_archive`
    from its index before anything is written; returns (staging folder, archive sha256)."""
    return extract_safely(
        archive, dest_parent, admit=admit_kit_archive, keep={MANIFEST_NAME: MAX_MANIFEST_BYTES}
    )


def _not_a_kit(why: str) -> VerificationError:
    return VerificationError(
        f"the archive is not a kit: {why}; nothing was written",
        code="ARCHIVE_NOT_A_KIT",
        hint="pack the kit with `k3kit pack`, or ask the publisher for the genuine archive",
    )


def admit_kit_archive(index: ArchiveIndex) -> None:
    """Refuse, from the index alone, an archive whose members are not the kit its manifest lists.

    Why before extraction: a few kilobytes of gzip can declare 10,000 empty files or 100 MiB of
    zeros; the verifier would refuse them after they were written. Here each regular member must
    be a file MANIFEST.json lists, with the size it lists, or one of the documents a manifest
    does not list (receipt, signature, ``evidence/<run>.json``, ``root/<N>.root.json``); each
    listed file must be there and each folder must hold one of them (``evidence/`` and ``root/``
    may be empty). The manifest is not yet
    checked against the receipt, so a forger who writes a matching manifest still reaches the
    caps (``MAX_MEMBERS``, ``MAX_TOTAL_BYTES``) before the signature check refuses the copy.
    """
    data = index.documents.get(MANIFEST_NAME)
    if data is None:
        raise _not_a_kit(f"no {MANIFEST_NAME} of at most {MAX_MANIFEST_BYTES} bytes")
    manifest = parse_document(
        data,
        Manifest,
        what=f"{MANIFEST_NAME} in the archive",
        max_bytes=MAX_MANIFEST_BYTES,
        code="ARCHIVE_NOT_A_KIT",
    )
    listed = {entry.path: entry.size for entry in manifest.files}
    holders: set[str] = set()
    for member in index.members:
        if member.kind == "dir":
            continue
        if member.name in listed:
            if member.size != listed.pop(member.name):
                raise _not_a_kit(f"{member.name!r} is not the size {MANIFEST_NAME} lists")
        elif member.name not in UNLISTED and not _UNLISTED_NAMES.match(member.name):
            raise _not_a_kit(f"{member.name!r} is not listed in {MANIFEST_NAME}")
        parts = member.name.split("/")
        holders.update("/".join(parts[:i]) for i in range(1, len(parts)))
    if listed:
        raise _not_a_kit(f"{min(listed)!r} is listed in {MANIFEST_NAME} but missing")
    holders |= {EVIDENCE_DIR, ROOT_DIR}  # a kit may carry them empty (the verifier allows it)
    empty = [m.name for m in index.members if m.kind == "dir" and m.name not in holders]
    if empty:
        raise _not_a_kit(f"folder {empty[0]!r} holds no file of the kit")
