"""One way to extend k3kit: every extension point is a :class:`k3kit._registry.Registry`, and each
registry is tied here to the schemas and docs that list its members, so a new member that is not
written down everywhere a user reads fails a test instead of drifting.

Also the deploy targets a package selects (``[deploy] targets``), driven through the real CLI.
"""

from __future__ import annotations

import json
import pkgutil
import re
import subprocess
from pathlib import Path
from typing import ClassVar, get_args

import pytest

import k3kit.engines as engines_package
from k3kit._registry import Registry, _folder_modules
from k3kit.audit import RULES
from k3kit.engines import ADAPTERS, EngineAdapter, adapter, engine, shipped_versions
from k3kit.errors import InputError
from k3kit.evidence import ADAPTERS as EVIDENCE
from k3kit.models.evidence import EvidenceTool
from k3kit.models.package import EngineName
from k3kit.publish.deploy import TARGETS, default_names
from tests.conftest import EXAMPLE, ROOT, GoldenKit, run_k3kit

DOCS = ROOT / "docs"
SCHEMAS = DOCS / "schemas"


def _table_column(doc: Path, header: str) -> set[str]:
    """The backticked first cell of each row of the table whose header row starts ``header``."""
    lines = doc.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    names = set()
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        match = re.match(r"\| `([^`]+)`", line)
        assert match, f"{doc.name}: a row of the {header!r} table names no member: {line}"
        names.add(match.group(1))
    return names


# -- each registry against the schemas and docs that list its members --------------------------


def test_engine_registry_is_the_package_schemas_engine_list() -> None:
    schema = json.loads((SCHEMAS / "package.schema.json").read_text())
    assert set(get_args(EngineName)) == set(ADAPTERS), "edit EngineName in models/package.py"
    assert set(schema["$defs"]["EnginePin"]["properties"]["name"]["enum"]) == set(ADAPTERS)
    assert set(shipped_versions()) == set(ADAPTERS), "an engine without snapshot data, or data "
    "without an engine adapter"


def test_every_engine_is_in_the_snapshot_table_of_the_deploy_docs() -> None:
    table = (DOCS / "deploy.md").read_text().split("| snapshot |", 1)[1].split("\n\n", 1)[0]
    for eng in ADAPTERS.values():
        assert f"| {eng.display} " in table, f"docs/deploy.md: no snapshot row for {eng.display}"


def test_evidence_registry_is_the_claims_schemas_tool_list() -> None:
    schema = json.loads((SCHEMAS / "claims.schema.json").read_text())
    field = schema["$defs"]["Run"]["properties"]["evidence_tool"]["anyOf"][0]
    assert set(get_args(EvidenceTool)) == set(EVIDENCE), "edit EvidenceTool in models/evidence.py"
    assert set(field["enum"]) == set(EVIDENCE)
    assert _table_column(DOCS / "audit.md", "| tool (`evidence_tool`)") == set(EVIDENCE)


def test_deploy_target_registry_is_the_deploy_docs_target_table() -> None:
    assert _table_column(DOCS / "deploy.md", "| target |") == set(TARGETS)


def test_every_deploy_target_names_templates_that_exist() -> None:
    templates = ROOT / "templates"
    for nodes in (1, 2):
        ctx = {"topo": _Shape(nodes), "unit_kit_file": "u.service"}
        for target in TARGETS.values():
            for rel, (template, mode) in target.files(ctx).items():
                assert (templates / template).is_file(), f"{target.name}: {template}"
                assert mode in (0o644, 0o755) and not rel.startswith("/") and ".." not in rel


def test_today_s_targets_are_the_default_and_slurm_is_opt_in() -> None:
    assert default_names() == ["compose", "k8s", "shell", "systemd"]
    assert not TARGETS["slurm"].default


def test_the_how_to_names_every_registry_s_decorator() -> None:
    text = (DOCS / "extending.md").read_text()
    for decorator in ("@engine", "@deploy_target", "@adapter", "@rule"):
        assert decorator in text
    for registry in (ADAPTERS, EVIDENCE, TARGETS, RULES):
        assert isinstance(registry, Registry)


class _Shape:
    def __init__(self, nodes: int) -> None:
        self.nodes = nodes


# -- the registry refuses what would make the winner depend on import order ---------------------


def test_a_second_engine_under_a_taken_name_is_refused() -> None:
    before = dict(ADAPTERS)

    class Impostor(EngineAdapter):
        name: ClassVar[str] = "vllm"

    with pytest.raises(ValueError, match="engine adapter 'vllm' registered twice"):
        engine(Impostor)
    assert dict(ADAPTERS) == before and type(ADAPTERS["vllm"]).__name__ == "Vllm"


