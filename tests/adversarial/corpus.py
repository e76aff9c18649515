"""The adversarial corpus: one named case per attack, built by code from a genuine kit.

Each ``attacks_<area>.py`` module in this package registers its cases with :func:`attack`. A case
gets a :class:`Workbench` (a private folder and copies of a genuine signed kit, its archive and its
weights, made on demand), tampers with what it needs, and returns the ``k3kit`` argv to run. The
runner appends ``--json``, runs the real CLI as a subprocess and checks three things:

- the exit code is the expected one (1 unless the case says otherwise) -- exit 0 where a refusal
  was expected is a **false accept**, the one result this corpus exists to rule out;
- the expected error code appears somewhere in the JSON on stdout (a report's check or problem,
  or the error object of a refused call);
- no traceback and never exit 70: attacker bytes are bad input, never a bug.

Discovery is by module name, so a new ``attacks_*.py`` file joins the corpus with no list to edit.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import GoldenKit, KeyFiles, run_k3kit

Argv = Sequence[str | Path]


@dataclass
class Workbench:
    """A private folder for one case, with copies of the genuine artefacts made on demand."""

    golden: GoldenKit
    archive_path: Path
    other_key: KeyFiles
    root: Path
    _made: dict[str, Path] = field(default_factory=dict)
    #: Variables the victim's shell has set (a builder adds them: DOCKER_CONFIG, PATH, ...).
    env: dict[str, str] = field(default_factory=dict)

    @property
    def trust(self) -> Path:
        return self.golden.key.public

    def kit(self) -> Path:
        """A private copy of the genuine signed kit directory."""
        return self._copy("kit", lambda dest: shutil.copytree(self.golden.kit, dest))

    def archive(self) -> Path:
        """A private copy of the genuine ``.kit.tar.gz``."""
        name = self.archive_path.name
        return self._copy(name, lambda dest: shutil.copyfile(self.archive_path, dest))

    def cache_root(self) -> Path:
        """A private copy of the Hugging Face cache root (links into ``blobs/`` kept as links)."""
        cache = self.golden.snapshot.parents[2]
        return self._copy("hf-cache", lambda dest: shutil.copytree(cache, dest, symlinks=True))

    def snapshot(self) -> Path:
        """The snapshot folder inside :meth:`cache_root`'s copy."""
        rel = self.golden.snapshot.relative_to(self.golden.snapshot.parents[2])
        return self.cache_root() / rel

    def plain_weights(self) -> Path:
        """A private plain-folder copy of the weights (links resolved)."""
        return self._copy(
            "weights", lambda dest: shutil.copytree(self.golden.snapshot, dest, symlinks=False)
        )

    def launch(self, *extra: str | Path) -> Argv:
        """``launch`` of :meth:`kit` on :meth:`snapshot` under the genuine key, without the node
        check (there are no GPUs here: it would refuse first), with ``extra`` options."""
        return [
            "launch",
            "--no-preflight",
            self.kit(),
            "--profile",
            "interactive",
            "--trust",
            self.trust,
            "--weights",
            self.snapshot(),
            "--state-dir",
            self.root / "state",
            *extra,
        ]

    def _copy(self, name: str, make: Callable[[Path], object]) -> Path:
        if name not in self._made:
            dest = self.root / name
            make(dest)
            self._made[name] = dest
        return self._made[name]


@dataclass(frozen=True)
class Attack:
    name: str
    area: str
    build: Callable[[Workbench], Argv]
    code: str
    exit_code: int = 1
    timeout: float = 120.0


REGISTRY: dict[str, Attack] = {}


def attack(
    code: str, *, exit_code: int = 1, timeout: float = 120.0
) -> Callable[[Callable[[Workbench], Argv]], Callable[[Workbench], Argv]]:
    """Register the decorated builder as a case named after the function."""

    def register(build: Callable[[Workbench], Argv]) -> Callable[[Workbench], Argv]:
        name = build.__name__
        area = build.__module__.rsplit(".", 1)[-1].removeprefix("attacks_")
        if name in REGISTRY:
            raise RuntimeError(f"attack {name!r} is registered twice")
        REGISTRY[name] = Attack(name, area, build, code, exit_code, timeout)
        return build

    return register


def discover() -> dict[str, Attack]:
    """Import every ``attacks_*`` module of this package; returns the registry."""
    package = Path(__file__).parent
    for info in pkgutil.iter_modules([str(package)]):
        if info.name.startswith("attacks_"):
            importlib.import_module(f"tests.adversarial.{info.name}")
    return REGISTRY


def codes_in(obj: Any) -> Iterator[str]:
    """Every string value under a ``code`` key, anywhere in a JSON document."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "code" and isinstance(value, str):
                yield value
            else:
                yield from codes_in(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from codes_in(item)


@dataclass(frozen=True)
class Outcome:
    name: str
    exit_code: int
    codes: tuple[str, ...]
    stderr: str
    expected_exit: int
    expected_code: str

    @property
    def false_accept(self) -> bool:
        return self.exit_code == 0 and self.expected_exit != 0

    @property
    def as_expected(self) -> bool:
        return (
            self.exit_code == self.expected_exit
            and self.expected_code in self.codes
            and "Traceback" not in self.stderr
        )

    def explain(self) -> str:
        return (
            f"{self.name}: exit {self.exit_code} (expected {self.expected_exit}), codes "
            f"{sorted(set(self.codes))} (expected {self.expected_code}); stderr: "
            f"{self.stderr[-600:]!r}"
        )


def run(case: Attack, bench: Workbench) -> Outcome:
    argv = [*case.build(bench), "--json"]
    proc = run_k3kit(*argv, cwd=bench.root, env=bench.env or None, timeout=case.timeout)
    codes: tuple[str, ...] = ()
    if proc.stdout.strip():
        try:
            codes = tuple(codes_in(json.loads(proc.stdout)))
        except json.JSONDecodeError:
            codes = ("<stdout is not JSON>",)
    return Outcome(case.name, proc.returncode, codes, proc.stderr, case.exit_code, case.code)
