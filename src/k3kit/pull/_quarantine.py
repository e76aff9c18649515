"""Where wrong bytes go: a quarantine folder beside the weights folder, never inside it.

``<DIR>.k3kit-quarantine/<commit12>-<time>-<pid>/<path>`` keeps the evidence of one pull run
(with ``quarantine.json`` saying what was expected and what arrived) out of every place a
launcher or ``verify --weights DIR`` looks: not in the snapshot, not under a blob name, not
anywhere under ``DIR``. A move is a rename on the same filesystem; when that is impossible the
file is deleted instead, since keeping wrong bytes in place is never an option.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from k3kit._canonical import dumps
from k3kit._fs import atomic_write
from k3kit.models import LockedFile


@dataclass(frozen=True)
class QuarantineRecord:
    path: str
    expected: str
    actual: str
    origin: str  # "downloaded" or "found on disk"
    moved_to: str | None  # None: deleted, because it could not be moved
    problem: str | None = None  # set when the file could be neither moved nor deleted


def quarantine_dir(dest: Path) -> Path:
    """The quarantine folder of a weights folder: a sibling, so never part of the weights."""
    return dest.parent / f"{dest.name}.k3kit-quarantine"


class Quarantine:
    def __init__(self, dest: Path, commit: str) -> None:
        self.base = quarantine_dir(dest)
        self.commit = commit
        self.run_dir: Path | None = None
        self._lock = threading.Lock()

    def move(
        self, real: Path, entry: LockedFile, actual: str, origin: str, links: list[Path]
    ) -> QuarantineRecord:
        """Take ``real`` out of the weights; then drop the snapshot ``links`` that named it."""
        with self._lock:
            if self.run_dir is None:
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                self.run_dir = self.base / f"{self.commit[:12]}-{stamp}-{os.getpid()}"
            target = self.run_dir / entry.path
            n = 0
            while os.path.lexists(target):
                n += 1
                target = self.run_dir / f"{entry.path}.{n}"
            moved_to: str | None = None
            problem = None
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(real, target)
                moved_to = str(target)
            except OSError:
                try:
                    os.unlink(real)
                except OSError as exc:
                    problem = f"could not move or delete {real}: {exc.strerror}"
            for link in links:
                if link.is_symlink():
                    link.unlink()
        expected = f"sha256 {entry.sha256[:16]}…, {entry.size} bytes"
        return QuarantineRecord(entry.path, expected, actual, origin, moved_to, problem)

    def write_record(self, records: list[QuarantineRecord]) -> None:
        if self.run_dir is None or not records:
            return
        doc = {"commit": self.commit, "quarantined": [asdict(r) for r in records]}
        atomic_write(self.run_dir / "quarantine.json", dumps(doc), force=True)
