"""Attacks on the credential helpers and the head deadline of src/k3kit/oci/, made by an outsider
who read only docs/oci.md: a co-tenant (a real second user, uid 65534) who can write a folder on
the victim's PATH, a helper that misbehaves, a registry or token service that sends any bytes
with any timing. Every helper is a real program run as a real subprocess; every server is real,
on 127.0.0.1 on a port the kernel chose. Each test names the attack; it fails if the attack
works. No assertion on how long anything took: deadlines are lowered with their knobs.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from k3kit import _policy
from k3kit._fs import program_on_path
from k3kit.errors import EnvironmentProblem, InputError, K3kitError
from k3kit.oci import credhelper, fetch_blob_file, fetch_manifest
from k3kit.oci._http import Registry
from k3kit.oci.auth import credential_for
from k3kit.oci.ref import parse
from tests.channelkit import init_channel
from tests.conftest import GoldenKit, run_k3kit
from tests.cotenant import cotenant_python, needs_root, shared_folder
from tests.netkit import loopback
from tests.test_oci_attacks import DIGEST, USER, registry
from tests.test_oci_credhelper import (  # noqa: F401 - on_path is a fixture
    SECRET,
    _install,
    answering,
    cli,
    config,
    cotenant_plants_then_install,
    env_for,
    helper,
    on_path,
)
from tests.test_oci_deadline import BLOB, BODY, REPO, dribbling, refused_slow


@needs_root
def test_attack_cotenant_links_a_helper_name_to_a_root_owned_program_that_runs_theirs(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The co-tenant cannot place a helper file that k3kit would run (it is theirs), so they
    place a LINK named ``docker-credential-ecr-login`` in the shared folder on the victim's PATH,
    pointing at ``/usr/bin/env`` (root's, safe by itself), and beside it their script ``get``:
    ``/usr/bin/env get`` looks ``get`` up on the victim's PATH and runs the co-tenant's code as
    the victim. Judging only where the link leads misses who chose the link."""
    cotenant_plants_then_install(
        "import os, sys; d = sys.argv[1]; "
        "os.symlink('/usr/bin/env', os.path.join(d, 'docker-credential-ecr-login')); "
        "p = os.path.join(d, 'get'); "
        "open(p, 'w').write('#!/bin/sh\\ntouch ' + sys.argv[2] + "
        '\'\\necho {\\"Username\\": \\"x\\", \\"Secret\\": \\"y\\"}\\n\'); '
        "os.chmod(p, 0o755)",
        golden,
        tmp_path,
    )


@needs_root
def test_attack_cotenant_links_an_engine_name_on_path_to_a_root_owned_program(
    tmp_path: Path,
) -> None:
    """The same link, named as the engine ``launch`` runs (or ``nvidia-smi``): every program
    k3kit runs by name is found by one rule, so the link is refused for each of them."""
    with shared_folder() as shared:
        cotenant_python(
            "import os, sys; os.symlink('/usr/bin/env', os.path.join(sys.argv[1], 'vllm'))",
            str(shared),
        )
        found = program_on_path("vllm", f"{shared}:/usr/bin:/bin")
        assert found is not None and found[0] == Path("/usr/bin/env")
        assert found[1] == shared / "vllm"
        # the control: the same link made by the victim in their own folder is theirs to make
        own = tmp_path / "bin"
        own.mkdir()
        os.symlink("/usr/bin/env", own / "vllm")
        assert program_on_path("vllm", f"{own}:/usr/bin:/bin") == (Path("/usr/bin/env"), None)


# -- the environment a client is built from ------------------------------------------------------

PROXY_PASSWORD = "k3kit-proxy-Pw-9Xe4"


