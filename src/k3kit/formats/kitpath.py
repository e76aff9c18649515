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
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from k3kit._fs import is_root_entry, root_chain_names
from k3kit._immutable import NamedTuple
from k3kit._text import shown
from k3kit.errors import InputError, VerificationError
from k3kit.formats.documents import MAX_DOCUMENT_BYTES, parse_document
from k3kit.formats.manifest import EVIDENCE_DIR, MANIFEST_NAME, UNLISTED
from k3kit.models import lite

if TYPE_CHECKING:  # the archive reader is imported by the one function that reads an archive
    from k3kit.archive import ArchiveIndex
    from k3kit.models import Manifest

TargetKind = Literal["directory", "archive", "lock", "receipt"]
KIT_KINDS: tuple[TargetKind, ...] = ("directory", "archive")
RECEIPT_SUFFIX = ".dsse.json"
MAX_MANIFEST_BYTES = MAX_DOCUMENT_BYTES  # as verify reads it
# The unlisted files a kit may carry besides UNLISTED and root/ (k3kit._fs.root_chain_names):
# evidence/<run id>.json. A pattern's text, compiled on first use (re's cache): verify of a kit
# folder never matches it, and compiling it at import cost every node start ~0.1 ms of CPU.
_UNLISTED_NAMES = rf"^{EVIDENCE_DIR}/[a-z0-9][a-z0-9._-]{{0,63}}\.json$"


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


_KIND_NAMES: dict[TargetKind, str] = {
    "directory": "a folder",
    "archive": "a kit archive (.kit.tar.gz)",
    "lock": "a weights lock (.json)",
    "receipt": "a receipt (.dsse.json)",
}


def require_kit_folder(target: Path, *, verb: str, hint: str) -> Path:
    """``target`` if it is a folder, else the one refusal of a verb that works on a kit folder
    given an archive, a lock or a receipt: ``KIT_NOT_A_FOLDER`` (exit 3) naming what was given,
    what ``verb`` takes, and (``hint``) the verb or argument that takes what was given.

    Why one rule: click's ``file_okay=False`` answered "Directory 'x.kit.tar.gz' is a file"
    (exit 2) in five verbs, naming neither the kit folder nor how to get one."""
    kind = classify(target)
    if kind == "directory":
        return target
    raise InputError(
        f"{shown(target)} is {_KIND_NAMES[kind]}, not a kit folder; {verb} works on a kit folder",
        code="KIT_NOT_A_FOLDER",
        hint=hint,
    )


class OpenedKit(NamedTuple):  # a NamedTuple: cheaper to create at start-up than a dataclass
    """A kit folder to read: ``path`` is the folder itself or the staging copy of an archive.

    ``label`` is what the caller named (shown in reports); ``archive_sha256`` is the sha256 of
    the archive's bytes, or None for a directory. Nothing here says the kit verified.
    """

    path: Path
    label: str
    kind: TargetKind
    archive_sha256: str | None = None


