"""Attacks on the registry client by the registry, its token service and whoever wrote the
credentials file (docs/oci.md), each as the attacker would make it: a real HTTP server on
127.0.0.1 (a port the kernel picks) answering what the attacker chooses, a real credentials file,
the real CLI. A server's self-report (a token answer, a realm, a redirect, a Content-Length), a
file found in place, a degenerate URL: each must end in a registered code, never exit 70, never
a hang, and never with a secret printed.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.conftest import GoldenKit, run_k3kit
from tests.cotenant import cotenant_python, needs_root, shared_folder
from tests.netkit import loopback

REPO = "kits/kimi-k3"
DIGEST = "sha256:" + "ab" * 32
USER = "alice"
PASSWORD = "k3kit-attack-Pw-7Hq2"  # distinctive: searched for in every output
TOKEN = "tok-attack-5Rz8"
WRONG = "k3kit-attack-wrong-Pw-3Kd6"


def b64(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


class Registry(http.server.BaseHTTPRequestHandler):
    """A registry stand-in that says what the attacker wants. ``/v2/…`` answers 401 with
    ``challenge`` (``{origin}`` filled in) until it sees ``TOKEN`` (or Basic alice/PASSWORD),
    unless ``open``; then ``manifest`` (status, headers, body). ``/token`` answers ``token_body``.
    Every request's path and Authorization is recorded."""

    challenge = 'Bearer realm="{origin}/token",service="reg",scope="repository:kits/kimi-k3:pull"'
    token_body: bytes | None = None
    open = False
    manifest: tuple[int, dict[str, str], bytes] = (404, {}, b"{}")
    seen: ClassVar[list[tuple[str, str | None]]] = []

    def do_GET(self) -> None:
        sent = self.headers.get("Authorization")
        self.seen.append((self.path, sent))
        origin = f"http://{self.headers['Host']}"
        if self.path.startswith("/token"):
            body = self.token_body if self.token_body is not None else _token_json(TOKEN)
            return self._answer(200, {"Content-Type": "application/json"}, body)
        accepted = sent in (f"Bearer {TOKEN}", "Basic " + b64(USER, PASSWORD))
        if not self.open and not accepted:
            challenge = self.challenge.replace("{origin}", origin)
            return self._answer(401, {"WWW-Authenticate": challenge}, b"{}")
        status, headers, body = self.manifest
        self._answer(status, headers, body)

    do_HEAD = do_GET

    def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            with contextlib.suppress(OSError):  # the client may stop reading: that is the point
                self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _token_json(token: str, **extra: Any) -> bytes:
    return json.dumps({"token": token, **extra}).encode()


@contextlib.contextmanager
def registry(**attrs: Any) -> Iterator[tuple[str, type[Registry]]]:
    """A :class:`Registry` with ``attrs`` on 127.0.0.1; yields ``HOST:PORT`` and its class."""
    handler = type("Attacker", (Registry,), {"seen": [], **attrs})
    with loopback(handler) as host:
        yield host, handler


def auth_file(folder: Path, host: str, auth: str | None = None) -> Path:
    path = folder / "auth.json"
    path.write_text(json.dumps({"auths": {host: {"auth": auth or b64(USER, PASSWORD)}}}))
    return path


def install(
    host: str, trust: Path, into: Path, env: dict[str, str], *, debug: bool = False
) -> tuple[int, dict[str, Any]]:
    """``k3kit install oci://HOST/REPO@DIGEST`` as a buyer runs it; checks that nothing secret
    and no traceback was printed, and that nothing was installed."""
    done = run_k3kit(
        *(["--debug"] if debug else []),
        "install", f"oci://{host}/{REPO}@{DIGEST}", "--trust", trust, "--into", into, "--json",
        env=env,
    )  # fmt: skip
    text = done.stdout + done.stderr
    assert "Traceback" not in text and done.returncode != 70, text
    for secret in (PASSWORD, b64(USER, PASSWORD), TOKEN, WRONG, b64(USER, WRONG)):
        assert secret not in text, f"{secret!r} printed"
    assert not into.exists() or not os.listdir(into)
    return done.returncode, json.loads(done.stdout or "{}")


def code(out: dict[str, Any]) -> str:
    return str(out.get("error", {}).get("code", ""))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No credentials file (the user's own are never read)."""
    return {"REGISTRY_AUTH_FILE": str(tmp_path / "absent-auth.json")}


# -- 1. a server's self-report -----------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"[" * 60_000, id="nested-60k-deep"),
        pytest.param(b'{"token": "' + b"t" * 200_000 + b'"}', id="200k-body"),
        pytest.param(b"\xff\xfe{not json", id="not-utf8"),
        pytest.param(_token_json("tok with space"), id="token-not-a-header-value"),
        pytest.param(json.dumps({"token": ["x"]}).encode(), id="token-not-a-string"),
    ],
)
def test_attack_token_service_answers_what_no_token_service_would(
    golden: GoldenKit, tmp_path: Path, env: dict[str, str], body: bytes
) -> None:
    with registry(token_body=body) as (host, _):
        rc, out = install(host, golden.key.public, tmp_path / "kits", env)
    assert rc == 4 and code(out) == "OCI_REGISTRY_ERROR", out


