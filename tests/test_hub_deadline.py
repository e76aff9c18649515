"""The hub's bodies have an overall deadline too, as the registry's and the channel's do: a hub
or mirror that sends one byte every few seconds never trips the client's per-read timeout, so a
pull or a pin could wait forever. The attacker is the real dribbling HTTP server of
``test_oci_deadline`` on 127.0.0.1 (a byte every 0.3 s, 36 s for its body); k3kit's own knobs
give every body one second, and each test checks the read was cut off before the body was whole
and ends as ``HUB_TIMEOUT``. No assertion is on how long anything took.
"""

from __future__ import annotations

import threading

import httpx2
import pytest

from k3kit import _policy
from k3kit.errors import EnvironmentProblem
from k3kit.hub import HfHub, translate
from k3kit.hub._fetch import stream_body
from tests.test_oci_deadline import BODY, dribbling, head_of

COMMIT = "a" * 40


@pytest.fixture(autouse=True)
def one_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_policy, "READ_FLOOR_SECONDS", 1.0)
    monkeypatch.setattr(_policy, "READ_FLOOR_RATE", 1 << 40)


class Kept:
    """A sink that keeps what it was given (what pull's part file would hold)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def restart(self) -> None:
        self.data.clear()

    def write(self, data: bytes) -> None:
        self.data += data


def _read_shard(client: httpx2.Client, host: str, sink: Kept) -> None:
    """pull's read of one weights file from the dribbling server at ``host``."""
    stream_body(
        client,
        f"http://{host}/org/model/resolve/{COMMIT}/model.safetensors",
        {},
        size=len(BODY),
        what="model.safetensors",
        sink=sink,
        cancel=threading.Event(),
    )


def test_attack_a_weights_file_dribbled_a_byte_at_a_time_is_cut_off_at_its_deadline() -> None:
    sink = Kept()
    with (
        dribbling("/") as (host, handler),
        httpx2.Client(timeout=5) as client,
        pytest.raises(_policy.ReadTooSlow) as exc,
    ):
        _read_shard(client, host, sink)
    assert len(handler.sent) < len(BODY) and len(sink.data) < len(BODY)
    # what the hub client's retry loop makes of it (read_file's test below goes through it)
    problem = translate(exc.value, f"http://{host}", "org/model", COMMIT, "model.safetensors")
    assert problem is not None and problem.code == "HUB_TIMEOUT" and problem.hint
    assert "not complete after 1 s" in problem.message


def test_attack_a_small_file_read_by_pin_dribbled_a_byte_at_a_time_is_cut_off() -> None:
    with dribbling("/") as (host, handler):
        hub = HfHub(f"http://{host}", attempts=1, timeout=5)
        with pytest.raises(EnvironmentProblem) as exc:
            hub.read_file("org/model", COMMIT, "config.json", max_bytes=1024)
    assert exc.value.code == "HUB_TIMEOUT" and exc.value.hint
    assert len(handler.sent) < len(BODY)


# -- the head: status line and headers dribbled ----------------------------------------------------


def test_attack_a_weights_file_s_head_dribbled_a_byte_at_a_time_is_cut_off() -> None:
    """The status line and headers a byte every 0.3 s: every socket read gets a byte, so the
    5 s read timeout never trips. The body's Deadline is active from the request on, and
    bounds each read of the head too."""
    sink = Kept()
    with (
        dribbling("/", slow_head=True) as (host, handler),
        httpx2.Client(timeout=5) as client,
        pytest.raises(_policy.ReadTooSlow),
    ):
        _read_shard(client, host, sink)
    assert len(handler.sent) < len(head_of(BODY)) and not sink.data


def test_attack_a_small_file_s_head_dribbled_for_pin_is_cut_off() -> None:
    """The same through huggingface_hub's shared session (pin's small reads)."""
    with dribbling("/", slow_head=True) as (host, handler):
        hub = HfHub(f"http://{host}", attempts=1, timeout=5)
        with pytest.raises(EnvironmentProblem) as exc:
            hub.read_file("org/model", COMMIT, "config.json", max_bytes=1024)
    assert exc.value.code == "HUB_TIMEOUT" and exc.value.hint
    assert len(handler.sent) < len(head_of(BODY))


def test_attack_the_metadata_head_request_dribbled_is_cut_off() -> None:
    """pull's HEAD (huggingface_hub's get_hf_file_metadata: the size and commit of a file)
    answered a byte every 0.3 s: a HEAD is all head, bounded by the floor."""
    with dribbling("/", slow_head=True) as (host, handler):
        hub = HfHub(f"http://{host}", attempts=1, timeout=5)
        with pytest.raises(EnvironmentProblem) as exc:
            hub.fetch("org/model", COMMIT, "model.safetensors", size=len(BODY), sink=Kept(),
                      cancel=threading.Event())  # fmt: skip
    assert exc.value.code == "HUB_TIMEOUT" and exc.value.hint
    assert len(handler.sent) < len(head_of(BODY))


@pytest.mark.parametrize("call", ["resolve", "list_files"])
def test_attack_an_api_answer_s_head_dribbled_is_cut_off(call: str) -> None:
    """pin's API calls (a model's info, the tree listing) answered a head byte at a time."""
    with dribbling("/", slow_head=True) as (host, handler):
        hub = HfHub(f"http://{host}", attempts=1, timeout=5)
        with pytest.raises(EnvironmentProblem) as exc:
            getattr(hub, call)("org/model", COMMIT)
    assert exc.value.code == "HUB_TIMEOUT" and exc.value.hint
    assert len(handler.sent) < len(head_of(BODY))
