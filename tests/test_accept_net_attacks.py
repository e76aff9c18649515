"""A hostile model server against accept's own HTTP/1.1 client (:mod:`k3kit.accept._net`).

The server under test is the attacker: it wants accept to time figures it did not reach, to
crash (exit 70) or to hang. Each test is a real loopback server (a plain socket on 127.0.0.1,
port 0) writing the bytes such a server would, driven through the same calls accept makes
(:func:`k3kit.accept._http.run_closed_loop` and :func:`post_json`). No assertion on elapsed
time: a stall test lowers the client's own stall knob, and a timing test checks a lower bound
that the server's own sleep guarantees.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import certifi
import pytest

from k3kit.accept._http import Sample, Timeouts, post_json, run_closed_loop
from tests.netkit import self_signed
from tests.test_accept import SLOW_TTFT_S
from tests.test_accept import _accept as run_accept
from tests.test_accept import _by_claim as by_claim
from tests.test_accept import _server as standin
from tests.test_accept import acceptkit as acceptkit  # the shared signed kit (a fixture)
from tests.test_accept_lies import _evidence as evidence_of

Handler = Callable[[socket.socket], None]

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
EVENTS = b'data: {"choices":[{"text":"a"}]}\n\ndata: [DONE]\n\n'


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def _answer(text: str) -> bytes:
    """One complete, valid streamed answer carrying ``text`` as its one token."""
    events = b'data: {"choices":[{"text":"%s"}]}\n\ndata: [DONE]\n\n' % text.encode()
    return HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + _chunk(events) + b"0\r\n\r\n"


def _read_request(sock: socket.socket) -> bool:
    """Read one whole request (head and Content-Length body); False at the end of the stream."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            return False
        buf += data
    head, _, body = buf.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        data = sock.recv(65536)
        if not data:
            return False
        body += data
    return True


@contextmanager
def _server(handler: Handler) -> Iterator[tuple[str, threading.Event]]:
    """A loopback server running ``handler`` on each connection in its own thread; yields the
    URL and an event set when the test is over (a handler that holds a connection waits on it)."""
    over = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.05)

    def accept_loop() -> None:
        while not over.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=_run, args=(handler, conn), daemon=True).start()

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1/completions", over
    finally:
        over.set()
        thread.join()
        listener.close()


def _run(handler: Handler, conn: socket.socket) -> None:
    # OSError: the client hung up, as a client that gave up does
    with conn, contextlib.suppress(OSError):
        handler(conn)


def _streams(url: str, n: int, timeouts: Timeouts | None = None) -> list[Sample]:
    """``n`` streaming requests one after the other on one client (keep-alive), as accept's
    closed loop at concurrency 1 sends them."""
    out: list[Sample] = []
    bodies = [({"prompt": "p", "max_tokens": 1}, 1)] * n
    asyncio.run(run_closed_loop(url, bodies, 1, timeouts or Timeouts(), out))
    return out


# -- 1. timing and response smuggling ---------------------------------------------------------


def test_a_second_answer_sent_with_the_first_is_never_served_to_the_next_request() -> None:
    """Response smuggling on keep-alive: the server answers the first request with two whole
    answers in one write. The second sits in h11's buffer after the first's end; had the
    connection been reused, it would have been parsed as the answer to the next request, with
    a TTFT of ~0 for a token the server made before it saw that request. The connection must be
    dropped and the next request answered on a fresh one."""
    served: list[int] = []

    def handler(sock: socket.socket) -> None:
        while _read_request(sock):
            served.append(1)
            sock.sendall(_answer("honest") + _answer("SMUGGLED"))

    with _server(handler) as (url, _):
        samples = _streams(url, 2)
    assert [s.error for s in samples] == ["", ""]
    assert [s.text for s in samples] == [["honest"], ["honest"]]
    assert len(served) == 2


