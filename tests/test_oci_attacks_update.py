"""Attacks on ``k3kit update --from-registry`` where work happens before the refusal: a
download killed half-way (what it leaves in the state folder, and whether the next update
recovers), a refused download (what is left in --into and the state folder), and an update of
a release already installed (nothing overwritten). A real registry (Debian's docker-registry)
or a stand-in that stalls, a real channel server, the real CLI (docs/distribution.md)."""

from __future__ import annotations

import contextlib
import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.channelkit import PACKAGE, Channel, Releases, serve
from tests.conftest import run_k3kit
from tests.netkit import loopback
from tests.ocikit import LiveRegistry, needs_registry, sha256_digest
from tests.test_oci_update import (  # the same fixtures: one channel, one registry per test
    REPO,
    chan,
    installed,
    metadata_only,
    push,
    registry,
    releases,
    update_from,
)

pytestmark = needs_registry
__all__ = ["chan", "registry", "releases"]  # fixtures, used by name


def leftovers(state: Path) -> list[str]:
    """Download staging folders anywhere under the state folder."""
    return sorted(p.name for p in state.rglob(".download-*")) if state.exists() else []


class _Stall(http.server.BaseHTTPRequestHandler):
    """A registry that sends the first half of the kit's blob, then a byte a second and never
    the whole: the update is killed while it waits (SIGKILL runs no cleanup)."""

    kit = b""
    sent = threading.Event()
    release = threading.Event()

    def do_GET(self) -> None:
        with contextlib.suppress(OSError):  # the killed client's end of the socket is gone
            self._stall()

    def _stall(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.kit)))
        self.end_headers()
        half = len(self.kit) // 2
        self.wfile.write(self.kit[:half])
        self.wfile.flush()
        self.sent.set()
        # Then one byte a second, never the last: the client's read timeout never fires, so
        # the update is still waiting whenever the test (on however slow a machine) kills it.
        for i in range(half, len(self.kit) - 1):
            if self.release.wait(timeout=1):
                return
            self.wfile.write(self.kit[i : i + 1])
            self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def stalling(kit: bytes) -> Iterator[tuple[str, type[_Stall]]]:
    attrs = {"kit": kit, "sent": threading.Event(), "release": threading.Event()}
    handler: type[_Stall] = type("Stall", (_Stall,), attrs)
    with loopback(handler, stop=handler.release) as host:
        yield host, handler


def killed_update(chan: Channel, served: Path, host: str, handler: type[_Stall],
                  tmp_path: Path, trust: Path) -> None:  # fmt: skip
    """``k3kit update --from-registry`` against the stalling registry, killed with SIGKILL once
    half of the kit has been sent and its download file exists."""
    state = tmp_path / "state"
    with serve(served) as url:
        argv = [
            sys.executable, "-m", "k3kit", "update", "--channel", "stable", "--from", url,
            "--channel-root", str(chan.root), "--into", str(tmp_path / "kits"), "--trust",
            str(trust), "--state-dir", str(state), "--from-registry", f"oci://{host}/{REPO}",
        ]  # fmt: skip
        env = {**os.environ, "SOURCE_DATE_EPOCH": "1793491200"}
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # Waits for an event, not for a time: bounded only so a broken update fails the
            # test instead of hanging it.
            for _ in range(6000):
                if handler.sent.is_set() and any(state.rglob(".download-*/*.kit.tar.gz")):
                    break
                assert proc.poll() is None, proc.communicate()[1]
                time.sleep(0.05)
            else:
                pytest.fail("the update never started its download")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()


def test_attack_update_killed_mid_download_leaves_a_part_kit_the_next_update_sweeps(
    chan: Channel, releases: Releases, registry: LiveRegistry, tmp_path: Path
) -> None:
    """The partly downloaded kit stays in the state folder after SIGKILL (no code runs); it is
    never installed, and the next update removes it (its lock died with the process) and
    installs the release from a healthy registry."""
    served = metadata_only(chan, tmp_path)
    with stalling(releases.v110.read_bytes()) as (host, handler):
        killed_update(chan, served, host, handler, tmp_path, releases.key.public)
    assert len(leftovers(tmp_path / "state")) == 1  # what the kill left
    assert installed(tmp_path) == []
    push(registry, releases.v110, releases.key.public, ":1.1.0")
    rc, _, stderr = update_from(registry, chan, served, tmp_path, releases.key.public)
    assert rc == 0, stderr
    assert installed(tmp_path) == [f"{PACKAGE}-1.1.0"]
    assert leftovers(tmp_path / "state") == []


def test_attack_refused_download_leaves_nothing_in_into_or_the_state_folder(
    chan: Channel, releases: Releases, registry: LiveRegistry, tmp_path: Path
) -> None:
    """The registry's storage serves other bytes under the signed digest: every byte was
    written to the staging file before the hash could refuse it; after the refusal neither
    --into nor the state folder holds any of it."""
    push(registry, releases.v110, releases.key.public, ":1.1.0")
    blob = registry.blob_file(sha256_digest(releases.v110.read_bytes()))
    data = bytearray(blob.read_bytes())
    data[0] ^= 0xFF  # always a change
    blob.write_bytes(bytes(data))
    rc, out, _ = update_from(
        registry, chan, metadata_only(chan, tmp_path), tmp_path, releases.key.public
    )
    assert rc == 1 and out["error"]["code"] == "OCI_DIGEST_MISMATCH", out
    assert installed(tmp_path) == []  # hidden staging entries too
    assert leftovers(tmp_path / "state") == []


def test_attack_update_again_does_not_overwrite_the_installed_release(
    chan: Channel, releases: Releases, registry: LiveRegistry, tmp_path: Path
) -> None:
    """Run twice (a cron job, or an attacker replaying the update): the second run says the
    release is already installed and replaces nothing (same inodes); the first install still
    verifies, and nothing is left in staging."""
    push(registry, releases.v110, releases.key.public, ":1.1.0")
    served = metadata_only(chan, tmp_path)
    rc, _, stderr = update_from(registry, chan, served, tmp_path, releases.key.public)
    assert rc == 0, stderr
    target = tmp_path / "kits" / f"{PACKAGE}-1.1.0"
    before = [(p.name, p.stat().st_ino) for p in (target, *sorted(target.rglob("*")))]
    rc, out, stderr = update_from(registry, chan, served, tmp_path, releases.key.public)
    assert rc != 70, stderr
    assert rc == 0 and out["already_installed"] is True, out
    assert installed(tmp_path) == [f"{PACKAGE}-1.1.0"]
    assert [(p.name, p.stat().st_ino) for p in (target, *sorted(target.rglob("*")))] == before
    assert run_k3kit("verify", target, "--trust", releases.key.public).returncode == 0
    assert leftovers(tmp_path / "state") == []


def test_update_cli_has_no_force_to_overwrite_an_installed_release() -> None:
    """--force is not an update option: an installed release is never replaced by update."""
    done = run_k3kit("update", "--help")
    assert done.returncode == 0 and "--force" not in done.stdout