@pytest.mark.parametrize(
    ("variable", "proxy"),
    [
        ("ALL_PROXY", f"socks5://alice:{PROXY_PASSWORD}@127.0.0.1:1"),
        ("HTTPS_PROXY", "http://[::1"),
        ("HTTPS_PROXY", f"ftp://u:{PROXY_PASSWORD}@x"),
        ("SSL_CERT_FILE", "/nonexistent/ca.pem"),
    ],
)
def test_attack_an_unusable_proxy_variable_is_a_named_refusal_not_exit_70(
    golden: GoldenKit, tmp_path: Path, variable: str, proxy: str
) -> None:
    """A site image or a shell profile sets ``ALL_PROXY=socks5://…`` (httpx has no SOCKS without
    socksio), a proxy URL with a broken port, or an ``ftp://`` proxy: the HTTP client refused it
    while being built (so it did an ``SSL_CERT_FILE`` that is not there), and k3kit answered
    exit 70, "please report it". It is the caller's
    setting: ``BAD_PROXY_SETTING`` (exit 3), naming the cause, never the URL's password."""
    env = {variable: proxy, "NO_PROXY": "", "no_proxy": ""}
    env["REGISTRY_AUTH_FILE"] = str(tmp_path / "absent.json")
    done = run_k3kit(
        "--debug", "install", f"oci://registry.example/{REPO}@{DIGEST}",
        "--trust", golden.key.public, "--into", tmp_path / "kits", "--json", env=env,
    )  # fmt: skip
    text = done.stdout + done.stderr
    assert done.returncode == 3, text
    assert json.loads(done.stdout)["error"]["code"] == "BAD_PROXY_SETTING"
    assert "Traceback" not in text and PROXY_PASSWORD not in text
    assert not (tmp_path / "kits").exists() or not any((tmp_path / "kits").iterdir())


