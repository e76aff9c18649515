"""Docker credential helpers (docs/oci.md, "Credential helpers"): a config file's ``credHelpers``
or ``credsStore`` names ``docker-credential-NAME``, which k3kit runs with the registry's server
name on stdin and whose ``{"Username", "Secret"}`` answer it sends.

Every helper here is a real program: a shell script the test writes into a folder it puts on
``PATH``, run as a real subprocess. The logins go to a real registry (Debian's docker-registry
with its own ``auth: htpasswd``, tests/ocikit.py) or to the registry stand-in of
tests/test_oci_attacks.py, which records every ``Authorization`` it is sent. The attacks: a
helper a co-tenant (a real second user, uid 65534) placed on ``PATH``, a helper in a folder
others can write, a helper name that is a path, a helper that fails with the secret in its
output, one that answers no JSON, one that hangs (and forks), one that prints 10 MB, and an
identity token. Every CLI call is checked for the secret in all output, ``--debug`` included.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from k3kit.errors import EnvironmentProblem
from k3kit.oci import credhelper
from k3kit.oci.auth import credential_for
from tests.conftest import GoldenKit, run_k3kit
from tests.cotenant import cotenant_python, needs_root, shared_folder
from tests.ocikit import LiveRegistry, needs_bcrypt, needs_registry
from tests.test_oci_attacks import PASSWORD, USER, b64, code, install, registry
from tests.test_oci_auth import PASSWORD as REGISTRY_PASSWORD
from tests.test_oci_auth import archive, locked  # noqa: F401 - fixtures

SECRET = PASSWORD  # what every helper here knows; install() checks it is never printed
REPO = "kits/kimi-k3"


def helper(folder: Path, name: str, body: str) -> Path:
    """``docker-credential-NAME`` in ``folder``: a ``/bin/sh`` script with ``body``."""
    folder.mkdir(exist_ok=True)
    path = folder / f"docker-credential-{name}"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def answering(user: str, secret: str, seen: Path) -> str:
    """A helper body that keeps what it read on stdin in ``seen`` and answers as docker's do."""
    answer = json.dumps({"ServerURL": "ignored", "Username": user, "Secret": secret})
    return f"[ \"$1\" = get ] || exit 2\ncat > {seen}\nprintf '%s' '{answer}'\n"


