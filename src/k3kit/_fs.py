"""Filesystem primitives: the one safe open, a tree walk that reports what it refuses, atomic
writes.

Every file k3kit writes goes through :func:`atomic_write` (temp file in the same directory, fsync,
rename, fsync of the directory) so a crash leaves either the old file or the new one, never half of
one; nothing is replaced unless the caller passed ``force``. Directory outputs are staged beside
their destination and renamed into place for the same reason (:func:`replace_dir`).

Every ``os.open`` of a name someone else could have planted a link or a FIFO at goes through
:func:`open_nofollow` (and :func:`create_new`, :func:`open_regular` built on it), the one place
``O_NOFOLLOW`` is spelt. It sits on its own row below ``_digest``, which opens files through it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from k3kit._immutable import NamedTuple
from k3kit._text import shown
from k3kit.errors import EnvironmentProblem, InputError, K3kitError, VerificationError

# The write failures that are the disk's, not the input's: full, over quota, read-only, failing.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})


def os_error_text(exc: OSError, path: str | Path | None = None) -> str:
    """``exc`` for a person: its reason, then the file it names (``path``, else the one the
    system gave), escaped; never a dangling ``: `` before an empty name (a broken pipe, a closed
    socket and ``open("")`` name no file, or an empty one)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    named = path if path is not None else exc.filename
    if named is None or isinstance(named, int) or not os.fsdecode(named):
        return str(reason)
    return f"{reason}: {shown(os.fsdecode(named))}"


def disk_problem(path: str | Path | None, exc: OSError) -> EnvironmentProblem | None:
    """``exc`` as a ``DISK_UNWRITABLE`` error naming the disk (the folder written into), or None
    when it is not a disk failure. The one place every writer (atomic writes, staging folders,
    the CLI's last-resort OSError mapping) turns ENOSPC and its kin into exit 4 with a fix."""
    if exc.errno not in DISK_ERRNOS:
        return None
    named = path if path is not None else exc.filename
    if named is None or isinstance(named, int) or not str(named):
        what, folder = "a write failed", "the folder written to"
    else:
        where = Path(os.fsdecode(named))
        what, folder = f"cannot write {shown(where)}", shown(where.parent)
    return EnvironmentProblem(
        f"{what}: {exc.strerror or exc} (the disk holding {folder})",
        code="DISK_UNWRITABLE",
        hint=f"free space (or quota) on the disk holding {folder}, or make it writable, or write "
        "elsewhere; then rerun: nothing was half-written",
    )


def _size(n: int) -> str:
    """Bytes for a person: ``1.56 TB``, ``512.00 kB`` (decimal units, as disks are sold)."""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{n} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def need_free_space(folder: Path, needed: int, *, what: str) -> None:
    """Refuse, before a byte is written, when ``folder``'s disk has less free space than
    ``needed``: the one free-space check of every writer of big data (pull, install).

    Without it a pull into a too-small disk downloads for hours until ENOSPC. The disk is asked
    for what an unprivileged writer may use (``shutil.disk_usage(...).free``, i.e. ``f_bavail``);
    a folder whose disk cannot be asked is left to the writes themselves (still exit 4)."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if needed <= free:
        return
    raise EnvironmentProblem(
        f"{what} needs {_size(needed)} more on the disk holding {shown(folder)}, which has "
        f"{_size(free)} free; nothing was written",
        code="DISK_TOO_SMALL",
        hint=f"free {_size(needed - free)} on that disk, or give a folder on a larger one",
    )


def write_error(path: Path, exc: OSError, what: str = "") -> EnvironmentProblem:
    """An OSError from writing ``path``: :func:`disk_problem` if it is the disk's, else generic."""
    return disk_problem(path, exc) or EnvironmentProblem(
        f"cannot write {shown(path)}: {what}{exc.strerror or type(exc).__name__}"
    )


class TreeEntry(NamedTuple):
    """One thing found under a root: ``kind`` is file, symlink, dir or special."""

    rel: str
    kind: str
    size: int


ROOT_DIR = "root"
MAX_ROOTS = 64
MAX_ROOT_BYTES = 64 * 1024
_ROOT_NAME = re.compile(r"^([1-9][0-9]{0,8})\.root\.json$")


