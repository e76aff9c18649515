"""A real OCI registry for the tests: Debian's ``docker-registry`` (the reference `distribution`
registry, 2.8: no referrers API) on 127.0.0.1, with its own storage folder.

The port is found by binding port 0 and then handed to the registry; another process could take
it in between, so the registry's own log must say it listens before the fixture returns, and a
registry that exits at start (address in use) is started again on a fresh port.
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

REGISTRY_BIN = shutil.which("docker-registry")
SKOPEO_BIN = shutil.which("skopeo")
needs_registry = pytest.mark.skipif(
    REGISTRY_BIN is None,
    reason="docker-registry (Debian package docker-registry) is not installed; "
    "scripts/ensure-tools.sh installs it",
)
needs_skopeo = pytest.mark.skipif(
    SKOPEO_BIN is None,
    reason="skopeo (Debian package skopeo) is not installed; scripts/ensure-tools.sh installs it",
)
_CONFIG = """version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""
_HTPASSWD_AUTH = """auth:
  htpasswd:
    realm: k3kit-test
    path: {htpasswd}
"""
_SYSTEM_PYTHON = "/usr/bin/python3"


def bcrypt_line(user: str, password: str) -> str | None:
    """An htpasswd line ``user:$2b$...`` (the only hash docker-registry reads), made by the
    system's crypt(3) through Debian's python3 (its ``crypt`` module), or None where that is
    not available."""
    code = (
        "import crypt, sys; "
        "print(sys.argv[1] + ':' + crypt.crypt(sys.argv[2], crypt.mksalt(crypt.METHOD_BLOWFISH)))"
    )
    try:
        done = subprocess.run(
            [_SYSTEM_PYTHON, "-W", "ignore", "-c", code, user, password],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
    except OSError:
        return None
    line = done.stdout.strip()
    return line if done.returncode == 0 and ":$2" in line else None


needs_bcrypt = pytest.mark.skipif(
    REGISTRY_BIN is None or bcrypt_line("probe", "probe") is None,
    reason="docker-registry's htpasswd auth needs bcrypt lines: Debian's python3 with crypt(3)",
)


@dataclass(frozen=True)
class LiveRegistry:
    host: str  # 127.0.0.1:PORT
    storage: Path

    def ref(self, repo: str, tail: str) -> str:
        """``oci://HOST/REPO`` + ``tail`` (``:TAG`` or ``@sha256:…``)."""
        return f"oci://{self.host}/{repo}{tail}"

    def blob_file(self, digest: str) -> Path:
        """Where the registry keeps the bytes of ``digest`` (manifests are blobs too)."""
        hexa = digest.split(":", 1)[1]
        return self.storage / "docker/registry/v2/blobs/sha256" / hexa[:2] / hexa / "data"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(proc: subprocess.Popen[bytes], log: Path, port: int) -> bool:
    """Wait for the registry's "listening on" line, or for it to exit (False). Bounded by a
    generous number of polls, never by a time asserted in a test."""
    for _ in range(600):
        if f"listening on 127.0.0.1:{port}" in log.read_text(errors="replace"):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


@contextmanager
def live_registry(root: Path, htpasswd: Path | None = None) -> Iterator[LiveRegistry]:
    """Start a registry storing under ``root/storage``; stopped (and waited for) at exit. With
    ``htpasswd``, it asks for Basic credentials (its own ``auth: htpasswd`` module)."""
    assert REGISTRY_BIN is not None
    storage = root / "storage"
    storage.mkdir(parents=True, exist_ok=True)
    for attempt in range(5):
        port = _free_port()
        config = root / f"config-{attempt}.yml"
        auth = _HTPASSWD_AUTH.format(htpasswd=htpasswd) if htpasswd is not None else ""
        config.write_text(_CONFIG.format(storage=storage, port=port) + auth)
        log = root / f"registry-{attempt}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([REGISTRY_BIN, "serve", str(config)], stdout=out, stderr=out)
        if _listening(proc, log, port):
            break
        proc.kill()
        proc.wait()
    else:
        raise RuntimeError(f"docker-registry did not start; see {root}")
    try:
        yield LiveRegistry(f"127.0.0.1:{port}", storage)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
