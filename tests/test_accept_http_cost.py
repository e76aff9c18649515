"""What accept's HTTP client costs per request, held without any clock (issue 23).

The client's overhead was measured against vLLM's own benchmark client in
``benchmarks/accept_client.py``; these tests pin the causes found there, as facts that do not
depend on how busy the machine is: no module is looked up while requests run (httpcore imported
``sniffio`` in every lock it set up, and a failed import scans ``sys.path`` each time), httpx is
no longer on the path at all, a kept-alive connection carries the next request, and a
plain-HTTP client skips the CA bundle while an ``https://`` server's certificate is still
checked. What leaving httpx must not lose is held too: redirects are refused, a server that
hangs up an idle connection or goes silent mid-stream fails cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

import certifi
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from k3kit.accept._http import Sample, Timeouts, client, post_json, run_closed_loop
from k3kit.accept._net import Client
from tests.standin_server import Knobs, StandInServer


class _Lookups:
    """A meta-path finder that finds nothing and notes every module name asked of it."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        self.names.append(name)
        return None


def _run(url: str, n: int, concurrency: int) -> list[Sample]:
    body = {"model": "m", "prompt": "x", "max_tokens": 4, "stream": True}
    got: list[Sample] = []
    asyncio.run(run_closed_loop(url, [(body, 1)] * n, concurrency, Timeouts(), got))
    return got


def test_no_module_is_looked_up_while_requests_run() -> None:
    """A second run imports nothing: every module the client needs was loaded by the first.

    When accept ran on httpcore, without ``sniffio`` installed httpcore asked the import system
    for it in every lock and event of every request (a scan of each ``sys.path`` entry, ~0.25 ms,
    several per request); this keeps any such lookup out of the client that replaced it.
    """
    with StandInServer(Knobs(ttft_s=0.0, tpot_s=0.0)) as server:
        url = f"{server.url}/v1/completions"
        assert all(s.ok for s in _run(url, 2, 2))
        lookups = _Lookups()
        sys.meta_path.insert(0, lookups)
        try:
            got = _run(url, 8, 4)
        finally:
            sys.meta_path.remove(lookups)
    assert [s.error for s in got] == [""] * 8
    assert lookups.names == []


@contextlib.contextmanager
def _https_server(folder: Path, names: Sequence[x509.GeneralName]) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on 127.0.0.1 with a self-signed certificate for ``names`` (no CA signed
    it, as a man in the middle's): its URL and the certificate's file."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    loop = asyncio.new_event_loop()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server: Any = loop.run_until_complete(asyncio.start_server(answer, "127.0.0.1", 0, ssl=context))
    port = server.sockets[0].getsockname()[1]

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{port}/v1/completions", folder / "cert.pem"
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


LOOPBACK = [x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))]


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[str]:
    with _https_server(tmp_path, LOOPBACK) as (url, _):
        yield url


