"""What a pull found: counts, quarantined files, verification problems and hub errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from k3kit.models import WeightsLock
from k3kit.pull._quarantine import QuarantineRecord
from k3kit.weights import WeightsProblem

LayoutName = Literal["cache", "plain"]


@dataclass
class PullError:
    path: str
    code: str
    message: str
    hint: str | None = None


@dataclass
class PullReport:
    lock: WeightsLock
    layout: LayoutName
    root: Path  # where the lock's relative paths live (snapshot folder or plain folder)
    files_downloaded: int = 0
    bytes_downloaded: int = 0
    files_in_place: int = 0  # verified without downloading (a resumed pull)
    bytes_hashed: int = 0
    quarantined: list[QuarantineRecord] = field(default_factory=list)
    problems: list[WeightsProblem] = field(default_factory=list)
    errors: list[PullError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.errors

    @property
    def exit_code(self) -> int:
        """0 all verified; 1 a check failed (wrong bytes, extra file…); 4 hub/network trouble."""
        if self.problems:
            return 1
        return 4 if self.errors else 0
