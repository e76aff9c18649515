"""Attacks on `oci://` sources and `push` that the CLI refuses before a registry is asked
(tests/test_oci.py runs the ones that need a live registry: another manifest for a digest, an
oversized blob, a forged receipt referrer, a moved tag, a redirect to plain http)."""

from __future__ import annotations

import atexit
import http.server
import json
import os
from pathlib import Path

from tests.adversarial.corpus import Argv, Workbench, attack
from tests.netkit import serve_in_thread

_DIGEST = "@sha256:" + "e" * 64


@attack("OCI_PLAIN_HTTP", exit_code=3)
def install_oci_over_plain_http_from_another_machine(w: Workbench) -> Argv:
    """Whoever is on the path could swap the kit's bytes (the digest check would catch it)
    and read what the node fetches: plain http is for a registry on this machine only."""
    ref = "oci+http://registry.example.com/kits/kimi-k3" + _DIGEST
    return ["install", ref, "--trust", w.trust, "--into", w.root / "kits"]


@attack("OCI_TAG_NOT_PINNED", exit_code=3)
def install_oci_by_a_tag_the_registry_can_move(w: Workbench) -> Argv:
    ref = "oci://registry.example.com/kits/kimi-k3:stable"
    return ["install", ref, "--trust", w.trust, "--into", w.root / "kits"]


@attack("OCI_REF_INVALID", exit_code=3)
def install_oci_with_credentials_in_the_reference(w: Workbench) -> Argv:
    """A user:password@ in the reference would be sent somewhere; it is not a reference."""
    ref = "oci://admin:hunter2@registry.example.com/kits/kimi-k3" + _DIGEST
    return ["install", ref, "--trust", w.trust, "--into", w.root / "kits"]


@attack("OCI_REF_INVALID", exit_code=3)
def install_oci_with_a_path_escape_in_the_repository(w: Workbench) -> Argv:
    ref = "oci://registry.example.com/kits/../../v2/other" + _DIGEST
    return ["install", ref, "--trust", w.trust, "--into", w.root / "kits"]


@attack("RECEIPT_UNTRUSTED_KEY")
def push_a_kit_the_trusted_key_did_not_sign(w: Workbench) -> Argv:
    """The archive is verified (a private copy) before any byte goes to the registry: a kit
    signed by another key is never published (the registry here refuses every connection)."""
    ref = "oci://127.0.0.1:9/kits/kimi-k3:1.0.0"
    return ["push", w.archive(), ref, "--trust", w.other_key.public]


@attack("OCI_TAG_NOT_PINNED", exit_code=3)
def render_site_kit_ref_by_tag(w: Workbench) -> Argv:
    site = w.root / "site.env"
    site.write_text("MODEL_DIR=/srv/models/kimi\nIMAGE=r.example/k@sha256:" + "b" * 64 + "\n")
    return [
        "render-site",
        w.kit(),
        "--trust",
        w.trust,
        "--site",
        site,
        "-o",
        w.root / "out",
        "--kit-ref",
        "oci://registry.example.com/kits/kimi-k3:latest",
    ]


@attack("USAGE", exit_code=2)
def render_site_pull_secret_name_that_breaks_out_of_the_yaml(w: Workbench) -> Argv:
    """The Secret's name is written into the pod's YAML: one that closes the flow mapping and
    adds a hostPath of its own must be refused, not rendered."""
    site = w.root / "site.env"
    site.write_text("MODEL_DIR=/srv/models/kimi\nIMAGE=r.example/k@sha256:" + "b" * 64 + "\n")
    return [
        "render-site", w.kit(), "--trust", w.trust, "--site", site, "-o", w.root / "out",
        "--kit-ref", "oci://registry.example.com/kits/kimi-k3@sha256:" + "c" * 64,
        "--kit-pull-secret", "regcred}\n        - name: host\n          hostPath: {path: /}",
    ]  # fmt: skip


@attack("KIT_NOT_RECOGNISED", exit_code=3)
def push_an_endless_device_as_the_archive(w: Workbench) -> Argv:
    """A name that reads forever (a device, a FIFO) would fill the private copy's disk."""
    endless = w.root / "kimi.kit.tar.gz"
    endless.symlink_to("/dev/zero")
    return ["push", endless, "oci://127.0.0.1:9/kits/kimi-k3:1.0.0", "--trust", w.trust]


def _update_from_registry(w: Workbench, registry: str) -> Argv:
    """``update --from-registry``: refused on the reference alone, before the channel (never
    contacted: example.com) or the registry is asked."""
    return [
        "update", "--channel", "stable", "--from", "https://channel.example.com/stable",
        "--from-registry", registry, "--channel-root", w.root / "1.root.json",
        "--into", w.root / "kits", "--trust", w.trust, "--state-dir", w.root / "state",
    ]  # fmt: skip


@attack("OCI_REF_INVALID", exit_code=3)
def update_from_registry_by_a_tag_the_registry_can_move(w: Workbench) -> Argv:
    """The kit's digest is the channel's signed sha256: a tag beside it would be the
    registry's word on which bytes to install."""
    return _update_from_registry(w, "oci://registry.example.com/kits/kimi-k3:latest")


@attack("OCI_REF_INVALID", exit_code=3)
def update_from_registry_with_credentials_in_the_reference(w: Workbench) -> Argv:
    """A password belongs in the credentials file (docs/oci.md), never in an argument that
    ends up in shell history, process lists and messages."""
    return _update_from_registry(w, "oci://admin:hunter2@registry.example.com/kits/kimi-k3")