def test_an_unusable_proxy_variable_is_the_same_refusal_for_the_hub(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hub's client is built by the same constructor (``_policy.client_from_env``)."""
    from k3kit.hub import HfHub

    monkeypatch.setenv("ALL_PROXY", f"socks5://alice:{PROXY_PASSWORD}@127.0.0.1:1")
    with pytest.raises(InputError) as exc:
        HfHub("https://huggingface.co")
    assert exc.value.code == "BAD_PROXY_SETTING" and PROXY_PASSWORD not in str(exc.value)


# -- the head deadline, through a proxy, across a redirect, under a flood of 1xx ------------------


@pytest.fixture
def one_second(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every read gets one second in all (k3kit's own knobs; the servers below would take
    minutes), and no credentials file of this machine is read."""
    monkeypatch.setattr(_policy, "READ_FLOOR_SECONDS", 1.0)
    monkeypatch.setattr(_policy, "READ_FLOOR_RATE", 1 << 40)
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "absent-auth.json"))


class Proxy(http.server.BaseHTTPRequestHandler):
    """An HTTP proxy on 127.0.0.1 that answers ``CONNECT`` one byte every 0.3 s (a 120-byte
    "200 Connection established"): every socket read gets a byte, no read timeout trips."""

    sent: ClassVar[list[int]] = []
    stop = threading.Event()
    asked = threading.Event()

    def do_CONNECT(self) -> None:
        self.asked.set()
        head = b"HTTP/1.1 200 Connection established\r\nX-Padding: %s\r\n\r\n" % (b"p" * 70)
        with contextlib.suppress(OSError):
            for i in range(len(head)):
                if self.stop.wait(timeout=0.3):
                    return
                self.wfile.write(head[i : i + 1])
                self.wfile.flush()
                self.sent.append(1)

    def log_message(self, *args: object) -> None:
        pass


def test_attack_a_proxy_dribbling_its_connect_answer_is_cut_off_at_the_deadline(
    one_second: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry is reached through ``HTTPS_PROXY`` (a proxy mount of httpx, its own
    connection pool): the proxy's answer to ``CONNECT`` is read by that pool, so it must be
    paced too, or the proxy holds k3kit for as long as it likes."""
    attrs = {"sent": [], "stop": threading.Event(), "asked": threading.Event()}
    handler: type[Proxy] = type("SlowProxy", (Proxy,), attrs)
    with loopback(handler, stop=handler.stop) as proxy:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTPS_PROXY", f"http://{proxy}")
        reg = Registry("https://registry.example", REPO)
        with reg, pytest.raises(EnvironmentProblem) as exc:
            fetch_manifest(reg, REPO, BLOB)
        assert exc.value.code == "OCI_REGISTRY_UNREACHABLE" and "too slowly" in str(exc.value)
        assert len(handler.sent) < 120  # cut off before the end
        # and it went through the proxy (its CONNECT was sent before the wait that was cut
        # short, so the proxy reads it however loaded the machine is)
        assert handler.asked.wait(timeout=60)


class Informational(http.server.BaseHTTPRequestHandler):
    """A registry that answers every GET with ``100 Continue`` after ``100 Continue`` (h11 and
    http.client skip any number of 1xx before the real head), a few a second, forever."""

    protocol_version = "HTTP/1.1"
    sent: ClassVar[list[int]] = []
    stop = threading.Event()
    asked = threading.Event()

    def do_GET(self) -> None:
        self.asked.set()
        with contextlib.suppress(OSError):
            while not self.stop.wait(timeout=0.05):
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                self.wfile.flush()
                self.sent.append(1)

    def log_message(self, *args: object) -> None:
        pass


def test_attack_a_registry_flooding_1xx_answers_before_the_head_is_cut_off(
    one_second: None,
) -> None:
    attrs = {"sent": [], "stop": threading.Event(), "asked": threading.Event()}
    handler: type[Informational] = type("Flood", (Informational,), attrs)
    with loopback(handler, stop=handler.stop) as host:
        reg = Registry(f"http://{host}", REPO)
        with reg, pytest.raises(EnvironmentProblem) as exc:
            fetch_manifest(reg, REPO, BLOB)
        assert handler.asked.wait(timeout=60)  # the flood's server was asked
    assert exc.value.code == "OCI_REGISTRY_UNREACHABLE" and "too slowly" in str(exc.value)


class Redirector(http.server.BaseHTTPRequestHandler):
    """A registry that sends its blob reads to ``target`` (another origin on this machine, as a
    blob store), with a 307 answered at once."""

    target = ""

    def do_GET(self) -> None:
        self.send_response(307)
        self.send_header("Location", f"http://{self.target}{self.path}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_attack_a_redirect_to_a_blob_store_that_dribbles_keeps_the_deadline_of_the_read(
    one_second: None, tmp_path: Path
) -> None:
    """The deadline is the read's, from its first request: a registry cannot restart it by
    redirecting to another origin (here a store dribbling the head a byte every 0.3 s)."""
    with dribbling("/v2/", slow_head=True) as (store, slow):
        redirector = type("Hop", (Redirector,), {"target": store})
        with loopback(redirector) as host:
            ref = parse(f"oci://{host}/{REPO}", repository_only=True)
            with pytest.raises(EnvironmentProblem) as exc:
                fetch_blob_file(ref, BLOB, len(BODY), tmp_path / "kit.tar.gz")
        refused_slow(exc, slow.sent)


# -- the helper: its name, where PATH finds it, how it misbehaves --------------------------------


@pytest.mark.parametrize(
    "name", ["ecr\nlogin", "ecr-login\n", "ecr\x00login", "x" * 300, "ëcr-login", "..", "."]
)
def test_attack_a_helper_name_with_odd_characters_is_refused_before_anything_runs(
    on_path: Path,  # noqa: F811 - the fixture
    tmp_path: Path,
    name: str,
) -> None:
    """A config naming ``ecr\\nlogin``, a NUL, 300 characters, a non-ASCII letter or ``..``:
    none is a plain program name. A helper a looser rule would find (``docker-credential-``
    plus part of the name) exists on PATH and would leave a marker; it never runs."""
    marker = tmp_path / "ran"
    for planted in ("ecr", "ecr-login", "x" * 64, ""):
        helper(on_path, planted, f"touch {marker}\n" + answering(USER, SECRET, marker))
    config(tmp_path / "docker", {"credHelpers": {"registry.example": name}})
    with pytest.raises(K3kitError) as exc:
        credential_for("https://registry.example", "kits/kimi-k3")
    assert exc.value.code == "OCI_AUTH_FILE_INVALID"
    assert not marker.exists()


@needs_root
def test_attack_cotenant_helper_in_the_current_folder_reached_by_an_empty_path_entry(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """``PATH=:/usr/bin`` (an empty entry, as a careless profile leaves it) means "the current
    folder". The victim runs k3kit from a shared folder where the co-tenant planted
    ``docker-credential-ecr-login``: found there, it is the co-tenant's, and is not run."""
    with shared_folder() as shared, registry(challenge='Basic realm="reg"') as (host, handler):
        marker = shared / "ran"
        plant = (
            "import os, sys; p = os.path.join(sys.argv[1], 'docker-credential-ecr-login'); "
            "open(p, 'w').write('#!/bin/sh\\ntouch ' + sys.argv[2] + '\\n'); os.chmod(p, 0o755)"
        )
        cotenant_python(plant, str(shared), str(marker))
        env = env_for(tmp_path, {"credHelpers": {host: "ecr-login"}}, tmp_path / "empty")
        env["PATH"] = f":{os.environ['PATH']}"
        done = run_k3kit(
            "install", f"oci://{host}/{REPO}@{DIGEST}", "--trust", golden.key.public,
            "--into", tmp_path / "kits", "--json", env=env, cwd=shared,
        )  # fmt: skip
        assert not marker.exists(), "the co-tenant's helper ran"
    assert done.returncode == 4, done.stdout + done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "OCI_CRED_HELPER_UNSAFE"
    assert all(sent is None for _, sent in handler.seen)


def test_attack_a_helper_that_closes_stdout_and_stays_is_killed_at_its_deadline(
    on_path: Path,  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """EOF on stdout is not the end of a helper: one that closes it and keeps running would
    hold k3kit in ``wait`` forever. The deadline (lowered to 2 s; it would sleep 10 min)
    covers the wait too."""
    monkeypatch.setattr(credhelper, "TIMEOUT_S", 2.0)
    helper(on_path, "h", "exec >&-\nsleep 600\n")
    with pytest.raises(EnvironmentProblem) as exc:
        credential_for("https://registry.example", "kits/kimi-k3")
    assert exc.value.code == "OCI_CRED_HELPER_FAILED"
    assert "did not answer within 2 s" in exc.value.message


def test_attack_a_helper_that_writes_the_secret_to_stderr_and_exits_0_is_unechoed(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A helper that prints the secret on stderr (its debug line), nothing on stdout, and
    exits 0: no answer (``OCI_CRED_HELPER_FAILED``), and the secret appears nowhere in
    k3kit's output, ``--debug`` included (``cli`` checks every byte)."""
    with registry(challenge='Basic realm="reg"') as (host, handler):
        helper(tmp_path / "bin", "leaky", f"echo 'token={SECRET}' >&2\nexit 0\n")
        env = env_for(tmp_path, {"credHelpers": {host: "leaky"}}, tmp_path / "bin")
        rc, out = cli(env, "install", f"oci://{host}/{REPO}@{DIGEST}",
                      "--trust", golden.key.public, "--into", tmp_path / "kits")  # fmt: skip
    assert rc == 4 and out["error"]["code"] == "OCI_CRED_HELPER_FAILED"  # type: ignore[index]
    assert all(sent is None for _, sent in handler.seen)


class FloodingMirror(Informational):
    """A channel mirror: its files as they are, except ``flooded``, answered with 1xx forever."""

    folder = Path()
    flooded = "/metadata/timestamp.json"

    def do_GET(self) -> None:
        if self.path == self.flooded:
            return super().do_GET()
        file = self.folder / self.path.lstrip("/")
        if ".." in self.path or not file.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        data = file.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return None


def test_attack_channel_mirror_flooding_1xx_before_the_timestamp_is_cut_off(
    one_second: None, golden: GoldenKit, tmp_path: Path
) -> None:
    """http.client (under python-tuf's fetcher) skips any number of ``100 Continue`` before a
    response's real status line; the paced socket under it ends the flood at the deadline."""
    from k3kit import api
    from k3kit.signing.keys import load_public

    chan = init_channel(tmp_path / "chan")
    attrs = {"sent": [], "stop": threading.Event(), "asked": threading.Event()}
    handler: type[FloodingMirror] = type(
        "Mirror", (FloodingMirror,), {**attrs, "folder": chan.repo}
    )
    with loopback(handler, stop=handler.stop) as host:
        with pytest.raises(EnvironmentProblem) as exc:
            api.update_from_channel(
                f"http://{host}", "stable", chan.root, tmp_path / "kits",
                [load_public(golden.key.public)], state_dir=tmp_path / "state",
            )  # fmt: skip
        assert handler.asked.wait(timeout=60)
    assert exc.value.code == "CHANNEL_UNREACHABLE" and "too slowly" in str(exc.value)
    assert not (tmp_path / "kits").exists() or not any((tmp_path / "kits").iterdir())


@needs_root
def test_attack_own_helper_name_linked_to_a_program_the_cotenant_wrote(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The link is the victim's own (in their private bin), but it leads into the shared
    folder, to a file the co-tenant wrote (and can rewrite): where it leads is judged too."""
    with shared_folder() as shared, registry(challenge='Basic realm="reg"') as (host, handler):
        marker = shared / "ran"
        plant = (
            "import os, sys; p = os.path.join(sys.argv[1], 'helper'); "
            "open(p, 'w').write('#!/bin/sh\\ntouch ' + sys.argv[2] + '\\n'); os.chmod(p, 0o755)"
        )
        cotenant_python(plant, str(shared), str(marker))
        own = tmp_path / "bin"
        own.mkdir()
        os.symlink(shared / "helper", own / "docker-credential-linked")
        env = env_for(tmp_path, {"credHelpers": {host: "linked"}}, own)
        rc, got = _install(env, host, golden, tmp_path / "kits")
        assert not marker.exists(), "the co-tenant's program ran"
    assert rc == 4 and got == "OCI_CRED_HELPER_UNSAFE"
    assert all(sent is None for _, sent in handler.seen)