def config(folder: Path, doc: dict[str, object]) -> Path:
    """A docker config.json holding ``doc``, private, as `docker login` leaves it."""
    folder.mkdir(exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return path


def env_for(tmp_path: Path, doc: dict[str, object], bin_dir: Path) -> dict[str, str]:
    """The environment of a user whose only credentials file is ``doc`` (docker's config.json)
    and whose PATH starts with ``bin_dir``."""
    docker = config(tmp_path / "docker", doc)
    return {
        "REGISTRY_AUTH_FILE": "",
        "XDG_RUNTIME_DIR": str(tmp_path / "no-runtime"),
        "DOCKER_CONFIG": str(docker.parent),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }


def cli(env: dict[str, str], *args: str | Path) -> tuple[int, dict[str, object]]:
    """The real CLI with --debug; nothing secret and no traceback in any of its output."""
    done = run_k3kit("--debug", *args, "--json", env=env)
    text = done.stdout + done.stderr
    assert "Traceback" not in text and done.returncode != 70, text
    for secret in (SECRET, REGISTRY_PASSWORD):
        assert secret not in text and b64(USER, secret) not in text, "the secret was printed"
    return done.returncode, json.loads(done.stdout or "{}")


# -- a real registry with htpasswd ----------------------------------------------------------------


@needs_registry
@needs_bcrypt
def test_push_and_install_with_credentials_from_a_credhelpers_helper(
    locked: LiveRegistry,  # noqa: F811
    archive: Path,  # noqa: F811
    golden: GoldenKit,
    tmp_path: Path,
) -> None:
    """``credHelpers`` names the helper for this registry: it is asked with the registry's
    server name on stdin and its answer logs in, for push and for install."""
    seen = tmp_path / "stdin"
    helper(tmp_path / "bin", "k3test", answering(USER, REGISTRY_PASSWORD, seen))
    env = env_for(tmp_path, {"credHelpers": {locked.host: "k3test"}}, tmp_path / "bin")
    rc, out = cli(env, "push", archive, f"oci://{locked.host}/{REPO}:1.0.0",
                  "--trust", golden.key.public)  # fmt: skip
    assert rc == 0, out
    assert seen.read_text().strip() == locked.host
    ref = f"oci://{locked.host}/{REPO}@{out['digest']}"
    rc, out = cli(env, "install", ref, "--trust", golden.key.public, "--into", tmp_path / "kits")
    assert rc == 0, out
    assert any((tmp_path / "kits").iterdir())


@needs_registry
@needs_bcrypt
def test_attack_a_credsstore_secret_the_registry_refuses_is_auth_failed_and_never_printed(
    locked: LiveRegistry,  # noqa: F811
    archive: Path,  # noqa: F811
    golden: GoldenKit,
    tmp_path: Path,
) -> None:
    """``credsStore`` (every registry's logins in one helper, docker desktop's way): a secret
    the registry refuses is OCI_AUTH_FAILED naming the file and the helper, never the secret."""
    helper(tmp_path / "bin", "store", answering(USER, SECRET, tmp_path / "stdin"))
    doc: dict[str, object] = {"auths": {locked.host: {}}, "credsStore": "store"}
    env = env_for(tmp_path, doc, tmp_path / "bin")
    rc, out = cli(env, "push", archive, f"oci://{locked.host}/{REPO}:1.0.0",
                  "--trust", golden.key.public)  # fmt: skip
    assert rc == 4 and code(out) == "OCI_AUTH_FAILED", out
    message = str(out["error"]["message"])  # type: ignore[index]
    assert "docker-credential-store" in message and "config.json" in message


# -- the registry stand-in: what was sent --------------------------------------------------------


def _install(env: dict[str, str], host: str, golden: GoldenKit, into: Path) -> tuple[int, str]:
    rc, out = install(host, golden.key.public, into, env, debug=True)
    return rc, code(out)


def test_the_helper_s_answer_is_what_the_registry_is_sent(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The control for the attacks below: the same stand-in, a helper that answers."""
    with registry(challenge='Basic realm="reg"') as (host, handler):
        helper(tmp_path / "bin", "ok", answering(USER, SECRET, tmp_path / "stdin"))
        env = env_for(tmp_path, {"credHelpers": {host: "ok"}}, tmp_path / "bin")
        rc, got = _install(env, host, golden, tmp_path / "kits")
    assert rc == 4 and got == "OCI_NOT_FOUND"  # logged in; the stand-in has no such kit
    assert handler.seen[-1][1] == "Basic " + b64(USER, SECRET)


def test_attack_a_failing_helper_s_output_is_never_echoed(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A helper that fails with the secret in its stdout and stderr (a debug print, an error
    quoting the token): OCI_CRED_HELPER_FAILED, nothing of either shown, nothing sent."""
    body = f"echo 'token {SECRET} rejected'\necho 'stderr {SECRET}' >&2\nexit 3\n"
    with registry(challenge='Basic realm="reg"') as (host, handler):
        helper(tmp_path / "bin", "broken", body)
        env = env_for(tmp_path, {"credHelpers": {host: "broken"}}, tmp_path / "bin")
        rc, got = _install(env, host, golden, tmp_path / "kits")
    assert rc == 4 and got == "OCI_CRED_HELPER_FAILED"
    assert all(sent is None for _, sent in handler.seen)


def test_a_helper_with_no_login_for_the_registry_is_no_credential(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The protocol's "no login" (exit 1, ``credentials not found in native keychain``) is
    not a failure: no credential, so the registry's 401 is OCI_AUTH_REQUIRED."""
    body = f"echo '{credhelper.NOT_FOUND}'\nexit 1\n"
    with registry(challenge='Basic realm="reg"') as (host, handler):
        helper(tmp_path / "bin", "empty", body)
        env = env_for(tmp_path, {"credsStore": "empty"}, tmp_path / "bin")
        rc, got = _install(env, host, golden, tmp_path / "kits")
    assert rc == 4 and got == "OCI_AUTH_REQUIRED"
    assert all(sent is None for _, sent in handler.seen)


@pytest.mark.parametrize(
    "answer",
    [
        f"not json {SECRET}",
        json.dumps({"Username": USER}),
        json.dumps({"Username": USER, "Secret": 7}),
        json.dumps([USER, SECRET]),
        json.dumps({"Username": "a:b", "Secret": SECRET}),
        json.dumps({"Username": USER, "Secret": SECRET + "\n"}),
    ],
)
def test_attack_a_helper_answer_that_is_not_one_is_refused_unechoed(
    golden: GoldenKit, tmp_path: Path, answer: str
) -> None:
    body = f"cat > /dev/null\nprintf '%s' '{answer}'\n"
    with registry(challenge='Basic realm="reg"') as (host, handler):
        helper(tmp_path / "bin", "odd", body)
        env = env_for(tmp_path, {"credHelpers": {host: "odd"}}, tmp_path / "bin")
        rc, got = _install(env, host, golden, tmp_path / "kits")
    assert rc == 4 and got == "OCI_CRED_HELPER_FAILED"
    assert all(sent is None for _, sent in handler.seen)


def test_an_identity_token_is_refused_with_its_own_words(golden: GoldenKit, tmp_path: Path) -> None:
    """``Username: <token>`` means the Secret is an OAuth2 refresh token for the registry's
    token service (docker's identity token); k3kit does not make that exchange and says so."""
    with registry(challenge='Basic realm="reg"') as (host, handler):
        helper(tmp_path / "bin", "oauth", answering("<token>", SECRET, tmp_path / "stdin"))
        env = env_for(tmp_path, {"credHelpers": {host: "oauth"}}, tmp_path / "bin")
        rc, out = cli(env, "install", f"oci://{host}/{REPO}@sha256:{'ab' * 32}",
                      "--trust", golden.key.public, "--into", tmp_path / "kits")  # fmt: skip
    assert rc == 4 and code(out) == "OCI_CRED_HELPER_FAILED"
    assert "identity token" in str(out["error"]["message"])  # type: ignore[index]
    assert all(sent is None for _, sent in handler.seen)


@pytest.mark.parametrize("name", ["../../tmp/evil", "/usr/bin/id", "-x", "a b", 7])
def test_attack_a_helper_name_that_is_a_path_is_refused_before_anything_runs(
    golden: GoldenKit, tmp_path: Path, name: object
) -> None:
    """``docker-credential-../../tmp/evil`` would be a path, not a lookup on PATH: the config
    names no helper k3kit may run (OCI_AUTH_FILE_INVALID), and nothing is run or sent."""
    with registry(challenge='Basic realm="reg"') as (host, handler):
        env = env_for(tmp_path, {"credHelpers": {host: name}}, tmp_path / "bin")
        rc, got = _install(env, host, golden, tmp_path / "kits")
    assert rc == 3 and got == "OCI_AUTH_FILE_INVALID"
    assert all(sent is None for _, sent in handler.seen)


def test_a_helper_missing_from_path_is_a_named_failure(golden: GoldenKit, tmp_path: Path) -> None:
    with registry(challenge='Basic realm="reg"') as (host, _):
        env = env_for(tmp_path, {"credsStore": "k3kit-absent"}, tmp_path / "empty-bin")
        rc, got = _install(env, host, golden, tmp_path / "kits")
    assert rc == 4 and got == "OCI_CRED_HELPER_FAILED"


# -- placed by someone else ---------------------------------------------------------------------


@needs_root
def test_attack_cotenant_places_a_credential_helper_on_path(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A real second user writes ``docker-credential-ecr-login`` into a shared folder on the
    victim's PATH (a sticky ``/tmp/bin``): running it would run their code as the victim and
    send whatever it answers. It is never run (its marker is never made), nothing is sent."""
    cotenant_plants_then_install(
        "import os, sys; p = os.path.join(sys.argv[1], 'docker-credential-ecr-login'); "
        "body = '#!/bin/sh\\ntouch ' + sys.argv[2] + '\\n"
        'echo {\\"Username\\": \\"x\\", \\"Secret\\": \\"y\\"}\\n\'; '
        "open(p, 'w').write(body); os.chmod(p, 0o755)",
        golden,
        tmp_path,
    )


def cotenant_plants_then_install(plant: str, golden: GoldenKit, tmp_path: Path) -> None:
    """The co-tenant (uid 65534) runs ``plant`` with a sticky shared folder and a marker path
    as its arguments; that folder is on the victim's PATH and ``ecr-login`` is the helper the
    victim's config names. The victim's install must not run anything the co-tenant chose
    (the marker stays absent), is OCI_CRED_HELPER_UNSAFE, and sends no credentials."""
    with shared_folder() as shared, registry(challenge='Basic realm="reg"') as (host, handler):
        marker = shared / "ran"
        cotenant_python(plant, str(shared), str(marker))
        env = env_for(tmp_path, {"credHelpers": {host: "ecr-login"}}, shared)
        rc, got = _install(env, host, golden, tmp_path / "kits")
        assert not marker.exists(), "the co-tenant's program ran as the victim"
    assert rc == 4 and got == "OCI_CRED_HELPER_UNSAFE"
    assert all(sent is None for _, sent in handler.seen)


def test_attack_own_helper_in_a_folder_others_can_write_is_not_run(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Our own helper, but in a folder anyone can write and that is not sticky: anyone could
    rename it away and put theirs in its place between k3kit's look and its run."""
    with (
        shared_folder(mode=0o777) as shared,
        registry(challenge='Basic realm="reg"') as (
            host,
            handler,
        ),
    ):
        marker = tmp_path / "ran"
        helper(shared, "swappable", f"touch {marker}\n" + answering(USER, SECRET, marker))
        env = env_for(tmp_path, {"credHelpers": {host: "swappable"}}, shared)
        rc, got = _install(env, host, golden, tmp_path / "kits")
    assert rc == 4 and got == "OCI_CRED_HELPER_UNSAFE"
    assert not marker.exists()
    assert all(sent is None for _, sent in handler.seen)


# -- bounded: time and output (the library call, with the time knob lowered) ----------------------


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private bin folder first on PATH, and a docker config naming helper ``h`` for
    ``registry.example``; yields the bin folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = config(tmp_path / "docker", {"credHelpers": {"registry.example": "h"}})
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("REGISTRY_AUTH_FILE", "")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "no-runtime"))
    monkeypatch.setenv("DOCKER_CONFIG", str(docker.parent))
    yield bin_dir


def _process_is_gone(pid: int) -> bool:
    """Whether ``pid`` no longer runs (gone, or a zombie waiting for its parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_attack_a_helper_that_hangs_is_killed_with_what_it_forked(
    on_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper that forks a child holding its stdout open and then never answers: k3kit
    gives up at its deadline (lowered here to 2 s: the helper would sleep 10 minutes) and
    kills the whole process group, the child too. No assertion on how long it took; the
    child's pid is written atomically first thing, so a machine too loaded to start the
    child within 2 s leaves no pid file and no child to outlive anything."""
    monkeypatch.setattr(credhelper, "TIMEOUT_S", 2.0)
    pid_file = tmp_path / "child.pid"
    body = f"sleep 600 &\necho $! > {pid_file}.part && mv {pid_file}.part {pid_file}\nsleep 600\n"
    helper(on_path, "h", body)
    with pytest.raises(EnvironmentProblem) as exc:
        credential_for("https://registry.example", REPO)
    assert exc.value.code == "OCI_CRED_HELPER_FAILED"
    assert "did not answer within 2 s" in exc.value.message
    if not pid_file.exists():
        return
    child = int(pid_file.read_text())
    for _ in range(600):  # SIGKILL is delivered asynchronously; the outcome is not in doubt
        if _process_is_gone(child):
            break
        time.sleep(0.05)
    assert _process_is_gone(child), "the helper's child outlived it"


def test_attack_a_helper_that_prints_10_mb_is_cut_off(on_path: Path) -> None:
    """10 MB where a few KiB of JSON belong: read up to the 64 KiB cap, then refused."""
    helper(on_path, "h", "head -c 10000000 /dev/zero\n")
    with pytest.raises(EnvironmentProblem) as exc:
        credential_for("https://registry.example", REPO)
    assert exc.value.code == "OCI_CRED_HELPER_FAILED"
    assert f"more than {credhelper.MAX_OUTPUT} bytes" in exc.value.message


def test_a_helper_is_asked_only_for_its_own_registry(on_path: Path, tmp_path: Path) -> None:
    """``credHelpers`` keys compare as ``auths`` keys do: the helper for ``registry.example``
    is not asked for ``registry.example.evil`` (no credential), and is for another spelling of
    the same server."""
    seen = tmp_path / "stdin"
    helper(on_path, "h", answering(USER, SECRET, seen))
    assert credential_for("https://registry.example.evil", REPO) is None
    assert not seen.exists()
    found = credential_for("https://Registry.Example:443", REPO)
    assert found is not None and found.password == SECRET and found.helper == "h"
    assert SECRET not in repr(found)


def test_an_identity_token_in_the_file_itself_is_refused_with_its_own_words(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """docker login against an OAuth registry writes ``identitytoken`` and no ``auth``: the
    same refusal in the file's words (OCI_AUTH_FILE_INVALID), the token never echoed."""
    with registry(challenge='Basic realm="reg"') as (host, handler):
        doc: dict[str, object] = {"auths": {host: {"identitytoken": SECRET}}}
        env = env_for(tmp_path, doc, tmp_path / "bin")
        rc, out = cli(env, "install", f"oci://{host}/{REPO}@sha256:{'ab' * 32}",
                      "--trust", golden.key.public, "--into", tmp_path / "kits")  # fmt: skip
    assert rc == 3 and code(out) == "OCI_AUTH_FILE_INVALID"
    assert "identity token" in str(out["error"]["message"])  # type: ignore[index]
    assert all(sent is None for _, sent in handler.seen)
