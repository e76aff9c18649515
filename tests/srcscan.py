"""src/k3kit read with ``ast`` once per test process, for the tests that scan the source.

test_codes (every ``code="..."`` literal is registered) and test_vocabulary (each constant and
primitive has one home) each parsed and walked every module of src/k3kit, twice each (two tests
apiece), and test_complexity had radon parse them once more: five parses of about 230 files and
six walks, 10-15 s of a unit run on this machine. The trees and their nodes are the same for all
of them, so they are made once here; the tests only read them (nothing here may be changed by a
test).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "k3kit"


@dataclass(frozen=True)
class Module:
    """One source file: its path, its tree, and every node of it in ``ast.walk`` order."""

    path: Path
    tree: ast.Module
    nodes: tuple[ast.AST, ...]


@functools.cache
def source_modules() -> tuple[Module, ...]:
    """Every ``*.py`` under src/k3kit, sorted by path, parsed once."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        out.append(Module(path, tree, tuple(ast.walk(tree))))
    return tuple(out)