def test_leftover_bytes_after_done_on_a_kept_connection_cost_the_connection() -> None:
    """Bytes after the chunked terminator that are the start of an answer (its head and a first
    token, the rest never sent) must not become the next request's answer, with a token stamped
    before that request was sent: the next request gets its own answer."""
    early = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    early += _chunk(b'data: {"choices":[{"text":"SMUGGLED"}]}\n\n')

    def handler(sock: socket.socket) -> None:
        while _read_request(sock):
            sock.sendall(_answer("honest") + early)

    with _server(handler) as (url, _):
        samples = _streams(url, 3)
    assert [(s.error, s.text) for s in samples] == [("", ["honest"])] * 3


def test_a_first_event_split_with_its_first_half_in_the_head_is_timed_by_its_last_byte() -> None:
    """The server sends the head and half the first token's event at once, then the rest after
    a pause: the token arrived when its line was complete, so the TTFT is at least the pause."""
    pause_s = 0.3
    first = b'data: {"choices":[{"text":"a"'
    rest = b"}]}\n\ndata: [DONE]\n\n"

    def handler(sock: socket.socket) -> None:
        _read_request(sock)
        sock.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + _chunk(first))
        time.sleep(pause_s)
        sock.sendall(_chunk(rest) + b"0\r\n\r\n")

    with _server(handler) as (url, _):
        (sample,) = _streams(url, 1)
    assert sample.error == ""
    assert sample.ttft_s >= pause_s


# -- 2 and 5. degenerate framing: every h11 refusal fails one request, nothing escapes --------

