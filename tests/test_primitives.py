"""The primitives every reader stands on, as tables: one row per refusal reason, exact outcome.

Why tables: the end-to-end tests reach these functions through whole kits, so a branch that only
an attacker would take (a NUL in a path, a lone surrogate, a ``-0``) was never run at all. Each row
here names one reason and asserts the exact code or problem text it produces; the rows that pass
are there so a refusal cannot be "fixed" by refusing everything. Layouts are built as real folders.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from k3kit import _canonical
from k3kit._canonical import (
    MAX_CONTAINER_ITEMS,
    MAX_STRING_CHARS,
    measurement_loads,
    require_canonical,
    strict_loads,
)
from k3kit._policy import MAX_DEPTH, MAX_PATH_BYTES, MAX_SEGMENT_BYTES, path_problem
from k3kit.errors import InputError, VerificationError
from k3kit.render import env_value, make_environment, render, yaml_scalar

# -- path policy ---------------------------------------------------------------------------------

BAD = "absolute, empty or contains a backslash or NUL"
DOTS = "empty, '.' or '..' segment"


@pytest.mark.parametrize(
    ("rel", "problem"),
    [
        pytest.param("/etc/passwd", BAD, id="absolute"),
        pytest.param("", BAD, id="empty"),
        pytest.param("a\\b", BAD, id="backslash"),
        pytest.param("a\x00b", BAD, id="nul"),
        pytest.param("a/\udcff", "not valid UTF-8", id="non-utf8-surrogateescape"),
        pytest.param("cafe\u0301.bin", "not NFC-normalised", id="nfd"),
        pytest.param("/".join(["a" * 250] * 17), "path too long", id="too-long"),
        pytest.param("/".join(["a"] * (MAX_DEPTH + 1)), "path too deep", id="too-deep"),
        pytest.param("a/./b", DOTS, id="dot"),
        pytest.param("../victim", DOTS, id="dotdot"),
        pytest.param("a//b", DOTS, id="empty-segment"),
        pytest.param("a/", DOTS, id="trailing-slash"),
        pytest.param("a b", "segment 'a b' has characters outside [A-Za-z0-9._-]", id="space"),
        pytest.param("caf\u00e9", "segment 'café' has characters outside [A-Za-z0-9._-]", id="nfc"),
        pytest.param("a:b", "segment 'a:b' has characters outside [A-Za-z0-9._-]", id="colon"),
        pytest.param("dir/model.", "segment 'model.' ends with a dot", id="trailing-dot"),
        pytest.param("...", "segment '...' ends with a dot", id="three-dots"),
        pytest.param("a" * (MAX_SEGMENT_BYTES + 1), "segment too long", id="segment-too-long"),
    ],
)
def test_path_policy_refuses(rel: str, problem: str) -> None:
    assert path_problem(rel) == problem


@pytest.mark.parametrize(
    "rel",
    [
        "model.safetensors",
        ".gitattributes",
        "a/b-c_d.e/f",
        "/".join(["a"] * MAX_DEPTH),
        "a" * MAX_SEGMENT_BYTES,
        "/".join(["a" * 255] * 16),  # 4,095 bytes
    ],
)
def test_path_policy_accepts(rel: str) -> None:
    assert len(rel.encode()) <= MAX_PATH_BYTES
    assert path_problem(rel) is None


# -- canonical bytes -----------------------------------------------------------------------------


def _read(data: bytes, max_bytes: int = 1 << 24) -> Any:
    """How a kit document is read: strict parse, then the bytes must be the JCS form."""
    obj = strict_loads(data, source="doc.json", max_bytes=max_bytes)
    require_canonical(data, obj, source="doc.json")
    return obj


NOT_CANON = ("JSON_NOT_CANONICAL", "bytes are not RFC 8785 canonical JSON")


@pytest.mark.parametrize(
    ("data", "code", "detail"),
    [
        pytest.param(b'{"a": 1}', *NOT_CANON, id="whitespace"),
        pytest.param(b'{"a":1}\n', *NOT_CANON, id="trailing-newline"),
        pytest.param(b'{"b":1,"a":2}', *NOT_CANON, id="key-order"),
        pytest.param(b'{"a":"\\u0041"}', *NOT_CANON, id="needless-escape"),
        pytest.param(b'{"a":"\\/"}', *NOT_CANON, id="escaped-solidus"),
        pytest.param(b'{"a":"\\u00e9"}', *NOT_CANON, id="escaped-non-ascii"),
        pytest.param(b'{"a":-0}', *NOT_CANON, id="negative-zero"),
        pytest.param(b'{"a":1,"a":2}', "JSON_MALFORMED", "duplicate key 'a'", id="duplicate"),
        pytest.param(b'{"a":NaN}', "JSON_MALFORMED", "NaN is not allowed", id="nan"),
        pytest.param(b'{"a":-Infinity}', "JSON_MALFORMED", "-Infinity is not allowed", id="inf"),
        pytest.param(b'{"a":1.0}', "JSON_MALFORMED", "non-integer number 1.0", id="float"),
        pytest.param(b'{"a":1e2}', "JSON_MALFORMED", "non-integer number 1e2", id="exponent"),
        pytest.param(b'{"a":01}', "JSON_MALFORMED", "not strict JSON", id="leading-zero"),
        pytest.param(
            b'{"a":9007199254740992}', "JSON_MALFORMED", "outside the interop", id="2**53"
        ),
        pytest.param(b'{"a":' + b"9" * 41 + b"}", "JSON_MALFORMED", "41 digits", id="huge-int"),
        pytest.param(b"[" * 33 + b"]" * 33, "JSON_MALFORMED", "nesting deeper than 32", id="deep"),
        pytest.param(b'{"a":"\\ud800"}', "JSON_MALFORMED", "lone surrogate", id="surrogate"),
        pytest.param(b'{"\\udc00":1}', "JSON_MALFORMED", "lone surrogate", id="surrogate-key"),
        pytest.param(b'{"a":"\xff"}', "JSON_MALFORMED", "not strict JSON", id="not-utf8"),
        pytest.param(b'{"a":1}{"b":2}', "JSON_MALFORMED", "Extra data", id="two-documents"),
        pytest.param(
            b'"' + b"a" * (MAX_STRING_CHARS + 1) + b'"',
            "JSON_MALFORMED",
            f"exceeds {MAX_STRING_CHARS}",
            id="long-string",
        ),
    ],
)
def test_canonical_bytes_refuse(data: bytes, code: str, detail: str) -> None:
    with pytest.raises(VerificationError) as info:
        _read(data)
    assert info.value.code == code
    assert detail in info.value.message
    assert info.value.message.startswith("doc.json: ")


def _object_of(members: int) -> bytes:
    return b"{" + b",".join(b'"%07d":0' % i for i in range(members)) + b"}"


def _array_of(items: int) -> bytes:
    return b"[" + b",".join([b"0"] * items) + b"]"


@pytest.mark.parametrize(
    ("document", "refusal"),
    [
        (_object_of, "an object of more than 1000 members"),
        (_array_of, "an array of more than 1000 items"),
    ],
    ids=["object", "array"],
)
def test_a_container_over_the_bound_is_refused(
    monkeypatch: pytest.MonkeyPatch, document: Callable[[int], bytes], refusal: str
) -> None:
    """The container bound, at 1,000: the walk reads the bound when it runs, so this is the
    refusal a document of MAX_CONTAINER_ITEMS + 1 (a million and one) members or items meets.
    Parsing a million of them cost 1-9 s a row (the parser's hooks run once per value, under
    coverage in `make test`). One fewer passes, so the refusal is the bound's."""
    assert MAX_CONTAINER_ITEMS == 1_000_000  # the documented bound these rows stand for
    monkeypatch.setattr(_canonical, "MAX_CONTAINER_ITEMS", 1000)
    assert len(_read(document(1000))) == 1000
    with pytest.raises(VerificationError) as info:
        _read(document(1001))
    assert info.value.code == "JSON_MALFORMED"
    assert info.value.message.endswith(refusal)


