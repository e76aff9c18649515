"""Immutable records that cost little to define: the start-up path's ``dataclass`` and
``typing.NamedTuple``.

Why not ``@dataclass(frozen=True)``: it writes its methods' source and ``exec``s it at import,
about 1 ms of CPU a class on the 2-core machine, thirty times what a plain class costs. Five of
them on ``launch``'s path were 5 ms of its start-up (docs/performance.md, "Seventh pass").

An :class:`Immutable` subclass names its fields in ``__slots__`` (annotated in the class body for
the type checker) and either takes them by keyword or writes a typed ``__init__`` of its own
(positional arguments, defaults, validation) that hands them by name to ``Immutable.__init__``,
which refuses a missing or unknown one. Equality, hashing and ``repr`` come from the fields, as
a frozen dataclass's do; assigning or deleting a field afterwards raises ``AttributeError``.

:class:`NamedTuple` is ``typing.NamedTuple`` to the type checker and, at run time, the same
``collections.namedtuple`` class that ``typing.NamedTuple`` makes, without its check of each
field's annotation. Under ``from __future__ import annotations`` every annotation is a string, and
``typing`` turns each one into a ``ForwardRef``, which compiles it: 0.2-0.3 ms a class on Python
3.13 against 0.05-0.1 ms for the namedtuple alone. ``launch`` loads 27 of them: its CPU fell by
about 2.5 ms (docs/performance.md, "Eighth pass").
Nothing reads those ``ForwardRef``s: ``typing.get_type_hints`` evaluates the strings as well.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, dataclass_transform


# For the type checker: assignments refused, as at run time; a record without an __init__ of its
# own takes its fields by keyword, as Immutable.__init__ does.
@dataclass_transform(frozen_default=True, kw_only_default=True)
class Immutable:
    """Base of the immutable records; see the module docstring."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Fields in order, base classes first (a subclass extends its base's fields).
        cls._fields = tuple(
            name for klass in reversed(cls.__mro__) for name in klass.__dict__.get("__slots__", ())
        )

    def __init__(self, **values: object) -> None:
        # By name: __slots__ order is not an interface (ruff's RUF023 sorts it).
        if values.keys() != set(self._fields):
            raise TypeError(f"{type(self).__name__} takes exactly {', '.join(self._fields)}")
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Immutable) or type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._values()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"

    def __replace__(self, **changes: object) -> Self:
        """``copy.replace(record, field=value)`` (Python 3.13; ``dataclasses.replace`` for a
        dataclass): a new record made by the class's own ``__init__``, so one that validates its
        values (``WeightsOptions``) validates the new ones. Every record's ``__init__`` takes its
        fields under their own names."""
        unknown = changes.keys() - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        values = dict(zip(self._fields, self._values(), strict=True))
        return type(self)(**{**values, **changes})

    def __reduce__(self) -> tuple[Callable[..., Immutable], tuple[object, ...]]:
        # copy and pickle rebuild by name: setting slots one by one would raise.
        return _rebuild, (type(self), dict(zip(self._fields, self._values(), strict=True)))


def _rebuild(cls: type[Immutable], values: dict[str, object]) -> Immutable:
    record = object.__new__(cls)
    Immutable.__init__(record, **values)
    return record


# Names a NamedTuple's body may not define (typing refuses the same ones): they are the tuple's own.
_PROHIBITED = frozenset(
    {"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults"}
    | {"_make", "_replace", "_asdict", "_source"}
)
# Set by collections.namedtuple itself, not copied from the class body.
_SPECIAL = frozenset({"__module__", "__name__", "__annotations__", "__orig_bases__"})


# called through a name, so the type checker does not read the call as a namedtuple declaration
_namedtuple: Callable[..., Any] = collections.namedtuple


class _NamedTupleMeta(type):
    """Makes ``class R(NamedTuple): ...`` what ``typing.NamedTuple`` makes of it, less the
    annotation check (see the module docstring)."""

    def __new__(
        mcls, typename: str, bases: tuple[type, ...], ns: dict[str, Any]
    ) -> Any:  # the class collections.namedtuple returns, not an instance of this metaclass
        if not bases and ns.get("_is_base", False):  # NamedTuple itself, never a record's body
            return super().__new__(mcls, typename, bases, ns)
        # Generic[T] in the bases arrives as Generic (its __mro_entries__). It is dropped, as
        # typing keeps it only for subscripting: a tuple subclass subscripts as tuple does.
        if any(base is not Generic and not isinstance(base, _NamedTupleMeta) for base in bases):
            raise TypeError("a NamedTuple may inherit only from NamedTuple and Generic")
        annotations = ns.get("__annotations__")
        if not isinstance(annotations, dict):
            # No eager annotations (a future Python's lazy ones, or none at all): typing's own
            # class, whatever it costs.
            import types
            import typing

            def body(space: dict[str, Any]) -> None:
                space.update(ns)

            spelt = ns.get("__orig_bases__", bases)
            typed = tuple(typing.NamedTuple if b is NamedTuple else b for b in spelt)  # noqa: TID251
            return types.new_class(typename, typed, exec_body=body)
        defaults: list[str] = []
        for name in annotations:
            if name in ns:
                defaults.append(name)
            elif defaults:
                raise TypeError(f"NamedTuple field {name} without a default follows {defaults}")
        record = _namedtuple(
            typename, list(annotations), defaults=[ns[n] for n in defaults], module=ns["__module__"]
        )
        record.__annotations__ = dict(annotations)
        for key, value in ns.items():
            if key in _PROHIBITED:
                raise AttributeError(f"cannot overwrite NamedTuple attribute {key}")
            if key in _SPECIAL:
                continue
            if key not in record._fields:
                setattr(record, key, value)
            # as typing (3.12+): a field's default is told its name too
            set_name = getattr(type(value), "__set_name__", None)
            if set_name is not None:
                set_name(value, record, key)
        return record


if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple  # noqa: TID251 - the type checker's view
else:

    class NamedTuple(metaclass=_NamedTupleMeta):
        """Base of the start-up path's named tuples; see the module docstring."""

        _is_base = True


class _EmptyMapping(Mapping[Any, Any]):
    """The read-only empty default of a record's mapping field (a NamedTuple's default is shared
    by every instance, so it must not be a dict). Unlike ``types.MappingProxyType({})`` it pickles
    and deep-copies, as the frozen dataclasses' fresh dicts did: to the one instance."""

    __slots__ = ()

    def __getitem__(self, key: object) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "EMPTY_MAPPING"

    def __reduce__(self) -> str:
        return "EMPTY_MAPPING"  # pickled and copied by name: the module's one instance


EMPTY_MAPPING: Mapping[Any, Any] = _EmptyMapping()
