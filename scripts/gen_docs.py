"""Regenerate the generated parts of docs/: JSON Schemas from the models, the CLI reference, the
error-code list (from k3kit.codes), the audit rule index in docs/audit.md (from the rules the
audit package discovers) and the folder map in docs/design.md and docs/development.md (from the
import-linter contracts in pyproject.toml and each folder's docstring).

Run ``python scripts/gen_docs.py`` after changing a model or a command; ``--check`` exits 1 when
docs/ is stale (the test suite runs it), so the documentation cannot drift from the code.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
import tomllib
from pathlib import Path

import click

from k3kit.audit import ordered_rules
from k3kit.cli import cli
from k3kit.codes import AREAS
from k3kit.models import (
    Claims,
    DsseEnvelope,
    KitInfo,
    Manifest,
    PackageDef,
    ReceiptPredicate,
    WeightsLock,
)
from k3kit.models.commerce import BuyerReceiptBody, LedgerCheckpointBody, LicenceBody
from k3kit.signing.trust.model import RootRules

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SCHEMAS = {
    "package.schema.json": PackageDef,
    "claims.schema.json": Claims,
    "weights-lock.schema.json": WeightsLock,
    "kit.schema.json": KitInfo,
    "manifest.schema.json": Manifest,
    "receipt-predicate.schema.json": ReceiptPredicate,
    "dsse-envelope.schema.json": DsseEnvelope,
    # the root is TUF root metadata; what k3kit adds is its signed custom fields (x-k3kit-*)
    "root.schema.json": RootRules,
    "licence.schema.json": LicenceBody,
    "buyer-receipt.schema.json": BuyerReceiptBody,
    "ledger-checkpoint.schema.json": LedgerCheckpointBody,
}


def schema_files() -> dict[Path, str]:
    out = {}
    for name, model in SCHEMAS.items():
        schema = model.model_json_schema(by_alias=True, mode="validation")
        out[DOCS / "schemas" / name] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def cli_reference() -> str:
    lines = [
        "# CLI reference",
        "",
        "Generated from the click definitions by `scripts/gen_docs.py`; do not edit.",
        "",
    ]
    root_ctx = click.Context(cli, info_name="k3kit", max_content_width=100, terminal_width=100)
    lines += ["## k3kit", "", "```text", cli.get_help(root_ctx), "```", ""]
    for name in sorted(cli.list_commands(root_ctx)):
        cmd = cli.get_command(root_ctx, name)
        assert cmd is not None
        ctx = click.Context(
            cmd, info_name=name, parent=root_ctx, max_content_width=100, terminal_width=100
        )
        lines += [f"## k3kit {name}", "", "```text", cmd.get_help(ctx), "```", ""]
        if isinstance(cmd, click.Group):  # `k3kit root create`, ...: each subcommand's help too
            for sub_name in sorted(cmd.list_commands(ctx)):
                sub = cmd.get_command(ctx, sub_name)
                assert sub is not None
                sub_ctx = click.Context(
                    sub, info_name=sub_name, parent=ctx, max_content_width=100, terminal_width=100
                )
                lines += [
                    f"### k3kit {name} {sub_name}",
                    "",
                    "```text",
                    sub.get_help(sub_ctx),
                    "```",
                    "",
                ]
    return "\n".join(lines)


def error_codes() -> str:
    """docs/error-codes.md: every registered code with its one exit code, grouped by area."""
    lines = [
        "# Error codes",
        "",
        "Generated from `k3kit.codes` by `scripts/gen_docs.py`; do not edit. Each code has",
        "one exit code (`K3kitError` takes it from the registry); `--json` output carries",
        "the code as `error.code`, a failed check's `code` or a problem's `code`.",
        "",
    ]
    for area in AREAS:
        lines += [
            f"## {area.__name__}",
            "",
            (area.__doc__ or "").strip(),
            "",
            "| code | exit | meaning |",
            "|---|---|---|",
        ]
        lines += [
            f"| `{m.value}` | {m.exit} | {m.description} |"
            for m in sorted(area, key=lambda m: m.value)
        ]
        lines.append("")
    total = sum(len(a) for a in AREAS)
    lines += [f"{total} codes in {len(AREAS)} areas.", ""]
    return "\n".join(lines)


RULES_BEGIN = "<!-- BEGIN generated rule index (scripts/gen_docs.py) -->"
RULES_END = "<!-- END generated rule index -->"


def audit_doc() -> str:
    """docs/audit.md with its rule index regenerated from the discovered rules."""
    text = (DOCS / "audit.md").read_text()
    head, rest = text.split(RULES_BEGIN, 1)
    _, tail = rest.split(RULES_END, 1)
    rules = ordered_rules()
    table = [
        "",
        f"{len(rules)} rules are registered ({rules[0].id}-{rules[-1].id}):",
        "",
        "| id | title | module | source |",
        "|---|---|---|---|",
    ]
    table += [
        f"| {r.id} | {r.title} | `{r.check.__module__.rsplit('.', 1)[-1]}` | {r.source} |"
        for r in rules
    ]
    return head + RULES_BEGIN + "\n".join(table) + "\n\n" + RULES_END + tail


MAP_BEGIN = "<!-- BEGIN generated folder map (scripts/gen_docs.py) -->"
MAP_END = "<!-- END generated folder map -->"


def _summary(unit: str) -> str:
    """The first paragraph of a top-level module's or folder's docstring, on one line."""
    src = ROOT / "src" / "k3kit"
    path = src / unit / "__init__.py" if (src / unit).is_dir() else src / f"{unit}.py"
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    text = " ".join(doc.split("\n\n", 1)[0].split()).replace("|", "\\|")
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"``\1``", text)  # reST roles read as plain code
    return text.replace("``", "`")


def folder_map() -> str:
    """The folder map: the layers contract top to bottom, each unit with its docstring's first
    paragraph, then every other contract by name. The contracts are the source of truth, so the
    map cannot drift from what import-linter enforces."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    top = next(c for c in contracts if c["type"] == "layers" and c["containers"] == ["k3kit"])
    lines = [
        "",
        f"Top to bottom, as the contract *{top['name']}* in `pyproject.toml` states it: a",
        "folder or module imports only from rows below its own, and names on one row never import",
        "each other. Each description is the first paragraph of that folder's `__init__.py` (or",
        "that module's) docstring.",
        "",
        "| row | folder or module | what lives there |",
        "|---|---|---|",
    ]
    for row, layer in enumerate(top["layers"], start=1):
        for name in (n.strip().strip("()") for n in layer.split("|")):
            shown = f"`{name}/`" if (ROOT / "src" / "k3kit" / name).is_dir() else f"`{name}`"
            lines.append(f"| {row} | {shown} | {_summary(name)} |")
    lines += ["", "The other contracts:", ""]
    lines += [f"- {c['name']}" for c in contracts if c is not top]
    return "\n".join(lines) + "\n\n"


