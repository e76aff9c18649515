"""keygen and key loading, through the real CLI, checked against securesystemslib and ssh-keygen."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from tests.conftest import run_k3kit


def test_keygen_writes_0600_private_key_and_reports_interoperable_ids(tmp_path: Path) -> None:
    proc = run_k3kit("keygen", "--out", tmp_path / "pub1", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    private, public = tmp_path / "pub1.key", tmp_path / "pub1.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert b"BEGIN PRIVATE KEY" in private.read_bytes()
    pub = serialization.load_pem_public_key(public.read_bytes())

    from securesystemslib.signer import SSlibKey

    assert out["keyid"] == SSlibKey.from_crypto(pub).keyid

    if shutil.which("ssh-keygen"):
        openssh = pub.public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        (tmp_path / "k.openssh.pub").write_bytes(openssh + b" test\n")
        listing = subprocess.run(
            ["ssh-keygen", "-lf", str(tmp_path / "k.openssh.pub")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert listing.split()[1] == out["fingerprint"]


def test_keygen_refuses_to_overwrite(tmp_path: Path) -> None:
    assert run_k3kit("keygen", "--out", tmp_path / "k").returncode == 0
    before = (tmp_path / "k.key").read_bytes()
    proc = run_k3kit("keygen", "--out", tmp_path / "k")
    assert proc.returncode == 3
    assert "exists" in proc.stderr and "Traceback" not in proc.stderr
    assert (tmp_path / "k.key").read_bytes() == before


def test_group_readable_private_key_is_refused_with_hint(tmp_path: Path, kit: Path) -> None:
    assert run_k3kit("keygen", "--out", tmp_path / "k").returncode == 0
    os.chmod(tmp_path / "k.key", 0o640)
    proc = run_k3kit(
        "sign",
        kit,
        "--key",
        tmp_path / "k.key",
        "--claims",
        Path(__file__).parents[1] / "examples/kimi-k3-b300x8/claims.toml",
        "--force",
    )
    assert proc.returncode == 4
    assert "chmod 600" in proc.stderr


def test_passphrase_encrypted_key_needs_its_passphrase(tmp_path: Path, kit: Path) -> None:
    env = {"K3_PASS": "correct horse"}
    proc = run_k3kit("keygen", "--out", tmp_path / "enc", "--passphrase-env", "K3_PASS", env=env)
    assert proc.returncode == 0, proc.stderr
    assert b"ENCRYPTED PRIVATE KEY" in (tmp_path / "enc.key").read_bytes()
    claims = Path(__file__).parents[1] / "examples/kimi-k3-b300x8/claims.toml"
    no_pass = run_k3kit("sign", kit, "--key", tmp_path / "enc.key", "--claims", claims, "--force")
    assert no_pass.returncode == 4 and "--passphrase-env" in no_pass.stderr
    wrong = run_k3kit(
        "sign",
        kit,
        "--key",
        tmp_path / "enc.key",
        "--claims",
        claims,
        "--force",
        "--passphrase-env",
        "K3_PASS",
        env={"K3_PASS": "wrong"},
    )
    assert wrong.returncode == 4
    ok = run_k3kit(
        "sign",
        kit,
        "--key",
        tmp_path / "enc.key",
        "--claims",
        claims,
        "--force",
        "--passphrase-env",
        "K3_PASS",
        env=env,
    )
    assert ok.returncode == 0, ok.stderr
    verified = run_k3kit("verify", kit, "--trust", tmp_path / "enc.pub")
    assert verified.returncode == 0, verified.stderr


@pytest.mark.parametrize("content", [b"", b"not a key", b"-----BEGIN PUBLIC KEY-----\nAAAA\n"])
def test_unreadable_trust_key_is_an_environment_error(
    tmp_path: Path, kit: Path, content: bytes
) -> None:
    bad = tmp_path / "bad.pub"
    bad.write_bytes(content)
    proc = run_k3kit("verify", kit, "--trust", bad)
    assert proc.returncode == 4
    assert "Traceback" not in proc.stderr


def test_public_key_given_to_key_is_named_as_such_not_chmod_or_passphrase(
    tmp_path: Path, kit: Path
) -> None:
    """The .pub beside the .key handed to --key (PEM, or an OpenSSH one-liner) used to be told to
    `chmod 600` and, after that, that the passphrase was wrong: it is now named as a public key
    (exit 4, KEY_IS_PUBLIC) before any permission check, by every verb that loads a --key."""
    assert run_k3kit("keygen", "--out", tmp_path / "k").returncode == 0
    pem_pub = tmp_path / "k.pub"
    assert os.stat(pem_pub).st_mode & 0o044  # world-readable, as keygen writes it
    pub = serialization.load_pem_public_key(pem_pub.read_bytes())
    ssh_pub = tmp_path / "id_ed25519.pub"
    ssh_pub.write_bytes(
        pub.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        + b" me@host\n"
    )
    claims = Path(__file__).parents[1] / "examples/kimi-k3-b300x8/claims.toml"
    receipt = (kit / "receipt.dsse.json").read_bytes()
    for key in (pem_pub, ssh_pub):
        for argv in (
            ("sign", kit, "--key", key, "--claims", claims, "--force"),
            ("countersign", kit, "--key", key),
            (
                "ledger",
                "checkpoint",
                "--db",
                tmp_path / "l.sqlite",
                "--key",
                key,
                "-o",
                tmp_path / "head.json",
            ),
        ):
            proc = run_k3kit(*argv)
            assert proc.returncode == 4, proc.stderr
            assert f"{key} is a public key; --key needs the private key" in proc.stderr
            assert "chmod" not in proc.stderr and "passphrase" not in proc.stderr
    named = run_k3kit("countersign", kit, "--key", pem_pub)
    assert f"({tmp_path / 'k.key'}, not {pem_pub})" in named.stderr
    assert (kit / "receipt.dsse.json").read_bytes() == receipt
    assert not (tmp_path / "head.json").exists()


_SPKI = (serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _keygen_pems() -> list[bytes]:
    """Ed25519 public keys in the PEM form keygen writes, from fixed seeds."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    seeds = [bytes([i]) * 32 for i in range(1, 9)]
    return [
        ed25519.Ed25519PrivateKey.from_private_bytes(s).public_key().public_bytes(*_SPKI)
        for s in seeds
    ]


