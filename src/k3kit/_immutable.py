"""Immutable slotted records that cost nothing to define: the start-up path's ``dataclass``.

Why not ``@dataclass(frozen=True)``: it writes its methods' source and ``exec``s it at import,
about 1 ms of CPU a class on the 2-core machine, thirty times what a plain class costs. Five of
them on ``launch``'s path were 5 ms of its start-up (docs/performance.md, "Seventh pass").

An :class:`Immutable` subclass names its fields in ``__slots__`` (annotated in the class body for
the type checker) and either takes them by keyword or writes a typed ``__init__`` of its own
(positional arguments, defaults, validation) that hands them by name to ``Immutable.__init__``,
which refuses a missing or unknown one. Equality, hashing and ``repr`` come from the fields, as
a frozen dataclass's do; assigning or deleting a field afterwards raises ``AttributeError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Self, dataclass_transform


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