@pytest.mark.parametrize(
    "expires_in",
    [10**400, -1, "soon", "١٢٣", 1.5e308, None],
    ids=["huge", "negative", "word", "arabic-digits", "float", "null"],
)
def test_attack_token_expires_in_is_not_believed(
    golden: GoldenKit, tmp_path: Path, env: dict[str, str], expires_in: object
) -> None:
    """The token's lifetime is the service's self-report: k3kit never reads it (a token is
    asked for on each 401), so no value of it can crash or extend anything. The token is then
    accepted and the registry has no such manifest: OCI_NOT_FOUND, reached with the token."""
    body = _token_json(TOKEN, expires_in=expires_in)
    with registry(token_body=body) as (host, handler):
        rc, out = install(host, golden.key.public, tmp_path / "kits", env)
    assert rc == 4 and code(out) == "OCI_NOT_FOUND", out
    assert (f"/v2/{REPO}/manifests/{DIGEST}", f"Bearer {TOKEN}") in handler.seen


def test_attack_registry_401s_every_token_it_was_given_is_asked_once_then_refused(
    golden: GoldenKit, tmp_path: Path, env: dict[str, str]
) -> None:
    """A 401 loop: the token service hands out a token, the registry answers 401 to it again,
    for ever. One token per request, then OCI_AUTH_REQUIRED: not a loop."""
    challenge = 'Bearer realm="{origin}/token",service="reg"'
    with registry(challenge=challenge, token_body=_token_json("tok-never-good")) as (host, h):
        rc, out = install(host, golden.key.public, tmp_path / "kits", env)
    assert rc == 4 and code(out) == "OCI_AUTH_REQUIRED", out
    assert [p for p, _ in h.seen if p.startswith("/token")] == ["/token?service=reg"]
    assert len(h.seen) == 3  # 401, token, 401 again: refused


@pytest.mark.parametrize(
    "realm",
    [
        "https://[::1/token",
        "https://registry.example:99999/token",
        "https://registry.example:port/token",
        "https://regis\u00e9try.example/token",
        "https://reg istry.example/token",
    ],
    ids=["ipv6-unclosed", "port-out-of-range", "port-not-a-number", "latin1-host", "space"],
)
def test_attack_token_realm_that_is_no_url_is_refused_before_any_request(
    golden: GoldenKit, tmp_path: Path, env: dict[str, str], realm: str
) -> None:
    """The realm is the registry's word, and ``same_origin`` is asked about it: a URL that
    cannot be parsed must be refused (OCI_AUTH_REALM_REFUSED), not crash the comparison."""
    challenge = f'Bearer realm="{realm}",service="reg"'
    with registry(challenge=challenge) as (host, handler):
        rc, out = install(host, golden.key.public, tmp_path / "kits", env)
    assert rc == 4 and code(out) == "OCI_AUTH_REALM_REFUSED", out
    assert not any(p.startswith("/token") for p, _ in handler.seen)


@pytest.mark.parametrize(
    "location",
    ["http://[::1/blob", "https://blobs.example:70000/x", "https://blobs.example:x/y"],
    ids=["ipv6-unclosed", "port-out-of-range", "port-not-a-number"],
)
def test_attack_redirect_to_a_location_that_is_no_url_is_refused(
    golden: GoldenKit, tmp_path: Path, env: dict[str, str], location: str
) -> None:
    """httpx itself refuses some of these (``OCI_REGISTRY_UNREACHABLE``, the transport's
    code), k3kit's redirect rule the rest: never a crash in between."""
    with registry(open=True, manifest=(307, {"Location": location}, b"")) as (host, _):
        rc, out = install(host, golden.key.public, tmp_path / "kits", env)
    assert rc == 4 and code(out) in ("OCI_REDIRECT_REFUSED", "OCI_REGISTRY_UNREACHABLE"), out


