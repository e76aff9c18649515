"""Registry credentials (docs/oci.md): Basic auth against a real registry (Debian's
docker-registry with its own ``auth: htpasswd`` module, on 127.0.0.1 with its own storage), the
distribution token flow against the same registry's own ``auth: token`` module (a small JWT
issuer on 127.0.0.1, tests/ocikit.py, stands in for Harbor's token service), a token front (a
registry stand-in that can redirect blob reads to a blob store), credentials from docker's
config.json and podman's auth.json; and the attacks: a wrong password, a credentials file that
is not one, a blob redirect to a blob store, a token realm on another origin or over plain http
elsewhere.
Every test checks that no password, ``auth`` string or token is printed.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from k3kit.archive import pack
from k3kit.oci.auth import Credential
from tests.conftest import GoldenKit, run_k3kit
from tests.netkit import loopback
from tests.ocikit import (
    LiveRegistry,
    bcrypt_line,
    live_registry,
    needs_bcrypt,
    needs_registry,
    token_issuer,
)

pytestmark = needs_registry
REPO = "kits/kimi-k3"
FOLDER = "kimi-k3-b300x8-1.0.0"
USER = "alice"
PASSWORD = "k3kit-test-Pw-9q7Zx"  # distinctive: searched for in every output
WRONG = "k3kit-wrong-Pw-4Lm2"


@pytest.fixture(scope="module")
def archive(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("oci-auth-archive") / f"{FOLDER}.kit.tar.gz"
    pack(golden.kit, out)
    return out


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRegistry]:
    """A real registry that asks for Basic credentials (alice / PASSWORD), one per module: the
    tests using it push the same archive to the same tag and read only what they pushed
    themselves, so none depends on another having run (or not)."""
    line = bcrypt_line(USER, PASSWORD)
    if line is None:
        pytest.skip("no bcrypt for docker-registry's htpasswd (Debian's python3 with crypt(3))")
    root = tmp_path_factory.mktemp("locked-registry")
    htpasswd = root / "htpasswd"
    htpasswd.write_text(line + "\n")
    with live_registry(root / "registry", htpasswd) as live:
        yield live


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LiveRegistry]:
    """A real registry without auth of its own (the token front stands before it)."""
    with live_registry(tmp_path / "registry") as live:
        yield live


def b64(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def auth_env(tmp_path: Path, auths: dict[str, str], name: str = "auth.json") -> dict[str, str]:
    """``REGISTRY_AUTH_FILE`` naming a podman-style auth.json with ``auths`` (key -> auth)."""
    path = tmp_path / name
    path.write_text(json.dumps({"auths": {k: {"auth": v} for k, v in auths.items()}}))
    return {"REGISTRY_AUTH_FILE": str(path)}


def no_credentials(tmp_path: Path) -> dict[str, str]:
    """An environment where no credentials file exists (the user's own are never read)."""
    return {"REGISTRY_AUTH_FILE": str(tmp_path / "absent-auth.json")}


def k3kit(env: dict[str, str], *args: str | Path) -> tuple[int, dict[str, Any], str]:
    proc = run_k3kit(*args, "--json", env=env)
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text
    for secret in (PASSWORD, WRONG, b64(USER, PASSWORD), b64(USER, WRONG), "tok-"):
        assert secret not in text, f"{secret!r} printed"
    return proc.returncode, json.loads(proc.stdout or "{}"), proc.stderr


def push(env: dict[str, str], host: str, archive: Path, trust: Path) -> tuple[int, dict[str, Any]]:
    rc, out, _ = k3kit(env, "push", archive, f"oci://{host}/{REPO}:1.0.0", "--trust", trust)
    return rc, out


def install(env: dict[str, str], ref: str, trust: Path, into: Path) -> tuple[int, dict[str, Any]]:
    rc, out, _ = k3kit(env, "install", ref, "--trust", trust, "--into", into)
    return rc, out


def code(out: dict[str, Any]) -> str:
    return str(out.get("error", {}).get("code", ""))


# -- Basic auth: the real registry's htpasswd ---------------------------------------------------


@needs_bcrypt
def test_push_and_install_with_basic_credentials_from_docker_config(
    locked: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    docker = tmp_path / "docker"
    docker.mkdir()
    (docker / "config.json").write_text(
        json.dumps({"auths": {f"https://{locked.host}/v1/": {"auth": b64(USER, PASSWORD)}}})
    )
    env = {"REGISTRY_AUTH_FILE": "", "XDG_RUNTIME_DIR": str(tmp_path), "DOCKER_CONFIG": str(docker)}
    rc, out = push(env, locked.host, archive, golden.key.public)
    assert rc == 0, out
    rc, out = install(env, f"oci://{locked.host}/{REPO}@{out['digest']}", golden.key.public,
                      tmp_path / "kits")  # fmt: skip
    assert rc == 0, out
    assert (tmp_path / "kits" / FOLDER / "MANIFEST.json").is_file()


@needs_bcrypt
def test_podman_auth_file_prefers_the_entry_for_the_repositorys_namespace(
    locked: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """A wrong password stored for the whole host and the right one for ``HOST/kits``: the
    longer (namespace) key is the one used, as podman does."""
    env = auth_env(
        tmp_path, {locked.host: b64(USER, WRONG), f"{locked.host}/kits": b64(USER, PASSWORD)}
    )
    rc, out = push(env, locked.host, archive, golden.key.public)
    assert rc == 0, out


@needs_bcrypt
def test_a_registry_asking_for_credentials_with_none_stored_is_auth_required(
    locked: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    rc, out = push(auth_env(tmp_path, {locked.host: b64(USER, PASSWORD)}), locked.host, archive,
                   golden.key.public)  # fmt: skip
    assert rc == 0, out
    ref = f"oci://{locked.host}/{REPO}@{out['digest']}"
    rc, out = install(no_credentials(tmp_path), ref, golden.key.public, tmp_path / "kits")
    assert rc == 4 and code(out) == "OCI_AUTH_REQUIRED"
    assert "REGISTRY_AUTH_FILE" in out["error"]["hint"]
    assert not (tmp_path / "kits" / FOLDER).exists()


@needs_bcrypt
def test_a_key_spelling_the_registry_in_capitals_is_its_key_and_another_port_is_not(
    locked: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """``podman login LocalHost:PORT`` and ``oci://localhost:PORT``: one server, so the stored
    password is sent; the same password stored for another port of this host is not."""
    port = locked.host.rsplit(":", 1)[1]
    rc, out = push(auth_env(tmp_path, {locked.host: b64(USER, PASSWORD)}), locked.host, archive,
                   golden.key.public)  # fmt: skip
    assert rc == 0, out
    ref = f"oci://localhost:{port}/{REPO}@{out['digest']}"
    other = "1" if port != "1" else "2"
    refused = auth_env(tmp_path, {f"localhost:{other}": b64(USER, PASSWORD)}, "other.json")
    rc, out = install(refused, ref, golden.key.public, tmp_path / "kits")
    assert rc == 4 and code(out) == "OCI_AUTH_REQUIRED"
    matched = auth_env(tmp_path, {f"LocalHost:{port}": b64(USER, PASSWORD)}, "capitals.json")
    rc, out = install(matched, ref, golden.key.public, tmp_path / "kits")
    assert rc == 0, out


@needs_bcrypt
def test_attack_wrong_password_is_auth_failed_and_never_printed(
    locked: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    env = auth_env(tmp_path, {locked.host: b64(USER, WRONG)})
    rc, out = push(env, locked.host, archive, golden.key.public)
    assert rc == 4 and code(out) == "OCI_AUTH_FAILED"  # k3kit() checked nothing secret printed


@needs_bcrypt
@pytest.mark.parametrize(
    "auth", ["%%not-base64-k3kit-wrong-Pw-4Lm2%%", base64.b64encode(WRONG.encode()).decode()]
)
def test_a_credentials_file_entry_that_is_not_user_password_is_refused_unechoed(
    locked: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path, auth: str
) -> None:
    rc, out = push(auth_env(tmp_path, {locked.host: auth}), locked.host, archive,
                   golden.key.public)  # fmt: skip
    assert rc == 3 and code(out) == "OCI_AUTH_FILE_INVALID"
    assert auth not in json.dumps(out)


def test_a_credentials_repr_holds_no_secret() -> None:
    cred = Credential("https://r.example", Path("auth.json"), USER, PASSWORD)
    assert PASSWORD not in repr(cred) and USER not in repr(cred)
    assert cred.basic() == "Basic " + b64(USER, PASSWORD)


# -- the token flow: the real registry's own ``auth: token`` module ------------------------------


def test_push_and_install_against_the_registrys_token_auth(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """docker-registry challenges (Bearer realm, service, scope) and verifies the JWT itself;
    the token service (Harbor's shape: on the registry's origin, by a router) gives one for the
    scope asked, with alice's Basic credentials."""
    with (
        token_issuer(tmp_path / "issuer", USER, PASSWORD) as issuer,
        live_registry(tmp_path / "registry", token=issuer) as reg,
    ):
        issuer.upstream = f"http://{reg.host}"
        env = auth_env(tmp_path, {issuer.host: b64(USER, PASSWORD)})
        rc, out = push(env, issuer.host, archive, golden.key.public)
        assert rc == 0, out
        ref = f"oci://{issuer.host}/{REPO}@{out['digest']}"
        rc, out = install(no_credentials(tmp_path), ref, golden.key.public, tmp_path / "anon")
        assert rc == 4 and code(out) == "OCI_AUTH_REQUIRED"
        rc, out = install(env, ref, golden.key.public, tmp_path / "kits")
    assert rc == 0, out
    assert (tmp_path / "kits" / FOLDER / "MANIFEST.json").is_file()
    assert issuer.seen.count("Basic " + b64(USER, PASSWORD)) >= 2  # a token per scope asked


def test_attack_token_realm_on_another_origin_than_the_registry_gets_no_password(
    archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The real registry, asked directly, names a token service on another origin (another
    port): k3kit asks it anonymously (never with the registry's password), and says why it
    cannot log in."""
    with (
        token_issuer(tmp_path / "issuer", USER, PASSWORD) as issuer,
        live_registry(tmp_path / "registry", token=issuer) as reg,
    ):
        env = auth_env(tmp_path, {reg.host: b64(USER, PASSWORD)})
        rc, out = push(env, reg.host, archive, golden.key.public)
    assert rc == 4 and code(out) == "OCI_AUTH_REQUIRED"
    assert issuer.seen and issuer.seen == [None] * len(issuer.seen)


# -- the token flow: a token front before the real registry -------------------------------------


class _Front(http.server.BaseHTTPRequestHandler):
    """Harbor's shape on one origin: ``/token`` gives a bearer token for Basic alice/PASSWORD;
    ``/v2/…`` answers 401 with a Bearer challenge until it gets a token it issued, then
    forwards to the real registry (Host kept, so upload Locations name this front). ``realm``
    overrides the realm the challenge names; ``blob_store`` answers blob reads with a 307
    there."""

    upstream = ""
    realm = ""
    blob_store = ""
    issued: ClassVar[set[str]] = set()
    token_requests: ClassVar[list[str | None]] = []

    def _route(self) -> None:
        if self.path.startswith("/token"):
            return self._token()
        bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        if bearer not in self.issued:
            actions = "pull" if self.command in ("GET", "HEAD") else "pull,push"
            realm = self.realm or f"http://{self.headers['Host']}/token"
            challenge = (
                f'Bearer realm="{realm}",service="front",scope="repository:{REPO}:{actions}"'
            )
            return self._answer(401, b"{}", {"WWW-Authenticate": challenge})
        if self.blob_store and self.command == "GET" and "/blobs/sha256:" in self.path:
            return self._answer(307, b"", {"Location": self.blob_store + self.path})
        self._forward()

    do_GET = do_HEAD = do_POST = do_PUT = _route

    def _token(self) -> None:
        sent = self.headers.get("Authorization")
        self.token_requests.append(sent)
        if sent != "Basic " + b64(USER, PASSWORD):
            return self._answer(401, b'{"errors":[]}', {})
        token = f"tok-{len(self.issued)}"
        self.issued.add(token)
        self._answer(200, json.dumps({"token": token}).encode(), {})

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        request = urllib.request.Request(
            self.upstream + self.path, data=body, headers=headers, method=self.command
        )
        try:
            with urllib.request.urlopen(request) as resp:
                self._answer(resp.status, resp.read(), dict(resp.headers))
        except urllib.error.HTTPError as exc:
            self._answer(exc.code, exc.read(), dict(exc.headers))

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "transfer-encoding", "connection", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", headers.get("Content-Length", str(len(body))))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Another origin (a blob store, a foreign token service): records the Authorization
    header of each request; serves blobs from the real registry, refuses tokens."""

    upstream = ""
    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        if not self.path.startswith("/v2/"):
            return self._answer(401, b"{}")
        with urllib.request.urlopen(self.upstream + self.path) as resp:
            self._answer(200, resp.read())

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def front(reg: LiveRegistry, **attrs: Any) -> type[_Front]:
    return type("Front", (_Front,), {"upstream": f"http://{reg.host}", "issued": set(),
                                     "token_requests": [], **attrs})  # fmt: skip


def recorder(reg: LiveRegistry) -> type[_Recorder]:
    return type("Recorder", (_Recorder,), {"upstream": f"http://{reg.host}", "seen": []})


def test_attack_blob_redirect_to_a_blob_store_does_not_carry_the_authorization_header(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The registry sends blob reads to object storage on another origin (as S3-backed
    registries do): the bearer token is for the registry, and the blob store never sees it."""
    store = recorder(registry)
    with loopback(front(registry)) as host:
        env = auth_env(tmp_path, {host: b64(USER, PASSWORD)})
        rc, out = push(env, host, archive, golden.key.public)
        assert rc == 0, out
        with loopback(store) as store_host:
            ref = f"oci://{host}/{REPO}@{out['digest']}"
            with loopback(front(registry, blob_store=f"http://{store_host}")) as redirecting:
                ref = ref.replace(host, redirecting)
                env = auth_env(tmp_path, {redirecting: b64(USER, PASSWORD)}, "auth2.json")
                rc, out = install(env, ref, golden.key.public, tmp_path / "kits")
    assert rc == 0, out
    assert store.seen and store.seen == [None] * len(store.seen)


def test_attack_token_realm_on_another_origin_gets_no_credentials(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """A registry names someone else's token service as its realm, one the node HAS a login for
    (to collect that password, or a token for that service): the token request goes there
    without any credentials, and the registry's 401 is reported, naming why."""
    collector = recorder(registry)
    with (
        loopback(collector) as elsewhere,
        loopback(front(registry, realm=f"http://{elsewhere}/token")) as host,
    ):
        env = auth_env(tmp_path, {host: b64(USER, PASSWORD), elsewhere: b64(USER, PASSWORD)})
        rc, out = push(env, host, archive, golden.key.public)
    assert rc == 4 and code(out) == "OCI_AUTH_REQUIRED"
    assert "another origin" in out["error"]["message"]
    assert collector.seen == [None]


@pytest.mark.parametrize("realm", ["http://192.0.2.1/token", "https://user:pw@192.0.2.1/token"])
def test_attack_token_realm_over_plain_http_or_with_a_password_is_refused_unasked(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path, realm: str
) -> None:
    """192.0.2.1 (TEST-NET-1) is never reached: the realm is refused before any request."""
    with loopback(front(registry, realm=realm)) as host:
        env = auth_env(tmp_path, {host: b64(USER, PASSWORD)})
        rc, out = push(env, host, archive, golden.key.public)
    assert rc == 4 and code(out) == "OCI_AUTH_REALM_REFUSED"
    assert "pw@" not in json.dumps(out)
    assert not os.listdir(registry.storage)  # nothing pushed


@pytest.mark.parametrize(
    ("url", "other", "same"),
    [
        ("https://Registry.Example/v2/x", "https://registry.example", True),
        ("https://registry.example:443/v2/", "https://registry.example", True),
        ("http://registry.example/v2/", "https://registry.example", False),
        ("https://registry.example:8443/", "https://registry.example", False),
        ("https://blobs.registry.example/", "https://registry.example", False),
        ("https://registry.example.evil/", "https://registry.example", False),
    ],
)
def test_same_origin_is_scheme_host_and_port(url: str, other: str, same: bool) -> None:
    """The one rule deciding where a credential may go (registry requests, redirects, token
    realms, and the hub's downloads): not a string prefix, which ``.evil`` would pass."""
    from k3kit._policy import same_origin

    assert same_origin(url, other) is same
