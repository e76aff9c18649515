"""One way to extend k3kit: a named registry that members join by decorator when imported.

Why one helper: engines, deploy targets, evidence adapters and audit rules each had their own
registration style (a dict literal, a dict built inside a function, two hand-written decorators),
so adding a member meant learning a different mechanism each time, and only some of them refused
a name registered twice. Here every extension point is a :class:`Registry`: a member module
decorates what it defines, the folder imports its public modules (:func:`import_members`), and
the lookup that fails names every known member and the registered error code of that extension
point. A test per registry ties its names to the schemas and docs that list them.

The registry is a ``dict`` so that code and tests reading a table (``ADAPTERS["vllm"]``, pytest's
``monkeypatch.setitem``) keep working; :meth:`Registry.add` is the one way members get in.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from typing import TypeVar

from k3kit.errors import InputError

T = TypeVar("T")
F = TypeVar("F")


class Registry(dict[str, T]):
    """The members of one extension point, by name (``kind`` says which, in messages)."""

    def __init__(self, kind: str, *, code: str) -> None:
        super().__init__()
        self.kind = kind
        self.code = code

    def add(self, name: str, member: T) -> T:
        """Register ``member`` under ``name``; a second member under one name is a bug
        (two modules claiming a name would make which one wins depend on import order)."""
        if name in self:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self[name] = member
        return member

    def decorator(self, name: str, make: Callable[[F], T]) -> Callable[[F], F]:
        """A decorator registering ``make(obj)`` under ``name`` and returning ``obj`` unchanged."""

        def register(obj: F) -> F:
            self.add(name, make(obj))
            return obj

        return register

    def known(self) -> str:
        """Every registered name, sorted, for messages."""
        return ", ".join(sorted(self))

    def get_or_fail(self, name: str, *, where: str = "") -> T:
        """The member named ``name``, or an :class:`InputError` under this registry's code that
        lists the known members (the fix is to choose one of them)."""
        member = self.get(name)
        if member is None:
            prefix = f"{where}: " if where else ""
            raise InputError(
                f"{prefix}no {self.kind} {name!r}",
                code=self.code,
                hint=f"known {self.kind}s: {self.known()}",
            )
        return member


def import_members(package: str, path: Iterable[str]) -> list[str]:
    """Import every public module of ``package`` (its ``__path__``), so each registers itself:
    a new member is a new module, and no list elsewhere needs an edit."""
    folders = list(path)
    found = _folder_modules(folders)
    if found is None:  # a zip import or another importer: pkgutil asks it
        import pkgutil

        found = [m.name for m in pkgutil.iter_modules(folders)]
    names = sorted(name for name in found if not name.startswith("_"))
    for name in names:
        importlib.import_module(f"{package}.{name}")
    return names


def _folder_modules(path: list[str]) -> list[str] | None:
    """The module names ``pkgutil.iter_modules(path)`` yields when every entry of ``path`` is a
    folder on disk, by its rule for folders (``pkgutil._iter_file_finder_modules``): a file with
    a module suffix, or a folder holding an ``__init__``; None when an entry is not a folder.

    Why not pkgutil itself: importing it was ~1 ms of CPU on every launch (docs/performance.md),
    for a listing of one folder."""
    if not all(os.path.isdir(folder) for folder in path):
        return None
    import inspect  # pkgutil's own helper for the name; loaded with click on every CLI run

    names: dict[str, None] = {}
    for folder in path:
        try:
            filenames = sorted(os.listdir(folder))
        except OSError:  # unreadable, as import and pkgutil ignore it
            filenames = []
        for filename in filenames:
            name = inspect.getmodulename(filename)
            if name == "__init__":
                continue
            full = os.path.join(folder, filename)
            if not name and "." not in filename and os.path.isdir(full):
                try:
                    contents = os.listdir(full)
                except OSError:
                    contents = []
                if not any(inspect.getmodulename(f) == "__init__" for f in contents):
                    continue
                name = filename
            if name and "." not in name:
                names.setdefault(name)
    return list(names)
