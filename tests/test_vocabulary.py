"""The typed vocabulary (issue 20): one problem type, one preflight status, typed facts, and one
home per constant and primitive.

The "one home" tests read the source with ``ast``: a second copy of the 16 MiB cap, of a kit file
name, of ``O_NOFOLLOW`` or of a ``strftime`` timestamp fails here, naming the file and line, so a
copy cannot come back unnoticed. Comments and docstrings may still mention them.
"""

from __future__ import annotations

import ast
import errno
import functools
import json
import os
from pathlib import Path

import pytest

from k3kit import _digest, _fs
from k3kit.errors import EnvironmentProblem
from k3kit.formats import names
from k3kit.formats.vocab import PreflightStatus, Problem
from k3kit.preflight._checks import Check
from k3kit.pull import PullError
from tests.srcscan import SRC, source_modules

KIT_NAMES = {
    names.MANIFEST_NAME,
    names.RECEIPT_NAME,
    names.MANIFEST_SIG_NAME,
    names.KIT_INFO_NAME,
    names.LOCK_NAME,
}
CAP = 16 * 1024 * 1024


def _modules() -> list[tuple[str, ast.Module]]:
    return [(str(m.path.relative_to(SRC)), m.tree) for m in source_modules()]


@functools.cache
def _walks() -> dict[int, tuple[ast.AST, ...]]:
    return {id(m.tree): m.nodes for m in source_modules()}


def _walk(tree: ast.Module) -> tuple[ast.AST, ...]:
    """``ast.walk(tree)``, from the walk made once per process for src/k3kit's trees (a tree
    planted by a test is walked here)."""
    return _walks().get(id(tree)) or tuple(ast.walk(tree))


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the string nodes that are docstrings (allowed to name anything)."""
    out = set()
    for node in _walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            out.add(id(body[0].value))
    return out


def _const_int(node: ast.AST) -> int | None:
    """The value of an integer expression made of literals and ``*``, ``<<`` and ``**``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if not isinstance(node, ast.BinOp):
        return None
    left, right = _const_int(node.left), _const_int(node.right)
    if left is None or right is None:
        return None
    if isinstance(node.op, ast.Mult):
        return left * right
    if isinstance(node.op, ast.LShift) and right < 64:
        return left << right
    if isinstance(node.op, ast.Pow) and right < 64:
        return int(left**right)
    return None


def _findings(rel: str, tree: ast.Module) -> list[str]:
    found = []
    docs = _docstrings(tree)
    for node in _walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.BinOp | ast.Constant) and _const_int(node) == CAP:
            found.append(f"{where}: the 16 MiB cap (k3kit.formats.documents)")
        if isinstance(node, ast.Constant) and node.value in KIT_NAMES and id(node) not in docs:
            found.append(f"{where}: kit file name {node.value!r} (k3kit.formats.names)")
        if isinstance(node, ast.Attribute) and node.attr == "O_NOFOLLOW":
            found.append(f"{where}: O_NOFOLLOW (k3kit._fs.open_nofollow)")
        if isinstance(node, ast.Attribute) and node.attr == "strftime":
            found.append(f"{where}: strftime (k3kit._values)")
    return found


#: Each thing's one home, where the scan expects exactly one hit of it.
HOMES = {
    "formats/documents.py": "16 MiB cap",
    "formats/names.py": "kit file name",
    "_fs.py": "O_NOFOLLOW",
    "_values.py": "strftime",
}


def test_each_constant_and_primitive_has_one_home() -> None:
    stray = []
    for rel, tree in _modules():
        found = _findings(rel, tree)
        home = HOMES.get(rel)
        stray += [f for f in found if home is None or home not in f]
    assert stray == []


def test_the_homes_hold_what_the_scan_looks_for() -> None:
    """The scan must see what it looks for: each home holds its thing (the names: all five)."""
    by_home = {rel: _findings(rel, tree) for rel, tree in _modules() if rel in HOMES}
    for rel, thing in HOMES.items():
        hits = [f for f in by_home[rel] if thing in f]
        assert len(hits) >= (len(KIT_NAMES) if rel == "formats/names.py" else 1), (rel, hits)


