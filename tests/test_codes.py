"""The typed vocabulary: every code in src/ is registered, each has one exit code, docs list all.

The AST scan is what keeps the registry complete: a new ``code="..."`` literal (a keyword, a
``"code"`` dict entry, an assignment to a ``*code`` name or attribute, a problem record's first
argument) that is not a :mod:`k3kit.codes` member fails here, whoever adds it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from k3kit import codes
from k3kit.audit import ordered_rules
from k3kit.errors import EnvironmentProblem, ExitCode, InputError, K3kitError, VerificationError
from k3kit.formats.vocab import CheckStatus, Problem, ReportLike, Severity
from k3kit.node.verify import Report
from tests.srcscan import source_modules

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "k3kit"
CLASSES = {
    "VerificationError": ExitCode.CHECK_FAILED,
    "InputError": ExitCode.BAD_INPUT,
    "UsageProblem": ExitCode.USAGE,
    "EnvironmentProblem": ExitCode.ENVIRONMENT,
}
PROBLEM_TYPES = {"Problem", "Difference", "WeightsProblem"}


def _literal(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _error_class(call: ast.Call) -> str | None:
    """The error class a call raises with: its own name, or an ``error=`` keyword."""
    for kw in call.keywords:
        if kw.arg == "error" and isinstance(kw.value, ast.Name):
            return kw.value.id
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name if name in CLASSES else None


def scan() -> list[tuple[str, str, str | None]]:
    """(code, where, raising class or None) for every code literal in src/k3kit."""
    found: list[tuple[str, str, str | None]] = []
    for module in source_modules():
        rel = module.path.relative_to(ROOT)
        for node in module.nodes:
            if isinstance(node, ast.Call):
                cls = _error_class(node)
                for kw in node.keywords:
                    value = _literal(kw.value)
                    if kw.arg and kw.arg.endswith("code") and value is not None:
                        found.append((value, f"{rel}:{kw.value.lineno}", cls))
                func = node.func
                if isinstance(func, ast.Name) and func.id in PROBLEM_TYPES and node.args:
                    value = _literal(node.args[0])
                    if value is not None:
                        found.append((value, f"{rel}:{node.lineno}", None))
            elif isinstance(node, ast.Dict):
                for key, val in zip(node.keys, node.values, strict=True):
                    value = _literal(val)
                    if key is not None and _literal(key) == "code" and value is not None:
                        found.append((value, f"{rel}:{val.lineno}", None))
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                values = [node.value] if node.value is not None else []
                for target in targets:
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        pairs = list(zip(target.elts, node.value.elts, strict=False))
                    else:
                        pairs = [(target, v) for v in values]
                    for t, v in pairs:
                        name = t.id if isinstance(t, ast.Name) else getattr(t, "attr", "")
                        if name.endswith("code") and isinstance(v, ast.IfExp):
                            lits = [_literal(v.body), _literal(v.orelse)]
                        else:
                            lits = [_literal(v)] if name.endswith("code") else []
                        found += [(lit, f"{rel}:{node.lineno}", None) for lit in lits if lit]
    return found


def test_every_code_literal_in_src_is_registered() -> None:
    found = scan()
    assert len(found) > 250, "the scan lost its way: it should see every raise site"
    unknown = sorted({f"{code} ({where})" for code, where, _ in found if not codes.lookup(code)})
    assert not unknown, "register these in k3kit.codes:\n" + "\n".join(unknown)


def test_the_class_raised_agrees_with_the_registered_exit_code() -> None:
    wrong = [
        f"{where}: {cls}(code={code}) exits {CLASSES[cls]}, "
        f"registry says {codes.REGISTRY[code].exit}"
        for code, where, cls in scan()
        if cls in CLASSES and code in codes.REGISTRY and CLASSES[cls] != codes.REGISTRY[code].exit
    ]
    assert not wrong, "\n".join(wrong)


def test_each_code_has_one_area_and_one_exit_code() -> None:
    members = [m for area in codes.AREAS for m in area]
    values = [m.value for m in members]
    assert len(values) == len(set(values)), "a code is registered in two areas"
    assert len(codes.REGISTRY) == len(members)
    for member in members:
        assert member.exit in {int(e) for e in ExitCode} - {0}, member
        assert member.description and "\n" not in member.description, member
        assert re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*", member.value), member


@pytest.mark.parametrize("cls", [VerificationError, InputError, EnvironmentProblem])
def test_trust_duplicate_key_exits_3_whichever_class_carries_it(cls: type[K3kitError]) -> None:
    """The issue's example: TRUST_DUPLICATE_KEY used to exit 3 from the CLI and 1 from verify."""
    err = cls("twice", code=codes.TrustCode.TRUST_DUPLICATE_KEY)
    assert err.exit_code == ExitCode.BAD_INPUT
    assert err.code == "TRUST_DUPLICATE_KEY"  # StrEnum: string equality for existing callers
    assert cls("twice", code="TRUST_DUPLICATE_KEY").exit_code == ExitCode.BAD_INPUT


def test_an_unregistered_code_keeps_its_class_exit_code() -> None:
    assert InputError("x", code="SOMEONE_ELSES_NEW_CODE").exit_code == ExitCode.BAD_INPUT
    assert VerificationError("x").exit_code == ExitCode.CHECK_FAILED


def test_error_codes_doc_lists_every_code_with_its_exit() -> None:
    text = (ROOT / "docs" / "error-codes.md").read_text()
    for member in codes.REGISTRY.values():
        assert f"| `{member.value}` | {member.exit} |" in text, member


def test_audit_doc_details_exactly_the_discovered_rules() -> None:
    text = (ROOT / "docs" / "audit.md").read_text()
    detailed = set(re.findall(r"^\| (R\d\d) \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \|", text, re.M))
    assert detailed == {r.id for r in ordered_rules()}


def test_vocabulary_enums_keep_their_json_strings() -> None:
    assert [s.value for s in CheckStatus] == ["passed", "failed", "not checked"]
    assert [s.value for s in Severity] == ["error", "warning", "info", "not-checkable", "pass"]
    problem = Problem(codes.KitCode.KIT_FILE_EXTRA, "a.txt", "file is not in MANIFEST.json")
    assert problem.as_json() == {
        "code": "KIT_FILE_EXTRA",
        "path": "a.txt",
        "detail": "file is not in MANIFEST.json",
    }
    with pytest.raises(AttributeError):
        problem.code = "X"  # type: ignore[misc]


def test_verify_report_implements_the_report_protocol() -> None:
    report = Report("kit")
    assert isinstance(report, ReportLike)
    assert report.as_json()["ok"] is True