class _LyingRegistry(http.server.BaseHTTPRequestHandler):
    """A registry on 127.0.0.1 that asks for a token (``challenge``) and whose token service
    answers ``token_body``: both the attacker's words."""

    challenge = ""
    token_body = b""

    def do_GET(self) -> None:
        if self.path.startswith("/token"):
            self._answer(200, {}, self.token_body)
        else:
            origin = f"http://{self.headers['Host']}"
            self._answer(401, {"WWW-Authenticate": self.challenge.replace("{origin}", origin)})

    def _answer(self, status: int, headers: dict[str, str], body: bytes = b"{}") -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _lying_registry(challenge: str, token_body: bytes = b"{}") -> str:
    """``HOST:PORT`` of a :class:`_LyingRegistry` that lives until the test process ends (the
    corpus runs the argv after the builder returns)."""
    attrs = {"challenge": challenge, "token_body": token_body}
    handler = type("Lying", (_LyingRegistry,), attrs)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve_in_thread(server)
    atexit.register(server.shutdown)
    return f"127.0.0.1:{server.server_address[1]}"


@attack("OCI_AUTH_REALM_REFUSED", exit_code=4)
def install_oci_from_a_registry_whose_token_realm_is_no_url(w: Workbench) -> Argv:
    """The registry names a realm with a port out of range: the origin check must refuse it,
    not crash on it (it was ``ValueError``, exit 70)."""
    host = _lying_registry('Bearer realm="https://registry.example:99999/token",service="r"')
    return ["install", f"oci://{host}/kits/kimi-k3{_DIGEST}", "--trust", w.trust,
            "--into", w.root / "kits"]  # fmt: skip


@attack("OCI_REGISTRY_ERROR", exit_code=4)
def install_oci_from_a_registry_whose_token_service_answers_deep_json(w: Workbench) -> Argv:
    """The token service answers 60 000 ``[``: the JSON parser's ``RecursionError`` is the
    registry's error, not a traceback (it was exit 70)."""
    host = _lying_registry('Bearer realm="{origin}/token",service="r"', b"[" * 60_000)
    return ["install", f"oci://{host}/kits/kimi-k3{_DIGEST}", "--trust", w.trust,
            "--into", w.root / "kits"]  # fmt: skip


# -- credential helpers (docs/oci.md, "Credential helpers") ---------------------------------------


def _with_helper(w: Workbench, name: object, helper_dir: Path | None, body: str = "") -> Argv:
    """``install oci://`` from a registry that asks for Basic credentials, by a user whose
    docker config names credential helper ``name`` for it, with ``helper_dir`` first on PATH
    holding ``docker-credential-NAME`` (``body``, a shell script) when given."""
    host = _lying_registry('Basic realm="r"')
    docker = w.root / "docker"
    docker.mkdir()
    config = docker / "config.json"
    config.write_text(json.dumps({"credHelpers": {host: name}}))
    config.chmod(0o600)
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if helper_dir is not None:
        script = helper_dir / f"docker-credential-{name}"
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
        path = f"{helper_dir}:{path}"
    w.env.update(
        REGISTRY_AUTH_FILE="", XDG_RUNTIME_DIR=str(w.root / "no-runtime"),
        DOCKER_CONFIG=str(docker), PATH=path,
    )  # fmt: skip
    return ["install", f"oci://{host}/kits/kimi-k3{_DIGEST}", "--trust", w.trust,
            "--into", w.root / "kits"]  # fmt: skip


@attack("OCI_CRED_HELPER_UNSAFE", exit_code=4)
def install_oci_with_a_credential_helper_in_a_folder_anyone_can_write(w: Workbench) -> Argv:
    """The helper sits in a folder anyone may write and that is not sticky (a shared bin):
    whoever swaps it runs their code as the victim and chooses the credentials sent. Never
    run (the co-tenant's own plant: tests/test_oci_credhelper.py)."""
    shared = w.root / "shared-bin"
    shared.mkdir()
    shared.chmod(0o777)
    return _with_helper(w, "shared", shared, f"touch {w.root / 'ran'}\n")


@attack("OCI_AUTH_FILE_INVALID", exit_code=3)
def install_oci_with_a_credential_helper_named_as_a_path(w: Workbench) -> Argv:
    """``docker-credential-../../tmp/x`` would be a path ``shutil.which`` runs, not a lookup
    on PATH: the config file names no helper k3kit may run."""
    return _with_helper(w, "../../tmp/x", None)


@attack("OCI_CRED_HELPER_FAILED", exit_code=4)
def install_oci_with_a_credential_helper_that_fails_printing_its_secret(w: Workbench) -> Argv:
    """A helper that fails with the secret in its stdout and stderr: a registered code, and
    nothing it printed is echoed (the corpus checks the code; the test file the secret)."""
    helper_dir = w.root / "bin"
    helper_dir.mkdir()
    body = "echo 'secret-k3kit-corpus-7Yw rejected'\necho 'secret-k3kit-corpus-7Yw' >&2\nexit 5\n"
    return _with_helper(w, "failing", helper_dir, body)


@attack("BAD_PROXY_SETTING", exit_code=3)
def install_oci_through_a_socks_proxy_variable_the_client_cannot_use(w: Workbench) -> Argv:
    """``ALL_PROXY=socks5://…`` from a site image (httpx has no SOCKS without socksio): the
    client refused it while being built, and k3kit said exit 70, "please report it"."""
    w.env.update({"ALL_PROXY": "socks5://u:pw@127.0.0.1:1", "HTTPS_PROXY": "", "NO_PROXY": ""})
    w.env["REGISTRY_AUTH_FILE"] = str(w.root / "absent.json")
    ref = "oci://registry.example.com/kits/kimi-k3" + _DIGEST
    return ["install", ref, "--trust", w.trust, "--into", w.root / "kits"]
