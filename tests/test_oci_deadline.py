"""Every body a registry sends has an overall deadline (docs/oci.md, "Transport"): a server that
sends one byte every few seconds never trips the 30 s per-read timeout, so without one a 64 KiB
token answer could take 22 days. The attacker here is a real HTTP server on 127.0.0.1 (a port
the kernel picks) that dribbles a byte every 0.3 s; the test does not wait the real 60 s floor,
it sets k3kit's own knobs (``k3kit._policy.READ_FLOOR_SECONDS`` / ``READ_FLOOR_RATE``) to one
second, and checks the read was cut off long before the body was whole. No assertion is on how
long anything took: the server's body takes 36 s to dribble and the client gives up at 1 s, so a
loaded machine moves neither outcome.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from k3kit import _policy
from k3kit.errors import EnvironmentProblem
from k3kit.oci import fetch_blob_file, fetch_manifest
from k3kit.oci._http import Registry
from k3kit.oci.ref import parse
from tests.channelkit import init_channel
from tests.conftest import GoldenKit
from tests.netkit import loopback

REPO = "kits/kimi-k3"
BODY = b"k" * 120  # 120 bytes at one per 0.3 s: 36 s, far past the 1 s deadline
BLOB = "sha256:" + hashlib.sha256(BODY).hexdigest()


class Dribbler(http.server.BaseHTTPRequestHandler):
    """A registry stand-in that answers ``slow`` (a path prefix) one byte every 0.3 s with an
    honest Content-Length, and everything else at once: ``/v2/`` paths answer 401 with a Bearer
    challenge to its own ``/token`` when ``challenge`` is set. ``sent`` counts the slow bytes
    written; ``stop`` ends a dribble when the test is over."""

    slow = ""
    body = BODY
    folder: Path | None = None  # other paths: its files, at once (a channel's metadata)
    challenge = False
    slow_head = False  # dribble the status line and headers instead, then the body at once
    sent: ClassVar[list[int]] = []
    stop = threading.Event()

    def do_GET(self) -> None:
        if self.challenge and self.path.startswith("/v2/"):
            realm = f'Bearer realm="http://{self.headers["Host"]}/token",service="reg"'
            return self._head(401, 2, {"WWW-Authenticate": realm}, b"{}")
        if not self.path.startswith(self.slow):
            file = self.folder / self.path.lstrip("/") if self.folder else None
            if file is None or ".." in self.path or not file.is_file():
                return self._head(404, 2, {}, b"{}")
            data = file.read_bytes()
            return self._head(200, len(data), {}, data)
        if self.slow_head:
            return self._dribble(
                head_of(self.body), then=b"" if self.command == "HEAD" else self.body
            )
        self._head(200, len(self.body), {}, b"")
        self._dribble(self.body)

    do_POST = do_GET

    def do_HEAD(self) -> None:
        if self.slow_head and self.path.startswith(self.slow):
            return self.do_GET()
        self._head(404, 0, {}, b"")  # no blob yet: the push goes on to upload it

    def _dribble(self, data: bytes, then: bytes = b"") -> None:
        """``data`` one byte every 0.3 s (each counted in ``sent``), then ``then`` at once."""
        with contextlib.suppress(OSError):  # the client hangs up: that is the point
            for i in range(len(data)):
                if self.stop.wait(timeout=0.3):
                    return
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                self.sent.append(1)
            self.wfile.write(then)
            self.wfile.flush()

    def _head(self, status: int, length: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


def head_of(body: bytes) -> bytes:
    """An honest status line and headers for ``body``, padded to 120 bytes and more: at a
    byte every 0.3 s, 36 s and more, far past the 1 s deadline and never a 5 s read timeout."""
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
        b"Content-Length: %d\r\nX-Padding: %s\r\n\r\n" % (len(body), b"p" * 40)
    )


@contextlib.contextmanager
def dribbling(
    slow: str,
    *,
    challenge: bool = False,
    body: bytes = BODY,
    folder: Path | None = None,
    slow_head: bool = False,
) -> Iterator[tuple[str, type[Dribbler]]]:
    attrs = {"slow": slow, "challenge": challenge, "body": body, "folder": folder}
    attrs["slow_head"] = slow_head
    attrs |= {"sent": [], "stop": threading.Event()}
    handler: type[Dribbler] = type("Attacker", (Dribbler,), attrs)
    with loopback(handler, stop=handler.stop) as host:
        yield host, handler


@pytest.fixture(autouse=True)
def one_second(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every body gets one second in all, whatever its size (the knobs k3kit reads per read)."""
    monkeypatch.setattr(_policy, "READ_FLOOR_SECONDS", 1.0)
    monkeypatch.setattr(_policy, "READ_FLOOR_RATE", 1 << 40)
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "absent-auth.json"))