@pytest.mark.parametrize("length", ["\u00b2", "99999999999999999999999999", "-1", "1e3"])
def test_attack_registry_content_length_that_is_no_number(
    golden: GoldenKit, tmp_path: Path, env: dict[str, str], length: str
) -> None:
    """A Content-Length that is not ASCII digits (``²`` passes ``str.isdigit``) is the
    registry's lie, not a crash: the answer is refused with a registered code."""
    body = b"{}"
    with registry(open=True, manifest=(200, {"Content-Length": length}, body)) as (host, _):
        rc, out = install(host, golden.key.public, tmp_path / "kits", env)
    assert rc in (1, 4) and code(out).startswith("OCI_"), out


# -- 2. and 3. the credentials file found in place ----------------------------------------------


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"[" * 500_000, "not JSON"),
        (b"\xff\xfe\x00{", "not JSON"),
        (b"{" + b" " * (1024 * 1024) + b"}", "over"),
    ],
    ids=["nested-500k-deep", "not-utf8", "over-1MiB"],
)
def test_attack_credentials_file_that_is_not_one_is_refused_unechoed(
    golden: GoldenKit, tmp_path: Path, content: bytes, why: str
) -> None:
    path = tmp_path / "auth.json"
    path.write_bytes(content)
    with registry() as (host, _):
        rc, out = install(host, golden.key.public, tmp_path / "kits",
                          {"REGISTRY_AUTH_FILE": str(path)})  # fmt: skip
    assert rc == 3 and code(out) == "OCI_AUTH_FILE_INVALID", out
    assert why in out["error"]["message"]