BROKEN = {
    "a chunk-size line of 20000 digits": HEAD
    + b"Transfer-Encoding: chunked\r\n\r\n"
    + b"0" * 20000
    + b"1\r\na\r\n0\r\n\r\n",
    "a chunk size of 2^120": HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"f" * 30 + b"\r\n",
    "a non-ASCII header name": HEAD + b"X-\xff: 1\r\nContent-Length: 1\r\n\r\na",
    "a status of 2000": b"HTTP/1.1 2000 OK\r\n\r\n",
    "a TLS record on plain HTTP": b"\x16\x03\x01\x00\x05hello\r\n\r\n",
    "a gzip transfer coding": HEAD + b"Transfer-Encoding: gzip\r\n\r\n" + EVENTS,
    "two Content-Lengths": HEAD + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n" + EVENTS,
    "a negative Content-Length": HEAD + b"Content-Length: -1\r\n\r\n" + EVENTS,
    "a chunk size in letters": HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + EVENTS,
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_framing_fails_the_request_and_never_escapes(name: str) -> None:
    """Each answer h11 refuses becomes that request's error (a sample error, a post_json error
    text), never an exception out of the client (which accept would report as exit 70)."""

    def handler(sock: socket.socket) -> None:
        _read_request(sock)
        sock.sendall(BROKEN[name])
        sock.shutdown(socket.SHUT_WR)

    with _server(handler) as (url, _):
        (sample,) = _streams(url, 1, Timeouts(stall_s=5))
        status, obj, error = asyncio.run(post_json(url, {"model": "m"}, Timeouts(stall_s=5)))
    assert sample.error.startswith("RemoteProtocolError"), sample.error
    assert (status, obj) == (0, None)
    assert error.startswith("RemoteProtocolError"), error


LAWFUL = {
    "Content-Length and chunked both (chunked frames it)": HEAD
    + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
    + _chunk(EVENTS)
    + b"0\r\n\r\n",
    "a chunk extension and a trailer": HEAD
    + b"Transfer-Encoding: chunked\r\n\r\n"
    + b"%x;ext=1\r\n" % len(EVENTS)
    + EVENTS
    + b"\r\n0\r\nX-Trailer: 1\r\n\r\n",
    "a 100 Continue and 2000 103s first": b"HTTP/1.1 100 Continue\r\n\r\n"
    + b"HTTP/1.1 103 Early Hints\r\n\r\n" * 2000
    + HEAD
    + b"Content-Length: %d\r\n\r\n" % len(EVENTS)
    + EVENTS,
    "an HTTP/1.0 answer read to the close": b"HTTP/1.0 200 OK\r\n\r\n" + EVENTS,
    "Connection: close, then an answer more": HEAD
    + b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(EVENTS)
    + EVENTS
    + _answer("SMUGGLED"),
    "a non-ASCII header value": HEAD
    + b"X-N: \xff\xfe\r\nContent-Length: %d\r\n\r\n" % len(EVENTS)
    + EVENTS,
}


@pytest.mark.parametrize("name", sorted(LAWFUL))
def test_odd_but_lawful_framing_is_read_as_one_answer_per_request(name: str) -> None:
    """Framing HTTP/1.1 allows is read as the one answer it frames; whatever follows it on the
    same connection is never the next request's answer (three requests, three real answers)."""

    def handler(sock: socket.socket) -> None:
        while _read_request(sock):
            sock.sendall(LAWFUL[name])
            if b"HTTP/1.0" in LAWFUL[name][:8] or b"Connection: close" in LAWFUL[name]:
                sock.shutdown(socket.SHUT_WR)
                return

    with _server(handler) as (url, _):
        samples = _streams(url, 3, Timeouts(stall_s=5))
    assert [(s.error, s.text) for s in samples] == [("", ["a"])] * 3


def test_a_204_with_a_body_fails_the_request_and_its_body_is_not_the_next_answer() -> None:
    """A 204 has no body by definition: bytes after its head are no answer to anything."""
    calls: list[int] = []

    def handler(sock: socket.socket) -> None:
        while _read_request(sock):
            calls.append(1)
            if len(calls) == 1:
                sock.sendall(b"HTTP/1.1 204 No Content\r\n\r\n" + _answer("SMUGGLED"))
            else:
                sock.sendall(_answer("honest"))

    with _server(handler) as (url, _):
        first, second = _streams(url, 2, Timeouts(stall_s=5))
    assert first.error.startswith("ValueError: HTTP 204"), first.error
    assert (second.error, second.text) == ("", ["honest"])


# -- 3. resource bounds ------------------------------------------------------------------------


def test_a_server_that_accepts_and_never_answers_the_head_is_a_read_timeout() -> None:
    """The stall timer is armed from the first read, before any head: a silent server costs one
    ``stall_s`` (the test's 0.2 s), not the request's hour."""

    def handler(sock: socket.socket) -> None:
        _read_request(sock)
        _hold(sock)

    with _server(handler) as (url, _):
        (sample,) = _streams(url, 1, Timeouts(stall_s=0.2, request_s=600))
    assert sample.error.startswith("ReadTimeout"), sample.error


def test_a_server_that_never_reads_the_request_is_a_write_timeout() -> None:
    """A server that accepts and never reads: once the socket buffers are full the write waits
    at most ``stall_s``. 64 MiB of prompt is more than any loopback socket buffers hold."""
    with _server(_hold) as (url, _):
        body = {"prompt": "x" * (64 * 1024 * 1024), "max_tokens": 1}
        out: list[Sample] = []
        timeouts = Timeouts(stall_s=0.2, request_s=600)
        asyncio.run(run_closed_loop(url, [(body, 1)], 1, timeouts, out))
    (sample,) = out
    assert sample.error.startswith("WriteTimeout"), sample.error


def test_a_slowloris_body_is_bounded_by_the_request_timeout() -> None:
    """A byte well within every stall, forever: no single read times out, so the request's own
    bound ends it (``request_s``, lowered here below the stall)."""

    def handler(sock: socket.socket) -> None:
        _read_request(sock)
        sock.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
        while True:
            sock.sendall(_chunk(b":"))
            time.sleep(0.05)

    with _server(handler) as (url, _):
        (sample,) = _streams(url, 1, Timeouts(stall_s=30, request_s=0.5))
    assert sample.error == "request timed out"


def test_a_flood_faster_than_parsing_pauses_reading_and_still_ends() -> None:
    """8 MiB of comment lines in one write (far over the 64 KiB the client holds unparsed before
    pausing the socket), then a token and [DONE]: reading resumes as the parser catches up, so
    the pause never deadlocks the answer."""
    flood = b": pad\n" * (8 * 1024 * 1024 // 6)

    def handler(sock: socket.socket) -> None:
        _read_request(sock)
        sock.sendall(HEAD + b"Content-Length: %d\r\n\r\n" % (len(flood) + len(EVENTS)))
        sock.sendall(flood + EVENTS)

    with _server(handler) as (url, _):
        (sample,) = _streams(url, 1, Timeouts(stall_s=10))
    assert (sample.error, sample.text) == ("", ["a"])


def _hold(sock: socket.socket) -> None:
    """Keep the connection open without reading or sending a byte until the client hangs up
    (POLLRDHUP sees the close without draining what the client sent), or 60 s at most."""
    poll = select.poll()
    poll.register(sock, select.POLLRDHUP)
    poll.poll(60_000)


# -- 4. TLS ------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion:DeprecationWarning")
@pytest.mark.parametrize("version", ["TLSv1", "TLSv1_1"])
def test_a_trusted_server_that_offers_only_an_old_tls_version_is_refused(
    version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A downgrade: the server's certificate is trusted (the bundle points at it) and names the
    address, but it speaks at most TLS 1.0 / 1.1. The client's floor is TLS 1.2: no handshake,
    no request sent, a ConnectError for that request (never a plain-text fallback)."""
    cert, key = self_signed(tmp_path, "127.0.0.1")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.set_ciphers("ALL:@SECLEVEL=0")
    context.minimum_version = context.maximum_version = getattr(ssl.TLSVersion, version)
    served: list[int] = []

    def handler(sock: socket.socket) -> None:
        with context.wrap_socket(sock, server_side=True) as tls:
            served.append(1)
            _read_request(tls)
            tls.sendall(_answer("a"))

    monkeypatch.setattr(certifi, "where", lambda: str(cert))
    with _server(handler) as (url, _):
        https = url.replace("http://", "https://")
        status, obj, error = asyncio.run(post_json(https, {"model": "m"}, Timeouts(stall_s=5)))
    assert (status, obj, served) == (0, None, [])
    assert error.startswith("ConnectError"), error


# -- 5. nothing a server writes escapes as an exception ------------------------------------------


def _mutants(seed: int, n: int) -> list[bytes]:
    """``n`` answers made from two valid ones (chunked, Content-Length) by seeded random edits:
    bytes flipped, cut, repeated or inserted, the framing's own bytes most often."""
    rng = random.Random(seed)
    bases = [
        _answer("a") + _answer("b"),
        HEAD + b"Content-Length: %d\r\n\r\n" % len(EVENTS) + EVENTS,
    ]
    specials = [b"\r\n", b"\n", b"0", b"f", b":", b";", b" ", b"\x00", b"\xff", b"HTTP/1.1 "]
    out = []
    for _ in range(n):
        data = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            edit = rng.randrange(4)
            if edit == 0:
                data[at] = rng.randrange(256)
            elif edit == 1:
                del data[at : at + rng.randint(1, 8)]
            elif edit == 2:
                data[at:at] = data[at : at + rng.randint(1, 16)] * rng.randint(2, 50)
            else:
                data[at:at] = rng.choice(specials)
        out.append(bytes(data))
    return out


def test_seeded_mangled_answers_each_fail_or_pass_one_request_and_nothing_escapes() -> None:
    """300 mangled answers (fixed seed), one per connection, through the streaming path and the
    JSON path: every one ends as that request's result (error text or a sample); none raises out
    of the client (an escaped h11 or parser exception is accept's exit 70)."""
    answers = _mutants(seed=23, n=300)
    taken: list[int] = []
    lock = threading.Lock()

    def handler(sock: socket.socket) -> None:
        if not _read_request(sock):
            return
        with lock:
            index = len(taken)
            taken.append(index)
        sock.sendall(answers[index % len(answers)])
        sock.shutdown(socket.SHUT_WR)

    timeouts = Timeouts(stall_s=10)
    with _server(handler) as (url, _):
        samples = _streams(url, len(answers), timeouts)
        results = [asyncio.run(post_json(url, {"m": 1}, timeouts)) for _ in range(20)]
    assert len(samples) == len(answers)
    assert all(isinstance(s.error, str) for s in samples)
    assert len(results) == 20
    assert any(s.error for s in samples) and any(not s.error for s in samples)


def test_a_tls_server_that_accepts_and_never_shakes_hands_is_a_connect_timeout() -> None:
    """The TCP connection is accepted, the ClientHello never answered: the handshake is part of
    the connect, so ``connect_s`` (lowered here) ends it, not asyncio's 60 s handshake default
    nor the request's hour."""
    with _server(_hold) as (url, _):
        https = url.replace("http://", "https://")
        timeouts = Timeouts(connect_s=0.2, stall_s=600, request_s=600)
        status, obj, error = asyncio.run(post_json(https, {"model": "m"}, timeouts))
    assert (status, obj) == (0, None)
    assert error.startswith("ConnectTimeout"), error


# -- the smuggling attack end to end: the real CLI against a slow server behind a smuggler ----

STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"
CHUNKED_END = b"\r\n0\r\n\r\n"


@contextmanager
def _smuggler(upstream: str) -> Iterator[str]:
    """A proxy in front of an honest (slow) server that appends, after the end of each streamed
    answer, a copy of the previous streamed answer: bytes that are whole, valid answers with the
    right token counts, already there when accept sends its next request."""
    host, port = upstream.removeprefix("http://").split("/")[0].split(":")
    previous: list[bytes] = []

    def handler(client: socket.socket) -> None:
        server = socket.create_connection((host, int(port)))
        threading.Thread(target=_pipe, args=(client, server), daemon=True).start()
        with server:
            answer = b""
            while data := server.recv(65536):
                answer += data
                start = answer.rfind(STREAM_HEAD)
                if start >= 0 and answer.endswith(CHUNKED_END):
                    # one write with the answer's last bytes: one loopback segment (well under
                    # 64 KiB), so the copy is there when that answer's end is (the case the
                    # client can refuse; one sent later races the next request, see the report)
                    extra = previous[-1] if previous else b""
                    assert len(data) + len(extra) < 32 * 1024
                    client.sendall(data + extra)
                    previous.append(answer[start:])
                    answer = b""
                else:
                    client.sendall(data)

    with _server(handler) as (url, _):
        yield url.removesuffix("/v1/completions")


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)


def test_accept_behind_a_smuggler_measures_the_slow_server_and_reproduces_nothing_on_ttft(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """The attack through the real CLI: each streamed answer is followed by a ready-made one.
    Served to the next request, it would have a TTFT of ~0 against a server that takes 0.3 s.
    Every request is timed on its own answer instead: each TTFT is at least the server's sleep,
    and the 200 ms TTFT claim is not reproduced."""
    with (
        standin(acceptkit, ttft_s=SLOW_TTFT_S, tpot_s=0.005) as server,
        _smuggler(server.url) as url,
    ):
        proc, result = run_accept(
            acceptkit, url, tmp_path / "out", "--points", "1", "--requests", "6"
        )
    assert proc.returncode == 1, proc.stderr
    assert result["points"][0]["failed"] == 0, result["points"]
    ttft = by_claim(result)[("interactive-c1", "ttft_ms.p50")]
    assert ttft["verdict"] == "not reproduced", ttft
    assert min(evidence_of(tmp_path / "out")["ttfts"]) >= SLOW_TTFT_S
