"""``k3kit accept -o``: the output folder is refused before any request, and written whole.

Each test is what a buyer (or whoever left files in the folder) does, with the real CLI against a
real stand-in server on 127.0.0.1; ``server.knobs.count`` counts the streamed requests it
answered, so "before any request" is observed, not assumed.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_accept import _accept, _server
from tests.test_accept import acceptkit as acceptkit  # the shared signed kit (a fixture)

FAST = {"ttft_s": 0.05, "tpot_s": 0.002}
FEW = ("--requests", "3")


def _error_code(stdout: str) -> str:
    code: str = json.loads(stdout)["error"]["code"]
    return code


def test_stale_evidence_in_the_output_is_refused_before_any_request(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """The attack pass's finding 8: a stale ``evidence/interactive-c1.json`` in ``-o``. The whole
    measurement ran, then exit 3 and nothing signed. Now the refusal comes first."""
    out = tmp_path / "out"
    (out / "evidence").mkdir(parents=True)
    stale = out / "evidence" / "interactive-c1.json"
    stale.write_text("{}")
    with _server(acceptkit, **FAST) as server:
        proc, result = _accept(acceptkit, server.url, out, "--points", "1", *FEW)
        answered = server.knobs.count
    assert proc.returncode == 3, proc.stderr
    assert result["error"]["code"] == "OUTPUT_EXISTS"
    assert answered == 0
    assert stale.read_text() == "{}" and sorted(p.name for p in out.rglob("*")) == [
        "evidence",
        "interactive-c1.json",
    ]


def test_force_over_a_folder_accept_did_not_write_is_refused_before_any_request(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """``-o ~/notes --force`` by mistake: the folder holds the buyer's own files, not a report."""
    out = tmp_path / "notes"
    out.mkdir()
    (out / "todo.txt").write_text("mine\n")
    with _server(acceptkit, **FAST) as server:
        proc, result = _accept(acceptkit, server.url, out, "--points", "1", *FEW, "--force")
        answered = server.knobs.count
    assert proc.returncode == 3, proc.stderr
    assert result["error"]["code"] == "OUTPUT_NOT_OURS"
    assert answered == 0
    assert [p.name for p in out.iterdir()] == ["todo.txt"]


def test_force_replaces_an_earlier_report_whole(acceptkit: dict[str, Path], tmp_path: Path) -> None:
    """A report of point 4, then ``--force`` with point 1: with --force the old
    ``interactive-c4.json`` stayed beside a report that does not name it. Now the folder is
    replaced whole: only what the new report names is there."""
    out = tmp_path / "out"
    with _server(acceptkit, **FAST) as server:
        first, _ = _accept(acceptkit, server.url, out, "--points", "4", *FEW)
        assert first.returncode in (0, 1), first.stderr
        assert (out / "evidence" / "interactive-c4.json").is_file()
        again, _ = _accept(acceptkit, server.url, out, "--points", "1", *FEW)
        assert again.returncode == 3 and _error_code(again.stdout) == "OUTPUT_EXISTS"
        second, _ = _accept(acceptkit, server.url, out, "--points", "1", *FEW, "--force")
    assert second.returncode in (0, 1), second.stderr
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        ".k3kit-output",
        "acceptance.dsse.json",
        "evidence",
        "evidence/interactive-c1.json",
    ]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]  # no staging left


def test_force_over_an_empty_folder_writes_the_report(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with _server(acceptkit, **FAST) as server:
        proc, _ = _accept(acceptkit, server.url, out, "--points", "1", *FEW, "--force")
    assert proc.returncode in (0, 1), proc.stderr
    assert (out / "acceptance.dsse.json").is_file() and (out / ".k3kit-output").is_file()
