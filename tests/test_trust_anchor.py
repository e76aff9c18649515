"""Attacks on what the operator tells k3kit to trust: a ``--trust`` key, a ``--root``, a
``--site`` file, made by a real second user (uid 65534, :mod:`tests.cotenant`).

Whoever can replace ``publisher.pub`` decides which kits are VERIFIED: no signature check can
notice, because the check itself trusts that file. The golden kit stands for the attacker's kit
(signed by the key they control); the operator meant to trust another publisher.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import GoldenKit, run_k3kit
from tests.cotenant import cotenant_python, needs_root, shared_folder
from tests.trustkit import keypair

REPLACE = (
    "import os, sys\n"
    "tmp = sys.argv[1] + '.new'\n"
    "open(tmp, 'w').write(sys.argv[2])\n"
    "os.chmod(tmp, 0o644)\n"
    "os.replace(tmp, sys.argv[1])\n"
)

SITE = (
    "MODEL_DIR=/srv/models\nIMAGE=registry.example/k3kit-vllm@sha256:"
    + "a" * 64
    + "\nHOST={host}\n"
)


def _error(proc: object) -> dict[str, str]:
    out = json.loads(proc.stdout)  # type: ignore[attr-defined]
    error: dict[str, str] = out["error"]
    return error


@needs_root
def test_a_cotenant_who_swaps_publisher_pub_in_a_shared_folder_gets_no_verified_verdict(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The team keeps the publisher's key in a shared project folder (0777); the co-tenant
    replaces it with their own and hands over a kit they signed: it must not verify."""
    meant = keypair(tmp_path, "real-publisher")
    with shared_folder(0o777) as shared:
        trusted = shared / "publisher.pub"
        trusted.write_bytes(meant.public.read_bytes())
        trusted.chmod(0o644)
        cotenant_python(REPLACE, str(trusted), golden.key.public.read_text())
        assert trusted.read_bytes() == golden.key.public.read_bytes()  # the swap took
        proc = run_k3kit("verify", golden.kit, "--trust", trusted, "--json")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    error = _error(proc)
    assert error["code"] == "TRUST_ANCHOR_UNSAFE"
    assert "could have been put or replaced by another user" in error["message"]
    assert "VERIFIED" not in proc.stderr


@needs_root
def test_a_key_a_cotenant_planted_first_in_a_sticky_folder_is_not_trusted(
    golden: GoldenKit,
) -> None:
    """In a sticky folder (``/tmp``) the co-tenant cannot swap the operator's file, but a file
    they made first is theirs: its owner is checked, not only the folder."""
    with shared_folder(0o1777) as shared:
        planted = shared / "publisher.pub"
        cotenant_python(REPLACE, str(planted), golden.key.public.read_text())
        proc = run_k3kit("verify", golden.kit, "--trust", planted, "--json")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert _error(proc)["code"] == "TRUST_ANCHOR_UNSAFE"
    assert "is not owned by root or you" in _error(proc)["message"]


@needs_root
def test_the_operators_own_key_in_a_sticky_folder_still_verifies(golden: GoldenKit) -> None:
    """Sticky is allowed (nobody else can rename the operator's file there), so the rule does
    not refuse what is safe."""
    with shared_folder(0o1777) as shared:
        mine = shared / "publisher.pub"
        mine.write_bytes(golden.key.public.read_bytes())
        mine.chmod(0o644)
        proc = run_k3kit("verify", golden.kit, "--trust", mine)
    assert proc.returncode == 0, proc.stderr
    assert "VERIFIED" in proc.stderr + proc.stdout


@needs_root
def test_a_site_file_a_cotenant_rewrote_is_refused_before_anything_is_rendered(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The site file names the trust key and the listen address; a co-tenant who can rewrite
    it (shared 0777 folder) would make the engine listen on every interface."""
    out = tmp_path / "out"
    with shared_folder(0o777) as shared:
        site = shared / "site.env"
        site.write_text(SITE.format(host="127.0.0.1"))
        site.chmod(0o644)
        cotenant_python(REPLACE, str(site), SITE.format(host="0.0.0.0"))
        proc = run_k3kit(
            "render-site", golden.kit, "--trust", golden.key.public, "--site", site, "-o", out,
            "--json",
        )  # fmt: skip
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert _error(proc)["code"] == "TRUST_ANCHOR_UNSAFE"
    assert "site file" in _error(proc)["message"]
    assert not os.path.lexists(out)