def test_attack_credentials_file_is_a_fifo_nobody_writes_to(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A FIFO planted where auth.json belongs would block a plain ``open`` for ever."""
    path = tmp_path / "auth.json"
    os.mkfifo(path)
    with registry() as (host, _):
        rc, out = install(host, golden.key.public, tmp_path / "kits",
                          {"REGISTRY_AUTH_FILE": str(path)})  # fmt: skip
    assert rc == 3 and code(out) == "OCI_AUTH_FILE_INVALID", out


def test_attack_credentials_file_is_a_link_to_a_secret_file_of_roots(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """auth.json a link to a file of secrets that is not JSON (/etc/shadow's shape): refused,
    and not a byte of it is echoed."""
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$k3kit-shadow-hash-Qw9$:19000:0:99999:7:::\n")
    path = tmp_path / "auth.json"
    path.symlink_to(secret)
    with registry() as (host, _):
        rc, out = install(host, golden.key.public, tmp_path / "kits",
                          {"REGISTRY_AUTH_FILE": str(path)})  # fmt: skip
    assert rc == 3 and code(out) == "OCI_AUTH_FILE_INVALID", out
    assert "shadow-hash" not in json.dumps(out)


@pytest.mark.parametrize("auth", [b64("", PASSWORD), b64(USER, ""), "YWxpY2U", "4pyTIMOgIGxh"])
def test_attack_credentials_entry_without_user_password_is_refused_unechoed(
    golden: GoldenKit, tmp_path: Path, auth: str
) -> None:
    with registry() as (host, _):
        path = auth_file(tmp_path, host, auth)
        rc, out = install(host, golden.key.public, tmp_path / "kits",
                          {"REGISTRY_AUTH_FILE": str(path)})  # fmt: skip
    assert rc == 3 and code(out) == "OCI_AUTH_FILE_INVALID", out
    assert auth not in json.dumps(out)


@needs_root
def test_attack_cotenant_writes_the_credentials_file_k3kit_would_send(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A real second user (uid 65534) owns the auth.json the node finds in a shared folder:
    whatever it says (whose account, which registry) is the co-tenant's choice, so k3kit
    refuses it (OCI_AUTH_FILE_UNSAFE) and sends nothing."""
    with shared_folder() as shared, registry() as (host, handler):
        planted = shared / "auth.json"
        text = json.dumps({"auths": {host: {"auth": b64(USER, PASSWORD)}}})
        cotenant_python("import sys; open(sys.argv[1], 'w').write(sys.argv[2])",
                        str(planted), text)  # fmt: skip
        rc, out = install(host, golden.key.public, tmp_path / "kits",
                          {"REGISTRY_AUTH_FILE": str(planted)})  # fmt: skip
    assert rc == 4 and code(out) == "OCI_AUTH_FILE_UNSAFE", out
    assert all(sent is None for _, sent in handler.seen)


@needs_root
def test_attack_cotenant_rewrites_a_world_writable_credentials_file(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Our own auth.json left mode 0666 in a shared folder: the co-tenant really rewrites it
    (the kernel lets it), and k3kit refuses a file anyone could have written."""
    with shared_folder() as shared, registry() as (host, handler):
        path = auth_file(shared, host)
        path.chmod(0o666)
        text = json.dumps({"auths": {host: {"auth": b64("mallory", "theirs")}}})
        cotenant_python("import sys; open(sys.argv[1], 'w').write(sys.argv[2])",
                        str(path), text)  # fmt: skip
        assert b64("mallory", "theirs") in path.read_text()  # the kernel let it write
        rc, out = install(host, golden.key.public, tmp_path / "kits",
                          {"REGISTRY_AUTH_FILE": str(path)})  # fmt: skip
    assert rc == 4 and code(out) == "OCI_AUTH_FILE_UNSAFE", out
    assert all(sent is None for _, sent in handler.seen)


@needs_root
def test_attack_cotenant_swaps_the_credentials_file_in_a_folder_it_can_write(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Our own 0600 auth.json in a folder the co-tenant can write (not sticky): it can rename
    ours away and put its own, so the file is refused too."""
    with shared_folder(0o777) as shared, registry() as (host, handler):
        path = auth_file(shared, host)
        path.chmod(0o600)
        rc, out = install(host, golden.key.public, tmp_path / "kits",
                          {"REGISTRY_AUTH_FILE": str(path)})  # fmt: skip
    assert rc == 4 and code(out) == "OCI_AUTH_FILE_UNSAFE", out
    assert all(sent is None for _, sent in handler.seen)


def test_a_private_credentials_file_is_used(golden: GoldenKit, tmp_path: Path) -> None:
    """The control for the co-tenant cases: the same file, ours and private, is sent (Basic
    on the registry's own origin) and the registry's 404 follows."""
    basic = 'Basic realm="reg"'
    with registry(challenge=basic) as (host, handler):
        path = auth_file(tmp_path, host)
        path.chmod(0o600)
        rc, out = install(host, golden.key.public, tmp_path / "kits",
                          {"REGISTRY_AUTH_FILE": str(path)})  # fmt: skip
    assert rc == 4 and code(out) == "OCI_NOT_FOUND", out
    assert handler.seen[-1][1] == "Basic " + b64(USER, PASSWORD)


def test_attack_refused_credentials_are_not_printed_even_with_debug(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The registry refuses the stored password (Basic, 401 again): OCI_AUTH_FAILED names the
    file it came from; neither the password nor its base64 is in any output, --debug included
    (``install`` checks every output for both)."""
    with registry(challenge='Basic realm="reg"') as (host, handler):
        path = auth_file(tmp_path, host, b64(USER, WRONG))
        rc, out = install(host, golden.key.public, tmp_path / "kits",
                          {"REGISTRY_AUTH_FILE": str(path)}, debug=True)  # fmt: skip
    assert rc == 4 and code(out) == "OCI_AUTH_FAILED", out
    assert str(path) in out["error"]["message"]
    assert handler.seen[-1][1] == "Basic " + b64(USER, WRONG)  # it was really sent


# -- 4. degenerate origins -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "other", "same"),
    [
        ("HTTPS://REGISTRY.EXAMPLE/v2/", "https://registry.example", True),
        ("https://registry.example:443/", "https://registry.example", True),
        ("https://user:pw@registry.example/", "https://registry.example", True),
        ("https://registry.example./", "https://registry.example", False),
        ("http://[::1]:5000/token", "http://[::1]:5000", True),
        ("http://[::1]/token", "http://[::1]:80", True),
        ("http://[::1]:5001/token", "http://[::1]:5000", False),
        ("https://registry.example:99999/", "https://registry.example", False),
        ("https://[::1/", "https://[::1/", False),
        ("https://registry.example:x/", "https://registry.example:x/", False),
    ],
)
def test_same_origin_on_degenerate_urls_never_raises_and_fails_closed(
    url: str, other: str, same: bool
) -> None:
    """Two unparsable URLs are not the same origin (a credential goes nowhere), and no input
    raises: the comparison runs on a registry's realm and redirects."""
    from k3kit._policy import same_origin

    assert same_origin(url, other) is same


@pytest.mark.parametrize(
    "scope",
    ['repository:kits/kimi-k3:pull",evil="1', "repository:kits/kimi-k3:pull&account=admin"],
    ids=["quote-comma", "ampersand"],
)
def test_attack_scope_with_quotes_and_ampersands_stays_one_query_parameter(
    golden: GoldenKit, tmp_path: Path, env: dict[str, str], scope: str
) -> None:
    """The scope and service are the registry's words, copied into the token request: each
    must stay one URL-encoded parameter, never add another (``&account=admin``)."""
    challenge = f'Bearer realm="{{origin}}/token",service="reg",scope="{scope}"'
    with registry(challenge=challenge) as (host, handler):
        install(host, golden.key.public, tmp_path / "kits", env)
    asked = [p for p, _ in handler.seen if p.startswith("/token")]
    assert asked, handler.seen
    for path in asked:
        assert "account=" not in path.replace("%26account%3D", "")
        assert '"' not in path and "," not in path
