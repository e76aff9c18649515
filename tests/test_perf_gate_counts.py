"""The perf gate's instruction counts (benchmarks/perf_gate.py) when cachegrind did not count.

The gate reads valgrind's log; a missing, failing or silent valgrind must come out as "not
measured" (with why), never as a ratio judged "ok", and the figures file and the generated docs
must say so. valgrind is replaced here by a small script on a private PATH, so these tests run in
well under a second with or without valgrind installed, and measure nothing themselves.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def gate() -> Iterator[ModuleType]:
    """The gate as scripts/gen_docs.py loads it (a file, not a package import)."""
    spec = importlib.util.spec_from_file_location("perf_gate", ROOT / "benchmarks" / "perf_gate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.get("perf_gate")
    sys.modules["perf_gate"] = module  # its dataclasses look their module up while being built
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        if saved is None:
            sys.modules.pop("perf_gate", None)
        else:
            sys.modules["perf_gate"] = saved


def _setup(gate: ModuleType, tmp_path: Path) -> object:
    # The contenders are never run: the stand-in valgrind ignores the command it is given.
    commands = {name: [sys.executable, "-c", "pass", name] for name in gate.INSTRUCTION_CONTENDERS}
    env = {"PATH": os.environ.get("PATH", "")}
    return gate.Setup(commands, env, env, tmp_path / "unused.bin")


def _fake_valgrind(bindir: Path, *, refs: str | None, exit_code: int) -> None:
    """A valgrind that writes ``I refs: REFS`` to the log file it is given (none if REFS is None)
    and exits ``exit_code``."""
    bindir.mkdir()
    line = f'echo "==1== I   refs:      {refs}" > "$log"\n' if refs is not None else ""
    script = bindir / "valgrind"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in --log-file=*) log="${a#--log-file=}";; esac; done\n'
        'log=$(echo "$log" | sed "s/%p/$$/")\n' + line + f"exit {exit_code}\n"
    )
    script.chmod(0o755)


@pytest.mark.parametrize(
    ("refs", "exit_code", "why"),
    [
        ("1,000,000", 1, "valgrind exited 1"),  # valgrind (or the contender under it) failed
        (None, 0, "valgrind exited 0"),  # a clean exit that counted nothing
        ("0", 0, "counted no instruction"),  # a count of 0: its ratio would pass any limit
    ],
)
def test_a_count_valgrind_did_not_make_is_not_measured(
    gate: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    refs: str | None,
    exit_code: int,
    why: str,
) -> None:
    _fake_valgrind(tmp_path / "bin", refs=refs, exit_code=exit_code)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ.get('PATH', '')}")
    counted = gate.count_instructions(_setup(gate, tmp_path), tmp_path)
    assert counted["measured"] is False and why in counted["why"], counted
    assert "gates" not in counted  # main() adds no verdict, "ok" or not, for these ratios
    assert "**not measured**" in gate.render({**_figures(gate), "instructions": counted})


def test_without_valgrind_the_counts_are_not_measured(
    gate: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    counted = gate.count_instructions(_setup(gate, tmp_path), tmp_path)
    assert counted == {"measured": False, "why": "valgrind is not on PATH (`make tools`)"}


def test_counts_that_were_made_are_judged_against_the_limits(
    gate: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same stand-in, counting: every contender reads 1,000,000, so each ratio is 1.0."""
    _fake_valgrind(tmp_path / "bin", refs="1,000,000", exit_code=0)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ.get('PATH', '')}")
    counted = gate.count_instructions(_setup(gate, tmp_path), tmp_path)
    assert counted["measured"] is True
    assert counted["counts"] == dict.fromkeys(gate.INSTRUCTION_CONTENDERS, 1_000_000)
    assert [(g["ratio"], g["ok"]) for g in counted["gates"]] == [(1.0, True)] * len(
        gate.INSTRUCTION_GATES
    )


def test_the_figures_render_with_and_without_counts(gate: ModuleType) -> None:
    """The recorded figures (measured), a record made where valgrind could not count, and one
    older than the counts: each renders, and only the first shows ratios."""
    figures = _figures(gate)
    assert figures["instructions"]["measured"] is True
    shown = gate.render(figures)
    assert "not measured" not in shown
    for g in figures["instructions"]["gates"]:
        assert f"| {g['name']} ({g['why']}) | {g['ratio']:.3f} | {g['limit']:.2f} |" in shown
    missing = gate.render({**figures, "instructions": {"measured": False, "why": "no valgrind"}})
    assert "Instruction counts: **not measured** (no valgrind)." in missing
    older = {k: v for k, v in figures.items() if k != "instructions"}
    assert "Instruction counts: **not measured** (not recorded)." in gate.render(older)


def _figures(gate: ModuleType) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gate.FIGURES.read_text())
    return data


def test_record_keeps_the_committed_figures_when_nothing_was_counted(
    gate: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--record`` where valgrind cannot count exits 2 and leaves benchmarks/perf_figures.json
    as it was (its counts would otherwise vanish from the generated docs). The rounds themselves
    are stood in for: only the recording step is under test."""
    runs = _figures(gate)["runs"]
    monkeypatch.setattr(gate, "prepare", lambda work, mib: _setup(gate, tmp_path))
    monkeypatch.setattr(gate, "measure", lambda setup, rounds: runs)
    monkeypatch.setattr(
        gate, "count_instructions", lambda setup, work: {"measured": False, "why": "no valgrind"}
    )
    figures = tmp_path / "perf_figures.json"
    figures.write_text("committed\n")
    monkeypatch.setattr(gate, "FIGURES", figures)
    out = tmp_path / "run.json"
    assert gate.main(["--record", "--out", str(out)]) == 2
    assert figures.read_text() == "committed\n"
    assert json.loads(out.read_text())["instructions"]["measured"] is False
