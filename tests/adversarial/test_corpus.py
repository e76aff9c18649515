"""Runs every registered attack through the real CLI; the last test is the corpus summary."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from k3kit.archive import pack
from tests.adversarial.corpus import REGISTRY, Attack, Outcome, Workbench, discover, run
from tests.conftest import GoldenKit, KeyFiles

CASES = sorted(discover().values(), key=lambda a: (a.area, a.name))
_OUTCOMES: dict[str, Outcome] = {}


@pytest.fixture(scope="module")
def genuine_archive(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("genuine-archive") / "kimi-k3-b300x8-1.0.0.kit.tar.gz"
    pack(golden.kit, out)
    return out


def _bench(golden: GoldenKit, archive: Path, other: KeyFiles, root: Path) -> Workbench:
    root.mkdir(parents=True, exist_ok=True)
    return Workbench(golden, archive, other, root)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_attack(
    case: Attack, golden: GoldenKit, genuine_archive: Path, other_key: KeyFiles, tmp_path: Path
) -> None:
    outcome = run(case, _bench(golden, genuine_archive, other_key, tmp_path))
    _OUTCOMES[case.name] = outcome
    assert outcome.exit_code != 70, outcome.explain()
    assert outcome.as_expected, outcome.explain()


def test_zz_corpus_summary(
    golden: GoldenKit,
    genuine_archive: Path,
    other_key: KeyFiles,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every case, counted by area; any false accept fails here even if its own test was
    deselected (cases not run in this session are run now)."""
    for case in CASES:
        if case.name not in _OUTCOMES:
            root = tmp_path / case.name
            try:
                _OUTCOMES[case.name] = run(case, _bench(golden, genuine_archive, other_key, root))
            finally:
                shutil.rmtree(root, ignore_errors=True)
    by_area: dict[str, int] = {}
    for case in CASES:
        by_area[case.area] = by_area.get(case.area, 0) + 1
    false_accepts = [o for o in _OUTCOMES.values() if o.false_accept]
    unexpected = [o for o in _OUTCOMES.values() if not o.as_expected]
    with capsys.disabled():
        print(
            f"\nadversarial corpus: {len(REGISTRY)} cases "
            f"({', '.join(f'{a} {n}' for a, n in sorted(by_area.items()))}); "
            f"false accepts: {len(false_accepts)}; other deviations: {len(unexpected)}"
        )
    assert len(REGISTRY) == len(CASES)
    assert not false_accepts, "\n".join(o.explain() for o in false_accepts)
    assert not unexpected, "\n".join(o.explain() for o in unexpected)
