"""The operator's site file (``KEY=value`` lines) as ``launch`` reads it, one row per refusal
reason and per accepted form.

It is the one launch input that is not signed, so it is parsed as data, against the same schema
``render-site`` uses (``k3kit.node.site``): launch takes four keys, no value can pass for an option,
a port is a port and a host a host; anything else is exit 3 naming the line, never a silent default.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from k3kit.errors import InputError
from k3kit.node.launch import read_site

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
        b"KIT_DIR=/opt/kit\nIMAGE=vllm/vllm-openai@sha256:" + b"a" * 64 + b"\nHOST=[::1]\n",
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
    ("not UTF-8", b"HOST=caf\xe9\n", "not UTF-8", "SITE_INVALID"),
    ("an unknown key", b"LD_PRELOAD=/x.so\n", ":1: 'LD_PRELOAD' is not a site key", "SITE_INVALID"),
    ("a line without =", b"PORT 8000\n", ":1: not a KEY=value line", "SITE_INVALID"),
    ("a key set twice", b"PORT=1\nPORT=2\n", ":2: PORT is set twice", "SITE_INVALID"),
    (
        "a value that is an option",
        b"MODEL_DIR=--trust-remote-code\n",
        ":1: MODEL_DIR='--trust-remote-code' is not valid",
        "SITE_INVALID",
    ),
    (
        "a host that is an option",
        b"HOST=--enable-auto-tool-choice\n",
        ":1: HOST='--enable-auto-tool-choice' is not valid",
        "SITE_INVALID",
    ),
    (
        "a relative weights folder",
        b"MODEL_DIR=weights\n",
        ":1: MODEL_DIR='weights' is not valid",
        "SITE_INVALID",
    ),
    ("an empty value", b"HOST=\n", ":1: HOST='' is not valid", "SITE_INVALID"),
    ("a control character", b"HOST=a\x1bb\n", ":1: HOST='a\\x1bb' is not valid", "SITE_INVALID"),
    ("port zero", b"PORT=0\n", ":1: PORT='0' is not valid", "SITE_INVALID"),
    ("port too big", b"PORT=65536\n", "PORT must be 1-65535", "SITE_INVALID"),
    ("rendezvous port too big", b"RDZV_PORT=70000\n", "RDZV_PORT must be 1-65535", "SITE_INVALID"),
    ("superscript digit", "PORT=8²\n".encode(), ":1: PORT='8²' is not valid", "SITE_INVALID"),
    ("host with a slash", b"HOST=evil/path\n", ":1: HOST='evil/path' is not valid", "SITE_INVALID"),
    ("host with a space", b"HOST=a b\n", ":1: HOST='a b' is not valid", "SITE_INVALID"),
    (
        "an image not pinned by digest",
        b"IMAGE=vllm:0.33\n",
        ":1: IMAGE='vllm:0.33' is not valid",
        "SITE_INVALID",
    ),
    ("a runtime value", b"NODE_RANK=0\n", ":1: NODE_RANK is a runtime value", "SITE_LOCKED_VALUE"),
]


@pytest.mark.parametrize(
    ("data", "reason", "code"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_site_file_refused(tmp_path: Path, data: bytes, reason: str, code: str) -> None:
    path = tmp_path / "site.env"
    path.write_bytes(data)
    with pytest.raises(InputError, match=re.escape(reason)) as info:
        read_site(path)
    assert info.value.code == code and int(info.value.exit_code) == 3


def test_a_site_file_that_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="site file") as info:
        read_site(tmp_path)
    assert info.value.code == "SITE_INVALID"
