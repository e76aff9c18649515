"""``k3kit._immutable.Immutable``, the records that replaced five frozen dataclasses on launch's
start-up path (issue 23, seventh pass): what the dataclasses promised still holds."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest

from k3kit._immutable import Immutable
from k3kit.errors import InputError
from k3kit.formats.vocab import Problem
from k3kit.node.launch import Site
from k3kit.pull._report import PullError
from k3kit.weights import WeightsOptions


def test_fields_are_set_by_name_whatever_order_slots_are_written_in() -> None:
    """ruff sorts ``__slots__``: a record that took its values in slot order swapped Site's host
    and port (caught by the suite); values go by name."""
    site = Site(Path("/w"), None, "0.0.0.0", 9000)
    assert (site.model_dir, site.trust_key, site.host, site.port) == (
        Path("/w"),
        None,
        "0.0.0.0",
        9000,
    )
    assert WeightsOptions(workers=3).workers == 3
    assert WeightsOptions().on_progress is None


def test_a_missing_or_unknown_field_is_refused() -> None:
    class Pair(Immutable):
        __slots__ = ("a", "b")

    with pytest.raises(TypeError, match="takes exactly"):
        Pair(a=1)
    with pytest.raises(TypeError, match="takes exactly"):
        Pair(a=1, b=2, c=3)


def test_records_cannot_be_changed() -> None:
    problem = Problem("KIT_FILE_EXTRA", "a.txt", "file is not in MANIFEST.json")
    with pytest.raises(AttributeError, match="immutable"):
        problem.detail = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del problem.path
    with pytest.raises(AttributeError):
        problem.extra = 1  # slotted: no new attributes either


def test_equality_and_hash_follow_the_fields_and_the_class() -> None:
    a, b = Problem("C", "p", "d"), Problem("C", "p", "d")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != Problem("C", "p", "other")
    # a subclass with the same three values is another record (as between dataclasses)
    assert a != PullError("C", "p", "d")
    assert a != ("C", "p", "d")


def test_a_subclass_extends_its_base_fields() -> None:
    """PullError adds ``hint`` to Problem's three fields (tests/test_vocabulary.py reads them)."""
    assert set(Problem._fields) == {"code", "path", "detail"}
    assert set(PullError._fields) == set(Problem._fields) | {"hint"}
    assert "hint='retry'" in repr(PullError("C", "p", "d", "retry"))


@pytest.mark.parametrize(
    "record",
    [
        Problem("C", "p", "d"),
        PullError("C", "p", "d", None),
        Site(port=1),
        WeightsOptions(workers=2, algorithm="blake3", full=True),
    ],
)
def test_copy_and_pickle_rebuild_an_equal_record(record: Immutable) -> None:
    assert copy.copy(record) == record
    assert copy.deepcopy(record) == record
    assert pickle.loads(pickle.dumps(record)) == record


def test_weights_options_still_refuse_bad_values() -> None:
    for bad in ({"workers": 0}, {"algorithm": "md5"}):
        with pytest.raises(InputError):
            WeightsOptions(**bad)


def test_a_record_without_its_own_init_takes_its_fields_by_keyword() -> None:
    class Pair(Immutable):
        __slots__ = ("a", "b")
        a: int
        b: str

    assert Pair(a=1, b="x") == Pair(b="x", a=1)
    with pytest.raises(TypeError):
        Pair(1, "x")  # type: ignore[call-arg]


def test_a_changed_copy_goes_through_the_records_own_checks() -> None:
    """``copy.replace`` (3.13; ``dataclasses.replace`` no longer applies to these records)."""
    options = WeightsOptions(workers=2)
    changed = options.__replace__(full=True)
    assert (changed.workers, changed.full, options.full) == (2, True, False)
    with pytest.raises(InputError):
        options.__replace__(workers=0)  # validated again
    with pytest.raises(TypeError, match="no field"):
        Site().__replace__(hots="0.0.0.0")
    assert Problem("C", "p", "d").__replace__(detail="e") == Problem("C", "p", "e")
    assert PullError("C", "p", "d").__replace__(hint="h").hint == "h"
