"""The strict parser's bounds walk, rewritten for speed (issue 23), against the walk it replaced.

``_bounds`` runs on every event a server streams to ``accept``; it was rewritten to keep
scalars off its stack. This holds the new walk to the old one's verdicts on generated JSON
trees, at depth limits around the trees' own depth, so a refusal cannot have been lost.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from k3kit import _canonical
from k3kit._canonical import _bounds, _check_string, _StrictDecodeError


def _reference_bounds(obj: Any, limit: int) -> None:
    """The walk before the rewrite, verbatim: one stack entry per value."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise _StrictDecodeError(f"nesting deeper than {limit}")
        if isinstance(node, str):
            _check_string(node)
        elif isinstance(node, dict):
            if len(node) > _canonical.MAX_CONTAINER_ITEMS:
                raise _StrictDecodeError("too many members")
            for key, value in node.items():
                _check_string(key)
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            if len(node) > _canonical.MAX_CONTAINER_ITEMS:
                raise _StrictDecodeError("too many items")
            stack.extend((v, depth + 1) for v in node)


#: Strings that pass and fail (a lone surrogate), so both verdicts occur.
_TEXT = st.one_of(st.text(max_size=4), st.just("\ud800"))
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=24,
)


def _verdict(walk: Any, obj: Any, limit: int) -> str:
    try:
        walk(obj, limit)
    except _StrictDecodeError as exc:
        return "nesting" if "nesting" in str(exc) else "refused"
    return "ok"


@given(obj=_JSON, limit=st.integers(min_value=0, max_value=6))
def test_the_new_walk_refuses_exactly_what_the_old_one_did(obj: Any, limit: int) -> None:
    old, new = _verdict(_reference_bounds, obj, limit), _verdict(_bounds, obj, limit)
    # Both refuse the same trees; when a tree is both too deep and holds a bad string, which
    # reason is found first depends on the walk's order, so only "refused or not" must agree.
    assert (old == "ok") == (new == "ok")


@pytest.mark.parametrize("size", [3, 4])
def test_an_oversize_container_is_refused_at_any_depth(
    monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    monkeypatch.setattr(_canonical, "MAX_CONTAINER_ITEMS", 3)
    for tree in ([[0] * size], {"a": {str(i): 0 for i in range(size)}}):
        assert _verdict(_bounds, tree, 8) == ("ok" if size == 3 else "refused")
