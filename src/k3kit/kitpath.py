"""One rule for what a path given to a verb is, and one way to open a kit from it.

Why: ``verify``, ``audit``, ``pull`` and ``install`` each used to decide "directory, archive,
lock or receipt" with their own rule (a ``.json`` suffix here, a ``.tar.gz`` suffix there, "any
file" elsewhere), so the same path could be a kit to one verb and a receipt to another, and a
FIFO hung one of them. :func:`classify` is the only rule; each verb then says which kinds it
accepts (:func:`require`). :func:`open_kit` turns a directory or an archive into a kit folder:
an archive is read by the one strict reader (:func:`k3kit.archive.extract_safely`) into a fresh
staging folder that is removed when the ``with`` block ends, so no caller forgets to clean up.

The rule, decided from what the path *is* and its name, never from its contents:

* not there (not even a dangling link): ``KIT_NOT_FOUND`` (exit 3);
* a directory: ``"directory"``;
* neither a directory nor a regular file (a FIFO, a device): ``KIT_NOT_RECOGNISED`` (exit 3);
* a regular file named ``*.dsse.json``: ``"receipt"``; any other ``*.json``: ``"lock"``;
* any other regular file: ``"archive"`` (its bytes then decide, under the archive reader).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from k3kit._text import shown
from k3kit.archive import extract_safely
from k3kit.errors import InputError

TargetKind = Literal["directory", "archive", "lock", "receipt"]
KIT_KINDS: tuple[TargetKind, ...] = ("directory", "archive")
RECEIPT_SUFFIX = ".dsse.json"


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
    staging, digest = extract_safely(target)
    try:
        yield OpenedKit(staging, str(target), kind, digest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
