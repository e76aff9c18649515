"""Install a kit: verify a private copy, then move exactly those bytes into place, read-only.

The verdict must hold for what is installed, so nothing is read twice from a source an attacker
may still be writing: the archive (or kit folder) is copied once into a private staging folder
beside the destination, the staging copy is verified, and the same staging copy is renamed into
``DIR/<name>-<version>/``. The rename is atomic on one filesystem, so a reader of ``DIR`` sees no
kit or the whole verified kit, never half of one; on any failure the staging copy is removed and
an earlier installation is left as it was. An archive is admitted from its tar index before
anything is written (:func:`k3kit.formats.kitpath.extract_kit`): its receipt must be signed by
a trusted key and sign its ``MANIFEST.json``, and its members must be what that manifest lists. A
staging folder that a killed install left behind is removed by the next install into the same
folder (:func:`owned_staging`).

An installed kit of the same name and version is never replaced: the same kit, in a folder this
user owns and nobody can write (as ``install`` leaves it) and that verifies again in full, makes
the install a no-op; a folder anyone else made or can write is refused (``INSTALL_TARGET_FOREIGN``)
whatever its bytes, and different bytes are refused (two different kits claiming one version is
exactly what an operator must look at, not what a tool should settle silently).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from k3kit._fs import (
    NotRegularFile,
    TreeEntry,
    create_new,
    foreign_entry,
    need_free_space,
    open_regular,
    owned_staging,
    swappable_on_the_way,
    walk,
)
from k3kit._immutable import NamedTuple
from k3kit._policy import path_problem
from k3kit.archive import MAX_MEMBER_BYTES, MAX_MEMBERS, MAX_TOTAL_BYTES
from k3kit.errors import EnvironmentProblem, InputError, VerificationError
from k3kit.formats.kitpath import extract_kit
from k3kit.formats.manifest import MANIFEST_NAME, RECEIPT_NAME
from k3kit.node.verify import KitNotVerified, Report, TrustSource, signed_manifest_check, verify_dir
from k3kit.signing.trust import RollbackPolicy, kit_roots

_STAGING_PREFIX = ".k3kit-install-"


class Installed(NamedTuple):
    """Where a verified kit now lives, and the report that verified it."""

    path: Path
    name: str
    version: str
    kit_sha256: str
    already_installed: bool
    report: Report


def _copy_kit_dir(source: Path, dest: Path) -> None:
    """Copy a kit folder's regular files and folders only; anything else is refused, not skipped
    (the verifier would refuse it anyway, and a copy must not follow a link out of the kit).

    As for an archive, the work is budgeted before it is done: every entry is checked and the
    count and sizes are held to the archive caps before the first byte is copied, and each file
    is copied up to the size seen then (one that grows meanwhile is ``KIT_CHANGED``)."""
    kit_roots(source)  # root/ by the one rule verify and an archive's index use (same codes)
    entries = _budgeted_entries(source)
    need_free_space(dest.parent, sum(e.size for e in entries), what=f"copying {source.name}")
    dest.mkdir(mode=0o700)
    for entry in entries:
        if entry.kind == "dir":
            (dest / entry.rel).mkdir(mode=0o700)
        else:
            _copy_file(source / entry.rel, dest / entry.rel, entry.size)


def _budgeted_entries(source: Path) -> list[TreeEntry]:
    entries: list[TreeEntry] = []
    total = 0
    for entry in walk(source):
        problem = path_problem(entry.rel)
        if problem:
            raise VerificationError(
                f"{entry.rel!r} in the kit folder: {problem}", code="KIT_PATH_UNSAFE"
            )
        if entry.kind not in ("dir", "file"):
            raise VerificationError(
                f"{entry.rel!r} in the kit folder is a {entry.kind}", code="KIT_NOT_REGULAR"
            )
        entries.append(entry)
        total += entry.size
        if len(entries) > MAX_MEMBERS or entry.size > MAX_MEMBER_BYTES or total > MAX_TOTAL_BYTES:
            raise VerificationError(
                f"the kit folder is over the caps of a kit ({MAX_MEMBERS} entries, "
                f"{MAX_MEMBER_BYTES} bytes a file, {MAX_TOTAL_BYTES} in all) at {entry.rel!r}; "
                "nothing was copied",
                code="ARCHIVE_TOO_LARGE",
            )
    return entries


def _copy_file(src: Path, dst: Path, size: int) -> None:
    try:
        fd, st = open_regular(src)
    except NotRegularFile as exc:
        raise VerificationError(
            f"{src.name!r} is not a regular file", code="KIT_NOT_REGULAR"
        ) from exc
    try:
        mode = 0o755 if st.st_mode & stat.S_IXUSR else 0o644
        out = create_new(dst, mode)
        try:
            copied = 0
            while chunk := os.read(fd, min(1024 * 1024, size + 1 - copied)):
                copied += len(chunk)
                if copied > size:
                    raise VerificationError(
                        f"{src.name!r} grew while the kit folder was copied", code="KIT_CHANGED"
                    )
                os.write(out, chunk)
            os.fsync(out)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _make_read_only(root: Path) -> None:
    """Files 0444 (0555 if executable), folders 0555: the installed kit is not edited in place."""
    for entry in walk(root):
        path = root / entry.rel
        if entry.kind == "file":
            executable = os.lstat(path).st_mode & stat.S_IXUSR
            mode = 0o555 if executable else 0o444
            os.chmod(path, mode, follow_symlinks=False)
    for entry in sorted(walk(root), key=lambda e: e.rel.count("/"), reverse=True):
        if entry.kind == "dir":
            os.chmod(root / entry.rel, 0o555)  # noqa: S103 - read and search only, for everyone
    os.chmod(root, 0o555)  # noqa: S103


def _same_kit(a: Path, b: Path) -> bool:
    """Same signed bytes: the manifest (which covers every file) and the receipt."""
    try:
        return all(
            (a / name).read_bytes() == (b / name).read_bytes()
            for name in (MANIFEST_NAME, RECEIPT_NAME)
        )
    except OSError:
        return False


def _installed_already(target: Path, staging: Path, trusted: TrustSource, kit_sha256: str) -> bool:
    """The folder already at ``target`` is this kit as ``install`` left it, not merely its bytes.

    Bytes alone prove nothing about who can change them next: a co-tenant who pre-creates
    ``NAME-VERSION/`` in a sticky shared ``--into`` with the genuine files would be told
    "already installed" and edit them afterwards. So the folder must first look like k3kit's own
    (:func:`_refuse_foreign`: ours, read-only, nothing another user can write), and only then is
    it verified in full, as it stands, against the receipt: comparing ``MANIFEST.json`` and the
    receipt alone would call a folder with the genuine pair beside a changed ``serve.yaml``
    installed.
    """
    _refuse_foreign(target)
    if not _same_kit(target, staging):
        return False
    existing = verify_dir(target, trusted, label=str(target))
    return existing.ok and existing.facts.get("kit_sha256") == kit_sha256


def _refuse_foreign(target: Path) -> None:
    """Refuse a ``target`` that ``install`` cannot have left there (``INSTALL_TARGET_FOREIGN``).

    The folders above ``target`` were checked by :func:`_destination_root`; whoever can write
    ``target`` or anything in it could change the kit after any check, so every entry must be
    a folder or regular file owned by this user and not writable by anyone, as
    :func:`_make_read_only` leaves them.
    """
    why = foreign_entry(target, read_only=True)
    if why is not None:
        raise EnvironmentProblem(
            f"{target} was not installed by k3kit as this user: {why}; it is not trusted as "
            "the installed kit",
            code="INSTALL_TARGET_FOREIGN",
            hint=f"look at who made {target} and why; install into a folder of your own "
            "(in a sticky shared folder only its owner or root can remove it)",
        )


def _destination_root(into: Path) -> Path:
    # Checked before mkdir: mkdir(exist_ok) on a file raises FileExistsError, which would read
    # as an I/O problem (exit 4) although the operator named the wrong path (exit 3).
    if (into.exists() or into.is_symlink()) and not into.is_dir():
        raise InputError(f"{into} is not a folder", code="INSTALL_DIR_INVALID")
    # The staging copy is verified, then renamed into place: whoever can write DIR (or a folder
    # above it) could swap the staging folder for their own in between, and an unverified kit
    # would be installed as verified. Checked on the nearest existing folder before anything is
    # created, and again on DIR itself once it exists (a umask of 002 makes it group-writable).
    into = Path(os.path.abspath(into))  # absolute, links kept: the name as the operator wrote it
    existing = into
    while not (existing.exists() or existing.is_symlink()) and existing != existing.parent:
        existing = existing.parent
    _refuse_replaceable(existing)
    try:
        into.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot create {into}: {exc.strerror or exc}") from exc
    _refuse_replaceable(into)
    return Path(os.path.realpath(into))


def _refuse_replaceable(folder: Path) -> None:
    """``folder`` and every folder above it, as written and as resolved, are out of other users'
    reach (:func:`swappable_on_the_way`, the rule state folders use too): a link on the way owned
    by a co-tenant is refused even when it points at a safe folder today, since its owner can
    re-point it after the install, and whatever follows the name (the kit's ``run.sh``) would
    follow them."""
    unsafe = swappable_on_the_way(folder)
    if unsafe is not None:
        raise EnvironmentProblem(
            f"{unsafe} can be written by another user (a folder they can write, or a link "
            "they own and can re-point), who could swap the kit between its verification and "
            "the install, or after it",
            code="INSTALL_DIR_UNSAFE",
            hint="install into a folder owned by you or root and writable by no one else, "
            "named through no link another user owns",
        )


def install(
    kit: Path,
    trusted: TrustSource,
    into: Path,
    *,
    rollback: RollbackPolicy | None = None,
    expect: Callable[[Report], None] | None = None,
) -> Installed:
    """Verify ``kit`` (a ``.kit.tar.gz`` or a kit folder) and install it as ``into/NAME-VERSION``.

    Returns :class:`Installed`. Raises :class:`KitNotVerified` (exit 1) when the kit does not
    verify, ``VerificationError`` ``INSTALL_CONFLICT`` when another kit is installed under the
    same name and version, ``InputError`` for a kit path that is neither, and
    ``EnvironmentProblem`` for I/O failures and for an ``into`` another user can write
    (``INSTALL_DIR_UNSAFE``). With a root of trust and ``rollback``, an older or
    conflicting kit is refused (``ROLLBACK``/``EQUIVOCATION``) exactly as ``verify`` refuses it.
    Weights are not part of an install: ``pull`` and ``launch`` check them. ``expect`` (when
    given) sees the report of a kit that verified before it is moved into place, and refuses it
    by raising (``update`` checks the kit is the release its channel entry names).
    """
    if not (kit.is_file() or kit.is_dir()):
        raise InputError(f"kit not found: {kit}", code="KIT_NOT_FOUND")
    return install_fetched(
        lambda _holder: kit, trusted, into, source=str(kit), rollback=rollback, expect=expect
    )


def install_fetched(
    fetch: Callable[[Path], Path],
    trusted: TrustSource,
    into: Path,
    *,
    source: str,
    rollback: RollbackPolicy | None = None,
    expect: Callable[[Report], None] | None = None,
) -> Installed:
    """:func:`install` of the kit ``fetch(holder)`` returns, where ``holder`` is the private
    staging folder inside ``into``: a kit downloaded from a registry (:mod:`k3kit.node.registry`)
    is written there, once, and verified and installed from there exactly as a local archive,
    so nobody else can change it between the download and the verification.

    ``source`` is what the report calls the kit (its ``kit``, printed and in ``--json``): where
    it came from as the caller named it (the ``oci://`` reference, the channel's target). Not
    the downloaded file's path: that file is in the staging folder, gone when this returns."""
    root = _destination_root(into)
    with contextlib.ExitStack() as stack:
        try:  # the staging folder a killed install left in ``root`` is removed first
            holder = stack.enter_context(owned_staging(root, _STAGING_PREFIX))
        except OSError as exc:
            raise EnvironmentProblem(f"cannot write to {root}: {exc.strerror or exc}") from exc
        kit = fetch(holder)
        return _install_via(holder, kit, source, trusted, root, rollback, expect)


def _install_via(
    holder: Path,
    kit: Path,
    source: str,
    trusted: TrustSource,
    root: Path,
    rollback: RollbackPolicy | None,
    expect: Callable[[Report], None] | None = None,
) -> Installed:
    if kit.is_dir():
        staging = holder / "kit"
        _copy_kit_dir(kit, staging)
        archive_sha256 = None
    else:
        # The receipt is checked against the trust source, and MANIFEST.json against the
        # receipt, from the archive's index: a forged manifest cannot budget a byte of disk.
        check = signed_manifest_check(trusted, label=source)
        staging, archive_sha256 = extract_kit(kit, holder, authenticate=check)
    report = verify_dir(staging, trusted, label=source, rollback=rollback)
    if archive_sha256 is not None:
        report.facts["archive_sha256"] = archive_sha256
    if not report.ok:
        raise KitNotVerified(report)
    if expect is not None:
        expect(report)
    receipt = report.facts["receipt"]
    name, version = receipt["kit"], receipt["version"]
    folder = f"{name}-{version}"
    if path_problem(folder) or "/" in folder:
        raise VerificationError(f"kit name {folder!r} is not a safe folder name", code="KIT_NAME")
    target = root / folder
    kit_sha256 = report.kit_sha256
    if target.exists() or target.is_symlink():
        if _installed_already(target, staging, trusted, kit_sha256):
            return Installed(target, name, version, kit_sha256, True, report)
        raise VerificationError(
            f"{target} holds another kit of {name} {version}",
            code="INSTALL_CONFLICT",
            hint="two different kits claim the same version: compare them before removing one",
        )
    _make_read_only(staging)
    try:
        os.rename(staging, target)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):  # another install won the race
            raise VerificationError(
                f"{target} appeared while installing", code="INSTALL_CONFLICT"
            ) from exc
        raise EnvironmentProblem(f"cannot install into {target}: {exc.strerror or exc}") from exc
    with contextlib.suppress(OSError):
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return Installed(target, name, version, kit_sha256, False, report)
