"""Attacks by a co-tenant on the port file of the dev tools (scripts/standin_server.py,
scripts/dev_hub.py), made as the attacker would: a real second user (uid 65534) plants a link
where the operator's tool will write, then the real script runs as the operator.

The README's flow reads the port back with ``$(cat engine.port)`` and hands it to ``k3kit
accept`` or ``k3kit pull``, so whoever controls that file chooses the server k3kit measures.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.cotenant import cotenant_python, needs_root, shared_folder

STANDIN = ROOT / "scripts" / "standin_server.py"
DEV_HUB = ROOT / "scripts" / "dev_hub.py"
SECRET = b"the operator's own file, which no port number may overwrite\n"
PLANT_LINK = "import os, sys; os.symlink(sys.argv[1], sys.argv[2])"
GIVE_UP_S = 120  # only so a broken script cannot hang the suite; never part of a verdict


def _run_until_port_or_exit(argv: list[str], port: Path) -> subprocess.CompletedProcess[str]:
    """Run a dev tool until it exits or its port file appears, then stop it (SIGTERM)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    give_up = time.monotonic() + GIVE_UP_S
    try:
        while proc.poll() is None and not os.path.lexists(port) and time.monotonic() < give_up:
            time.sleep(0.05)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(SECRET)
    victim.chmod(0o600)
    return victim


@needs_root
def test_a_cotenant_link_at_the_standin_port_files_temp_name_overwrites_nothing(
    tmp_path: Path,
) -> None:
    """The co-tenant links ``engine.port.tmp`` (the name the tool used to write) to a file of
    the operator's in a shared 0777 folder; the tool refuses the folder before it listens."""
    victim = _victim(tmp_path)
    with shared_folder(0o777) as shared:
        port = shared / "engine.port"
        cotenant_python(PLANT_LINK, str(victim), str(shared / "engine.port.tmp"))
        done = _run_until_port_or_exit(
            [sys.executable, str(STANDIN), "--port-file", str(port)], port
        )
        assert victim.read_bytes() == SECRET
        assert not os.path.lexists(port)
    assert done.returncode == 1, done.stderr
    assert "refusing --port-file" in done.stderr
    assert "writable by other users (mode 0777)" in done.stderr


@needs_root
def test_the_dev_hub_refuses_a_port_file_a_cotenant_can_replace_before_reading_the_lock(
    tmp_path: Path,
) -> None:
    """Checked first: nothing is read, hashed or served for a port file that would be refused."""
    with shared_folder(0o777) as shared:
        port = shared / "hub.port"
        missing = tmp_path / "no-such.lock.json"
        done = _run_until_port_or_exit(
            [
                sys.executable,
                str(DEV_HUB),
                *("--lock", str(missing), "--weights", str(tmp_path), "--port-file", str(port)),
            ],
            port,
        )
        assert not os.path.lexists(port)
    assert done.returncode == 1, done.stderr
    assert "refusing --port-file" in done.stderr and "Traceback" not in done.stderr


@needs_root
def test_in_a_sticky_folder_the_port_file_is_the_operators_and_a_planted_link_is_left_alone(
    tmp_path: Path,
) -> None:
    """A sticky folder (like /tmp) is allowed: the co-tenant cannot rename the operator's file.
    Their link at the old fixed temp name is never followed, so its target keeps its bytes."""
    victim = _victim(tmp_path)
    with shared_folder(0o1777) as shared:
        port = shared / "engine.port"
        link = shared / "engine.port.tmp"
        cotenant_python(PLANT_LINK, str(victim), str(link))
        done = _run_until_port_or_exit(
            [sys.executable, str(STANDIN), "--port-file", str(port)], port
        )
        st = os.lstat(port)
        assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid(), done.stderr
        assert port.read_text().strip().isascii() and int(port.read_text()) > 0
        assert os.path.islink(link) and os.readlink(link) == str(victim)
    assert victim.read_bytes() == SECRET


@needs_root
def test_the_dev_hub_never_serves_a_file_a_cotenant_linked_into_a_shared_weights_folder(
    tmp_path: Path,
) -> None:
    """The weights live in a shared model folder (0777). The co-tenant swaps ``config.json`` for
    a link to the operator's private file of the same size, then would fetch it from the hub on
    127.0.0.1 (no auth). The hub refuses the folder's link before it listens."""
    secret = tmp_path / "id_ed25519"
    genuine = b'{"model_type": "stand-in"}\n'
    secret.write_bytes(b"S" * len(genuine))  # the size the lock says: only the path gives it away
    secret.chmod(0o600)
    lock = tmp_path / "weights.lock.json"
    port = tmp_path / "hub.port"  # the operator's own folder: the port file is not the attack
    with shared_folder(0o777) as shared:
        (shared / "config.json").write_bytes(genuine)
        entry = {"path": "config.json", "size": len(genuine), "sha256": "0" * 64}
        lock.write_text(json.dumps({"repo": "org/model", "commit": "a" * 40, "files": [entry]}))
        cotenant_python(
            "import os, sys; os.unlink(sys.argv[2]); os.symlink(sys.argv[1], sys.argv[2])",
            str(secret),
            str(shared / "config.json"),
        )
        done = _run_until_port_or_exit(
            [
                sys.executable,
                str(DEV_HUB),
                *("--lock", str(lock), "--weights", str(shared), "--port-file", str(port)),
            ],
            port,
        )
    assert not os.path.lexists(port), "the hub served a folder holding a co-tenant's link"
    assert done.returncode == 1, done.stderr
    assert "refusing to serve config.json: it leads outside" in done.stderr