@contextmanager
def open_kit(target: Path, *, authenticate: Authenticate | None = None) -> Iterator[OpenedKit]:
    """Open a kit directory or ``.kit.tar.gz`` for reading; an archive's copy lasts the block.

    Raises :class:`InputError` ``KIT_NOT_FOUND`` / ``KIT_NOT_RECOGNISED`` (see :func:`classify`;
    a lock or a receipt is not a kit), and the archive reader's ``VerificationError``
    (``ARCHIVE_FORMAT``, ``ARCHIVE_TOO_LARGE``, ``ARCHIVE_MEMBER_*``: exit 1) for an archive it
    refuses; ``authenticate`` as for :func:`extract_kit`.
    """
    kind = require(target, KIT_KINDS, verb="this command")
    if kind == "directory":
        yield OpenedKit(target, str(target), kind)
        return
    staging, digest = extract_kit(target, authenticate=authenticate)
    try:
        yield OpenedKit(staging, str(target), kind, digest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class Authenticate(NamedTuple):  # a NamedTuple: cheaper to create at start-up than a dataclass
    """How a caller with a trust source checks an archive's manifest before it is extracted.

    ``documents`` names the small members to keep from the index pass (name -> most bytes kept:
    the receipt, ``MANIFEST.json``, the root files a pinned root can reach); ``check`` is given
    the index (every member, and the kept bytes) and raises unless the receipt is signed by a
    trusted key and signs exactly that ``MANIFEST.json``
    (:func:`k3kit.node.verify.signed_manifest_check` builds both; this layer cannot import the
    verifier).
    """

    documents: Mapping[str, int]
    check: Callable[[ArchiveIndex], None]


def extract_kit(
    archive: Path, dest_parent: Path | None = None, *, authenticate: Authenticate | None = None
) -> tuple[Path, str]:
    """:func:`k3kit.archive.extract_safely` for a kit, admitted from its index before anything is
    written; returns (staging folder, archive sha256).

    The index must be the kit its own manifest lists (:func:`admit_kit_archive`), and, with
    ``authenticate``, that manifest must be the one a trusted receipt signs: then a forger's
    manifest (7 files of 64 MiB of zeros beside a genuine receipt of another kit) is refused with
    nothing written. Without it (``audit``, ``pull`` without ``--trust``, ``card --unverified``:
    nothing to check against) the manifest is the archive's own, and a forger who writes a
    matching one reaches the caps before the verifier refuses the copy.
    """
    keep = {MANIFEST_NAME: MAX_MANIFEST_BYTES, **(authenticate.documents if authenticate else {})}

    def admit(index: ArchiveIndex) -> None:
        admit_kit_archive(index)
        if authenticate is not None:
            authenticate.check(index)

    from k3kit.archive import extract_safely  # a kit folder never needs the archive reader

    return extract_safely(archive, dest_parent, admit=admit, keep=keep)


def _not_a_kit(why: str) -> VerificationError:
    return VerificationError(
        f"the archive is not a kit: {why}; nothing was written",
        code="ARCHIVE_NOT_A_KIT",
        hint="pack the kit with `k3kit pack`, or ask the publisher for the genuine archive",
    )


def admit_kit_archive(index: ArchiveIndex) -> None:
    """Refuse, from the index alone, an archive whose members are not the kit its manifest lists
    (:func:`kit_members_problem`, ``ARCHIVE_NOT_A_KIT``).

    Why before extraction: a few kilobytes of gzip can declare 10,000 empty files or 100 MiB of
    zeros; the verifier would refuse them after they were written. The manifest here is the
    archive's own; ``install`` first checks it against the signed receipt
    (:func:`k3kit.node.verify.check_signed_manifest`), so a forger who writes a matching manifest is
    refused before anything is written too.
    """
    # root/ first, by the rule a kit folder's root walk uses: one verdict in both forms.
    root_chain_names((m.name, m.kind, m.size) for m in index.members if is_root_entry(m.name))
    data = index.documents.get(MANIFEST_NAME)
    if data is None:
        raise _not_a_kit(f"no {MANIFEST_NAME} of at most {MAX_MANIFEST_BYTES} bytes")
    manifest = parse_document(
        data,
        lite.Manifest,  # the verifier's pydantic-free record (k3kit.models.lite)
        what=f"{MANIFEST_NAME} in the archive",
        max_bytes=MAX_MANIFEST_BYTES,
        code="ARCHIVE_NOT_A_KIT",
    )
    why = kit_members_problem(((m.name, m.kind, m.size) for m in index.members), manifest)
    if why is not None:
        raise _not_a_kit(why)


def kit_members_problem(
    members: Iterable[tuple[str, str, int]], manifest: Manifest | lite.Manifest
) -> str | None:
    """Why ``members`` (name, kind ``"file"``/``"dir"``/other, size) are not the kit ``manifest``
    lists, or None: the one rule for "these entries are a kit", for an archive's index and for a
    folder that ``build --force`` would replace.

    Each file must be one MANIFEST.json lists, with the size it lists, or one of the documents a
    manifest does not list (receipt, signature, ``evidence/<run>.json``, ``root/<N>.root.json``);
    each listed file must be there and each folder must hold one of them (``evidence/`` and
    ``root/`` may be empty); anything else (a link, a device) is not a kit's.
    """
    listed = {entry.path: entry.size for entry in manifest.files}
    holders: set[str] = set()
    folders: list[str] = []
    roots: list[tuple[str, str, int]] = []
    for name, kind, size in members:
        if is_root_entry(name):
            roots.append((name, kind, size))
            continue
        if kind == "dir":
            folders.append(name)
            continue
        if kind != "file":
            return f"{name!r} is a {kind}, not a file of a kit"
        if name in listed:
            if size != listed.pop(name):
                return f"{name!r} is not the size {MANIFEST_NAME} lists"
        elif name not in UNLISTED and not re.fullmatch(_UNLISTED_NAMES, name):
            return f"{name!r} is not listed in {MANIFEST_NAME}"
        parts = name.split("/")
        holders.update("/".join(parts[:i]) for i in range(1, len(parts)))
    if listed:
        return f"{min(listed)!r} is listed in {MANIFEST_NAME} but missing"
    try:
        root_chain_names(roots)
    except VerificationError as exc:
        return exc.message
    holders.add(EVIDENCE_DIR)  # a kit may carry it empty (the verifier allows it)
    empty = [name for name in folders if name not in holders]
    if empty:
        return f"folder {empty[0]!r} holds no file of the kit"
    return None
