"""Render a kit's deploy files from ``templates/`` with jinja2.

Rendering happens once, at build time; the output is hashed into the manifest and signed, and the
verifier never re-renders. The environment is sandboxed and strict (an undefined variable is an
error, never an empty string), and every value that reaches a shell or YAML file passes through an
explicit quoting filter, so a profile value cannot inject commands or structure.
"""

from __future__ import annotations

import functools
import json
import shlex
from decimal import Decimal
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from k3kit._resources import shipped_dir
from k3kit.errors import InputError


def yaml_scalar(value: Any) -> str:
    """A YAML 1.2 value for a flag: JSON is valid YAML, and JSON quoting leaves nothing implicit."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dict):
        return json.dumps({k: _plain(v) for k, v in value.items()}, separators=(", ", ": "))
    return json.dumps(_plain(value))


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def env_value(value: str) -> str:
    """A value for a ``KEY=value`` env file read by systemd, docker and ``set -a; . file``."""
    if any(c in value for c in "\n\r\x00"):
        raise InputError(f"environment value {value!r} contains a newline or NUL", code="ENV_VALUE")
    return shlex.quote(value)


@functools.cache
def make_environment(templates: Path | None = None) -> SandboxedEnvironment:
    """One environment per templates folder for the process: jinja2 compiles a template into
    Python the first time it is asked for (most of a build's rendering: ~80 ms of a ~200 ms
    build), and keeps the compiled one in its environment; a fresh environment per build threw
    that away. The loader still checks each template's file on use, so an edited one is compiled
    again. Nothing renders into the environment itself (filters are set here, once)."""
    env = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(templates or shipped_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["yaml"] = yaml_scalar
    env.filters["shquote"] = shlex.quote
    env.filters["envquote"] = env_value
    return env


@functools.cache
def make_html_environment(templates: Path | None = None) -> SandboxedEnvironment:
    """For HTML pages (the package card): autoescape on, so every string from a kit is escaped.
    One per templates folder, as :func:`make_environment`."""
    return SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(templates or shipped_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(env: SandboxedEnvironment, template: str, context: dict[str, Any]) -> bytes:
    """Render one template; template bugs become a clear exit-3 error naming the template."""
    try:
        text = env.get_template(template).render(**context)
    except jinja2.TemplateError as exc:
        where = (
            f"{template}:{exc.lineno}" if isinstance(exc, jinja2.TemplateSyntaxError) else template
        )
        raise InputError(f"template {where}: {exc}", code="TEMPLATE_ERROR") from exc
    return text.encode("utf-8")
