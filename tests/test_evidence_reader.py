"""The typed reader every evidence adapter maps a tool's output through, one row per refusal.

A benchmark file is attacker-controlled bytes: each value an adapter reads is checked for its
type and magnitude here, and a refusal names the file and the key, so an auditor sees which
figure of which file was malformed. What an adapter did not read is listed, never dropped.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from k3kit.errors import VerificationError
from k3kit.evidence._base import MAX_MAGNITUDE, MAX_UNMAPPED, Document, Reader, adapter


def _reader(**obj: Any) -> Reader:
    return Reader(obj, "bench.json", VerificationError, "EVIDENCE_MALFORMED")


NUMBER_REFUSALS = [
    ("a boolean", True, "expected a number, got bool"),
    ("a string", "12.5", "expected a number, got str"),
    ("null inside an array", None, "expected a number, got NoneType"),
    ("NaN", math.nan, "nan is outside +/-1e+15"),
    ("infinity", math.inf, "inf is outside"),
    ("too big", 2e15, "2000000000000000.0 is outside"),
]


@pytest.mark.parametrize(
    ("value", "reason"), [c[1:] for c in NUMBER_REFUSALS], ids=[c[0] for c in NUMBER_REFUSALS]
)
def test_a_number_is_refused(value: Any, reason: str) -> None:
    with pytest.raises(VerificationError, match=re.escape(f"bench.json: ttft: {reason}")) as info:
        _reader().number("ttft", value)
    assert info.value.code == "EVIDENCE_MALFORMED"


COUNT_CASES = [
    ("an integer", 150, 150),
    ("llmperf's float count", 150.0, 150),
    ("zero", 0, 0),
]


@pytest.mark.parametrize(
    ("value", "expected"), [c[1:] for c in COUNT_CASES], ids=[c[0] for c in COUNT_CASES]
)
def test_a_count_is_read(value: Any, expected: int) -> None:
    assert _reader().count("completed", value) == expected


@pytest.mark.parametrize(
    "value",
    [-1, 1.5, -2.0, True, "3", None],
    ids=["negative", "fraction", "negative float", "bool", "string", "null"],
)
def test_a_count_is_refused(value: Any) -> None:
    with pytest.raises(VerificationError, match="expected a non-negative integer"):
        _reader().count("completed", value)


def test_optional_values_are_none_when_absent_and_checked_when_present() -> None:
    r = _reader(completed=3.0, ttft=-0.5)
    assert r.opt_count("completed") == 3 and r.opt_count("failed") is None
    assert r.opt_number("ttft") == -0.5 and r.opt_number("tpot") is None
    assert r.text("model", None) == ""
    with pytest.raises(VerificationError, match="model: expected a string, got int"):
        r.text("model", 7)


ARRAY_CASES = [
    ("counts", {"lens": [1, 2.0]}, "count", [1, 2]),
    ("numbers", {"lens": [1, 0.5]}, "number", [1.0, 0.5]),
    ("arrays of floats", {"lens": [[0.1, 0.2], []]}, "numbers", [(0.1, 0.2), ()]),
    ("arrays mixing ints", {"lens": [[1, 0.5]]}, "numbers", [(1.0, 0.5)]),
    ("texts", {"lens": ["", "timeout"]}, "text", ["", "timeout"]),
    ("absent", {}, "count", None),
]


@pytest.mark.parametrize(
    ("obj", "kind", "expected"), [c[1:] for c in ARRAY_CASES], ids=[c[0] for c in ARRAY_CASES]
)
def test_an_array_is_read(obj: dict[str, Any], kind: str, expected: Any) -> None:
    assert _reader(**obj).array("lens", kind) == expected


ARRAY_REFUSALS = [
    ("not an array", {"lens": {"0": 1}}, "count", "expected an array"),
    (
        "an array of numbers where arrays belong",
        {"lens": [0.1]},
        "numbers",
        "expected an array of arrays",
    ),
    (
        "a huge float in bulk",
        {"lens": [[0.1, -1e16]]},
        "numbers",
        f"a value is outside +/-{MAX_MAGNITUDE:g}",
    ),
    ("a string among the gaps", {"lens": [[0.1, "x"]]}, "numbers", "expected a number, got str"),
    ("a number among texts", {"lens": ["ok", 3]}, "text", "expected a string, got int"),
]


@pytest.mark.parametrize(
    ("obj", "kind", "reason"), [c[1:] for c in ARRAY_REFUSALS], ids=[c[0] for c in ARRAY_REFUSALS]
)
def test_an_array_is_refused(obj: dict[str, Any], kind: str, reason: str) -> None:
    with pytest.raises(VerificationError, match=re.escape(f"lens: {reason}")):
        _reader(**obj).array("lens", kind)


def test_what_was_not_read_is_listed_in_file_order_and_bounded() -> None:
    r = _reader(b=1, a=2, c=3)
    r.get("a")
    assert r.unmapped() == ["b", "c"]
    many = _reader(**{f"k{i:03d}": i for i in range(MAX_UNMAPPED + 10)})
    listed = many.unmapped()
    assert len(listed) == MAX_UNMAPPED + 1 and listed[-1] == "... and 10 more"


def _doc(n: int) -> Document:
    return Document("runs.jsonl", [{"i": i} for i in range(n)], False, VerificationError, "E")


@pytest.mark.parametrize(
    ("n", "record", "expected", "reason"),
    [
        (1, None, ({"i": 0}, None), None),
        (3, 2, ({"i": 2}, 2), None),
        (3, None, None, "3 benchmarks in one file: name one with evidence_record (0..2)"),
        (3, 3, None, "evidence_record 3 is not one of 0..2"),
        (3, -1, None, "evidence_record -1 is not one of 0..2"),
    ],
    ids=["the only record", "the named record", "unnamed of several", "past the end", "negative"],
)
def test_the_record_a_run_cites(
    n: int, record: int | None, expected: Any, reason: str | None
) -> None:
    if reason is None:
        assert _doc(n).one(record, "benchmark") == expected
    else:
        with pytest.raises(VerificationError, match=re.escape(f"runs.jsonl: {reason}")):
            _doc(n).one(record, "benchmark")


def test_an_adapter_cannot_be_registered_twice() -> None:
    from k3kit.evidence import ADAPTERS

    tool = next(iter(ADAPTERS))
    with pytest.raises(ValueError, match="registered twice"):
        adapter(tool, lambda obj: False)(ADAPTERS[tool].parse)