def root_chain_names(entries: Iterable[tuple[str, str, int]]) -> dict[int, str]:
    """What a kit's ``root/`` holds, by version: the ONE rule for its chain of roots, whichever
    form the kit arrives in. ``entries`` are ``(path in the kit, kind, size)`` of ``root`` and of
    everything under it: a folder's walk, or an archive's tar index before extraction.

    Why one rule, here: a kit's bytes must get one verdict as a folder and as a ``.kit.tar.gz``.
    The archive's admission (:mod:`k3kit.formats.kitpath`) and the root walk
    (:mod:`k3kit.signing.trust.root`, which may not import ``formats``) both call this; when each
    had its own rule, ``root/notes.txt`` was ``ROOT_CHAIN_MALFORMED`` in a folder and
    ``ARCHIVE_NOT_A_KIT`` in an archive. Only regular files named ``<N>.root.json``, at most
    :data:`MAX_ROOTS` of them, each at most :data:`MAX_ROOT_BYTES` (judged from the size the
    folder or the tar header declares, before a byte is read); anything else is
    ``ROOT_CHAIN_MALFORMED``. Returns version -> path in the kit.
    """
    out: dict[int, str] = {}
    for rel, kind, size in entries:
        if rel == ROOT_DIR:
            if kind != "dir":
                raise _malformed(f"{ROOT_DIR}/ is a {kind}, not a directory")
            continue
        name = rel.removeprefix(ROOT_DIR + "/")
        m = _ROOT_NAME.fullmatch(name)
        if kind != "file" or not m:
            raise _malformed(f"{rel}: only regular files named <N>.root.json belong there")
        if size > MAX_ROOT_BYTES:
            raise _malformed(f"{rel} is {size} bytes, more than a root's {MAX_ROOT_BYTES}")
        if len(out) >= MAX_ROOTS:
            raise _malformed(f"more than {MAX_ROOTS} roots under {ROOT_DIR}/")
        out[int(m.group(1))] = rel
    return out


def is_root_entry(rel: str) -> bool:
    """True for ``root`` and every path under it (judged by :func:`root_chain_names`)."""
    return rel == ROOT_DIR or rel.startswith(ROOT_DIR + "/")


def _malformed(why: str) -> VerificationError:
    return VerificationError(
        why,
        code="ROOT_CHAIN_MALFORMED",
        hint=f"a kit's {ROOT_DIR}/ holds only <N>.root.json files: rebuild it with "
        "`k3kit root attach`, or ask the publisher for the genuine kit",
    )


def walk(
    root: Path, *, on_error: Callable[[str, OSError], None] | None = None
) -> Iterator[TreeEntry]:
    """Yield every entry under ``root`` (sorted), never following symlinks.

    Directories are descended; everything else is reported with its kind so callers can refuse
    symlinks and special files with a named reason instead of silently skipping them.

    Without ``on_error`` a folder that cannot be listed raises :class:`EnvironmentProblem` and an
    entry that cannot be stat'ed raises its ``OSError``. With it, both are handed to
    ``on_error(rel, exc)`` (``rel`` is "" for ``root`` itself) and the walk goes on without that
    entry: a weights check turns them into named problems in a full report (a tree deeper than
    PATH_MAX, a folder without permission), not a bare exit 4.
    """
    # Paths are joined as text: a pathlib join per entry was two thirds of a kit's walk (about
    # 0.7 of 1.1 ms for 49 entries on 3.13), paid on every verify and twice by launch.
    base = os.fspath(root)
    stack = [""]
    while stack:
        prefix = stack.pop()
        here = os.path.join(base, prefix) if prefix else base
        try:
            names = sorted(os.listdir(here))
        except OSError as exc:
            if on_error is None:
                raise EnvironmentProblem(f"cannot list {here}: {exc.strerror}") from exc
            on_error(prefix, exc)
            continue
        for name in reversed(names):
            rel = f"{prefix}/{name}" if prefix else name
            try:
                st = os.lstat(f"{here}/{name}")
            except OSError as exc:
                if on_error is None:
                    raise
                on_error(rel, exc)
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(rel)
                yield TreeEntry(rel, "dir", 0)
            elif stat.S_ISREG(st.st_mode):
                yield TreeEntry(rel, "file", st.st_size)
            elif stat.S_ISLNK(st.st_mode):
                yield TreeEntry(rel, "symlink", 0)
            else:
                yield TreeEntry(rel, "special", 0)


