"""``k3kit._immutable.Immutable``, the records that replaced five frozen dataclasses on launch's
start-up path (issue 23, seventh pass): what the dataclasses promised still holds."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any, cast

import pytest

from k3kit._immutable import Immutable, NamedTuple
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


# --- k3kit._immutable.NamedTuple: typing.NamedTuple's class without the annotation check -------

# The same body under both bases; every observable behaviour must agree.
_BODY = '''
from __future__ import annotations
from typing import Generic, TypeVar
T = TypeVar("T")

class Point(Base):
    """A point."""
    x: int
    y: str = "origin"
    label: tuple[str, ...] | None = None

    @property
    def twice(self) -> int:
        return self.x * 2

    def moved(self, dx: int) -> Point:
        return self._replace(x=self.x + dx)

    @classmethod
    def at(cls, x: int) -> Point:
        return cls(x)

class Boxed(Base, Generic[T]):
    value: T
    note: str = ""
'''


def _both() -> list[dict[str, object]]:
    import typing

    spaces = []
    for base in (typing.NamedTuple, NamedTuple):  # noqa: TID251 - the reference
        space: dict[str, object] = {"Base": base, "__name__": "tests.records"}
        exec(compile(_BODY, "<records>", "exec"), space)
        spaces.append(space)
    return spaces


def _behaviour(space: dict[str, object]) -> dict[str, object]:
    point: Any = space["Point"]
    boxed: Any = space["Boxed"]
    p = point(1, "a", ("t",))
    return {
        "fields": point._fields,
        "defaults": point._field_defaults,
        "doc": point.__doc__,
        "module": point.__module__,
        "qualname": point.__qualname__,
        "mro": [k.__name__ for k in point.__mro__],
        # typing keeps each as a ForwardRef of the string; the text is the same
        "annotations": {
            k: getattr(v, "__forward_arg__", v) for k, v in point.__annotations__.items()
        },
        "repr": repr(p),
        "tuple": tuple(p),
        "asdict": p._asdict(),
        "default": point(5),
        "by_keyword": point(y="b", x=2),
        "method": p.moved(2),
        "classmethod": point.at(7),
        "property": p.twice,
        "made": point._make([3, "c", None]),
        "equal_to_tuple": p == (1, "a", ("t",)),
        "hash": hash(p) == hash((1, "a", ("t",))),
        "order": sorted([point(2), point(1)]),
        "pickle": pickle.loads(pickle.dumps(point(1))) == point(1),
        "copy": copy.copy(p) == p and copy.deepcopy(p) == p,
        "generic": (boxed[int](4).value, boxed(5, "n")._fields, str(boxed[int]).endswith("[int]")),
    }


def test_named_tuple_behaves_as_typings_own() -> None:
    """Every behaviour the records rely on, compared with typing.NamedTuple on one class body
    (a tuple: equal to and hashed as its values, ordered, unpacked; defaults; methods, properties
    and class methods from the body; _replace, _asdict, _make; pickling by module and name)."""
    import sys
    import types

    module = types.ModuleType("tests.records")
    sys.modules["tests.records"] = module
    try:
        typed, fast = _both()
        for space in (typed, fast):
            module.Point = space["Point"]  # type: ignore[attr-defined]
            module.Boxed = space["Boxed"]  # type: ignore[attr-defined]
            behaviour = _behaviour(space)
            if space is typed:
                expected = behaviour
        assert behaviour.keys() == expected.keys()
        for key in expected:
            # the classes differ, so compare records as their tuples and reprs
            got, want = behaviour[key], expected[key]
            same = got == want or tuple(cast("tuple[object]", got)) == tuple(
                cast("tuple[object]", want)
            )
            assert (repr(got), same) == (repr(want), True), key
    finally:
        del sys.modules["tests.records"]


def test_named_tuple_annotations_stay_strings_that_get_type_hints_reads() -> None:
    """The saving: no ForwardRef per field. typing.get_type_hints still resolves them."""
    import typing

    from k3kit.engines._snapshot import Option

    assert Option.__annotations__["flag"] == "str"
    hints = typing.get_type_hints(Option)
    assert hints["flag"] is str and hints["deprecated"] is bool


@pytest.mark.parametrize(
    ("body", "error", "match"),
    [
        ("a: int = 1\n    b: int", TypeError, "without a default follows"),
        ("a: int\n    def _replace(self): ...", AttributeError, "cannot overwrite"),
        ("a: int\n    __slots__ = ()", AttributeError, "cannot overwrite"),
    ],
)
def test_named_tuple_refuses_what_typing_refuses(
    body: str, error: type[Exception], match: str
) -> None:
    import typing

    source = f"class R(Base):\n    {body}\n"
    for base in (typing.NamedTuple, NamedTuple):  # noqa: TID251 - the reference
        with pytest.raises(error):
            exec(source, {"Base": base, "__name__": "tests.records"})
    with pytest.raises(error, match=match):
        exec(source, {"Base": NamedTuple, "__name__": "tests.records"})


def test_named_tuple_refuses_another_base() -> None:
    with pytest.raises(TypeError, match="only from NamedTuple and Generic"):

        class R(NamedTuple, dict):  # type: ignore[misc,type-arg]
            a: int


def test_named_tuple_without_eager_annotations_is_typings_own_class() -> None:
    """A class body whose annotations are not a plain dict (a later Python's lazy annotations)
    is handed to typing.NamedTuple whole, not half-built."""
    import typing

    from k3kit._immutable import _NamedTupleMeta

    record: Any = _NamedTupleMeta.__new__(
        _NamedTupleMeta, "R", (NamedTuple,), {"__module__": __name__, "__qualname__": "R"}
    )
    assert record._fields == () and issubclass(record, tuple)
    assert record.__orig_bases__ == (typing.NamedTuple,)  # noqa: TID251


def test_no_typing_named_tuple_is_made_on_verify_and_launch_paths() -> None:
    """The start-up saving, pinned without a clock: importing what verify and launch import makes
    no class through typing.NamedTuple (each compiled its annotations: ~0.2 ms of CPU apiece)."""
    probe = (
        "import typing\n"
        "made = []\n"
        "original = typing.NamedTupleMeta.__new__\n"
        "def counting(mcls, name, bases, ns):\n"
        "    made.append(ns['__module__'] + '.' + name)\n"
        "    return original(mcls, name, bases, ns)\n"
        "typing.NamedTupleMeta.__new__ = counting\n"
        "import k3kit.cli.deploy, k3kit.cli.buyer, k3kit.node.launch, k3kit.node.verify\n"
        "import k3kit.engines.vllm, k3kit.engines.sglang, k3kit.weights.vcache\n"
        "print(made)\n"
    )
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == "[]"


# -- the eighth pass's NamedTuple, attacked (class bodies typing accepts, records k3kit ships) ----


_SET_NAME_BODY = """
from __future__ import annotations
told = []

class Told:
    def __set_name__(self, owner, name):
        told.append((owner.__name__, name))

class R(Base):
    a: int = Told()
    b: str = "b"
    kind = Told()
"""


def test_named_tuple_tells_every_descriptor_its_name_as_typing_does() -> None:
    """typing.NamedTuple (3.12 and later) calls ``__set_name__`` on every value of the class
    body, a field's default included, with the namedtuple class as owner. k3kit's skipped the
    fields' defaults."""
    import sys
    import typing

    space: dict[str, Any] = {"Base": NamedTuple, "__name__": "tests.records"}
    exec(compile(_SET_NAME_BODY, "<records>", "exec"), space)
    assert space["told"] == [("R", "a"), ("R", "kind")]
    assert space["R"]._fields == ("a", "b") and isinstance(space["R"].kind, space["Told"])
    if sys.version_info >= (3, 12):  # 3.11's typing calls no __set_name__ at all
        reference: dict[str, Any] = {"Base": typing.NamedTuple, "__name__": "tests.records"}  # noqa: TID251
        exec(compile(_SET_NAME_BODY, "<records>", "exec"), reference)
        assert reference["told"] == space["told"]


def test_a_record_body_cannot_make_itself_the_base() -> None:
    """The metaclass knew its own base by ``_is_base`` in the namespace: a record whose body set
    it became a plain class, not a tuple (typing keeps it as a class attribute)."""

    class R(NamedTuple):
        _is_base = True  # type: ignore[misc]  # what mypy refuses, the run time must survive
        a: int

    made: Any = R
    record = made(1)
    assert isinstance(record, tuple) and made._fields == ("a",) and record == (1,)


def test_a_field_named_like_a_tuple_method_is_the_field() -> None:
    """``count`` and ``index`` may be fields (namedtuple allows them); the field wins over
    tuple's method, as in typing's class. k3kit's own records avoid the names (GpuFacts.number,
    Header.number), so a caller's ``gpu.index`` fails loudly instead of returning a method."""
    import typing

    body = "class R(Base):\n    count: int\n    index: int = 0\n"
    for base in (typing.NamedTuple, NamedTuple):  # noqa: TID251 - the reference
        space: dict[str, Any] = {"Base": base, "__name__": "tests.records"}
        exec(body, space)
        record = space["R"](3)
        assert (record.count, record.index, record == (3, 0)) == (3, 0, True)
    from k3kit.archive._tar import Header
    from k3kit.preflight._facts import GpuFacts

    assert "index" not in Header._fields and "index" not in GpuFacts._fields
    assert callable(GpuFacts(0, "g", None, None, None, None, None).index)


_CHILD = """
import pickle, sys
records = pickle.loads(sys.stdin.buffer.read())
print(repr([(type(r).__module__, type(r).__qualname__, tuple(r)) for r in records]))
"""


def test_k3kit_records_unpickle_in_another_process() -> None:
    """The converted records pickle by module and name: a fresh interpreter (nothing of k3kit
    imported) rebuilds each as its own class, with the same values."""
    import subprocess
    import sys

    from k3kit._fs import TreeEntry
    from k3kit.archive._extract import Member
    from k3kit.archive._tar import Header
    from k3kit.formats.vocab import PreflightStatus as Status
    from k3kit.preflight._checks import Check
    from k3kit.preflight._cpu import CpuFacts
    from k3kit.preflight._facts import GpuFacts, NodeFacts, OsFacts

    gpu = GpuFacts(0, "NVIDIA B300", 1, 0, "10.0", False, 18)
    records: list[Any] = [
        TreeEntry("a/b", "file", 3),
        Member("a/b", "file", 0o644, 3),
        Header(1, b"a/b", "file", 0o644, 3),
        Check("gpu.count", Status.PASS, True, "8", "8"),
        NodeFacts("nvml", [gpu], None, "580.1", 13000, ("n",)),
        OsFacts(1, -1, 2, "/w", {"shm": "gone"}),
        # the read-only empty default (k3kit._immutable.EMPTY_MAPPING) pickles too; a
        # types.MappingProxyType, the first default, did not
        OsFacts(1, -1, 2, "/w"),
        CpuFacts("/proc", 8, 1024, frozenset({"avx2"}), "cpu", {}),
    ]
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=pickle.dumps(records),
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    expected = [(type(r).__module__, type(r).__qualname__, tuple(r)) for r in records]
    assert out.strip() == repr(expected)
    assert pickle.loads(pickle.dumps(records)) == records


def test_the_empty_mapping_default_is_read_only_and_survives_pickle_and_copy() -> None:
    """A NamedTuple's default is shared by every instance, so a mapping field's empty default
    must refuse writes; the records pickled and deep-copied as dataclasses did."""
    from k3kit._immutable import EMPTY_MAPPING
    from k3kit.preflight._facts import OsFacts
    from k3kit.signing.trust.policy import Trust

    assert pickle.loads(pickle.dumps(EMPTY_MAPPING)) is EMPTY_MAPPING
    assert copy.deepcopy(EMPTY_MAPPING) is EMPTY_MAPPING
    mapping: Any = EMPTY_MAPPING
    assert mapping == {} and len(mapping) == 0 and list(mapping) == []
    with pytest.raises(TypeError):
        cast(Any, EMPTY_MAPPING)["x"] = 1
    facts = OsFacts(1, 2, 3, None)
    assert facts == OsFacts(1, 2, 3, None, {}) and OsFacts(1, 2, 3, None, {}) == facts
    assert pickle.loads(pickle.dumps(facts)) == facts and copy.deepcopy(facts) == facts
    assert facts.unreadable.get("shm", "not read") == "not read"
    trust = Trust(keys=())
    assert copy.deepcopy(trust).revoked is EMPTY_MAPPING


def test_the_empty_mapping_default_reads_as_an_empty_dict_everywhere() -> None:
    """What the records' readers do with a mapping field (``in``, ``get``, ``items``, ``dict``,
    equality both ways, every pickle protocol, threads) gives what an empty dict gives, and the
    default is unhashable as a dict is (a record holding one was never a dict key)."""
    import threading
    from types import MappingProxyType

    from k3kit._immutable import EMPTY_MAPPING

    mapping: Any = EMPTY_MAPPING
    assert "x" not in mapping and mapping.get("x") is None and mapping.get("x", 1) == 1
    assert list(mapping.items()) == [] and list(mapping.values()) == [] and not mapping
    assert dict(mapping) == {} and {**mapping} == {}
    empty: dict[str, int] = {}
    one = {"x": 1}
    assert mapping == empty and empty == mapping and mapping == MappingProxyType({})
    assert mapping != one and one != mapping  # a dict on the left hands over to Mapping.__eq__
    with pytest.raises(KeyError):
        mapping["x"]
    with pytest.raises(TypeError):
        hash(mapping)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(EMPTY_MAPPING, protocol=protocol)) is EMPTY_MAPPING
    assert copy.copy(EMPTY_MAPPING) is EMPTY_MAPPING

    seen: list[bool] = []

    def read() -> None:
        seen.append(pickle.loads(pickle.dumps(EMPTY_MAPPING)) is EMPTY_MAPPING and not mapping)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [True] * 8
