"""``_canonical.dumps``'s fast path (the stdlib's C encoder) against rfc8785, the writer it
stands in for: the same bytes, or the same refusal, for every input (issue 23, seventh pass).

The fast path is only taken for a plain tree (exact dicts with ASCII keys, lists, str, bool,
None, integers inside +-(2**53-1)); these tests feed both writers what falls on either side of
that line, so a difference in escaping, key order or number form fails here, not in a verdict.
"""

from __future__ import annotations

import enum
import sys
from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from k3kit import _canonical
from k3kit._canonical import MAX_SAFE_INT, dumps
from k3kit.errors import VerificationError


def _reference(obj: Any) -> bytes | str:
    try:
        return bytes(rfc8785.dumps(obj))
    except (rfc8785.CanonicalizationError, RecursionError) as exc:
        return type(exc).__name__


def _ours(obj: Any) -> bytes | str:
    try:
        return dumps(obj)
    except (rfc8785.CanonicalizationError, RecursionError) as exc:
        return type(exc).__name__


def test_every_character_is_written_as_rfc8785_writes_it() -> None:
    """All of Unicode but the surrogates, 4,096 characters a string: the escapes of the C
    encoder and of RFC 8785 agree character for character (controls, quote, backslash, DEL,
    U+2028, the private use area, the astral planes)."""
    points = [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(points), 4096):
        text = "".join(map(chr, points[start : start + 4096]))
        assert _canonical._plain(text)
        assert dumps(text) == rfc8785.dumps(text), hex(points[start])
        assert dumps({"k": [text]}) == rfc8785.dumps({"k": [text]})


@pytest.mark.parametrize("char", [chr(c) for c in range(0x20)] + ['"', "\\", "/", "\x7f"])
def test_control_characters_and_quotes_as_keys_and_values(char: str) -> None:
    obj: Any = {f"a{char}": char, "b": [char, {char: char}]}
    assert dumps(obj) == rfc8785.dumps(obj)


@pytest.mark.parametrize(
    "value",
    [0, 1, -1, MAX_SAFE_INT, -MAX_SAFE_INT, True, False, None, "", [], {}, [[]], {"": {}}],
)
def test_plain_scalars_and_empty_containers(value: Any) -> None:
    assert _canonical._plain(value)
    assert dumps(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        MAX_SAFE_INT + 1,  # rfc8785 refuses it: the fast path must not write it
        -MAX_SAFE_INT - 1,
        1.5,
        {"é": 1},  # a non-ASCII key: sorted by rfc8785 in UTF-16 order
        {"\ue000": 1, "\U0001f600": 2},  # where code-point and UTF-16 orders differ
        ("a", 1),  # a tuple
        {"a": "\ud800"},  # a lone surrogate: refused by rfc8785
        {1: "a"},  # a key that is not a string
    ],
)
def test_what_is_not_plain_goes_to_rfc8785(value: Any) -> None:
    assert not _canonical._plain(value) or value == {"a": "\ud800"}
    assert _ours(value) == _reference(value)


def test_code_point_and_utf16_orders_differ_and_the_result_is_rfc8785s() -> None:
    obj = {"\ue000": 1, "\U0001f600": 2}
    assert list(sorted(obj)) == ["\ue000", "\U0001f600"]  # code-point order
    assert dumps(obj) == rfc8785.dumps(obj)  # UTF-16 order puts the emoji (D83D DE00) first
    assert dumps(obj).index("\U0001f600".encode()) < dumps(obj).index("\ue000".encode())


class _Word(enum.StrEnum):
    A = "a"


class _Count(enum.IntEnum):
    ONE = 1


def test_subclasses_are_written_by_rfc8785() -> None:
    """A StrEnum or IntEnum member is not plain (its str() is not its value in every encoder)."""
    objs: list[Any] = [{"k": _Word.A}, {_Word.A: 1}, [_Count.ONE]]
    for obj in objs:
        assert not _canonical._plain(obj)
        assert dumps(obj) == rfc8785.dumps(obj)


def test_a_shared_or_circular_container_is_not_walked_for_ever() -> None:
    shared: list[Any] = [1]
    assert not _canonical._plain([shared, shared])
    assert dumps([shared, shared]) == rfc8785.dumps([shared, shared])
    loop: list[Any] = []
    loop.append(loop)
    assert not _canonical._plain(loop)
    assert _ours(loop) == "RecursionError"


_KEYS = st.one_of(
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=4),
    st.text(max_size=3),  # any Unicode, surrogates included
    st.sampled_from(["\ue000", "\U0001f600", "\uffff", "é"]),
)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.sampled_from([MAX_SAFE_INT, -MAX_SAFE_INT, MAX_SAFE_INT + 1, -MAX_SAFE_INT - 1])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
)
_TREES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(_KEYS, inner, max_size=4)
        | st.tuples(inner, inner)
    ),
    max_leaves=30,
)


@given(obj=_TREES)
def test_both_writers_give_the_same_bytes_or_the_same_refusal(obj: Any) -> None:
    assert _ours(obj) == _reference(obj)


@given(obj=_TREES)
def test_require_canonical_accepts_exactly_rfc8785s_bytes(obj: Any) -> None:
    reference = _reference(obj)
    if isinstance(reference, bytes):
        _canonical.require_canonical(reference, obj, source="doc")  # accepted
        with pytest.raises(VerificationError):
            _canonical.require_canonical(reference + b" ", obj, source="doc")