def display_name(rel: str) -> str:
    """``rel`` as printable text: undecodable bytes as ``\\xNN``, control characters escaped."""
    text = os.fsencode(rel).decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems refuse O_RDONLY fsync on dirs
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _exists_error(path: Path) -> InputError:
    return InputError(f"{path} exists", code="OUTPUT_EXISTS", hint="pass --force to replace it")


# The file every folder output of k3kit carries (render-site's, demo's): what --force may replace.
OUTPUT_MARKER = ".k3kit-output"


def _not_ours(path: Path, why: str, code: str) -> InputError:
    return InputError(
        f"{shown(path)} {why}; --force replaces only what k3kit wrote",
        code=code,
        hint="choose another output, or move or remove it yourself",
    )


def marked_output(folder: Path) -> bool:
    """True if ``folder`` holds :data:`OUTPUT_MARKER` as a regular file owned by this user."""
    try:
        st = os.lstat(folder / OUTPUT_MARKER)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()


def write_output_marker(folder: Path, verb: str) -> None:
    """Mark ``folder`` as written by ``k3kit VERB``, so a later ``--force`` may replace it."""
    note = f"written by k3kit {verb}; `k3kit {verb} --force` may replace this whole folder\n"
    atomic_write(folder / OUTPUT_MARKER, note.encode(), force=True)


class FolderRule(NamedTuple):
    """How a folder output is recognised as k3kit's: ``is_ours(folder)``, the code a refusal
    carries and the words that name the mark in the message."""

    is_ours: Callable[[Path], bool]
    code: str = "OUTPUT_NOT_OURS"
    mark: str = f"a folder k3kit wrote (with its {OUTPUT_MARKER} file)"


MARKED = FolderRule(marked_output)  # render-site's and demo's folders


def refuse_existing(path: Path, *, force: bool, folder: FolderRule | None = None) -> None:
    """The one rule for every output k3kit may replace; checked before any work is done.

    Without ``force`` anything at ``path`` (even a dangling link) is ``OUTPUT_EXISTS``. With it:

    * a file output (``folder`` None) replaces a regular file only; a folder, a symbolic
      link (its target is not what the user named) or a special file is refused;
    * a folder output replaces an empty folder or one ``folder.is_ours`` recognises (the
      :data:`OUTPUT_MARKER` that k3kit writes into its folders, or a kit's own manifest), owned
      by this user; never a link, never the current folder or one above it.

    Refusals carry ``folder.code`` (``OUTPUT_NOT_OURS``; build keeps ``OUTPUT_NOT_A_KIT``), exit 3:
    a mistyped ``-o ~/src --force`` must not delete a source tree, ``.git/`` included.
    """
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return  # not there (a parent that is a file is the writer's problem to report)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot inspect {path}: {exc.strerror or exc}") from exc
    if not force:
        raise _exists_error(path)
    code = folder.code if folder else "OUTPUT_NOT_OURS"
    if stat.S_ISLNK(st.st_mode):
        raise _not_ours(path, "is a symbolic link", code)
    if folder is None:
        if not stat.S_ISREG(st.st_mode):
            raise _not_ours(path, "is not a regular file", code)
        return
    if not stat.S_ISDIR(st.st_mode):
        raise _not_ours(path, "is not a folder", code)
    real = os.path.realpath(path)
    if _holds(real, os.path.realpath(os.curdir)):
        raise _not_ours(path, "holds the current folder", code)
    if st.st_uid != os.geteuid():
        raise _not_ours(path, "belongs to another user", code)
    if not _empty(path) and not folder.is_ours(path):
        raise _not_ours(path, f"is neither empty nor {folder.mark}", code)


def _holds(folder: str, inner: str) -> bool:
    """``inner`` is ``folder`` or lies below it (both real paths)."""
    return inner == folder or inner.startswith(folder.rstrip("/") + "/")


