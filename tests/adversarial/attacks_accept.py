"""``k3kit accept -o`` aimed at a folder it must not write (issue 19, classes 7 and 9): each is
refused with exit 3 before any request (the ``--url`` here has no server behind it, so a run
that got as far as measuring would fail differently).

tests/test_accept_output.py checks, with a real server, that no request was sent and that the
folder is left as it was.
"""

from __future__ import annotations

from pathlib import Path

from tests.adversarial.corpus import Argv, Workbench, attack

NO_SERVER = "http://127.0.0.1:9"


def _accept(w: Workbench, out: Path, *extra: str) -> Argv:
    return [
        "accept",
        w.golden.kit,
        "--trust",
        w.trust,
        "--url",
        NO_SERVER,
        "--weights",
        w.golden.snapshot,
        "--key",
        w.other_key.private,
        "-o",
        out,
        *extra,
    ]


@attack("OUTPUT_EXISTS", exit_code=3)
def accept_into_a_folder_with_stale_evidence(w: Workbench) -> Argv:
    out = w.root / "acceptance"
    (out / "evidence").mkdir(parents=True)
    (out / "evidence" / "interactive-c1.json").write_text("{}")
    return _accept(w, out)


@attack("OUTPUT_NOT_OURS", exit_code=3)
def accept_force_over_a_folder_it_did_not_write(w: Workbench) -> Argv:
    out = w.root / "notes"
    out.mkdir()
    (out / "todo.txt").write_text("mine\n")
    return _accept(w, out, "--force")
