"""The public API: docs/api.md's examples run, the example program passes mypy --strict, the
wheel installs into a fresh venv, every public name is documented, and the one target
classifier and ``open_kit`` behave as docs/api.md says."""

from __future__ import annotations

import fnmatch
import inspect
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

import k3kit
from k3kit import api
from tests.conftest import ROOT, GoldenKit, run_k3kit

CODE_IN_DOC = re.compile(r"``([A-Z][A-Z0-9]+(?:_[A-Z0-9*]+)+)``")


def _doc_blocks() -> str:
    text = (ROOT / "docs" / "api.md").read_text()
    return "\n".join(re.findall(r"```python\n(.*?)```", text, re.S))


def test_docs_api_examples_run() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _doc_blocks()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(r"^packed kit\.tar\.gz [0-9a-f]{12}$", out, re.M), out
    assert re.search(r"^verified [0-9a-f]{12} blake3$", out, re.M), out
    assert re.search(r"^refused WEIGHTS_\w+ 1 \['weights'\]$", out, re.M), out
    assert "weights ok: False" in out and "archive lock" in out
    assert "receipt.dsse.json" in out.splitlines()[-1]


def test_example_program_passes_mypy_strict_in_make_test() -> None:
    """``make test``'s typecheck step runs mypy with ``strict = true`` over ``tests/``, so the
    example program passes mypy --strict there or the build fails. Running mypy on it again here
    cost 10 s (from no cache it follows the example into all of k3kit) for the same verdict; this
    asserts what makes that step cover it: strict, ``tests`` among the files, nothing excluded,
    no override naming the example, and ``make test`` running the step."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True and "tests" in config["files"]
    assert "exclude" not in config and (ROOT / "tests" / "api_example.py").is_file()
    for override in config.get("overrides", []):
        modules = (
            override["module"] if isinstance(override["module"], list) else [override["module"]]
        )
        assert not any(fnmatch.fnmatchcase("tests.api_example", m) for m in modules), override
    makefile = (ROOT / "Makefile").read_text()
    assert "typecheck: $(STAMP)\n\t$(BIN)/mypy\n" in makefile
    assert re.search(r"^checks: .*\btypecheck\b", makefile, re.M)
    assert re.search(r"^test: .*\n\t\$\(MAKE\) .*\bchecks\b", makefile, re.M)


def test_example_program_gates_a_kit(golden: GoldenKit, kit: Path) -> None:
    ok = subprocess.run(
        [sys.executable, ROOT / "tests" / "api_example.py", golden.kit, golden.key.public],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0 and ok.stdout.startswith("verified "), ok.stderr
    (kit / "README.md").write_text("changed\n")
    bad = subprocess.run(
        [sys.executable, ROOT / "tests" / "api_example.py", kit, golden.key.public],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1 and "refused: KIT_FILE_CHANGED (kit_files)" in bad.stderr


def test_every_public_name_is_documented_and_names_real_codes() -> None:
    sources = "\n".join(
        p.read_text() for p in (ROOT / "src" / "k3kit").rglob("*.py") if p.name != "api.py"
    )
    for name in k3kit.__all__:
        if name == "__version__":
            continue
        obj = getattr(k3kit, name)
        doc = inspect.getdoc(obj) or ""
        assert len(doc) > 20, f"k3kit.{name} has no docstring"
        for code in CODE_IN_DOC.findall(doc):
            pattern = code.replace("*", r"[A-Z_]*")
            assert re.search(rf'"{pattern}"', sources), f"k3kit.{name} names unknown {code}"
    for name, func in inspect.getmembers(api, inspect.isfunction):
        if func.__module__ == "k3kit.api" and not name.startswith("_"):
            doc = inspect.getdoc(func) or ""
            assert "Raises" in doc or "raising" in doc, f"{name}: no Raises"
            assert name in k3kit.__all__, f"{name} is not exported"


def test_import_stays_lazy() -> None:
    probe = (
        "import sys, k3kit, k3kit.node.verify\n"
        "print(sorted(m for m in ('k3kit.api', 'huggingface_hub', 'jinja2') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr
    with pytest.raises(AttributeError):
        _ = k3kit.verify_kti  # type: ignore[attr-defined]


def test_the_verify_facts_types_import_at_run_time() -> None:
    """docs/api.md names ``k3kit.node.verify.VerifyFacts``; verify's start-up no longer builds it
    (k3kit.node._facts), but importing it from there still works."""
    import typing

    from k3kit.node.verify import ReceiptFacts, RollbackFacts, VerifyFacts, WeightsFacts

    for kind in (ReceiptFacts, RollbackFacts, VerifyFacts, WeightsFacts):
        assert typing.is_typeddict(kind)
    assert "weights" in VerifyFacts.__annotations__
    with pytest.raises(ImportError):
        from k3kit.node.verify import NoSuchFacts  # noqa: F401


def test_weights_options_are_typed_and_checked() -> None:
    options = k3kit.WeightsOptions(workers=2)
    with pytest.raises(AttributeError):  # immutable (k3kit._immutable.Immutable)
        options.workers = 3  # type: ignore[misc]
    for bad in ({"workers": 0}, {"algorithm": "md5"}):
        with pytest.raises(k3kit.InputError) as info:
            k3kit.WeightsOptions(**bad)
        assert info.value.code == "WEIGHTS_OPTION_INVALID"
    with pytest.raises(TypeError):
        k3kit.WeightsOptions(worker=2)  # type: ignore[call-arg]


def test_verify_weights_raises_with_the_report(golden: GoldenKit, tmp_path: Path) -> None:
    weights = tmp_path / "w"
    shutil.copytree(golden.snapshot, weights, symlinks=False)
    assert k3kit.verify_weights(weights, golden.lock).ok
    victim = next(p for p in sorted(weights.iterdir()) if p.suffix == ".safetensors")
    data = bytearray(victim.read_bytes())
    data[0] ^= 1
    victim.write_bytes(bytes(data))
    with pytest.raises(k3kit.WeightsNotVerified) as info:
        k3kit.verify_weights(weights, golden.lock, k3kit.WeightsOptions(all_errors=True))
    assert info.value.code == "WEIGHTS_DIGEST_MISMATCH" and info.value.exit_code == 1
    assert [p.path for p in info.value.report.problems] == [victim.name]


def test_one_classifier(golden: GoldenKit, tmp_path: Path) -> None:
    assert k3kit.classify(golden.kit) == "directory"
    assert k3kit.classify(golden.lock) == "lock"
    assert k3kit.classify(golden.kit / "receipt.dsse.json") == "receipt"
    assert k3kit.classify(golden.kit / "README.md") == "archive"  # its bytes decide, later
    fifo = tmp_path / "kit.fifo"
    os.mkfifo(fifo)
    for target, code in ((fifo, "KIT_NOT_RECOGNISED"), (tmp_path / "nope", "KIT_NOT_FOUND")):
        with pytest.raises(k3kit.InputError) as info:
            k3kit.classify(target)
        assert info.value.code == code


def test_open_kit_removes_the_staging_copy(golden: GoldenKit, tmp_path: Path) -> None:
    packed = k3kit.pack_kit(golden.kit, tmp_path / "k.kit.tar.gz")
    with k3kit.open_kit(packed.path) as opened:
        staging = opened.path
        assert (staging / "MANIFEST.json").is_file() and opened.archive_sha256 == packed.sha256
    assert not staging.exists()
    with k3kit.open_kit(golden.kit) as same:
        assert same.path == golden.kit and same.archive_sha256 is None
    with pytest.raises(k3kit.InputError) as info, k3kit.open_kit(golden.lock):
        pass
    assert info.value.code == "KIT_NOT_RECOGNISED"


def test_verbs_refuse_the_wrong_kind_of_target(golden: GoldenKit) -> None:
    verify = run_k3kit(
        "verify", golden.kit / "receipt.dsse.json", "--trust", golden.key.public, "--json"
    )
    assert verify.returncode == 3 and "KIT_NOT_RECOGNISED" in verify.stdout, verify.stderr
    audit = run_k3kit("audit", golden.lock, "--trust", golden.key.public, "--json")
    assert audit.returncode == 3 and "KIT_NOT_RECOGNISED" in audit.stdout, audit.stderr
    pull = run_k3kit("pull", golden.kit / "receipt.dsse.json", "--dir", golden.kit / "x", "--json")
    assert pull.returncode == 3 and "KIT_NOT_RECOGNISED" in pull.stdout, pull.stderr
    assert not (golden.kit / "x").exists()


INSTALL_OFFLINE = ("--no-deps", "--no-index", "-q")


def test_wheel_installs_into_a_fresh_venv(tmp_path: Path) -> None:
    """The wheel alone provides k3kit: built here, installed --no-deps into a new venv. The
    third-party dependencies come from this environment's site-packages through a path entry
    (nothing is downloaded); the editable k3kit of this checkout is not on that path."""
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(dist)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0:
        pytest.skip(f"cannot build the wheel here (no build backend?): {built.stderr[-300:]}")
    wheel = next(dist.glob("k3kit-*.whl"))
    venv = tmp_path / "venv"
    # No pip inside the new venv (ensurepip's copy had been most of this test's time): this
    # environment's pip installs into it through --python, as into any interpreter.
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300
    )
    py = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", py, "install", *INSTALL_OFFLINE, str(wheel)],
        check=True,
        timeout=300,
    )
    where_site = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    fresh_site = subprocess.run(
        [py, "-c", where_site], capture_output=True, text=True, check=True
    ).stdout.strip()
    (Path(fresh_site) / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = (
        "from k3kit import verify_kit, check_kit; import k3kit, pathlib; "
        "print(pathlib.Path(k3kit.__file__).parent.joinpath('py.typed').is_file(), "
        "k3kit.__file__)"
    )
    # -I: a PYTHONPATH of the caller's (a worktree's src/) must not provide k3kit instead.
    proc = subprocess.run(
        [py, "-I", "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    typed, where = proc.stdout.split()
    assert typed == "True" and where.startswith(fresh_site), proc.stdout
