"""Which ``auths`` entry of a credentials file is the registry's (docs/oci.md, "Which entry").

podman and docker compare a key with the registry's name as a string; k3kit compares the server
a key names: its host in any case (DNS names are case-insensitive) and its port, the scheme's
default when none is written. So ``Registry.Example`` and ``registry.example:443`` are
``https://registry.example``; another port, a longer host (``registry.example.evil``) or a host
that merely ends the same (``evil-registry.example``) stay someone else's. Real files read
through ``REGISTRY_AUTH_FILE``, the one lookup every registry call makes.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from k3kit.oci.auth import credential_for

SECRET = "k3kit-keys-Pw-7Tq"


def auth_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """A podman-style auth.json holding one entry, ``key``, that REGISTRY_AUTH_FILE names."""
    path = tmp_path / "auth.json"
    auth = base64.b64encode(f"alice:{SECRET}".encode()).decode()
    path.write_text(json.dumps({"auths": {key: {"auth": auth}}}))
    path.chmod(0o600)
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(path))


@pytest.mark.parametrize(
    ("key", "origin"),
    [
        ("Registry.Example", "https://registry.example"),
        ("REGISTRY.EXAMPLE/kits", "https://registry.example"),
        ("registry.example:443", "https://registry.example"),
        ("https://Registry.Example:443/v1/", "https://registry.example"),
        ("registry.example", "https://registry.example:443"),
        ("LocalHost:5000", "http://localhost:5000"),
        ("[::1]:5000", "http://[::1]:5000"),
    ],
)
def test_a_key_naming_the_same_server_in_another_spelling_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, origin: str
) -> None:
    auth_file(tmp_path, monkeypatch, key)
    found = credential_for(origin, "kits/kimi-k3")
    assert found is not None and found.password == SECRET and found.origin == origin


@pytest.mark.parametrize(
    ("key", "origin"),
    [
        ("registry.example:5000", "https://registry.example"),
        ("registry.example", "https://registry.example:5000"),
        ("localhost:443", "http://localhost"),
        ("registry.example.evil", "https://registry.example"),
        ("registry.example", "https://registry.example.evil"),
        ("evil-registry.example", "https://registry.example"),
        ("registry.example/kitsune", "https://registry.example"),
        ("alice@registry.example", "https://registry.example"),
        ("registry.example:99999", "https://registry.example"),
        ("[registry.example", "https://registry.example"),
        ("localhost:80", "http://localhost:5000"),
    ],
)
def test_attack_a_key_for_another_server_never_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, origin: str
) -> None:
    """The attacker runs ``registry.example.evil`` (or the same host on another port): the
    buyer's password for ``registry.example`` must never be the one k3kit sends it, and the
    reverse."""
    auth_file(tmp_path, monkeypatch, key)
    assert credential_for(origin, "kits/kimi-k3") is None
