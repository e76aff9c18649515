"""A publisher's claims.toml whose ids do not resolve is refused with a message naming the id.

``ClaimsBody``'s cross-reference validator has one branch per way a claims file can point at
something it does not hold (a run id twice, an unknown workload, a closed-loop run without its
concurrency or with an offered rate, more completions than requests, a comparison naming an
unknown run or control). Issue 20 moved its body into helpers; these tests pin each message, and
the first-problem-wins order, so a later split cannot change what a publisher reads.
"""

from __future__ import annotations

import copy
import json
import shutil
import tomllib
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from k3kit.errors import InputError
from k3kit.models import Claims, load
from tests.conftest import EXAMPLE, GoldenKit, run_k3kit

Edit = Callable[[dict[str, Any]], None]


def _example() -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads(
        (EXAMPLE / "claims.toml").read_text(encoding="utf-8"), parse_float=Decimal
    )
    return data


def _comparison(**point: str) -> dict[str, Any]:
    return {
        "id": "c",
        "description": "subject against baseline",
        "metric": "output_tok_s",
        "subject_profile": "interactive",
        "baseline_profile": "batch",
        "points": [{"concurrency": 1, "stated_percent": Decimal("1.0"), **point}],
    }


def _set(index: int, **fields: Any) -> Edit:
    return lambda d: d["runs"][index].update(fields)


def _duplicate_first_run(d: dict[str, Any]) -> None:
    d["runs"].append(copy.deepcopy(d["runs"][0]))


def _drop_concurrency(d: dict[str, Any]) -> None:
    del d["runs"][0]["concurrency"]


def _comparisons(*comps: dict[str, Any], aa: str | None = None) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["comparisons"] = [dict(c, aa_control=aa) if aa else c for c in comps]
        d["controls"] = [{"id": "aa", "kind": "negative", "description": "A/A", "metric": "m"}]

    return edit


def _two_problems(d: dict[str, Any]) -> None:
    d["runs"][1]["workload"] = "nope"
    d["runs"][0]["completed"] = 99


REFUSED: dict[str, tuple[Edit, str]] = {
    "run_id_twice": (_duplicate_first_run, "run ids must be unique"),
    "unknown_workload": (
        _set(0, workload="nope"),
        "run 'interactive-c1' names unknown workload 'nope'",
    ),
    "closed_loop_without_concurrency": (
        _drop_concurrency,
        "run 'interactive-c1': a closed-loop run needs its concurrency",
    ),
    "closed_loop_with_offered_rate": (
        _set(0, offered_rate=Decimal("1.5")),
        "run 'interactive-c1': offered_rate is for open-loop workloads",
    ),
    "more_completed_than_sent": (
        _set(0, completed=99),
        "run 'interactive-c1': completed 99 > requests",
    ),
    "comparison_of_an_unknown_subject": (
        _comparisons(_comparison(subject_run="ghost")),
        "comparison 'c' names unknown run 'ghost'",
    ),
    "comparison_against_an_unknown_baseline": (
        _comparisons(_comparison(subject_run="interactive-c1", baseline_run="ghost")),
        "comparison 'c' names unknown run 'ghost'",
    ),
    "comparison_with_an_unknown_control": (
        _comparisons(_comparison(), aa="zz"),
        "comparison 'c' names unknown control 'zz'",
    ),
    # Runs are checked in file order before comparisons: the first problem is the one reported.
    "first_problem_wins": (_two_problems, "run 'interactive-c1': completed 99 > requests"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_claims_file_that_does_not_resolve_is_refused_naming_the_id(case: str) -> None:
    edit, message = REFUSED[case]
    data = _example()
    edit(data)
    with pytest.raises(InputError) as caught:
        load(Claims, data, source="claims.toml")
    assert caught.value.code == "BAD_INPUT"
    assert str(caught.value).endswith(f"claims.toml: (top level): Value error, {message}")


def test_references_that_resolve_are_accepted() -> None:
    """The refusals above are not a validator that refuses everything: known ids pass."""
    data = _example()
    _comparisons(_comparison(subject_run="interactive-c1", baseline_run="interactive-c8"), aa="aa")(
        data
    )
    claims = load(Claims, data, source="claims.toml")
    assert [c.aa_control for c in claims.comparisons] == ["aa"]


def test_sign_refuses_unresolved_claims_as_bad_input(golden: GoldenKit, tmp_path: Path) -> None:
    """The publisher's view: ``k3kit sign --json`` exits 3 with the validator's message, and
    the kit's receipt is left as it was."""
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    before = {p.name: p.read_bytes() for p in kit.iterdir() if p.is_file()}
    text = (EXAMPLE / "claims.toml").read_text(encoding="utf-8")
    bad = tmp_path / "claims.toml"
    bad.write_text(text.replace("completed = 4", "completed = 40", 1), encoding="utf-8")
    result = run_k3kit(
        "sign", kit, "--key", golden.key.private, "--claims", bad, "--force", "--json"
    )
    assert result.returncode == 3, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "BAD_INPUT"
    assert error["message"].endswith(
        "claims.toml: (top level): Value error, run 'interactive-c1': completed 40 > requests"
    )
    assert {p.name: p.read_bytes() for p in kit.iterdir() if p.is_file()} == before
