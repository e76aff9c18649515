"""Pull the weights a lock pins from the hub, hashing each file as soon as it has landed.

Used by the CLI (``k3kit pull``) and the API. A file it could not finish is a :class:`PullError`,
the one problem record (:class:`k3kit.formats.vocab.Problem`) with the error's hint.

Downloads run in one thread pool (metadata through huggingface_hub, the body streamed by
``k3kit.hub`` with a cap at the locked size), each chunk hashed as it arrives
(``k3kit._digest.StreamHash``), so a pull ends with the verifier's verdict, not with a second
pass over 1.56 TB; files already on disk are hashed in a second pool (``hash_fd``).
A download is renamed into place only after its whole hash matched the lock; a part with wrong
bytes goes from its hidden name to the quarantine and is never placed (issue 23).

Rules that make the end state safe to launch from:

* Exactly the lock's files at the lock's commit, into a Hugging Face cache (``DIR`` is the cache
  root; files land in ``models--org--name/snapshots/<commit>/``) or a plain folder.
* A file whose bytes do not match the lock (on disk, or a refused download) is moved to the
  quarantine folder ``<DIR>.k3kit-quarantine/`` (beside ``DIR``, never inside it, so neither a
  launcher nor ``verify --weights`` ever sees it), its snapshot link is removed, and it is
  fetched once more; wrong again means exit 1.
* A rerun resumes: files already in place with the right size are hashed, not downloaded; only
  missing or bad ones are fetched.
* Nothing outside ``DIR`` is touched: every path under it is reached through folder descriptors
  without following a link (``_safedir``); a planted link in a folder position is refused, a bad
  link at a file's name is removed (the link, never its target); a FIFO is never opened.
* Ctrl-C cancels every transfer at its next chunk, deletes every part file and re-raises
  ``KeyboardInterrupt`` (the CLI exits 130); downloads run on daemon threads, so a transfer
  stalled in a socket read cannot delay the exit.
* The verdict comes from the verifier's own file-set rules (``weights.check_file_set``) plus the
  digests computed here, each tied to the file's identity (device, inode, size, mtime, ctime)
  when it was hashed: a file that changed after hashing is not counted as verified, even with its
  old mtime put back.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from k3kit.errors import EnvironmentProblem
from k3kit.models import WeightsLock
from k3kit.pull._engine import Puller
from k3kit.pull._kit import KitLock, read_kit_lock
from k3kit.pull._parts import Downloader
from k3kit.pull._quarantine import QuarantineRecord, quarantine_dir
from k3kit.pull._report import LayoutName, PullError, PullReport
from k3kit.weights.hashpool import default_workers

__all__ = [
    "Downloader",
    "KitLock",
    "PullError",
    "PullReport",
    "QuarantineRecord",
    "pull",
    "quarantine_dir",
    "read_kit_lock",
]


def pull(
    lock: WeightsLock,
    dest: Path,
    *,
    downloader: Downloader,
    layout: LayoutName = "cache",
    workers: int = 8,
    hash_workers: int | None = None,
    on_file_done: Callable[[str, int], None] | None = None,
    on_event: Callable[[str], None] | None = None,
) -> PullReport:
    """Fetch and verify every file of ``lock`` into ``dest``; never raises for wrong bytes."""
    dest = Path(os.path.abspath(dest))
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot create the weights folder {dest}: {exc.strerror or exc}", code="DIR_UNUSABLE"
        ) from exc
    puller = Puller(lock, dest, layout, downloader, on_file_done, on_event)
    return puller.run(workers, hash_workers or default_workers())  # the one default