def refused_slow(
    exc: pytest.ExceptionInfo[EnvironmentProblem],
    sent: list[int],
    code: str = "OCI_REGISTRY_UNREACHABLE",
    body: bytes = BODY,
) -> None:
    assert exc.value.code == code
    assert "too slowly" in str(exc.value) and exc.value.hint
    assert len(sent) < len(body)  # cut off, not read to the end


def test_attack_kit_blob_dribbled_a_byte_at_a_time_is_cut_off_at_its_deadline(
    tmp_path: Path,
) -> None:
    with dribbling("/v2/") as (host, handler):
        ref = parse(f"oci://{host}/{REPO}", repository_only=True)
        with pytest.raises(EnvironmentProblem) as exc:
            fetch_blob_file(ref, BLOB, len(BODY), tmp_path / "kit.tar.gz")
        refused_slow(exc, handler.sent)


def test_attack_manifest_dribbled_a_byte_at_a_time_is_cut_off_at_its_deadline() -> None:
    with dribbling("/v2/") as (host, handler), Registry(f"http://{host}", REPO) as reg:
        with pytest.raises(EnvironmentProblem) as exc:
            fetch_manifest(reg, REPO, BLOB)
        refused_slow(exc, handler.sent)


def test_attack_token_answer_dribbled_a_byte_at_a_time_is_cut_off_at_its_deadline() -> None:
    with dribbling("/token", challenge=True) as (host, handler):
        with Registry(f"http://{host}", REPO) as reg, pytest.raises(EnvironmentProblem) as exc:
            fetch_manifest(reg, REPO, BLOB)
        refused_slow(exc, handler.sent)
        assert "token" in str(exc.value)


def test_attack_upload_answer_dribbled_a_byte_at_a_time_is_cut_off_at_its_deadline() -> None:
    """The answer to a push's upload request (only its status and headers are used) is read
    under the same deadline: a registry cannot hold ``k3kit push`` open either."""
    with dribbling("/v2/kits/kimi-k3/blobs/uploads/") as (host, handler):
        with Registry(f"http://{host}", REPO) as reg, pytest.raises(EnvironmentProblem) as exc:
            reg.push_blob(REPO, BLOB, len(BODY), BODY)
        refused_slow(exc, handler.sent)


def test_the_deadline_grows_with_the_size_and_never_falls_under_the_floor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shipped numbers: 60 s for anything up to 3.75 MiB, then 64 KiB/s."""
    assert _policy.read_deadline(0) == 1.0  # the knob the fixture set
    assert _policy.read_deadline(1 << 40) == 1.0
    monkeypatch.undo()  # the shipped values
    assert _policy.read_deadline(64 * 1024) == 60.0
    assert _policy.read_deadline(4 * 1024 * 1024) == 64.0  # a manifest at its cap
    assert _policy.read_deadline(512 * 1024 * 1024) == 8192.0


def test_attack_channel_timestamp_dribbled_a_byte_at_a_time_is_cut_off_at_its_deadline(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The same class in the TUF channel: python-tuf's fetcher bounds only the gap between two
    reads. A mirror serves the channel's pinned root as it is and then, asked for
    ``timestamp.json``, a byte every 0.3 s: it stalls the node before anything is verified."""
    from k3kit import api
    from k3kit.signing.keys import load_public

    chan = init_channel(tmp_path / "chan")
    stamp = b'{"signed": {"_type": "timestamp", ' + b" " * 100 + b"}}"
    with dribbling("/metadata/timestamp.json", body=stamp, folder=chan.repo) as (host, handler):
        with pytest.raises(EnvironmentProblem) as exc:
            api.update_from_channel(
                f"http://{host}", "stable", chan.root, tmp_path / "kits",
                [load_public(golden.key.public)], state_dir=tmp_path / "state",
            )  # fmt: skip
        refused_slow(exc, handler.sent, "CHANNEL_UNREACHABLE", stamp)
    assert not (tmp_path / "kits").exists() or not any((tmp_path / "kits").iterdir())