def test_canonical_bytes_size_cap_comes_first() -> None:
    with pytest.raises(VerificationError) as info:
        _read(b'{"a":1}', max_bytes=6)
    assert (info.value.code, info.value.message) == (
        "JSON_MALFORMED",
        "doc.json: 7 bytes exceeds the 6-byte limit",
    )


def test_canonical_bytes_keep_the_callers_error_and_code() -> None:
    with pytest.raises(InputError) as info:
        strict_loads(b"[1,1.5]", source="x", max_bytes=99, error=InputError, code="LOCK_MALFORMED")
    assert info.value.code == "LOCK_MALFORMED" and info.value.exit_code == 3


@pytest.mark.parametrize(
    ("obj", "detail"),
    [
        pytest.param({"a": 2**60}, "cannot be canonicalised", id="int-out-of-range"),
        pytest.param({"a": float("nan")}, "cannot be canonicalised", id="nan-object"),
    ],
)
def test_an_object_without_a_canonical_form_is_refused(obj: Any, detail: str) -> None:
    with pytest.raises(VerificationError) as info:
        require_canonical(b"{}", obj, source="doc.json")
    assert info.value.code == "JSON_NOT_CANONICAL" and detail in info.value.message


def test_canonical_bytes_accept_the_jcs_form() -> None:
    data = '{"a":[1,-2,"é\\n\\u001f"],"b":{"c":null,"d":true},"é":9007199254740991}'.encode()
    assert _read(data)["a"] == [1, -2, "é\n\x1f"]


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        pytest.param(b'{"t":1e999}', "does not fit a 64-bit float", id="overflow"),
        pytest.param(b'{"t":0.' + b"1" * 40 + b"}", "not a 64-bit float", id="long-float"),
        pytest.param(b'{"t":Infinity}', "Infinity is not allowed", id="infinity"),
        pytest.param(b"[" * 9 + b"]" * 9, "nesting deeper than 8", id="deep"),
    ],
)
def test_measurement_json_refuses(data: bytes, detail: str) -> None:
    with pytest.raises(VerificationError) as info:
        measurement_loads(data, source="bench.json", max_bytes=1 << 20)
    assert info.value.code == "JSON_MALFORMED" and detail in info.value.message


