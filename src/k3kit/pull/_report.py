"""What a pull found: counts, quarantined files, verification problems and hub errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from k3kit._immutable import Immutable
from k3kit.errors import K3kitError
from k3kit.formats.vocab import Problem
from k3kit.models import WeightsLock
from k3kit.pull._quarantine import QuarantineRecord
from k3kit.weights import WeightsProblem

LayoutName = Literal["cache", "plain"]


class PullError(Problem):
    """A file the pull could not finish: the one problem record (:class:`Problem`) with the
    ``hint`` of the :class:`K3kitError` it came from, so every layer reports problems one way.

    ``message`` stays readable (the CLI's and the JSON's name for ``detail``).
    """

    __slots__ = ("hint",)
    hint: str | None

    def __init__(self, code: str, path: str, detail: str, hint: str | None = None) -> None:
        Immutable.__init__(self, code=code, path=path, detail=detail, hint=hint)

    @classmethod
    def of(cls, path: str, exc: K3kitError) -> PullError:
        """The problem an error raised while fetching ``path`` stands for."""
        return cls(exc.code, path, exc.message, exc.hint)

    @property
    def message(self) -> str:
        """The human explanation (``detail``), under the name pull's output has always used."""
        return self.detail

    def as_json(self) -> dict[str, Any]:
        """The record as ``pull --json`` writes it, keys in their published order."""
        return {"path": self.path, "code": self.code, "message": self.detail, "hint": self.hint}


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
