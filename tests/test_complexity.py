"""No function or class in ``src/k3kit`` reaches radon's cyclomatic-complexity rank D (21+).

A D-rank function has more paths than a reviewer can hold at once, so a broken branch hides in
it (issue 20 split the ones that had grown there). The allow-list below is what is left, each
with its reason; it may only shrink. A new entry needs the same kind of reason, not convenience.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from radon.complexity import cc_rank, cc_visit_ast
from radon.visitors import Class, Function

from tests.srcscan import SRC, source_modules

#: ``path:name`` → why it may stay at D or E for now. Empty since issue 20 split the last two
#: (R30's scope rule and the claims model's cross-reference validator).
ALLOWED: dict[str, str] = {}


def _blocks(blocks: list[Function | Class]) -> Iterator[Function | Class]:
    """Every function, method, class and nested function (a closure counts on its own)."""
    for block in blocks:
        yield block
        yield from _blocks(list(getattr(block, "closures", [])))


def _trees(root: Path) -> Iterator[tuple[Path, ast.Module]]:
    """Each module under ``root`` parsed; src/k3kit's from the one parse per process that the
    other source scans share (tests/srcscan.py), as radon's own parse would give them."""
    if root == SRC:
        yield from ((m.path, m.tree) for m in source_modules())
        return
    for path in sorted(root.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _ranked(root: Path = SRC, min_rank: str = "D") -> list[tuple[str, str, int]]:
    found = []
    for path, tree in _trees(root):
        rel = path.relative_to(root).as_posix()
        for block in _blocks(cc_visit_ast(tree)):
            if cc_rank(block.complexity) >= min_rank:
                found.append((f"{rel}:{block.name}", cc_rank(block.complexity), block.complexity))
    return found


def test_no_function_outside_the_allow_list_reaches_rank_d() -> None:
    over = [f"{name} is {rank} ({score})" for name, rank, score in _ranked() if name not in ALLOWED]
    assert over == [], "split these (or argue for an entry in ALLOWED): " + "; ".join(over)


def test_the_scan_finds_a_complex_function_and_method(tmp_path: Path) -> None:
    """The scan must see what it looks for: 25 branches in a function, a method and a closure."""
    branches = "".join(f"        if x == {i}:\n            return {i}\n" for i in range(25))
    body = f"    def inner(x):\n{branches}        return -1\n    return inner\n"
    method = "\n".join("    " + line if line else line for line in body.splitlines())
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        f"def outer():\n{body}\n\nclass K:\n    def meth(self):\n{method}\n"
    )
    names = [name for name, rank, _ in _ranked(tmp_path) if rank >= "D"]
    assert names == ["pkg/m.py:inner", "pkg/m.py:inner"]  # in a function and in a method
