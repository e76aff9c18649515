"""Make an engine snapshot from the engine's released wheel (``k3kit engine snapshot``).

The wheel is unpacked into a private temporary folder and the engine's own argument parser is
introspected there by :mod:`k3kit.engines._introspect`, run as a script in a subprocess by the
interpreter the publisher names (one whose site-packages hold the engine's dependencies, a CPU
torch for vLLM; the wheel's own files come first on its path). Nothing is downloaded. The result
records its provenance: the wheel's file name, size and sha256, the module the parser was read
from with the sha256 of that file as the wheel holds it, the Python that ran it, the modules
stubbed, the date and the k3kit that made it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath
from typing import Any

from k3kit._version import __version__
from k3kit.engines._snapfile import SnapshotFile
from k3kit.errors import InputError
from k3kit.models import load

#: Bounds on what is unpacked: vLLM's CUDA wheels are ~400 MB packed, ~1.2 GB unpacked.
MAX_WHEEL_MEMBERS = 50_000
MAX_WHEEL_UNPACKED = 8 * 1024**3
#: The engine's import of its parser (torch included) takes tens of seconds on a slow machine.
INTROSPECT_TIMEOUT_S = 900
_PARSERS = {
    "vllm": "the argument parser of `vllm serve`",
    "sglang": "sglang ServerArgs.add_cli_args",
}


def _unusable(wheel: Path, why: str, hint: str = "") -> InputError:
    return InputError(
        f"{wheel.name}: {why}",
        code="ENGINE_WHEEL_UNUSABLE",
        hint=hint or "give the engine's released wheel (.whl) as downloaded from PyPI",
    )


def _member_path(wheel: Path, name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\\" in name or not path.parts:
        raise _unusable(wheel, f"member {name[:80]!r} would land outside the folder")
    return path


def _metadata(wheel: Path, zf: zipfile.ZipFile, engine: str) -> str:
    """The version the wheel's own METADATA states, after checking it is the named engine."""
    names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(names) != 1:
        raise _unusable(wheel, "no single *.dist-info/METADATA: not a wheel")
    meta = HeaderParser().parsestr(zf.read(names[0]).decode("utf-8", "replace"))
    name = (meta.get("Name") or "").strip().lower().replace("_", "-")
    if name != engine:
        raise _unusable(wheel, f"is the wheel of {name[:40]!r}, not of {engine}")
    return (meta.get("Version") or "").strip()


def _unpack(wheel: Path, engine: str, into: Path) -> str:
    try:
        with zipfile.ZipFile(wheel) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_WHEEL_MEMBERS:
                raise _unusable(wheel, f"more than {MAX_WHEEL_MEMBERS} members")
            if sum(i.file_size for i in infos) > MAX_WHEEL_UNPACKED:
                raise _unusable(wheel, f"more than {MAX_WHEEL_UNPACKED} bytes unpacked")
            for info in infos:
                _member_path(wheel, info.filename)
            version = _metadata(wheel, zf, engine)
            zf.extractall(into)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise _unusable(wheel, f"cannot be read as a wheel: {exc}") from exc
    return version


def _introspect(engine: str, python: str, root: Path) -> dict[str, Any]:
    script = Path(__file__).with_name("_introspect.py")
    result = root.parent / "introspected.json"
    try:
        done = subprocess.run(
            [python, "-I", str(script), engine, str(root), str(result)],
            capture_output=True,
            timeout=INTROSPECT_TIMEOUT_S,
            check=False,
            cwd=root,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(
            f"{python}: could not run the engine's parser: {exc}",
            code="ENGINE_WHEEL_UNUSABLE",
            hint="--python names an interpreter that can import the engine (its dependencies "
            "installed; a CPU torch is enough)",
        ) from exc
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise InputError(
            f"{engine}'s parser could not be read: {' / '.join(tail)[:600]}",
            code="ENGINE_WHEEL_UNUSABLE",
            hint="run with a --python whose site-packages hold the engine's dependencies",
        )
    try:
        found = json.loads(result.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{engine}'s parser gave no readable result: {exc}",
            code="ENGINE_WHEEL_UNUSABLE",
            hint="run with a --python that can import the engine",
        ) from exc
    if not isinstance(found, dict):
        raise InputError(f"{engine}'s parser gave no object", code="ENGINE_WHEEL_UNUSABLE")
    return found


def _sha256_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def make_snapshot(
    engine: str, wheel: Path, *, python: str, today: str, version: str | None = None
) -> SnapshotFile:
    """The snapshot of ``engine`` read from ``wheel`` (``ENGINE_WHEEL_UNUSABLE``, exit 3)."""
    if not wheel.name.endswith(".whl") or not wheel.is_file():
        raise _unusable(wheel, "is not a .whl file")
    wheel_sha256, wheel_bytes = _sha256_file(wheel)
    with tempfile.TemporaryDirectory(prefix="k3kit-wheel-") as tmp:
        root = Path(tmp) / "wheel"
        root.mkdir()
        found = _unpack(wheel, engine, root)
        if version is not None and found != version:
            raise _unusable(
                wheel, f"is {engine} {found}, not {version}", "give the wheel of that version"
            )
        raw = _introspect(engine, python, root)
        source = str(raw.get("parser_source") or "")
        if not source or ".." in Path(source).parts or not (root / source).is_file():
            raise _unusable(wheel, "the engine's parser was not read from this wheel's files")
        source_sha256, _ = _sha256_file(root / source)
    provenance = {
        "wheel": wheel.name,
        "wheel_sha256": wheel_sha256,
        "wheel_bytes": wheel_bytes,
        "parser": _PARSERS[engine],
        "parser_source": source,
        "parser_source_sha256": source_sha256,
        "python": raw.get("python"),
        "stubbed": raw.get("stubbed"),
        "generated_on": today,
        "generated_by": f"k3kit {__version__}",
    }
    doc = {
        "engine": engine,
        "version": found,
        "options": raw.get("options"),
        "env_vars": raw.get("env_vars"),
        "registries": raw.get("registries"),
        "provenance": provenance,
    }
    return load(SnapshotFile, doc, source=f"{wheel.name}'s parser", code="ENGINE_WHEEL_UNUSABLE")
