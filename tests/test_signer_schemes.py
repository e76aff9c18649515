"""Signers by URI scheme: ``--key PATH``, ``file:PATH`` and ``pkcs11:`` against a real SoftHSM2.

Every test drives the real CLI in a subprocess against a real token (``tests/hsmkit.py``); the
signature it makes is checked by ``k3kit verify`` with the token's public key, which did not
change for HSM keys. Each refusal is named as the mistake or the attack it is, and must exit 3 or
4 with its registered code, never 70, and leave the kit's receipt as it was.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from cryptography.hazmat.primitives import serialization

from k3kit.signing.keys import keyid, load_public, to_cryptography
from tests.conftest import EXAMPLE, GoldenKit, run_k3kit
from tests.cotenant import cotenant_python, shared_folder
from tests.hsmkit import LABEL, PIN, Token, make_token, needs_softhsm

CLAIMS = EXAMPLE / "claims.toml"
_CLAIMS = ("--claims", str(CLAIMS), "--force", "--json")


@pytest.fixture(scope="module")
def token(tmp_path_factory: pytest.TempPathFactory) -> Token:
    """One token for the module: the tests only read it (sign, log in), never add objects."""
    return make_token(tmp_path_factory.mktemp("softhsm"))


def _sign(kit: Path, key: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_k3kit("sign", kit, "--key", key, "--claims", CLAIMS, "--force", "--json", env=env)


def _error_code(proc: subprocess.CompletedProcess[str]) -> str:
    return str(json.loads(proc.stdout)["error"]["code"])


@needs_softhsm
def test_a_release_key_held_by_softhsm_signs_a_receipt_verify_accepts(
    token: Token, kit: Path, golden: GoldenKit
) -> None:
    signed = _sign(kit, token.uri(), token.env)
    assert signed.returncode == 0, signed.stderr
    verified = run_k3kit("verify", kit, "--trust", token.release_public)
    assert verified.returncode == 0, verified.stderr
    # the token's key replaced the file key's signature: the old key no longer verifies it
    assert run_k3kit("verify", kit, "--trust", golden.key.public).returncode == 1
    assert json.loads(signed.stdout)["keyid"] == keyid(load_public(token.release_public))


@needs_softhsm
def test_pin_from_a_file_and_module_from_the_uri_countersign(
    token: Token, kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """RFC 7512's ``pin-source`` and ``module-path``: nothing from the environment but the
    token's folder, and the co-signature is the token's."""
    pin_file = tmp_path / "pin"
    pin_file.write_text(PIN + "\n")
    pin_file.chmod(0o600)
    uri = (
        f"pkcs11:token={LABEL};object=release?pin-source=file:{pin_file}&module-path={token.module}"
    )
    env = {"SOFTHSM2_CONF": str(token.conf), "K3KIT_PKCS11_MODULE": ""}
    done = run_k3kit("countersign", kit, "--key", uri, env=env)
    assert done.returncode == 0, done.stderr
    for pub in (golden.key.public, token.release_public):  # both signatures are there
        assert run_k3kit("verify", kit, "--trust", pub).returncode == 0


@needs_softhsm
def test_pin_from_passphrase_env_signs_an_sshsig(token: Token, kit: Path) -> None:
    """Without a PIN in the URI, ``--passphrase-env VAR`` gives it (the secrets callback), here
    for ``sshsig``, whose allowed_signers line carries the token's public key."""
    env = {**token.env, "K3_HSM_PIN": PIN}
    done = run_k3kit(
        "sshsig", kit, "--key", token.uri(pin=None), "--passphrase-env", "K3_HSM_PIN", env=env
    )
    assert done.returncode == 0, done.stderr
    pub = to_cryptography(load_public(token.release_public))
    line = pub.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert line.decode() in done.stdout
    assert base64.b64decode(line.split()[1])  # a real key blob, not an empty line