def _other_pems() -> list[bytes]:
    """Near-misses of that form (line endings, padding, other key types)."""
    from cryptography.hazmat.primitives.asymmetric import ed448, x25519

    first = _keygen_pems()[0]
    return [
        first.replace(b"\n", b"\r\n"),
        first.rstrip(b"\n"),
        first + b"\n",
        b" " + first,
        first.replace(b"=\n", b"\n", 1),
        x25519.X25519PrivateKey.from_private_bytes(bytes(32)).public_key().public_bytes(*_SPKI),
        ed448.Ed448PrivateKey.from_private_bytes(bytes(57)).public_key().public_bytes(*_SPKI),
    ]


def _cryptography_raw(pem: bytes) -> bytes | None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(pem)
    except ValueError:
        return None
    return key.public_bytes_raw() if isinstance(key, Ed25519PublicKey) else None


@pytest.mark.parametrize("pem", _keygen_pems())
def test_keygens_pem_is_read_without_serialization_as_cryptography_reads_it(pem: bytes) -> None:
    # verify reads keygen's PEM without importing cryptography's serialization package (a node's
    # start-up, docs/performance.md): for that form both readers give the same key
    from k3kit.signing.keys import _spki_pem_ed25519

    fast = _spki_pem_ed25519(pem)
    assert fast is not None and fast.public_bytes_raw() == _cryptography_raw(pem)


@pytest.mark.parametrize("pem", _other_pems())
def test_other_spellings_of_a_key_are_left_to_cryptography_or_read_alike(pem: bytes) -> None:
    from k3kit.signing.keys import _spki_pem_ed25519

    fast = _spki_pem_ed25519(pem)
    assert fast is None or fast.public_bytes_raw() == _cryptography_raw(pem)


@pytest.mark.parametrize(
    "text",
    ["", "YQ==", "YWI=", "YWJj", "YQ", "YQ=", "Y===", "YQ==\n", "-_8=", "+/8=", "YW Jj", "YQ==YQ"],
)
def test_dsse_base64_is_decoded_as_base64_b64decode_validating(text: str) -> None:
    """k3kit.signing.sign decodes with binascii (the base64 module is not imported on verify's
    path): the same bytes, and the same refusals, as ``base64.b64decode(validate=True)``."""
    import base64
    import binascii
    import re

    from k3kit.errors import VerificationError
    from k3kit.signing.sign import _b64decode

    def old(text: str) -> bytes | str:
        # fullmatch: with match, `$` also matched before a final newline ("YQ==\n" then failed
        # only in the strict decode; the pattern now refuses it, by the same code)
        if not re.fullmatch(r"^[A-Za-z0-9+/_-]*={0,2}$", text):
            return "is not base64"
        try:
            return base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            return "is not valid base64"

    try:
        got: bytes | str = _b64decode(text, "x")
    except VerificationError as exc:
        assert exc.code == "RECEIPT_MALFORMED"
        got = exc.message.removeprefix("x ")
    assert got == old(text)
