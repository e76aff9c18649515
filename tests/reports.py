"""Reading ``k3kit verify --json`` reports in tests: one check by id, and every code a report
carries (the top-level error's and each check's)."""

from __future__ import annotations

from typing import Any


def check(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    """The check with ``check_id`` (empty when the report has none: the run failed earlier)."""
    return next((c for c in report.get("checks", []) if c["id"] == check_id), {})


def codes(report: dict[str, Any]) -> set[str]:
    found = {c.get("code") for c in report.get("checks", [])}
    found.add(report.get("code"))
    return {c for c in found if c}
