"""No pattern ending in ``$`` is applied with ``match`` or ``search`` in ``src/`` (attack class 4).

Python's ``$`` also matches before a final newline, so ``re.match(r"^[a-z]+$", "abc\\n")``
succeeds: that let ``name\\n`` through a dozen validators until issue 23's eighth pass
(tests/test_trailing_newline.py). Those sites were mended one by one; this test holds the rule
for the next pattern, by reading the sources (AST), as tests/test_codes.py holds the error codes.
A pattern compiled or passed with ``re.MULTILINE`` is line-by-line on purpose and is not judged.
What it cannot follow: a pattern built by an f-string, imported from another module, or chosen
at run time (``for pattern in ...: pattern.match``). Run on the sources before the eighth pass it
finds 27 of the sites; the ones it cannot see were mended by hand (vLLM's statistic keys, the
repo id, the kit's unlisted names, the hub endpoint).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "k3kit"

# Where ``match`` on a ``$`` pattern is the safer reading, with why. Each entry is (module path
# relative to src/k3kit, pattern name).
ALLOWED = {
    # Which folders of a weights tree are a Hugging Face cache: the looser match finds more of
    # them, and finding one only decides which layout is refused as ambiguous.
    ("weights/layouts.py", "CACHE_REPO_ENTRY"),
}


def _dollar_ended(node: ast.expr | None) -> bool:
    if not isinstance(node, ast.Constant):
        return False
    value = node.value
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return isinstance(value, str) and value.endswith("$") and not value.endswith("\\$")


def _multiline(call: ast.Call) -> bool:
    flags = [*call.args[1:], *(k.value for k in call.keywords if k.arg == "flags")]
    return any("MULTILINE" in ast.unparse(f) or "re.M" in ast.unparse(f) for f in flags)


def _is_re_call(node: ast.AST, names: tuple[str, ...]) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "re"
    )


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(SRC).as_posix()
    texts: dict[str, ast.expr] = {}  # NAME = "...$" (a pattern kept as text)
    compiled: set[str] = set()  # NAME = re.compile("...$")
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if not isinstance(target, ast.Name) or node.value is None:
                    continue
                if _dollar_ended(node.value):
                    texts[target.id] = node.value
                elif (
                    _is_re_call(node.value, ("compile",))
                    and isinstance(node.value, ast.Call)
                    and node.value.args
                    and (_dollar_ended(node.value.args[0]) or _name_in(node.value.args[0], texts))
                    and not _multiline(node.value)
                ):
                    compiled.add(target.id)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func = node.func
        if func.attr not in ("match", "search"):
            continue
        if isinstance(func.value, ast.Name) and func.value.id in compiled:
            name = func.value.id
        elif (
            _is_re_call(node, ("match", "search"))
            and node.args
            and (_dollar_ended(node.args[0]) or _name_in(node.args[0], texts))
            and not _multiline(node)
        ):
            name = ast.unparse(node.args[0])
        else:
            continue
        if (rel, name) not in ALLOWED:
            found.append(f"{rel}:{node.lineno}: {name}.{func.attr} (use fullmatch)")
    return found


def _name_in(node: ast.expr, texts: dict[str, ast.expr]) -> bool:
    return isinstance(node, ast.Name) and node.id in texts


def test_no_pattern_ending_in_a_dollar_is_matched_from_the_start_only() -> None:
    offences = [o for path in sorted(SRC.rglob("*.py")) for o in _offences(path)]
    assert offences == []


def test_the_scan_finds_what_it_is_for(tmp_path: Path) -> None:
    """The rule is not vacuous: the spellings that slipped through before are each found."""
    global SRC
    saved = SRC
    SRC = tmp_path
    try:
        (tmp_path / "bad.py").write_text(
            "import re\n"
            '_A = re.compile(r"^[a-z]+$")\n'
            'TEXT = r"^x$"\n'
            "_B = re.compile(TEXT, re.ASCII)\n"
            '_LINES = re.compile(r"^k: (.*)$", re.MULTILINE)\n'
            "def f(s):\n"
            "    return (_A.match(s), _B.search(s), re.match(TEXT, s), re.search(r'^y$', s),\n"
            "            _A.fullmatch(s), _LINES.search(s), re.search(r'^z$', s, re.M))\n"
        )
        found = _offences(tmp_path / "bad.py")
    finally:
        SRC = saved
    assert [f.split(": ", 1)[1] for f in found] == [
        "_A.match (use fullmatch)",
        "_B.search (use fullmatch)",
        "TEXT.match (use fullmatch)",
        "'^y$'.search (use fullmatch)",
    ]
