"""Check engine settings against the pinned version's snapshot, stricter than the engine.

Engines built on argparse accept unambiguous prefixes (``--max-num-seq`` for ``--max-num-seqs``)
and ignore unknown environment variables with at most a warning, so a typo in a deploy file can
silently change nothing; prefixes also rot when a later version adds a similar flag. k3kit demands
exact long names, the right value type, a listed choice or registry name, and known environment
variables. Every problem names the key and, where one is close, the valid name meant.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from k3kit.engines._adapter import EngineAdapter
from k3kit.engines._argv import value_problems
from k3kit.engines._loads import env_loads, setting_loads
from k3kit.engines._snapshot import EngineSnapshot, Option, closest

_BOOL_ACTIONS = {
    "EnableDisableAction",
    "_StoreTrueAction",
    "BooleanOptionalAction",
    "_StoreFalseAction",
    "StoreBooleanAction",
}
_INT_TYPES = {"int", "human_readable_int", "human_readable_int_or_auto", "positive_int"}
_FLOAT_TYPES = {"float", "positive_float"}


def _check_value(key: str, opt: Option, value: object, allowed: tuple[str, ...] | None) -> str:
    if opt.action in _BOOL_ACTIONS:
        return "" if isinstance(value, bool) else "expects true or false"
    if isinstance(value, bool):
        return f"is not a switch ({opt.action}); give a value"
    if opt.type in _INT_TYPES:
        # Plain integers only: vLLM reads "1M" as 1,048,576 but "1m" as 1,000,000.
        return "" if isinstance(value, int) else "expects a plain integer"
    if opt.type in _FLOAT_TYPES:
        return "" if isinstance(value, int | Decimal) else "expects a number"
    if allowed is not None:
        if isinstance(value, str) and value in allowed:
            return ""
        near = closest(str(value), allowed) if isinstance(value, str) else None
        hint = f"; did you mean {near!r}?" if near else ""
        shown = ", ".join(allowed[:40]) + (", ..." if len(allowed) > 40 else "")
        return f"must be one of {shown}{hint}"
    return ""


def validate_settings(
    adapter: EngineAdapter,
    snap: EngineSnapshot,
    settings: Mapping[str, object],
    where: str,
) -> list[str]:
    """Every problem with one block of settings (``where`` names it, e.g.
    ``profiles.batch.serve``); empty when it is clean."""
    label = f"{snap.engine} {snap.version}"
    problems = []
    for raw_key, value in settings.items():
        key = raw_key.replace("_", "-")
        at = f"{where}.{raw_key}"
        if key in adapter.reserved:
            problems.append(
                f"{at}: is set by k3kit's launcher (paths, binding, node wiring), not by a profile"
            )
            continue
        opt = snap.options.get(key)
        if opt is None:
            near = closest(key, list(snap.options))
            hint = f"; did you mean `--{near}`?" if near else ""
            problems.append(
                f"{at}: `--{key}` is not a {label} server flag "
                f"(exact names only; prefixes are not accepted){hint}"
            )
            continue
        if opt.deprecated:
            problems.append(f"{at}: `--{key}` is deprecated in {label}")
            continue
        registry = adapter.registry_for.get(key, "")
        allowed = opt.choices or snap.registries.get(registry)
        why = _check_value(key, opt, value, allowed)
        if why:
            problems.append(f"{at}: {why} (got {value!r})")
    return problems


def validate_env(
    adapter: EngineAdapter, snap: EngineSnapshot, env: Mapping[str, str], where: str
) -> list[str]:
    """Engine-prefixed variables must be ones this engine version reads; it ignores the rest."""
    problems = []
    for var in env:
        if var.startswith(adapter.env_prefixes) and var not in snap.env_vars:
            near = closest(var, snap.env_vars)
            hint = f"; did you mean {near}?" if near else ""
            problems.append(
                f"{where}.{var}: not an environment variable {snap.engine} {snap.version} "
                f"knows (it would be ignored){hint}"
            )
    return problems


class Review:
    """What one profile's signed settings make the engine do beyond its flags' meaning.

    ``smuggled``: values the engine's own config loader would read as options (each names the
    setting); ``loads``: setting or variable name -> what it loads from outside the kit and the
    weights. Build and launch both use :func:`review_profile`, so a kit signed by an older k3kit is
    judged by the same rules when it is launched.

    A plain class with what its mutable dataclass generated (init, repr, eq; unhashable): a
    dataclass is ~0.4 ms of CPU to create at import, paid on every launch (docs/performance.md).
    """

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it was

    def __init__(
        self, smuggled: list[str] | None = None, loads: dict[str, str] | None = None
    ) -> None:
        self.smuggled: list[str] = [] if smuggled is None else smuggled
        self.loads: dict[str, str] = {} if loads is None else loads

    def __repr__(self) -> str:
        return f"Review(smuggled={self.smuggled!r}, loads={self.loads!r})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Review)
        return (self.smuggled, self.loads) == (other.smuggled, other.loads)

    def undeclared(self, declared: Mapping[str, str]) -> dict[str, str]:
        return {name: why for name, why in self.loads.items() if name not in declared}


def review_profile(
    snap: EngineSnapshot,
    settings: Mapping[str, object],
    env: Mapping[str, str],
    where: str,
) -> Review:
    """Check ``settings`` (a ``serve`` block) and ``env`` by the values' meaning to the engine."""
    review = Review()
    # Every option's names by its dest, in the snapshot's order: Option.aliases for each setting
    # scanned all ~400 options again (0.4 ms of the 0.5 ms this takes on every launch).
    names_of: dict[str, list[str]] = {}
    for name, option in snap.options.items():
        names_of.setdefault(option.dest, []).append(name)
    for raw_key, value in settings.items():
        key = raw_key.replace("_", "-")
        review.smuggled += [f"{where}.{raw_key}: {why}" for why in value_problems(snap, key, value)]
        opt = snap.options.get(key)
        aliases = list(names_of[opt.dest]) if opt is not None else []
        review.loads.update(setting_loads(snap.loads, key, value, aliases))
    for var, value in env.items():
        review.loads.update(env_loads(snap.loads, var, value))
    return review
