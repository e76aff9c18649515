"""The publisher's two inputs to a buyer receipt, one row per accepted form and per refusal.

The serve command is stored as argv (never a shell string), so every shape it arrives in is
either turned into exactly that argv or refused; the build record is a JSON object without floats.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from k3kit.commerce.buyer_receipt import read_build_record, read_serve_command
from k3kit.errors import InputError

SERVE = ["vllm", "serve", "/models/k3", "--config", "serve.yaml"]

SERVE_ACCEPTED = [
    ("JSON argv", b'["vllm", "serve", "/models/k3", "--config", "serve.yaml"]\n', SERVE),
    ("one shell line", b"vllm serve /models/k3 --config serve.yaml\n", SERVE),
    (
        "continued lines and a comment",
        b"# measured 2026-11-01\nvllm serve \\\n  /models/k3 \\\n  --config serve.yaml\n",
        SERVE,
    ),
    ("quoted argument kept whole", b"vllm serve '/models/k 3'\n", ["vllm", "serve", "/models/k 3"]),
]


@pytest.mark.parametrize(
    ("data", "argv"), [c[1:] for c in SERVE_ACCEPTED], ids=[c[0] for c in SERVE_ACCEPTED]
)
def test_serve_command_becomes_argv(tmp_path: Path, data: bytes, argv: list[str]) -> None:
    path = tmp_path / "serve.cmd"
    path.write_bytes(data)
    assert read_serve_command(path) == argv


SERVE_REFUSED = [
    ("not ASCII", "vllm serve /modèles\n".encode(), "must be ASCII"),
    ("an unclosed quote", b"vllm serve '/models\n", "No closing quotation"),
    ("only comments", b"# nothing here\n\n", "no command"),
    ("an empty JSON array", b"[]", "no command"),
    ("JSON with a number", b'["vllm", 8]', "no command"),
    ("JSON that is not an array", b'["vllm"', "serve.cmd"),
    ("a float in JSON", b'["vllm", 0.5]', "serve.cmd"),
]


@pytest.mark.parametrize(
    ("data", "reason"), [c[1:] for c in SERVE_REFUSED], ids=[c[0] for c in SERVE_REFUSED]
)
def test_serve_command_refused(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "serve.cmd"
    path.write_bytes(data)
    with pytest.raises(InputError, match=re.escape(reason)) as info:
        read_serve_command(path)
    assert info.value.code == "BAD_INPUT"


BUILD_REFUSED = [
    ("a JSON array", b'["vllm"]', "must be a JSON object"),
    ("an empty object", b"{}", "must be a JSON object"),
    ("a float", b'{"vllm": "0.33.0", "speedup": 1.5}', "build.json"),
    ("a duplicate key", b'{"image": "a", "image": "b"}', "build.json"),
    ("not JSON", b"vllm==0.33.0", "build.json"),
]


@pytest.mark.parametrize(
    ("data", "reason"), [c[1:] for c in BUILD_REFUSED], ids=[c[0] for c in BUILD_REFUSED]
)
def test_build_record_refused(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "build.json"
    path.write_bytes(data)
    with pytest.raises(InputError, match=re.escape(reason)) as info:
        read_build_record(path)
    assert info.value.code == "BAD_INPUT"


def test_build_record_is_read(tmp_path: Path) -> None:
    path = tmp_path / "build.json"
    path.write_bytes(b'{"engine": "vllm", "version": "0.33.0", "patches": []}')
    assert read_build_record(path) == {"engine": "vllm", "version": "0.33.0", "patches": []}