def test_measurement_json_accepts_floats() -> None:
    assert measurement_loads(b'{"t":1.5e3}', source="b", max_bytes=99) == {"t": 1500.0}


# -- YAML and env-file rendering -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        (True, "true"),
        (False, "false"),
        (8192, "8192"),
        (Decimal("0.90"), "0.90"),
        ("no", '"no"'),  # YAML 1.1 would read a bare no as false
        ("8192", '"8192"'),
        ("a: b\n- c", '"a: b\\n- c"'),
        ("x\r\x00", '"x\\r\\u0000"'),
        ('it\'s "q"', '"it\'s \\"q\\""'),
        ([Decimal("1"), Decimal("0.5")], "[1, 0.5]"),
        ({"k": Decimal("2")}, '{"k": 2}'),
    ],
)
def test_yaml_scalar_leaves_nothing_implicit(value: Any, rendered: str) -> None:
    assert yaml_scalar(value) == rendered


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\x00b"], ids=["newline", "cr", "nul"])
def test_env_value_refuses_line_breaks_and_nul(value: str) -> None:
    with pytest.raises(InputError) as info:
        env_value(value)
    assert info.value.code == "ENV_VALUE" and "contains a newline or NUL" in info.value.message


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("plain", "plain"),
        ("", "''"),
        ("a b", "'a b'"),
        ("$HOME", "'$HOME'"),
        ("it's", "'it'\"'\"'s'"),
    ],
)
def test_env_value_quotes_for_the_shell(value: str, quoted: str) -> None:
    assert env_value(value) == quoted


@pytest.mark.parametrize(
    "value", [True, False, 0, 262144, "kimi_k3", {"method": "mtp", "num_speculative_tokens": 2}]
)
def test_serve_config_reads_back_what_render_writes(value: object) -> None:
    from k3kit.formats.documents import parse_serve_config
    from k3kit.render import yaml_scalar

    line = f"# comment\n\nmax-model-len: {yaml_scalar(value)}\n".encode()
    assert parse_serve_config(line, source="serve.yaml") == {"max-model-len": value}


@pytest.mark.parametrize(
    "line",
    [
        b"no colon at all",
        b"Max-Model-Len: 1",  # not a flag name as k3kit renders it
        b"a:1",  # no space: YAML would read a string key
        b"a: {",  # not JSON
        b"a: !!python/object 1",  # a YAML tag: refused, never interpreted
        b"\xff: 1",  # not UTF-8
    ],
)
def test_serve_config_refuses_what_render_never_writes(line: bytes) -> None:
    from k3kit.formats.documents import parse_serve_config

    with pytest.raises(VerificationError) as exc:
        parse_serve_config(line, source="serve.yaml")
    assert exc.value.code == "SERVE_CONFIG_MALFORMED"


def test_the_one_environment_per_templates_folder_renders_an_edited_template_anew(
    tmp_path: Path,
) -> None:
    """Builds share one jinja2 environment per folder (its compiled templates are most of a
    build's rendering); a template edited on disk is still read again, not served compiled."""
    template = tmp_path / "unit.txt.j2"
    template.write_text("port={{ port }}\n")
    assert make_environment(tmp_path) is make_environment(tmp_path)
    assert render(make_environment(tmp_path), "unit.txt.j2", {"port": 1}) == b"port=1\n"
    template.write_text("PORT={{ port | shquote }}\n")
    stat = template.stat()
    os.utime(template, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a later mtime, surely
    assert render(make_environment(tmp_path), "unit.txt.j2", {"port": "2"}) == b"PORT=2\n"