def _empty(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot list {folder}: {exc.strerror or exc}") from exc


def atomic_write(
    path: Path, data: bytes, *, mode: int = 0o644, force: bool = False, state: bool = False
) -> None:
    """Write ``data`` to ``path`` atomically; never replace an existing file unless ``force``,
    and with it only a regular file (:func:`refuse_existing`).

    ``state=True`` is for a file k3kit keeps for itself (the verification cache): whatever stands
    at the name, a planted link or FIFO included, is replaced by the rename, never followed.
    """
    if not state:
        refuse_existing(path, force=force)
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # FileExistsError here is a *file* in the way, not the output
        raise write_error(path, exc, "cannot make its folder: ") from exc
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            if force or state:
                os.replace(tmp, path)
            else:
                # link() fails if the name appeared meanwhile: no silent overwrite even in a race.
                os.link(tmp, path)
                os.unlink(tmp)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except FileExistsError as exc:
        raise _exists_error(path) from exc
    except OSError as exc:
        raise write_error(path, exc) from exc
    _fsync_dir(parent)


def _lets_others_swap(st: os.stat_result) -> bool:
    """True when a folder with this status lets someone other than this user and root rename its
    entries: owned by another user, or writable by group/others without the sticky bit."""
    shared = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX
    return st.st_uid not in (0, os.geteuid()) or bool(shared)


def replaceable_by_others(folder: Path) -> Path | None:
    """The first of ``folder`` (a real path) and the folders above it that another user could
    use to swap what is inside ``folder`` after a check, else None.

    Whoever can write a folder can rename any entry of it away and put their own in its place,
    unless the folder is sticky (``/tmp``), where only an entry's owner may rename it. So each
    folder must be owned by root or this user, and writable by group or others only if sticky.
    """
    for current in (folder, *folder.parents):
        if _lets_others_swap(os.stat(current)):
            return current
    return None


def _unsafe_state(what: str, path: Path, why: str, fix: str, code: str) -> EnvironmentProblem:
    return EnvironmentProblem(f"{what} {shown(path)} {why}", code=code, hint=fix)


def swappable_on_the_way(path: Path) -> Path | None:
    """The first of ``path`` and the folders above it that another user could use to swap what
    the name leads to, else None: as written (a link on the way owned by another user, or a folder
    they can rename entries of), then as resolved (:func:`replaceable_by_others`).

    The one check for every folder k3kit trusts by name: state folders (:func:`private_dir`) and
    ``install --into``. Checking only the resolved path misses a co-tenant's link in a sticky
    ``/tmp``: it resolves to a safe folder today and is re-pointed by its owner tomorrow, and
    everything that later follows the name the operator typed (``run.sh``) follows the co-tenant.
    ``path`` must exist and be absolute (not resolved).
    """
    me = os.geteuid()
    for current in (path, *path.parents):
        st = os.lstat(current)
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (0, me):
                return current
        elif _lets_others_swap(st):
            return current
    return replaceable_by_others(Path(os.path.realpath(path)))


def _unsafe_above(path: Path) -> Path | None:
    """:func:`swappable_on_the_way` for the folders above ``path`` (``path`` itself is judged
    by its caller, with stricter rules for a state folder)."""
    return swappable_on_the_way(path.parent)


def _make_private_chain(path: Path, what: str, code: str) -> None:
    """Create each missing folder of ``path`` with mode 0700, one at a time (``mkdir -p`` would
    make the parents with the umask's default mode), after checking that the folder they go in
    is safe: nothing is created in a place the check would then refuse."""
    missing: list[Path] = []
    for current in (path, *path.parents):
        if os.path.lexists(current):
            break
        missing.append(current)
    if not missing:
        return
    above = _unsafe_above(missing[-1])  # an OSError here is private_dir's refusal
    if above is not None:
        raise _unsafe_parent(what, path, above, code)
    for current in reversed(missing):
        try:
            current.mkdir(mode=0o700)
        except FileExistsError:
            continue  # made meanwhile (another k3kit, or someone else): the checks judge it
        except OSError as exc:
            raise _unsafe_state(
                what,
                path,
                f"cannot be created: {exc.strerror or exc}",
                "create it yourself (mode 0700) or choose another folder",
                code,
            ) from exc


def _unsafe_parent(what: str, path: Path, above: Path, code: str) -> EnvironmentProblem:
    return _unsafe_state(
        what,
        path,
        f"sits under {shown(above)}, which another user owns or can write",
        "keep state under folders only you or root can write (the default "
        "$XDG_STATE_HOME/k3kit), or make the folder named sticky (chmod +t) or not writable "
        "by others (chmod o-w)",
        code,
    )


def private_dir(path: Path, *, what: str = "state folder", code: str = "STATE_DIR_UNSAFE") -> Path:
    """The one check for every folder k3kit keeps state in; returns its real path.

    State (rollback memory, accepted roots, the verification cache, launch's config copies) is
    only worth its name if no one else can change it: whoever can delete ``rollback.json`` can
    roll the node back, whoever can swap a folder after this check decides what is read. So:

    * missing folders are created one by one with mode 0700 (never silently re-made when present);
    * the folder itself is a real folder (not a link), owned by this user, writable by no one else;
    * every folder above it, both as written and as resolved, is owned by this user or root and
      writable by others only when sticky (``/tmp``: only an entry's owner may rename it), and a
      link on the way is owned by this user or root.

    Anything else raises ``EnvironmentProblem`` with ``code`` and a hint naming the fix, an
    ``OSError`` of any step included (a link loop, a stale NFS handle, the ``getcwd()`` of a
    working folder since removed): callers that keep going without their state (the signature
    memo, the verification cache) must never see a kit's verdict turn on one.
    """
    try:
        return _private_dir(path, what, code)
    except OSError as exc:
        raise _unsafe_state(
            what, path, f"cannot be checked: {exc.strerror or exc}", "check it exists", code
        ) from exc


def _private_dir(path: Path, what: str, code: str) -> Path:
    absolute = Path(os.path.abspath(path))
    _make_private_chain(absolute, what, code)
    st = os.lstat(absolute)
    above = _unsafe_above(absolute)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise _unsafe_state(
            what, absolute, "is not a real folder (a link or a file)", "remove it", code
        )
    if st.st_uid != os.geteuid():
        raise _unsafe_state(
            what,
            absolute,
            f"belongs to uid {st.st_uid}, not to this user",
            "use a folder of your own (k3kit never adopts state another user made)",
            code,
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise _unsafe_state(
            what, absolute, "is writable by group or others", f"chmod 700 {shown(absolute)}", code
        )
    if above is not None:
        raise _unsafe_parent(what, absolute, above, code)
    return Path(os.path.realpath(absolute))


def check_trust_anchor(path: Path, what: str, *, code: str = "TRUST_ANCHOR_UNSAFE") -> None:
    """Refuse a file k3kit is told to trust (a ``--trust`` key, a ``--root``, a ``--site`` file)
    that another user could have put or swapped; a missing or unreadable file is left to the
    read that follows, which reports it with its own code.

    A trust anchor decides every verdict after it: whoever can replace ``publisher.pub`` chooses
    which kits are VERIFIED, whoever can replace the site file chooses the trust key and the
    listen address. So the rule for the engine found on ``PATH`` and for state folders applies
    (:func:`swappable_on_the_way`): the file and every link and folder on the way, as written and
    as resolved, owned by this user or root and writable by others only where sticky.
    """
    try:
        unsafe = swappable_on_the_way(Path(os.path.abspath(path)))
    except OSError:
        return
    if unsafe is not None:
        raise EnvironmentProblem(
            f"{what} {shown(path)} could have been put or replaced by another user "
            f"({shown(unsafe)} is not owned by root or you, or others can write it)",
            code=code,
            hint="keep what you trust where only root or you can write it (e.g. /etc/k3kit, "
            "mode 0644, or your home folder) and pass that path",
        )


def placeable_by_others(executable: Path) -> Path | None:
    """For a program found on a caller's ``PATH`` (a real path): the first of the file and the
    folders above it that another user could have used to put it there or change it, else None.

    A ``PATH`` may lead through ``/tmp/bin`` or ``.``; running what another user placed there runs
    their code as this user, so the file must be owned by root or this user and writable by no one
    else, in folders :func:`replaceable_by_others` accepts."""
    st = os.stat(executable)
    if st.st_uid not in (0, os.geteuid()) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return executable
    return replaceable_by_others(executable.parent)


def program_on_path(name: str, search: str | None = None) -> tuple[Path, Path | None] | None:
    """The program ``name`` as found on ``search`` (a ``PATH`` value; the caller's ``PATH`` by
    default): its real path and :func:`placeable_by_others` of it, or None when it is not there.

    The one lookup of every program k3kit runs by name (the engine, ``nvidia-smi``, a registry
    credential helper), so each is judged by the same rule before it runs: a ``PATH`` may lead
    through ``/tmp/bin`` or ``.``, and whatever another user placed there would run as this
    user. Each caller words the refusal itself (a raised code, or a reason in a report). A name
    with a ``/`` is never looked up (``shutil.which`` would take it as a path, ``../x`` too).

    The name is judged as found as well as where it leads: a co-tenant who can write a folder on
    ``PATH`` cannot place a program of theirs, but can place a LINK by that name to one of
    root's (``docker-credential-x -> /usr/bin/env``: ``env get`` then runs their ``get``, found
    on the same ``PATH``). So the entry found (a link owned by another user, or a folder on its
    way they can rename entries of: :func:`swappable_on_the_way`) is refused like a program
    they own."""
    if not name or os.sep in name or "\0" in name:
        return None
    found = shutil.which(name, path=search if search is not None else os.environ.get("PATH"))
    if found is None:
        return None
    real = Path(os.path.realpath(found))
    return real, swappable_on_the_way(Path(os.path.abspath(found))) or placeable_by_others(real)


def foreign_entry(root: Path, *, read_only: bool) -> str | None:
    """Why ``root`` (not followed if a link) is not a tree only this user controls, else None.

    ``root`` and every entry under it must be a folder or a regular file owned by this user and
    writable by neither group nor others; with ``read_only`` not by this user either (what
    ``install`` leaves). Together with :func:`replaceable_by_others` on the folders above, that
    is what lets a check of the bytes stand until they are used: nobody else can change them.
    """
    me = os.geteuid()
    entries = [("", root)]
    try:
        if stat.S_ISDIR(os.lstat(root).st_mode):
            entries += [(e.rel, root / e.rel) for e in walk(root)]
        for rel, path in entries:
            st = os.lstat(path)
            name = shown(rel) or "the folder itself"
            if not (stat.S_ISDIR(st.st_mode) or (rel and stat.S_ISREG(st.st_mode))):
                return f"{name} is not a {'regular file' if rel else 'folder'}"
            if st.st_uid != me:
                return f"{name} is owned by uid {st.st_uid}"
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH | (stat.S_IWUSR if read_only else 0)):
                return f"{name} is writable (mode {stat.S_IMODE(st.st_mode):04o})"
    except (OSError, EnvironmentProblem) as exc:
        return f"it cannot be read: {exc}"
    return None


def staging_dir(dest: Path) -> Path:
    """A fresh private directory beside ``dest``, on the same filesystem so rename is atomic."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".staging", dir=dest.parent))
    except OSError as exc:
        raise disk_problem(dest, exc) or EnvironmentProblem(
            f"cannot create a staging directory beside {dest}: {exc}"
        ) from exc


def replace_dir(staged: Path, dest: Path, *, force: bool, folder: FolderRule | None = None) -> None:
    """Move a fully written ``staged`` directory to ``dest``; the old one survives any failure.

    ``dest`` is checked again with :func:`refuse_existing` (the folder rule) right before it is
    moved aside, so what replaced it during the work is not deleted either."""
    if dest.exists() or dest.is_symlink():
        try:
            refuse_existing(dest, force=force, folder=folder or MARKED)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        os.replace(dest, old)
        try:
            os.replace(staged, dest)
        except OSError:
            os.replace(old, dest)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staged, dest)
    _fsync_dir(dest.parent)


STAGING_MARKER = ".k3kit-staging"


@contextmanager
def owned_staging(parent: Path, prefix: str) -> Iterator[Path]:
    """A fresh private folder ``parent/<prefix><random>`` for the length of the block.

    Why a marker and a lock: a process killed with SIGKILL runs no ``finally``, so its staging
    folder stays in ``parent`` for good. Each such folder holds ``.k3kit-staging``, created
    already locked (``flock``, renamed into place locked) and held until the folder is removed;
    the kernel drops the lock when the process dies, however it dies. The next call with the same
    ``parent`` and ``prefix`` first removes what :func:`sweep_stale_staging` proves abandoned.
    """
    sweep_stale_staging(parent, prefix)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        fd = _locked_marker(folder)
    except BaseException:
        remove_tree(folder)
        raise
    try:
        yield folder
    finally:
        remove_tree(folder)
        os.close(fd)  # after the removal: a sweeper never sees this folder unlocked


def _locked_marker(folder: Path) -> int:
    tmp = folder / f"{STAGING_MARKER}.new"
    fd = create_new(tmp, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(
            fd, f"k3kit staging folder of process {os.getpid()}; removed when it ends\n".encode()
        )
        os.replace(tmp, folder / STAGING_MARKER)  # the name appears only once it is locked
    except BaseException:
        os.close(fd)
        raise
    return fd


def sweep_stale_staging(parent: Path, prefix: str) -> list[str]:
    """Remove the staging folders in ``parent`` that a dead k3kit process left; returns their names.

    A folder is removed only if all of these hold: its name starts with ``prefix``; it is a real
    folder (not a link) owned by this user; it holds ``.k3kit-staging``, a regular file owned by
    this user; and that file's lock can be taken, so the process that made it is gone. Anything
    else that merely looks like staging (another user's, no marker, a live install's) is left
    alone. Best effort: a folder that cannot be checked is kept, and nothing here raises.
    """
    removed: list[str] = []
    with contextlib.suppress(OSError):
        names = sorted(os.listdir(parent))
        for name in names:
            if name.startswith(prefix) and _remove_if_abandoned(parent / name):
                removed.append(name)
    return removed


def _owned(st: os.stat_result, kind: int) -> bool:
    return stat.S_IFMT(st.st_mode) == kind and st.st_uid == os.geteuid()


def _remove_if_abandoned(folder: Path) -> bool:
    try:
        if not _owned(os.lstat(folder), stat.S_IFDIR):
            return False
        fd, st = open_regular(folder / STAGING_MARKER)
    except OSError:
        return False
    try:
        if not _owned(st, stat.S_IFREG):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: the process that made it is still working in it
            return False
        remove_tree(folder)
        return not (folder.exists() or folder.is_symlink())
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Remove a folder k3kit made, including read-only folders (an installed kit is 0555).

    Only real folders are made writable again; a link is removed, never followed. Errors are
    left to the caller to notice (the path still exists)."""
    with contextlib.suppress(OSError):
        for root, dirs, _files in os.walk(path):
            for name in dirs:
                full = os.path.join(root, name)
                if not os.path.islink(full):
                    with contextlib.suppress(OSError):
                        os.chmod(full, 0o700)
        if not os.path.islink(path):
            os.chmod(path, 0o700)
    shutil.rmtree(path, ignore_errors=True)


class NotRegularFile(OSError):
    """What :func:`open_regular` raises for a folder, FIFO, device or socket: an ``OSError``,
    so a caller that maps every failure to open one way still does, and one that names this case
    can."""


def open_nofollow(
    path: Path | str, flags: int, mode: int = 0o600, *, dir_fd: int | None = None
) -> int:
    """The one safe ``os.open``: never through a link at the last component, never inherited.

    Every open of a name someone else could have planted a link at (a kit being installed, a
    download's part file, an archive member, a state file) goes through here, so a new caller
    cannot forget ``O_NOFOLLOW`` (a link there is ``ELOOP``) or ``O_CLOEXEC``. Folders above the
    last component are the caller's to hold (:class:`k3kit.pull._safedir.SafeDir` walks them).
    """
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)


