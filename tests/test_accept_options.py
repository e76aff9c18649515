"""``k3kit accept``'s own inputs, refused before any kit is read: one row per refusal reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from k3kit.cli.accept import _URL, _points
from k3kit.errors import InputError
from tests.conftest import run_k3kit


@pytest.mark.parametrize(
    ("text", "expected"),
    [(None, None), ("", None), ("8,1,32", [1, 8, 32]), ("4, 4 ,", [4])],
    ids=["absent", "empty", "sorted", "duplicates and blanks"],
)
def test_points_are_read(text: str | None, expected: list[int] | None) -> None:
    assert _points(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1,x", "expected e.g. 1,8,32"),
        ("0,8", "concurrencies are >= 1"),
        ("-4", ">= 1"),
        (",", ">= 1"),
    ],
    ids=["not a number", "zero", "negative", "only commas"],
)
def test_points_refusals(text: str, reason: str) -> None:
    with pytest.raises(InputError, match=reason) as info:
        _points(text)
    assert info.value.code == "BAD_POINTS"


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://127.0.0.1:8000", True),
        ("https://node-7.example:443/serving", True),
        ("http://user:secret@127.0.0.1:8000", False),
        ("file:///etc/passwd", False),
        ("http://127.0.0.1:8000/?x=1", False),
        ("http://a b", False),
        ("127.0.0.1:8000", False),
    ],
    ids=["plain", "https with a path", "credentials", "file scheme", "query", "space", "no scheme"],
)
def test_url_policy(url: str, ok: bool) -> None:
    assert bool(_URL.match(url)) is ok


def test_a_url_with_credentials_is_refused_before_the_key_is_read(tmp_path: Path) -> None:
    proc = run_k3kit(
        "accept",
        tmp_path / "kit",
        "--trust",
        tmp_path / "none.pub",
        "--url",
        "http://user:pw@127.0.0.1:1",
        "--weights",
        tmp_path,
        "--key",
        tmp_path / "no-such.key",
        "--json",
    )
    assert proc.returncode == 3, proc.stderr
    assert json.loads(proc.stdout)["error"]["code"] == "BAD_URL"
    assert "Traceback" not in proc.stderr