def test_the_scan_finds_a_copy_planted_in_a_module() -> None:
    planted = ast.parse(
        "import os, time\n"
        "CAP = 16 << 20\n"
        "OTHER = 16 * 1024 * 1024\n"
        "BARE = 16777216\n"
        "fd = os.open('x', os.O_WRONLY | os.O_NOFOLLOW)\n"
        "stamp = time.strftime('%Y')\n"
        "info = 'kit.json'\n"
    )
    kinds = [f.split(": ", 1)[1].split(" (")[0] for f in _findings("planted.py", planted)]
    assert sorted(kinds) == sorted(
        ["the 16 MiB cap"] * 3 + ["O_NOFOLLOW", "strftime", "kit file name 'kit.json'"]
    )


# --- one problem type ----------------------------------------------------------------------------


def test_a_pull_error_is_the_one_problem_record() -> None:
    exc = EnvironmentProblem("the hub answered 503", code="HUB_UNAVAILABLE", hint="retry later")
    problem = PullError.of("model-00001.safetensors", exc)
    assert isinstance(problem, Problem)
    assert (problem.code, problem.path, problem.detail, problem.hint) == (
        "HUB_UNAVAILABLE",
        "model-00001.safetensors",
        "the hub answered 503",
        "retry later",
    )
    assert problem.message == problem.detail


def test_pull_errors_keep_their_published_json_form() -> None:
    """``pull --json`` wrote ``dataclasses.asdict`` of the old record: path, code, message, hint,
    in that order, ``hint`` null when absent. Scripts parse it; it must not move."""
    problem = PullError("PULL_STOPPED", "a.bin", "not fetched: the pull stopped after X")
    assert json.dumps(problem.as_json()) == (
        '{"path": "a.bin", "code": "PULL_STOPPED", '
        '"message": "not fetched: the pull stopped after X", "hint": null}'
    )


# --- one preflight status ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "spelled"),
    [
        (PreflightStatus.PASS, "pass"),
        (PreflightStatus.FAIL, "fail"),
        (PreflightStatus.NOT_CHECKED, "not-checked"),
    ],
)
def test_preflight_json_spells_statuses_as_before(status: PreflightStatus, spelled: str) -> None:
    typed = json.dumps(Check("gpu.count", status, True, "8 GPU(s)", "8 GPU(s)").as_json())
    old = {"name": "gpu.count", "status": spelled, "required": True}
    old |= {"expected": "8 GPU(s)", "actual": "8 GPU(s)", "why": ""}
    assert typed == json.dumps(old)


def test_a_judged_comparison_is_pass_or_fail() -> None:
    assert PreflightStatus.of(True) is PreflightStatus.PASS
    assert PreflightStatus.of(False) is PreflightStatus.FAIL


# --- one safe open -------------------------------------------------------------------------------


def test_a_link_planted_where_a_file_is_created_is_refused(tmp_path: Path) -> None:
    """The attacker plants ``part -> victim`` where k3kit is about to create ``part``: the create
    fails and the victim keeps its bytes (``O_EXCL``: a create never reuses a planted name)."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "part").symlink_to(victim)
    with pytest.raises(FileExistsError):
        _fs.create_new(tmp_path / "part", 0o644)
    assert victim.read_bytes() == b"precious"


def test_a_link_planted_where_a_file_is_rewritten_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "state.tmp").symlink_to(victim)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    with pytest.raises(OSError) as caught:
        _fs.open_nofollow(tmp_path / "state.tmp", flags)
    assert caught.value.errno == errno.ELOOP
    assert victim.read_bytes() == b"precious"


def test_hashing_and_reading_share_one_not_a_regular_file(tmp_path: Path) -> None:
    """Two classes of the same name meant an ``except`` written for one missed the other."""
    assert _digest.NotRegularFile is _fs.NotRegularFile
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(_fs.NotRegularFile):
        _digest.hash_file(tmp_path / "fifo")
