"""Pin a weight revision into ``weights.lock.json``.

``pin_local`` hashes a local copy (a plain folder or a Hugging Face cache snapshot) of a revision
the publisher names by its 40-hex commit. Pinning from the hub itself, without downloading, lives
beside it (next issue); both produce the same lock format.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from k3kit.errors import InputError
from k3kit.models import PinSource, WeightsLock, load
from k3kit.weights import hash_tree, local_layout

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def pin_local(
    folder: Path,
    *,
    repo: str,
    revision: str,
    pinned_at: str,
    workers: int | None = None,
    on_file_done: Callable[[str, int], None] | None = None,
) -> WeightsLock:
    """Hash every file of ``folder`` and describe it as ``repo`` at commit ``revision``."""
    if not _COMMIT.match(revision):
        raise InputError(
            f"--revision {revision!r} is not a 40-hex commit sha",
            code="REVISION_NOT_COMMIT",
            hint="a local pin must name the exact commit; branches and tags move",
        )
    layout = local_layout(folder)
    if layout.kind == "snapshot" and layout.root.name != revision:
        raise InputError(
            f"{folder} is the snapshot of commit {layout.root.name}, not {revision}",
            code="REVISION_MISMATCH",
        )
    files = hash_tree(layout, workers=workers, on_file_done=on_file_done)
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