# (the attacker's or the mistaken operator's URI, the environment change, exit, code, message)
Refusal = tuple[Callable[[Token], str], dict[str, str], int, str, str]
REFUSALS: dict[str, Refusal] = {
    "wrong_pin": (lambda t: t.uri(pin="0000"), {}, 4, "HSM_PIN", "CKR_PIN_INCORRECT"),
    "missing_object": (lambda t: t.uri("nosuch"), {}, 4, "HSM_KEY_NOT_FOUND", "no private key"),
    "missing_token": (
        lambda t: t.uri().replace(LABEL, "no-such-token"),
        {},
        4,
        "HSM_KEY_NOT_FOUND",
        "no token present matches token=no-such-token",
    ),
    "unknown_scheme": (
        lambda t: t.uri().replace("pkcs11:", "pkcs12:"),
        {},
        3,
        "SIGNER_URI_INVALID",
        "no signer scheme of that name (known: file, pkcs11)",
    ),
    "uri_names_a_public_key": (
        lambda t: t.uri(extra=";type=public"),
        {},
        4,
        "KEY_IS_PUBLIC",
        "names a public object; signing needs the private key",
    ),
    "object_is_only_a_public_key": (
        lambda t: t.uri("pubonly"),
        {},
        4,
        "KEY_IS_PUBLIC",
        "names only a public key or certificate on the token",
    ),
    "key_is_not_ed25519": (lambda t: t.uri("p256"), {}, 4, "KEY_UNSUPPORTED", "not an Ed25519"),
    "public_object_swapped_for_another_key": (
        lambda t: t.uri("swapped"),
        {},
        4,
        "HSM_SIGN_FAILED",
        "does not verify with its own public key object",
    ),
    "unknown_attribute_smuggled": (
        lambda t: t.uri(extra=";x-vendor=1"),
        {},
        3,
        "SIGNER_URI_INVALID",
        "unsupported attribute 'x-vendor'",
    ),
    "no_pkcs11_module": (
        lambda t: t.uri(),
        {"K3KIT_PKCS11_MODULE": ""},
        4,
        "HSM_UNAVAILABLE",
        "no PKCS#11 module to load",
    ),
    "module_path_not_a_library": (
        lambda t: t.uri() + "&module-path=/nonexistent/libnothing.so",
        {},
        4,
        "HSM_UNAVAILABLE",
        "cannot load the PKCS#11 module",
    ),
}


@needs_softhsm
@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_bad_pkcs11_key_is_refused_with_its_code(token: Token, kit: Path, case: str) -> None:
    uri, env_change, exit_code, code, message = REFUSALS[case]
    receipt = (kit / "receipt.dsse.json").read_bytes()
    proc = _sign(kit, uri(token), {**token.env, **env_change})
    assert proc.returncode == exit_code, proc.stderr
    assert _error_code(proc) == code
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "pin-value=1234" not in proc.stderr + proc.stdout  # the PIN is never echoed
    assert "pin-value=0000" not in proc.stderr + proc.stdout
    assert (kit / "receipt.dsse.json").read_bytes() == receipt


@needs_softhsm
def test_a_pin_file_a_cotenant_can_read_is_refused(token: Token, kit: Path) -> None:
    """The PIN written to a world-readable file in a shared folder: the co-tenant (a real second
    user) reads it, so k3kit refuses to use it (as it refuses such a key file), exit 4."""
    with shared_folder(0o755) as shared:
        pin_file = shared / "hsm.pin"
        pin_file.write_text(PIN + "\n")
        pin_file.chmod(0o644)
        stolen = cotenant_python("import sys; print(open(sys.argv[1]).read())", str(pin_file))
        assert stolen.stdout.strip() == PIN  # the attack works: the PIN has leaked
        receipt = (kit / "receipt.dsse.json").read_bytes()
        proc = _sign(kit, f"pkcs11:token={LABEL};object=release?pin-source={pin_file}", token.env)
    assert proc.returncode == 4, proc.stderr
    assert _error_code(proc) == "KEY_TOO_PERMISSIVE"
    assert f"PIN file {pin_file} is accessible by group or others" in proc.stderr
    assert (kit / "receipt.dsse.json").read_bytes() == receipt


