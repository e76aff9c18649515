"""A real OCI registry for the tests: Debian's ``docker-registry`` (the reference `distribution`
registry, 2.8: no referrers API) on 127.0.0.1, with its own storage folder.

The port is found by binding port 0 and then handed to the registry; another process could take
it in between, so the registry's own log must say it listens before the fixture returns, and a
registry that exits at start (address in use) is started again on a fresh port.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    """An htpasswd line ``user:$2b$04$...`` (the only hash docker-registry reads), made by the
    system's crypt(3) through Debian's python3 (its ``crypt`` module), or None where that is
    not available.

    At bcrypt's lowest cost (2^4 rounds): the registry checks the password on every request, and
    at the module's default cost (2^12) each check was about a quarter of a second of CPU, so a
    push and an install were several seconds of hashing that no test here is about."""
    code = (
        "import crypt, sys; print(sys.argv[1] + ':' + "
        "crypt.crypt(sys.argv[2], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))"
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
def live_registry(
    root: Path, htpasswd: Path | None = None, token: TokenIssuer | None = None
) -> Iterator[LiveRegistry]:
    """Start a registry storing under ``root/storage``; stopped (and waited for) at exit. With
    ``htpasswd``, it asks for Basic credentials (its own ``auth: htpasswd`` module); with
    ``token``, for bearer tokens of that issuer (its own ``auth: token`` module)."""
    assert REGISTRY_BIN is not None
    storage = root / "storage"
    storage.mkdir(parents=True, exist_ok=True)
    for attempt in range(5):
        port = _free_port()
        config = root / f"config-{attempt}.yml"
        auth = _HTPASSWD_AUTH.format(htpasswd=htpasswd) if htpasswd is not None else ""
        auth += token.config() if token is not None else ""
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


# -- a token issuer for the registry's own ``auth: token`` module --------------------------------

_TOKEN_AUTH = """auth:
  token:
    realm: {realm}
    service: {service}
    issuer: {issuer}
    rootcertbundle: {cert}
"""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenIssuer:
    """The distribution token spec's authorization service, as Harbor or a docker_auth runs it,
    reduced to one user: ``GET /token?service=…&scope=…`` with Basic ``user``/``password``
    answers a JWT (ES256, its certificate in ``x5c``) granting the scope asked for; anything
    else is 401. The registry verifies the token against ``cert`` (its ``rootcertbundle``).
    ``seen`` records the Authorization header of every token request."""

    realm: str
    cert: Path
    key: Any
    user: str
    password: str
    host: str  # HOST:PORT of the issuer (and of the registry, once upstream is set)
    upstream: str = ""
    service: str = "k3kit-test"
    issuer: str = "k3kit-test-issuer"
    seen: list[str | None] = field(default_factory=list)

    def config(self) -> str:
        return _TOKEN_AUTH.format(
            realm=self.realm, service=self.service, issuer=self.issuer, cert=self.cert
        )

    def answer(self, authorization: str | None, query: str) -> tuple[int, bytes]:
        self.seen.append(authorization)
        basic = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        if authorization != f"Basic {basic}":
            return 401, b'{"details":"bad credentials"}'
        asked = urllib.parse.parse_qs(query).get("scope", [])
        return 200, json.dumps({"token": self._jwt(asked)}).encode()

    def _jwt(self, scopes: list[str]) -> str:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        cert = x509.load_pem_x509_certificate(self.cert.read_bytes())
        der = cert.public_bytes(serialization.Encoding.DER)
        access = []
        for scope in scopes:
            kind, name, actions = scope.split(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        claims = {
            "iss": self.issuer, "sub": self.user, "aud": self.service, "exp": now + 3600,
            "nbf": now - 60, "iat": now, "jti": f"k3kit-{len(self.seen)}", "access": access,
        }  # fmt: skip
        header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(der).decode()]}
        signing = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self.key.sign(signing.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


@contextmanager
def token_issuer(folder: Path, user: str, password: str) -> Iterator[TokenIssuer]:
    """A :class:`TokenIssuer` on 127.0.0.1 (a port the kernel picks) for the block; the same
    server routes every other path to ``issuer.upstream`` (set it to the registry once that
    runs), unchanged, as Harbor's nginx puts its token service and registry on one origin."""
    from cryptography.hazmat.primitives import serialization

    from tests.netkit import self_signed, serving

    folder.mkdir(parents=True, exist_ok=True)
    cert, key_file = self_signed(folder, "127.0.0.1")
    key = serialization.load_pem_private_key(key_file.read_bytes(), None)
    holder: list[TokenIssuer] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _route(self) -> None:
            if self.path.startswith("/token"):
                query = self.path.partition("?")[2]
                status, body = holder[0].answer(self.headers.get("Authorization"), query)
                return self._answer(status, body, {"Content-Type": "application/json"})
            length = int(self.headers.get("Content-Length") or 0)
            request = urllib.request.Request(
                holder[0].upstream + self.path,
                data=self.rfile.read(length) if length else None,
                headers=dict(self.headers),
                method=self.command,
            )
            try:
                with urllib.request.urlopen(request) as resp:
                    self._answer(resp.status, resp.read(), dict(resp.headers))
            except urllib.error.HTTPError as exc:
                self._answer(exc.code, exc.read(), dict(exc.headers))

        do_GET = do_HEAD = do_POST = do_PUT = _route

        def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for name, value in headers.items():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", headers.get("Content-Length", str(len(body))))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    host = f"127.0.0.1:{server.server_address[1]}"
    holder.append(TokenIssuer(f"http://{host}/token", cert, key, user, password, host))
    with serving(server):
        yield holder[0]
