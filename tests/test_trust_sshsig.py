"""SSHSIG of the kit checksum, checked by the real ``ssh-keygen -Y verify`` (OpenSSH)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from k3kit.errors import VerificationError
from k3kit.signing.trust import sshsig
from tests.conftest import EXAMPLE, GoldenKit, KeyFiles, run_k3kit
from tests.trustkit import signer

SSH_KEYGEN = shutil.which("ssh-keygen")
needs_ssh_keygen = pytest.mark.skipif(
    SSH_KEYGEN is None, reason="ssh-keygen not installed (.ci/run installs openssh-client)"
)


def _ssh_verify(kit: Path, allowed: Path) -> subprocess.CompletedProcess[bytes]:
    assert SSH_KEYGEN is not None
    with (kit / "MANIFEST.json").open("rb") as message:
        return subprocess.run(
            [
                SSH_KEYGEN,
                "-Y",
                "verify",
                "-f",
                str(allowed),
                "-I",
                "release@k3kit",
                "-n",
                "k3kit",
                "-s",
                str(kit / "MANIFEST.json.sig"),
            ],
            stdin=message,
            capture_output=True,
            check=False,
            timeout=30,
        )


@needs_ssh_keygen
def test_ssh_keygen_accepts_genuine_kit_and_refuses_changed_kit(
    golden: GoldenKit, tmp_path: Path
) -> None:
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    proc = run_k3kit("sshsig", kit, "--key", golden.key.private)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith('release@k3kit namespaces="k3kit" ssh-ed25519 ')
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(line + "\n")
    ok = _ssh_verify(kit, allowed)
    assert ok.returncode == 0, ok.stderr
    assert b'Good "k3kit" signature for release@k3kit' in ok.stdout + ok.stderr
    # The signed kit still verifies with k3kit: the .sig is outside MANIFEST.json.
    assert run_k3kit("verify", kit, "--trust", golden.key.public).returncode == 0
    # A changed kit has another MANIFEST.json (another kit checksum): ssh-keygen refuses it.
    manifest = kit / "MANIFEST.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"size":', b'"size": ', 1))
    bad = _ssh_verify(kit, allowed)
    assert bad.returncode != 0
    assert b"Good" not in bad.stdout + bad.stderr


@needs_ssh_keygen
def test_ssh_keygen_refuses_another_namespace(golden: GoldenKit, tmp_path: Path) -> None:
    message = (golden.kit / "MANIFEST.json").read_bytes()
    sig = tmp_path / "MANIFEST.json.sig"
    sig.write_text(sshsig.sign(message, signer(golden.key), namespace="file"))
    kit = tmp_path / "kit"
    kit.mkdir()
    shutil.copy(golden.kit / "MANIFEST.json", kit / "MANIFEST.json")
    shutil.copy(sig, kit / "MANIFEST.json.sig")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(
        sshsig.allowed_signers_line(signer(golden.key).public_key(), "release@k3kit") + "\n"
    )
    assert _ssh_verify(kit, allowed).returncode != 0


def test_own_sshsig_parser_round_trip_and_tamper(golden: GoldenKit) -> None:
    s = signer(golden.key)
    message = (golden.kit / "MANIFEST.json").read_bytes()
    armored = sshsig.sign(message, s)
    sshsig.verify(armored, message, s.public_key())
    with pytest.raises(VerificationError) as exc:
        sshsig.verify(armored, message + b" ", s.public_key())
    assert exc.value.code == "SSHSIG_INVALID"
    with pytest.raises(VerificationError):
        sshsig.verify(armored, message, s.public_key(), namespace="other")


@needs_ssh_keygen
def test_the_kit_readme_alone_lets_openssh_check_the_kit(golden: GoldenKit, tmp_path: Path) -> None:
    """build --ssh-signer puts the allowed_signers line in the signed README; the README's own
    commands (ssh-keygen, grep, sed, sha256sum: nothing from k3kit) then check the kit."""
    kit = tmp_path / "kit"
    proc = run_k3kit(
        "build",
        EXAMPLE / "package.toml",
        "--lock",
        golden.lock,
        "-o",
        kit,
        "--ssh-signer",
        golden.key.public,
    )
    assert proc.returncode == 0, proc.stderr
    proc = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", EXAMPLE / "claims.toml")
    assert proc.returncode == 0, proc.stderr
    proc = run_k3kit("sshsig", kit, "--key", golden.key.private)
    assert proc.returncode == 0, proc.stderr
    readme = (kit / "README.md").read_text()
    section = readme.split("## Check this kit with OpenSSH alone", 1)[1]
    script = section.split("```sh\n", 1)[1].split("```", 1)[0]
    assert sshsig.allowed_signers_line(signer(golden.key).public_key(), "release@k3kit") in script

    def run_readme() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=kit,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    ok = run_readme()
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert 'Good "k3kit" signature for release@k3kit' in ok.stdout + ok.stderr
    assert "serve.yaml: OK" in ok.stdout
    serve = next(kit.glob("profiles/*/*/serve.yaml"))
    serve.write_text(serve.read_text() + "# changed\n")
    changed = run_readme()
    assert changed.returncode != 0 and "serve.yaml: FAILED" in changed.stdout


# --- MANIFEST.json.sig rides along with a kit: verify checks it whenever it is there ----------


def _kit_with_sig(golden: GoldenKit, tmp_path: Path, key: KeyFiles) -> Path:
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    proc = run_k3kit("sshsig", kit, "--key", key.private, "--force")
    assert proc.returncode == 0, proc.stderr
    return kit


def _checks(proc: subprocess.CompletedProcess[str]) -> dict[str, dict[str, object]]:
    return {c["id"]: c for c in json.loads(proc.stdout)["checks"]}


def test_a_genuine_manifest_sig_is_checked_and_installed(golden: GoldenKit, tmp_path: Path) -> None:
    kit = _kit_with_sig(golden, tmp_path, golden.key)
    proc = run_k3kit("verify", kit, "--trust", golden.key.public, "--json")
    assert proc.returncode == 0, proc.stderr
    assert _checks(proc)["sshsig"]["ok"] is True
    proc = run_k3kit("install", kit, "--trust", golden.key.public, "--into", tmp_path / "kits")
    assert proc.returncode == 0, proc.stderr
    assert (Path(proc.stdout.strip()) / "MANIFEST.json.sig").read_bytes() == (
        kit / "MANIFEST.json.sig"
    ).read_bytes()


def test_a_kit_without_a_manifest_sig_reports_no_sshsig_check(golden: GoldenKit) -> None:
    proc = run_k3kit("verify", golden.kit, "--trust", golden.key.public, "--json")
    assert proc.returncode == 0 and "sshsig" not in _checks(proc)


def _forged_by_attacker(golden: GoldenKit, tmp_path: Path, other_key: KeyFiles) -> Path:
    """The attacker, with no publisher key, signs the genuine MANIFEST.json with their own key
    (a buyer who later takes the key from the .sig file, or an allowed_signers line handed
    along with the kit, would check it 'Good')."""
    return _kit_with_sig(golden, tmp_path, other_key)


def _stale_sig(golden: GoldenKit, tmp_path: Path, _other: KeyFiles) -> Path:
    """A genuine signature by the release key, but over another MANIFEST.json."""
    kit = _kit_with_sig(golden, tmp_path, golden.key)
    stale = tmp_path / "stale"
    shutil.copytree(golden.kit, stale)
    (stale / "MANIFEST.json").write_bytes(b'{"files":[],"schema":"k3kit.manifest/v1"}')
    assert run_k3kit("sshsig", stale, "--key", golden.key.private).returncode == 0
    shutil.copyfile(stale / "MANIFEST.json.sig", kit / "MANIFEST.json.sig")
    return kit


def _garbage(golden: GoldenKit, tmp_path: Path, _other: KeyFiles) -> Path:
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    (kit / "MANIFEST.json.sig").write_text("#!/bin/sh\nanything at all\n")
    return kit


@pytest.mark.parametrize("make", [_forged_by_attacker, _stale_sig, _garbage])
def test_a_manifest_sig_the_trusted_key_did_not_make_fails_and_installs_nothing(
    golden: GoldenKit, other_key: KeyFiles, tmp_path: Path, make: object
) -> None:
    kit = make(golden, tmp_path, other_key)  # type: ignore[operator]
    proc = run_k3kit("verify", kit, "--trust", golden.key.public, "--json")
    assert proc.returncode == 1, proc.stderr
    assert _checks(proc)["sshsig"]["code"] == "SSHSIG_INVALID"
    into = tmp_path / "kits"
    proc = run_k3kit("install", kit, "--trust", golden.key.public, "--into", into)
    assert proc.returncode == 1 and "SSHSIG_INVALID" in proc.stderr
    assert os.listdir(into) == []
