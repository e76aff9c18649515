"""``k3kit audit``: check what a signed receipt claims, offline, rule by rule.

Above ``node``: imports ``node.verify`` (for the signature), ``evidence``, ``archive`` and the
models; never click, never numpy. Rule modules are discovered, not listed: every module of this
package is imported here, and each registers its rules with :func:`k3kit.audit.findings.rule`; the
engine runs them in id order. Rules are documented in ``docs/audit.md``; :func:`rule_span` names the
range ("R01-R37") wherever it must be shown. Used by the CLI, the API, the demo, ``card`` (the
card's audit summary) and ``accept`` (a report the audit rejects is never signed as reproduced).
"""

import importlib
import pkgutil

from k3kit.audit.context import Policy
from k3kit.audit.engine import AuditReport, audit_path, audit_receipt, run_rules
from k3kit.audit.findings import RANK, RULES, SEVERITIES, Finding, ordered_rules, rule_span

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "RANK",
    "RULES",
    "SEVERITIES",
    "AuditReport",
    "Finding",
    "Policy",
    "audit_path",
    "audit_receipt",
    "ordered_rules",
    "rule_span",
    "run_rules",
]
