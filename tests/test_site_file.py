"""The operator's site file (``KEY=value`` lines), one row per refusal reason and per accepted form.

It is the one launch input that is not signed, so it is parsed as data: four keys, no value that
could pass for an option, a port that is a port and a host that is a host; anything else is exit
3 naming the line, never a silent default.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from k3kit.errors import InputError
from k3kit.launch import read_site

ACCEPTED = [
    ("defaults", b"", (None, None, "127.0.0.1", 8000)),
    (
        "all four keys, CRLF",
        b"MODEL_DIR=/w\r\nK3KIT_TRUST_KEY=/k.pub\r\nHOST=0.0.0.0\r\nPORT=9001\r\n",
        ("/w", "/k.pub", "0.0.0.0", 9001),
    ),
    (
        "comments and blank lines",
        b"# site\n\n  # indented comment\nPORT=65535\n",
        (None, None, "127.0.0.1", 65535),
    ),
    (
        "deploy-only keys are left to render-site",
        b"KIT_DIR=/opt/kit\nIMAGE=vllm:0.33\nHOST=[::1]\n",
        (None, None, "[::1]", 8000),
    ),
]


@pytest.mark.parametrize(
    ("data", "expected"), [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED]
)
def test_site_file_accepted(tmp_path: Path, data: bytes, expected: tuple[object, ...]) -> None:
    path = tmp_path / "site.env"
    path.write_bytes(data)
    site = read_site(path)
    model_dir = str(site.model_dir) if site.model_dir else None
    trust = str(site.trust_key) if site.trust_key else None
    assert (model_dir, trust, site.host, site.port) == expected


REFUSED = [
    ("not UTF-8", b"HOST=caf\xe9\n", "not UTF-8"),
    ("an unknown key", b"LD_PRELOAD=/x.so\n", "'LD_PRELOAD=/x.so' is not one of MODEL_DIR"),
    ("a line without =", b"PORT 8000\n", "is not one of"),
    ("a key set twice", b"PORT=1\nPORT=2\n", ":2: PORT is set twice"),
    (
        "a value that is an option",
        b"MODEL_DIR=--trust-remote-code\n",
        ":1: MODEL_DIR has an unusable value",
    ),
    ("an empty value", b"HOST=\n", "HOST has an unusable value"),
    ("a control character", b"HOST=a\x1bb\n", "HOST has an unusable value"),
    ("port zero", b"PORT=0\n", "PORT must be 1-65535"),
    ("port too big", b"PORT=65536\n", "PORT must be 1-65535"),
    ("superscript digit", "PORT=8²\n".encode(), "PORT must be 1-65535"),
    ("host with a slash", b"HOST=evil/path\n", "HOST 'evil/path' is not a host name"),
    ("host with a space", b"HOST=a b\n", "is not a host name"),
]


@pytest.mark.parametrize(("data", "reason"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_site_file_refused(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "site.env"
    path.write_bytes(data)
    with pytest.raises(InputError, match=re.escape(reason)) as info:
        read_site(path)
    assert info.value.code == "SITE_INVALID" and int(info.value.exit_code) == 3


def test_a_site_file_that_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="site file") as info:
        read_site(tmp_path)
    assert info.value.code == "SITE_INVALID"
