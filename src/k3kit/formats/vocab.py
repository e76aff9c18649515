"""The shared vocabulary of k3kit's results: check status, preflight status, audit severity, one
problem record, one report protocol.

Before this module the same ideas had four problem shapes (a manifest ``Difference``, a
``WeightsProblem``, verify's ``{"code", "path", "detail"}`` dicts, pull's errors) and status words
spelled as bare strings in each module; a typo there was a silent "not passed". The enums are
``StrEnum`` so the JSON output and every ``== "passed"`` comparison stay as they were.
"""

from __future__ import annotations

import enum
from typing import Any, Protocol, runtime_checkable

from k3kit._immutable import Immutable


class CheckStatus(enum.StrEnum):
    """The outcome of one verification check; a check that could not run is NOT_CHECKED."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_CHECKED = "not checked"


class PreflightStatus(enum.StrEnum):
    """The outcome of one preflight check (``k3kit preflight``); a check whose source could not
    be read is NOT_CHECKED, and a required one of those fails the verdict (docs/preflight.md)."""

    PASS = "pass"  # noqa: S105 (a status, not a password)
    FAIL = "fail"
    NOT_CHECKED = "not-checked"

    @classmethod
    def of(cls, ok: bool) -> PreflightStatus:
        """PASS when ``ok``, else FAIL: the one spelling of a judged comparison."""
        return cls.PASS if ok else cls.FAIL


class Severity(enum.StrEnum):
    """Audit finding severities, most serious first (docs/audit.md)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    NOT_CHECKABLE = "not-checkable"
    PASS = "pass"  # noqa: S105 (a severity, not a password)


class Problem(Immutable):
    """One way an artifact departs from what was signed or locked.

    ``code`` is a :mod:`k3kit.codes` member (scripts branch on it), ``path`` the file it is about
    (relative, already escaped for printing), ``detail`` the human explanation. An
    :class:`k3kit._immutable.Immutable` record, not a dataclass: it is on every verb's start-up
    path.
    """

    __slots__ = ("code", "detail", "path")
    code: str
    path: str
    detail: str

    def __init__(self, code: str, path: str, detail: str) -> None:
        super().__init__(code=code, path=path, detail=detail)

    def as_json(self) -> dict[str, Any]:
        """The record as the ``--json`` output writes it."""
        return {"code": str(self.code), "path": self.path, "detail": self.detail}


@runtime_checkable
class ReportLike(Protocol):
    """What every report k3kit returns offers: a verdict and its JSON form.

    Callers must test ``ok``: a report is returned, not raised, so a forgotten test would accept
    a bad artifact; the verbs that must not act on a failure raise instead.
    """

    @property
    def ok(self) -> bool:
        """True only when everything that was checked holds."""
        ...

    def as_json(self) -> dict[str, Any]:
        """The report as one JSON object (what ``--json`` prints)."""
        ...
