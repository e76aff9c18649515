"""Findings, severities, and the rule registry.

A rule never returns silently: every rule reports, for each thing it looked at, a pass, a
problem, or *not-checkable* with the reason (missing data is never a pass). Severities, most
serious first: error (the claim does not hold as stated), warning (it must be qualified), info
(context an auditor wants), not-checkable (the receipt lacks the data), pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from k3kit._registry import Registry
from k3kit.formats.vocab import Severity

if TYPE_CHECKING:
    from k3kit.audit.context import Context

ERROR, WARNING, INFO, NOT_CHECKABLE, PASS = (
    Severity  # k3kit.formats.vocab: str values, as in the JSON
)
SEVERITIES = (ERROR, WARNING, INFO, NOT_CHECKABLE, PASS)
RANK: dict[str, int] = {PASS: 0, NOT_CHECKABLE: 1, INFO: 2, WARNING: 3, ERROR: 4}


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    run: str | None
    message: str
    expected: str | None = None
    actual: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "severity": self.severity,
            "run": self.run,
            "message": self.message,
        }
        if self.expected is not None:
            out["expected"] = self.expected
        if self.actual is not None:
            out["actual"] = self.actual
        return out


@dataclass
class Out:
    """Where one rule writes its findings."""

    rule: str
    findings: list[Finding] = field(default_factory=list)

    def _add(
        self, severity: str, run: str | None, message: str, expected: str | None, actual: str | None
    ) -> None:
        self.findings.append(Finding(self.rule, severity, run, message, expected, actual))

    def error(
        self, run: str | None, message: str, expected: str | None = None, actual: str | None = None
    ) -> None:
        self._add(ERROR, run, message, expected, actual)

    def warning(
        self, run: str | None, message: str, expected: str | None = None, actual: str | None = None
    ) -> None:
        self._add(WARNING, run, message, expected, actual)

    def info(self, run: str | None, message: str) -> None:
        self._add(INFO, run, message, None, None)

    def not_checkable(self, run: str | None, message: str) -> None:
        self._add(NOT_CHECKABLE, run, message, None, None)

    def passed(self, run: str | None, message: str) -> None:
        self._add(PASS, run, message, None, None)


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    source: str
    check: Callable[[Context, Out], None]


#: Every audit rule, by its stable id (the same registry pattern as engines, deploy targets and
#: evidence adapters: :mod:`k3kit._registry`). No user input looks a rule up by id.
RULES: Registry[Rule] = Registry("audit rule", code="BAD_INPUT")


def rule(rule_id: str, title: str, source: str) -> Callable[[Callable[[Context, Out], None]], Any]:
    """Register a rule function under its stable id (``R`` and two digits)."""
    return RULES.decorator(rule_id, lambda func: Rule(rule_id, title, source, func))


def ordered_rules() -> list[Rule]:
    return sorted(RULES.values(), key=lambda r: int(r.id[1:]))


def rule_span() -> str:
    """The registered rule ids as a range, e.g. ``R01-R37`` (never written out by hand)."""
    ids = [r.id for r in ordered_rules()]
    return f"{ids[0]}-{ids[-1]}" if ids else "no rules"