def test_the_members_listed_in_a_folder_are_the_ones_pkgutil_lists(tmp_path: Path) -> None:
    """import_members lists a package folder itself (importing pkgutil cost every launch ~1 ms);
    its names must be pkgutil's for every kind of entry, and pkgutil decides for anything else."""
    files = ("__init__.py", "a.py", "_private.py", "b.pyc", "c.cpython-313-x86_64-linux-gnu.so")
    for name in (*files, "not.a.module.py", "notes.txt", "a.pyi"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_bytes(b"")
    (tmp_path / "compiled_pkg").mkdir()
    (tmp_path / "compiled_pkg" / "__init__.pyc").write_bytes(b"")
    (tmp_path / "no_init").mkdir()
    (tmp_path / "dotted.dir").mkdir()
    (tmp_path / "dotted.dir" / "__init__.py").write_bytes(b"")
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.py").write_bytes(b"")  # a name seen twice is listed once, as pkgutil does
    (other / "z.py").write_bytes(b"")
    folders = [str(tmp_path), str(other)]
    assert _folder_modules(folders) == [m.name for m in pkgutil.iter_modules(folders)]
    assert _folder_modules([str(tmp_path / "a.py")]) is None  # not a folder: pkgutil decides
    assert {"vllm", "sglang"} <= set(_folder_modules(list(engines_package.__path__)) or ())


def test_an_unknown_engine_names_the_known_ones() -> None:
    with pytest.raises(InputError) as caught:
        adapter("tgi")
    assert caught.value.code == "ENGINE_UNKNOWN"
    assert caught.value.hint == f"known engine adapters: {', '.join(sorted(ADAPTERS))}"


# -- [deploy] targets through the real CLI ------------------------------------------------------


def _package(tmp_path: Path, deploy: str) -> Path:
    path = tmp_path / "package.toml"
    path.write_text((EXAMPLE / "package.toml").read_text() + "\n[deploy]\n" + deploy + "\n")
    return path


def _build(golden: GoldenKit, package: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return run_k3kit("build", package, "--lock", golden.lock, "-o", out, "--json")


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_listing_today_s_targets_builds_the_same_bytes_as_not_choosing(
    golden: GoldenKit, tmp_path: Path
) -> None:
    package = _package(tmp_path, 'targets = ["systemd", "shell", "k8s", "compose"]')
    assert _build(golden, package, tmp_path / "chosen").returncode == 0
    default = run_k3kit(
        "build", EXAMPLE / "package.toml", "--lock", golden.lock, "-o", tmp_path / "d"
    )
    assert default.returncode == 0, default.stderr
    assert _tree(tmp_path / "chosen") == _tree(tmp_path / "d")


def test_a_package_that_chooses_shell_gets_run_sh_and_nothing_else(
    golden: GoldenKit, tmp_path: Path
) -> None:
    proc = _build(golden, _package(tmp_path, 'targets = ["shell"]'), tmp_path / "kit")
    assert proc.returncode == 0, proc.stderr
    info = json.loads((tmp_path / "kit" / "kit.json").read_text())
    for prof in info["profiles"]:
        files = {f.split("/", 3)[3] for f in prof["files"]}
        assert files == {"serve.yaml", "engine.env", "run.sh"}
    on_disk = {p.name for p in (tmp_path / "kit" / "profiles").rglob("*") if p.is_file()}
    assert on_disk == {"serve.yaml", "engine.env", "run.sh"}
    readme = (tmp_path / "kit" / "README.md").read_text()
    assert "- `shell`: `run.sh`" in readme and "compose.yaml" not in readme


def test_an_unknown_target_is_refused_before_anything_is_written(
    golden: GoldenKit, tmp_path: Path
) -> None:
    out = tmp_path / "kit"
    proc = _build(golden, _package(tmp_path, 'targets = ["shell", "helm"]'), out)
    assert proc.returncode == 3, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["code"] == "DEPLOY_TARGET_UNKNOWN"
    assert "deploy.targets[1]: no deploy target 'helm'" in error["message"]
    assert error["hint"] == f"known deploy targets: {', '.join(sorted(TARGETS))}"
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["package.toml"]


@pytest.mark.parametrize(
    ("deploy", "expected"),
    [
        ('targets = ["shell", "shell"]', "targets repeat a name"),
        ('targets = ["../../etc/cron.d"]', "deploy.targets[0]: String should match pattern"),
        ("targets = []", "deploy.targets"),
        ('targets = "shell"', "deploy.targets"),
    ],
)
def test_a_malformed_target_list_is_exit_3_naming_the_field(
    golden: GoldenKit, tmp_path: Path, deploy: str, expected: str
) -> None:
    out = tmp_path / "kit"
    proc = _build(golden, _package(tmp_path, deploy), out)
    assert proc.returncode == 3, proc.stderr
    assert expected in json.loads(proc.stdout)["error"]["message"]
    assert not out.exists()