def create_new(path: Path | str, mode: int = 0o600, *, dir_fd: int | None = None) -> int:
    """A write descriptor on a file this call creates: refused if anything (a file, a link, a
    FIFO) is already there (``FileExistsError``), so a planted name is never written through."""
    return open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode, dir_fd=dir_fd)


def open_regular(
    path: Path | str, *, dir_fd: int | None = None, follow_symlinks: bool = False
) -> tuple[int, os.stat_result]:
    """The one safe open of a file someone else may have planted: a read descriptor and its stat.

    Opened without following a link (a link is ``ELOOP``; ``follow_symlinks`` only for a path
    the caller named itself) and without blocking (a FIFO planted where a file belongs must not
    hang the reader), close-on-exec, then checked with ``fstat`` on that same descriptor, so
    nothing can be swapped in between the check and the read. Returns ``(fd, stat)`` of a regular
    file; the caller closes ``fd``. Raises ``FileNotFoundError``, :class:`NotRegularFile` (the
    descriptor already closed), or the ``OSError`` of the open.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK
    if follow_symlinks:
        fd = os.open(path, flags | os.O_CLOEXEC, dir_fd=dir_fd)
    else:
        fd = open_nofollow(path, flags, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFile(f"{shown(Path(path))} is not a regular file")
    return fd, st


_T = TypeVar("_T")


class UntrustedState(Exception):
    """A private state file (a cache's records, the signature memo) that is not to be read;
    the message says why in a few words. Never an error of the run: the caller treats the file
    as absent and does the work again."""


def read_private_state(path: Path, max_bytes: int, parse: Callable[[bytes], _T]) -> _T:
    """``parse`` of a state file only this user may have written: a regular file (a planted
    FIFO must not block; a link is not followed), owned by this user, that group and others
    cannot write, of at most ``max_bytes`` (refused by its size first: a sparse 1 TB file is
    never read). Raises ``FileNotFoundError`` when absent, :class:`UntrustedState` otherwise,
    including when ``parse`` fails in any way a strict reader of hostile bytes can (it raises
    UntrustedState itself for a document that parses but is not what it should be).

    One function for the verification cache and the signature memo: both are security state
    whose every doubt must cost one more check, never a trusted answer nor a crash."""
    try:
        fd, st = open_regular(path)
    except FileNotFoundError:
        raise
    except NotRegularFile as exc:
        raise UntrustedState("not a regular file") from exc
    except OSError as exc:
        raise UntrustedState(f"cannot open: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "rb") as handle:
            if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
                raise UntrustedState("owned by another user")
            if st.st_mode & 0o022:
                raise UntrustedState("writable by group or others")
            if st.st_size > max_bytes:
                raise UntrustedState(f"larger than {max_bytes} bytes")
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise UntrustedState(f"cannot read: {exc.strerror or exc}") from exc
    try:
        return parse(data)
    except (ValueError, TypeError, RecursionError, MemoryError) as exc:
        raise UntrustedState(f"unreadable ({type(exc).__name__})") from exc


def read_capped(
    path: Path,
    max_bytes: int,
    *,
    what: str,
    error: type[K3kitError],
    code: str,
    too_large_code: str | None = None,
) -> bytes:
    """Read a small file, refusing links, special files and anything over ``max_bytes``.

    The file is opened non-blocking (a FIFO planted where a document belongs must not hang the
    verifier) and checked with ``fstat`` on that same descriptor: only a regular file, and its
    size is compared with the cap before a byte is read (a 1 GiB sparse document costs nothing).
    A file that grows between ``fstat`` and the read is still cut at ``max_bytes + 1`` and refused.
    Raises ``error`` with ``code`` so the caller decides whether a bad file is the artifact's
    fault (verification, exit 1) or the caller's (bad input, exit 3); names are escaped.
    """
    name = shown(path)
    try:
        fd, st = open_regular(path)
    except FileNotFoundError as exc:
        raise error(f"{what} not found: {name}", code=code) from exc
    except NotRegularFile as exc:
        raise error(f"{what} is not a regular file: {name}", code=code) from exc
    except OSError as exc:
        raise error(f"{what} cannot be opened (symlink or unreadable): {name}", code=code) from exc
    try:
        if st.st_size > max_bytes:
            raise error(
                f"{what} is {st.st_size} bytes, more than the {max_bytes}-byte limit: {name}",
                code=too_large_code or code,
            )
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as exc:
        raise error(f"{what} cannot be read: {name}: {exc.strerror or exc}", code=code) from exc
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise error(f"{what} grew past {max_bytes} bytes while read: {name}", code=code)
    return data
