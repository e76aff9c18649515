"""The shortcuts that keep a 10,000-request audit fast decide exactly as the rules they replace.

benchmarks/bench_audit_cli.py measures the speed (never asserted here: a loaded machine would
fail any time limit); these tests pin the meaning. Each shortcut is compared with the slow form it
replaced, on every case of a grid or on seeded samples, and the bulk evidence checks refuse what
the per-value check refused.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

import pytest

from k3kit.audit.consistency import RETOKENIZE_REL, _crowded
from k3kit.audit.context import RETOKENIZE_ABS
from k3kit.audit.stats import Ordered, mean, pstdev
from k3kit.errors import VerificationError
from k3kit.evidence._base import MAX_MAGNITUDE, Reader


def test_crowded_chunks_decide_as_the_fraction_rule_on_every_small_case() -> None:
    for tokens in range(0, 400):
        for chunks in range(0, 440):
            slow = Fraction(chunks - tokens) > max(
                Fraction(RETOKENIZE_ABS), RETOKENIZE_REL * tokens
            )
            assert _crowded(chunks, tokens) is slow, (chunks, tokens)


def test_the_cached_mean_and_std_are_the_functions_values() -> None:
    rng = random.Random(22)
    samples = sorted(rng.lognormvariate(-4.0, 0.6) for _ in range(20_000))
    ordered = Ordered(samples)
    assert ordered.mean == mean(samples)
    assert ordered.std == pstdev(samples)
    # the two-pass formula, written out as it was before the map() form
    mu = math.fsum(samples) / len(samples)
    two_pass = math.sqrt(math.fsum((x - mu) * (x - mu) for x in samples) / len(samples))
    assert ordered.std == two_pass


def _reader(obj: dict[str, Any]) -> Reader:
    return Reader(obj, "attacker.json", VerificationError, "EVIDENCE_MALFORMED")


@pytest.mark.parametrize(
    "values",
    [[0.1, math.nan, 0.2], [math.nan], [0.1, 2e15], [-1e16, 0.1], [0.1, math.inf]],
    ids=["nan-inside", "nan-alone", "huge", "huge-negative", "infinite"],
)
@pytest.mark.parametrize("kind", ["number", "numbers"])
def test_a_float_array_checked_in_bulk_still_refuses_nan_and_huge_values(
    values: list[float], kind: str
) -> None:
    obj = {"gaps": [values] if kind == "numbers" else values}
    with pytest.raises(VerificationError) as refused:
        _reader(obj).array("gaps", kind)
    assert f"outside +/-{MAX_MAGNITUDE:g}" in refused.value.message


def test_a_float_array_in_bulk_keeps_its_values() -> None:
    assert _reader({"t": [0.25, 1.5]}).array("t", "number") == [0.25, 1.5]
    assert _reader({"t": [[0.25], []]}).array("t", "numbers") == [(0.25,), ()]
    assert _reader({"t": [1, 0.5]}).array("t", "number") == [1.0, 0.5]  # mixed: per value