@needs_softhsm
def test_no_pin_anywhere_in_a_script_is_refused_not_prompted(token: Token, kit: Path) -> None:
    """A script (stdin not a terminal) with no PIN in the URI and no --passphrase-env gets the
    error naming the ways to give one, at once, instead of a prompt that hangs. Run without
    ``run_k3kit`` so that stdin is certainly not the terminal pytest may have been started from."""
    proc = subprocess.run(
        [sys.executable, "-m", "k3kit", "sign", kit, "--key", token.uri(pin=None), *_CLAIMS],
        env={**os.environ, **token.env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 4, proc.stderr
    assert _error_code(proc) == "HSM_PIN"
    assert "add ?pin-source=FILE to the URI, or pass --passphrase-env VAR" in proc.stderr


def test_without_pykcs11_a_pkcs11_key_names_the_extra(kit: Path) -> None:
    """A publisher without the ``hsm`` extra: PyKCS11 cannot be imported (as if not installed)."""
    script = (
        "import sys; sys.modules['PyKCS11'] = None; from k3kit.cli import main; "
        "sys.argv = ['k3kit', *sys.argv[1:]]; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, "sign", kit, "--key", "pkcs11:token=t;object=o", *_CLAIMS],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 4, proc.stderr
    assert _error_code(proc) == "EXTRA_NOT_INSTALLED"  # the one missing-extra error
    assert "pip install 'k3kit[hsm]'" in proc.stderr


def test_a_bare_path_and_a_file_uri_sign_the_same_bytes(
    golden: GoldenKit, kit: Path, tmp_path: Path
) -> None:
    """``--key PATH`` (every script written before schemes) and ``--key file:PATH`` are one key:
    Ed25519 is deterministic and the time is fixed, so the two receipts are byte-identical."""
    bare = _sign(kit, str(golden.key.private), {})
    assert bare.returncode == 0, bare.stderr
    by_path = (kit / "receipt.dsse.json").read_bytes()
    uri = _sign(kit, f"file:{golden.key.private}", {})
    assert uri.returncode == 0, uri.stderr
    assert (kit / "receipt.dsse.json").read_bytes() == by_path
    assert json.loads(bare.stdout)["keyid"] == json.loads(uri.stdout)["keyid"]


def test_a_key_file_whose_name_looks_like_a_scheme_still_signs(
    golden: GoldenKit, kit: Path, tmp_path: Path
) -> None:
    """``--key rel:2026.key`` written before schemes existed: no scheme ``rel`` is registered and
    the file is there, so it is the file; only when no such file exists is it an unknown scheme."""
    key = tmp_path / "rel:2026.key"
    key.write_bytes(golden.key.private.read_bytes())
    key.chmod(0o600)
    argv = ("sign", kit, "--key", key.name, "--claims", CLAIMS, "--force", "--json")
    signed = run_k3kit(*argv, cwd=tmp_path)
    assert signed.returncode == 0, signed.stderr
    assert run_k3kit("verify", kit, "--trust", golden.key.public).returncode == 0
    key.unlink()
    refused = run_k3kit(*argv, cwd=tmp_path)
    assert refused.returncode == 3, refused.stderr
    assert _error_code(refused) == "SIGNER_URI_INVALID"


def test_a_scheme_cannot_be_registered_twice() -> None:
    """A second module claiming ``file:`` would silently take over every bare --key path."""
    from k3kit.signing.schemes import SCHEMES, scheme

    before = dict(SCHEMES)
    with pytest.raises(ValueError, match="signer scheme 'file' registered twice"):
        scheme("file")(SCHEMES["pkcs11"])
    assert before == SCHEMES


def test_a_file_uri_to_a_public_key_is_still_named_a_public_key(
    golden: GoldenKit, kit: Path
) -> None:
    proc = _sign(kit, f"file:{golden.key.public}", {})
    assert proc.returncode == 4, proc.stderr
    assert _error_code(proc) == "KEY_IS_PUBLIC"


def _private_key_options() -> list[tuple[str, click.Option]]:
    """Every ``--key``/``--sign-key`` option of the CLI, by command path."""
    from k3kit.cli import cli

    found: list[tuple[str, click.Option]] = []

    def walk(cmd: click.Command, path: str) -> None:
        for param in cmd.params:
            if isinstance(param, click.Option) and {"--key", "--sign-key"} & set(param.opts):
                found.append((path, param))
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):  # verbs load on use (cli._app.VerbGroup)
                sub = cmd.get_command(ctx, name)
                assert sub is not None, name
                walk(sub, f"{path} {name}".strip())

    walk(cli, "")
    return found


def test_every_command_that_takes_a_private_key_takes_a_signer_uri() -> None:
    """The class, not the instance: a --key that reads a private key as a Path would bypass the
    schemes. Only the trust-root verbs' --key that names a PUBLIC key may stay a path."""
    options = _private_key_options()
    signing = [path for path, opt in options if opt.metavar == "URI"]
    assert {"sign", "accept", "countersign", "sshsig", "root sign", "root create"} <= set(signing)
    assert {"licence sign", "ledger checkpoint", "buyer-receipt issue"} <= set(signing)
    for path, opt in options:
        if opt.metavar != "URI":
            assert (opt.help or "").startswith("Public key"), f"{path} {opt.opts}: {opt.help}"
            assert isinstance(opt.type, click.Path)


def test_the_buyers_verify_path_never_loads_the_schemes_or_pykcs11() -> None:
    """The CLI (all verbs registered) and the verifier import neither the scheme registry nor
    PyKCS11: they are loaded only when a --key is opened."""
    script = (
        "import sys, k3kit.cli, k3kit.node.verify; "
        "print(sorted(m for m in sys.modules "
        "if m.startswith(('PyKCS11', 'k3kit.signing.schemes'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"