# -- the head: status line and headers dribbled ----------------------------------------------------


def test_attack_registry_dribbles_the_head_of_a_manifest_answer() -> None:
    """The status line and headers a byte every 0.3 s: each socket read gets a byte, so the
    30 s read timeout never trips and httpx takes up to 100 KiB of head. The same Deadline,
    active while the request is made, bounds every read of the head."""
    with (
        dribbling("/v2/", slow_head=True) as (host, handler),
        Registry(f"http://{host}", REPO) as reg,
    ):
        with pytest.raises(EnvironmentProblem) as exc:
            fetch_manifest(reg, REPO, BLOB)
        refused_slow(exc, handler.sent, body=head_of(BODY))


def test_attack_registry_dribbles_the_head_of_a_kit_blob(tmp_path: Path) -> None:
    with dribbling("/v2/", slow_head=True) as (host, handler):
        ref = parse(f"oci://{host}/{REPO}", repository_only=True)
        with pytest.raises(EnvironmentProblem) as exc:
            fetch_blob_file(ref, BLOB, len(BODY), tmp_path / "kit.tar.gz")
        refused_slow(exc, handler.sent, body=head_of(BODY))


def test_attack_token_service_dribbles_the_head_of_its_answer() -> None:
    with dribbling("/token", challenge=True, slow_head=True) as (host, handler):
        with Registry(f"http://{host}", REPO) as reg, pytest.raises(EnvironmentProblem) as exc:
            fetch_manifest(reg, REPO, BLOB)
        refused_slow(exc, handler.sent, body=head_of(BODY))
        assert "token" in str(exc.value)


def test_attack_channel_mirror_dribbles_the_head_of_the_timestamp(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """python-tuf's fetcher (urllib3, http.client) reads the head line by line from the socket
    with a 30 s timeout per read: a mirror sending it a byte every 0.3 s is cut off by the
    Deadline active for that download."""
    from k3kit import api
    from k3kit.signing.keys import load_public

    chan = init_channel(tmp_path / "chan")
    with dribbling("/metadata/timestamp.json", folder=chan.repo, slow_head=True) as (
        host,
        handler,
    ):
        with pytest.raises(EnvironmentProblem) as exc:
            api.update_from_channel(
                f"http://{host}", "stable", chan.root, tmp_path / "kits",
                [load_public(golden.key.public)], state_dir=tmp_path / "state",
            )  # fmt: skip
        refused_slow(exc, handler.sent, "CHANNEL_UNREACHABLE", head_of(BODY))
    assert not (tmp_path / "kits").exists() or not any((tmp_path / "kits").iterdir())


def test_outside_a_deadline_a_read_waits_its_own_timeout() -> None:
    """The pacing is only what an active Deadline leaves: none active, a read keeps the
    client's own timeout; inside one, the wait is cut to what is left, and past it refused."""
    assert _policy.read_wait(30.0) == 30.0 and _policy.read_wait(None) is None
    with _policy.Deadline(0) as deadline:  # one second (the fixture's floor)
        wait = _policy.read_wait(30.0)
        assert wait is not None and 0 < wait <= 1.0
        deadline._ends -= 2  # its second spent, without waiting for it
        with pytest.raises(_policy.ReadTooSlow):
            _policy.read_wait(30.0)
    assert _policy.read_wait(30.0) == 30.0
