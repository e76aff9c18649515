"""Regenerate the generated parts of docs/: JSON Schemas from the models, the CLI reference, the
error-code list (from k3kit.codes) and the audit rule index in docs/audit.md (from the rules the
audit package discovers).

Run ``python scripts/gen_docs.py`` after changing a model or a command; ``--check`` exits 1 when
docs/ is stale (the test suite runs it), so the documentation cannot drift from the code.
"""

from __future__ import annotations

import json
import sys
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
from k3kit.signing.trust.model import RootBody

DOCS = Path(__file__).resolve().parents[1] / "docs"
SCHEMAS = {
    "package.schema.json": PackageDef,
    "claims.schema.json": Claims,
    "weights-lock.schema.json": WeightsLock,
    "kit.schema.json": KitInfo,
    "manifest.schema.json": Manifest,
    "receipt-predicate.schema.json": ReceiptPredicate,
    "dsse-envelope.schema.json": DsseEnvelope,
    "root.schema.json": RootBody,
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


def generated() -> dict[Path, str]:
    return {
        **schema_files(),
        DOCS / "cli.md": cli_reference(),
        DOCS / "error-codes.md": error_codes(),
        DOCS / "audit.md": audit_doc(),
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
