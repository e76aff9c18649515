"""``k3kit audit``: check what a signed receipt claims, offline, rule by rule (R01-R37).

Level 5: imports ``verify`` (for the signature), ``evidence``, ``archive`` and the models; never
click, never numpy. Each rule module registers its rules on import; :mod:`k3kit.audit.engine`
runs them in id order. Rules are documented in ``docs/audit.md``.
"""

from k3kit.audit import (  # noqa: F401  (importing registers the rules)
    arithmetic,
    binding,
    comparisons,
    completeness,
    consistency,
    scope,
    statistics,
)
from k3kit.audit.engine import AuditReport, audit_path, audit_receipt, run_rules
from k3kit.audit.findings import RANK, RULES, SEVERITIES, Finding, ordered_rules

__all__ = [
    "RANK",
    "RULES",
    "SEVERITIES",
    "AuditReport",
    "Finding",
    "audit_path",
    "audit_receipt",
    "ordered_rules",
    "run_rules",
]
