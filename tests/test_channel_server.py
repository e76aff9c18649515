"""scripts/channel_server.py, the static server the distribution docs run, attacked by a real
second user (uid 65534) as the attacker would: a link planted where the port file goes, and a
link planted in a shared channel folder to a file of the operator's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.cotenant import cotenant_python, needs_root, shared_folder

SERVER = ROOT / "scripts" / "channel_server.py"
SECRET = b"the operator's private key, which no local user may fetch\n"
PLANT_LINK = "import os, sys; os.symlink(sys.argv[1], sys.argv[2])"
GIVE_UP_S = 120  # only so a broken script cannot hang the suite; never part of a verdict


@contextmanager
def _server(folder: Path, port: Path) -> Iterator[subprocess.Popen[str]]:
    """The real script, until its port file appears (or it exits); stopped by SIGTERM after."""
    argv = [sys.executable, str(SERVER), "--dir", str(folder), "--port-file", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    give_up = time.monotonic() + GIVE_UP_S
    try:
        while proc.poll() is None and not os.path.lexists(port) and time.monotonic() < give_up:
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def _refused(folder: Path, port: Path) -> subprocess.CompletedProcess[str]:
    """The real script where it must refuse to start: it exits on its own (a server that started
    anyway would run until GIVE_UP_S and fail the test with TimeoutExpired)."""
    argv = [sys.executable, str(SERVER), "--dir", str(folder), "--port-file", str(port)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=GIVE_UP_S, check=False)


def _get(port: Path, name: str) -> tuple[int, bytes]:
    url = f"http://127.0.0.1:{int(port.read_text())}/{name}"
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def _channel(folder: Path) -> bytes:
    root = b'{"signed": {"_type": "root"}}\n'
    (folder / "metadata").mkdir()
    (folder / "metadata" / "1.root.json").write_bytes(root)
    return root


@needs_root
def test_the_channel_server_never_serves_a_file_linked_out_of_a_shared_channel_folder(
    tmp_path: Path,
) -> None:
    """The channel folder is shared (0777); the co-tenant plants ``metadata/2.root.json`` as a
    link to the operator's private key, then asks the server on 127.0.0.1 for it: 404. The
    genuine file beside it is served, so the server itself works."""
    secret = tmp_path / "id_ed25519"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    port = tmp_path / "channel.port"
    with shared_folder(0o777) as shared:
        genuine = _channel(shared)
        (shared / "metadata").chmod(0o777)
        cotenant_python(PLANT_LINK, str(secret), str(shared / "metadata" / "2.root.json"))
        with _server(shared, port) as proc:
            assert port.exists(), proc.stderr
            assert _get(port, "metadata/1.root.json") == (200, genuine)
            assert _get(port, "metadata/2.root.json") == (404, b"")


@needs_root
def test_the_channel_server_refuses_a_port_file_a_cotenant_can_replace(tmp_path: Path) -> None:
    """The co-tenant links ``channel.port``'s neighbourhood in a shared 0777 folder: the server
    refuses the folder before it listens, and the operator's file is untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(SECRET)
    channel = tmp_path / "channel"
    channel.mkdir()
    _channel(channel)
    with shared_folder(0o777) as shared:
        port = shared / "channel.port"
        cotenant_python(PLANT_LINK, str(victim), str(port))
        done = _refused(channel, port)
        assert os.path.islink(port) and victim.read_bytes() == SECRET
    assert done.returncode == 1, done.stderr
    assert "refusing --port-file" in done.stderr and "mode 0777" in done.stderr


def test_the_channel_server_refuses_a_folder_that_is_no_channel(tmp_path: Path) -> None:
    port = tmp_path / "channel.port"
    done = _refused(tmp_path, port)
    assert done.returncode == 1 and not port.exists()
    assert "is not a channel (no metadata/1.root.json)" in done.stderr


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """urllib honours http_proxy: a proxy would answer instead of the server under test."""
    for name in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