def test_an_https_server_whose_certificate_the_bundle_trusts_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verifying side works end to end: with the server's certificate in the CA bundle
    (certifi's file, pointed at it), the TLS handshake and the request go through."""
    with _https_server(tmp_path, LOOPBACK) as (url, cert):
        monkeypatch.setattr(certifi, "where", lambda: str(cert))
        status, obj, error = asyncio.run(post_json(url, {"model": "m"}, Timeouts()))
    assert (status, obj, error) == (200, {}, "")


def test_a_trusted_certificate_for_another_host_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server showing a certificate the bundle trusts, but issued for another name, is not
    the server at the URL: the hostname check refuses it (``IP address mismatch``)."""
    elsewhere = [x509.DNSName("elsewhere.example")]
    with _https_server(tmp_path, elsewhere) as (url, cert):
        monkeypatch.setattr(certifi, "where", lambda: str(cert))
        status, obj, error = asyncio.run(post_json(url, {"model": "m"}, Timeouts()))
    assert (status, obj) == (0, None)
    assert "mismatch" in error, error


def test_an_https_server_with_an_unsigned_certificate_is_refused(tls_server: str) -> None:
    """Skipping the CA bundle for plain HTTP must not turn verification off for HTTPS."""
    status, obj, error = asyncio.run(post_json(tls_server, {"model": "m"}, Timeouts()))
    assert (status, obj) == (0, None)
    assert "CERTIFICATE_VERIFY_FAILED" in error or "certificate verify failed" in error


def test_a_run_loads_neither_httpx_nor_anyio() -> None:
    """accept's requests go through k3kit.accept._net (h11 on asyncio): httpx's per-request
    machinery (request building, the pool's locks, anyio around each read) put its TTFT 8-17 %
    above vLLM's client at 32 streams. A whole run in a fresh interpreter loads none of it."""
    script = (
        "import asyncio, sys\n"
        "from k3kit.accept._http import Timeouts, run_closed_loop\n"
        "from tests.standin_server import Knobs, StandInServer\n"
        "body = {'model': 'm', 'prompt': 'x', 'max_tokens': 2, 'stream': True}\n"
        "got = []\n"
        "with StandInServer(Knobs(ttft_s=0.0, tpot_s=0.0)) as server:\n"
        "    url = server.url + '/v1/completions'\n"
        "    asyncio.run(run_closed_loop(url, [(body, 1)] * 2, 2, Timeouts(), got))\n"
        "print([s.error for s in got], sorted({'httpx', 'httpcore', 'anyio'} & set(sys.modules)))\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "['', ''] []", out.stderr


Served = tuple[asyncio.AbstractEventLoop, Any, threading.Thread, str, list[int]]


def _counting_server(answer: bytes) -> Served:
    """A keep-alive server that answers every request with ``answer`` in one write and counts
    the connections it accepted."""
    loop = asyncio.new_event_loop()
    accepted: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = [
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ]
                await reader.readexactly(length[0] if length else 0)
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = loop.run_until_complete(asyncio.start_server(serve, "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    port = server.sockets[0].getsockname()[1]
    return loop, server, thread, f"http://127.0.0.1:{port}/v1/completions", accepted


def _stop(loop: asyncio.AbstractEventLoop, server: Any, thread: threading.Thread) -> None:
    loop.call_soon_threadsafe(server.close)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


STREAM = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    + _frame(b'data: {"choices":[{"text":" the"}]}\n\n')
    + _frame(b"data: [DONE]\n\n")
    + b"0\r\n\r\n"
)


def test_requests_after_done_reuse_the_kept_alive_connection() -> None:
    """A stream read to ``[DONE]`` leaves its connection for the next request (the chunked
    terminator that came with ``[DONE]`` is parsed on the way out): eight requests, one
    connection, as vLLM's aiohttp client keeps it. A new connection per request was part of
    httpx's cost."""
    loop, server, thread, url, accepted = _counting_server(STREAM)
    body = {"model": "m", "prompt": "x", "max_tokens": 1, "stream": True}
    try:
        got: list[Sample] = []
        asyncio.run(run_closed_loop(url, [(body, 1)] * 8, 1, Timeouts(), got))
    finally:
        _stop(loop, server, thread)
    assert [s.error for s in got] == [""] * 8
    assert [s.text for s in got] == [[" the"]] * 8
    assert len(accepted) == 1


def test_a_redirect_to_another_server_is_not_followed() -> None:
    """A server that answers 307 to a second server's address gets an HTTP error, and the
    second server never sees the request (nor the buyer's prompt)."""
    loop2, server2, thread2, elsewhere, reached = _counting_server(STREAM)
    moved = b"HTTP/1.1 307 X\r\nLocation: " + elsewhere.encode() + b"\r\nContent-Length: 0\r\n\r\n"
    loop, server, thread, url, _ = _counting_server(moved)
    try:
        got = _run(url, 1, 1)
    finally:
        _stop(loop, server, thread)
        _stop(loop2, server2, thread2)
    assert "HTTP 307" in got[0].error, got[0].error
    assert reached == []


def test_a_second_content_encoding_header_does_not_hide_the_first() -> None:
    """A server that says ``gzip`` and then ``identity`` has compressed its answer: the
    repeated header is read whole ("gzip, identity"), as httpx read it, and refused."""
    head = b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-encoding: identity\r\n"
    loop, server, thread, url, _ = _counting_server(head + STREAM.split(b"\r\n", 1)[1])
    try:
        got = _run(url, 1, 1)
    finally:
        _stop(loop, server, thread)
    assert "compressed its answer" in got[0].error, got[0].error


def _closing_server() -> tuple[asyncio.AbstractEventLoop, Any, threading.Thread, str]:
    """A server that answers each connection's one request, keep-alive, then hangs up."""
    loop = asyncio.new_event_loop()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # a GET: no body
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server = loop.run_until_complete(asyncio.start_server(answer, "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    return loop, server, thread, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"


def test_a_kept_alive_connection_the_server_closed_is_not_reused() -> None:
    """A server may hang up an idle kept-alive connection: the next request opens a new one
    instead of failing on the dead one."""
    loop, server, thread, url = _closing_server()

    async def get(http: Client) -> int:
        async with http.get(url, time.perf_counter) as response:
            async for _ in response.chunks():
                pass
            return response.status_code

    async def twice() -> list[int]:
        async with client(1, Timeouts()) as http:
            first = await get(http)
            await asyncio.sleep(0.05)  # not a timing condition: only lets the FIN arrive first
            second = await get(http)
            return [first, second]

    try:
        assert asyncio.run(twice()) == [200, 200]
    finally:
        _stop(loop, server, thread)


def test_a_server_that_streams_then_goes_silent_is_a_read_timeout() -> None:
    """Tokens every 20 ms for longer than the stall limit keep the request alive (the one
    timer per connection re-arms for each read's own deadline); the silence after them, held
    open without ``[DONE]``, fails it with a timeout instead of waiting for ever."""
    with StandInServer(Knobs(ttft_s=0.0, tpot_s=0.02, hold_s=60.0)) as server:
        url = f"{server.url}/v1/completions"
        body = {"model": "m", "prompt": "x", "max_tokens": 60, "stream": True}
        timeouts = Timeouts(connect_s=5.0, stall_s=1.0, request_s=30.0)
        got: list[Sample] = []
        asyncio.run(run_closed_loop(url, [(body, 1)], 1, timeouts, got))
    assert got[0].error.startswith("ReadTimeout"), got[0].error
    assert got[0].text_chunks == 60


def test_a_server_that_stops_sending_is_a_read_timeout() -> None:
    """A stall past ``stall_s`` fails that request with a timeout, through the asyncio stream."""
    with StandInServer(Knobs(ttft_s=30.0, tpot_s=0.0)) as server:
        url = f"{server.url}/v1/completions"
        body = {"model": "m", "prompt": "x", "max_tokens": 2, "stream": True}
        timeouts = Timeouts(connect_s=5.0, stall_s=0.2, request_s=20.0)
        got: list[Sample] = []
        asyncio.run(run_closed_loop(url, [(body, 1)], 1, timeouts, got))
    assert got[0].error.startswith("ReadTimeout")