def with_folder_map(name: str) -> str:
    """docs/NAME with its folder map regenerated between the markers."""
    text = (DOCS / name).read_text()
    head, rest = text.split(MAP_BEGIN, 1)
    _, tail = rest.split(MAP_END, 1)
    return head + MAP_BEGIN + "\n" + folder_map() + MAP_END + tail


PERF_BEGIN = "<!-- BEGIN generated perf-gate figures (scripts/gen_docs.py) -->"
PERF_END = "<!-- END generated perf-gate figures -->"


def with_perf_figures() -> str:
    """docs/performance.md with the performance gate's recorded figures between the markers:
    rendered from benchmarks/perf_figures.json (``perf_gate.py --record``), never hand-copied."""
    spec = importlib.util.spec_from_file_location("perf_gate", ROOT / "benchmarks" / "perf_gate.py")
    assert spec is not None and spec.loader is not None
    gate = importlib.util.module_from_spec(spec)
    sys.modules["perf_gate"] = gate  # its dataclasses look their module up while being built
    spec.loader.exec_module(gate)
    figures = gate.render(json.loads(gate.FIGURES.read_text()))
    text = (DOCS / "performance.md").read_text()
    head, rest = text.split(PERF_BEGIN, 1)
    _, tail = rest.split(PERF_END, 1)
    return head + PERF_BEGIN + "\n" + figures + PERF_END + tail


def generated() -> dict[Path, str]:
    return {
        **schema_files(),
        DOCS / "cli.md": cli_reference(),
        DOCS / "error-codes.md": error_codes(),
        DOCS / "audit.md": audit_doc(),
        DOCS / "design.md": with_folder_map("design.md"),
        DOCS / "development.md": with_folder_map("development.md"),
        DOCS / "performance.md": with_perf_figures(),
    }


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for path, text in generated().items():
        if path.exists() and path.read_text() == text:
            continue
        if check:
            stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(DOCS.parent)}")
    if stale:
        print(
            "stale generated docs (run python scripts/gen_docs.py):",
            *[str(p.relative_to(DOCS.parent)) for p in stale],
            sep="\n  ",
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
