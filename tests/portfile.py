"""The port file the dev tools write (``scripts/dev_hub.py``, ``scripts/standin_server.py``).

Why one helper: both tools wrote ``PATH.tmp`` (a fixed, guessable name) with ``write_text``, which
follows a link, and renamed it over ``PATH``. In a folder another user can write (a shared project
folder, mode 0777), that user planted ``engine.port.tmp`` as a link to a file of the operator's
and the tool, run as the operator, overwrote that file with a port number; the link itself then
became ``engine.port``, which its owner re-points at will, so ``$(cat engine.port)`` led
``k3kit pull`` or ``k3kit accept`` to a port of their choosing. So the folder is judged before the
tool does any work (the rule :func:`k3kit._fs.swappable_on_the_way` applies to k3kit's own
folders: owned by this user or root, writable by others only when sticky, every folder above it
too), and the file is written under a fresh name made with ``O_EXCL`` (never a link's target),
then renamed into place. Standard library only: the tools run on any Python 3.11+ from a clone.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def port_file_problem(path: Path) -> str | None:
    """Why another user could replace or redirect a port file written at ``path``, else None."""
    me = os.geteuid()
    folder = Path(os.path.realpath(path.parent))
    for current in (folder, *folder.parents):
        try:
            st = os.stat(current)
        except OSError as exc:
            return f"{current} cannot be checked: {exc.strerror or exc}"
        if st.st_uid not in (0, me):
            return f"{current} belongs to uid {st.st_uid}"
        writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable and not st.st_mode & stat.S_ISVTX:
            return f"{current} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def check_port_file(tool: str, path: Path) -> None:
    """Refuse (``SystemExit``, before the tool listens) a port file others could tamper with."""
    problem = port_file_problem(path)
    if problem is not None:
        raise SystemExit(
            f"{tool}: refusing --port-file {path}: {problem}, so another user could replace it "
            "or plant a link at it (write it in a folder only you can write, e.g. the clone)"
        )


def write_port_file(tool: str, path: Path, port: int) -> None:
    """``port`` written whole at ``path``: a fresh ``O_EXCL`` file beside it, then a rename, so a
    reader never sees half a number and no planted link is followed."""
    check_port_file(tool, path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(f"{port}\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise SystemExit(f"{tool}: cannot write --port-file {path}: {exc.strerror or exc}") from exc
