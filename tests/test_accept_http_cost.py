"""What accept's HTTP client costs per request, held without any clock (issue 23).

The client's overhead was measured against vLLM's own benchmark client in
``benchmarks/accept_client.py``; these tests pin the causes found there, as facts that do not
depend on how busy the machine is: no module is looked up while requests run (httpcore imported
``sniffio`` in every lock it set up, and a failed import scans ``sys.path`` each time), and a
plain-HTTP client skips the CA bundle while an ``https://`` server's certificate is still
checked.
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
import sys
import threading
from collections.abc import Iterator, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from k3kit.accept._http import Sample, Timeouts, client, post_json, run_closed_loop
from k3kit.accept._net import AsyncioStream
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

    Without ``sniffio`` installed, httpcore asked the import system for it in every lock and
    event of every request (a scan of each ``sys.path`` entry, ~0.25 ms, several per request).
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


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[str]:
    """An HTTPS server on 127.0.0.1 whose certificate no CA signed (as a man in the middle's)."""
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
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    loop = asyncio.new_event_loop()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server: Any = loop.run_until_complete(asyncio.start_server(answer, "127.0.0.1", 0, ssl=context))
    port = server.sockets[0].getsockname()[1]

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{port}/v1/completions"
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_an_https_server_with_an_unsigned_certificate_is_refused(tls_server: str) -> None:
    """Skipping the CA bundle for plain HTTP must not turn verification off for HTTPS."""
    status, obj, error = asyncio.run(post_json(tls_server, {"model": "m"}, Timeouts()))
    assert (status, obj) == (0, None)
    assert "CERTIFICATE_VERIFY_FAILED" in error or "certificate verify failed" in error


def test_the_client_reads_through_asyncio_streams_not_anyio() -> None:
    """The stream httpx hands on is k3kit's asyncio one (anyio's cancel scope per read was the
    largest CPU cost per chunk); if an httpx upgrade stops taking it, this says so."""
    body = {"model": "m", "prompt": "x", "max_tokens": 2, "stream": True}

    async def stream_type(url: str) -> type:
        async with (
            client(1, Timeouts(), url) as http,
            http.stream("POST", url, json=body) as response,
        ):
            await response.aread()
            return type(response.extensions["network_stream"])

    with StandInServer(Knobs(ttft_s=0.0, tpot_s=0.0)) as server:
        assert asyncio.run(stream_type(f"{server.url}/v1/completions")) is AsyncioStream


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
    instead of failing on the dead one (httpcore asks the stream whether it is readable)."""
    loop, server, thread, url = _closing_server()

    async def twice() -> list[int]:
        async with client(1, Timeouts(), url) as http:
            first = await http.get(url)
            await asyncio.sleep(0.05)  # not a timing condition: only lets the FIN arrive first
            second = await http.get(url)
            return [first.status_code, second.status_code]

    try:
        assert asyncio.run(twice()) == [200, 200]
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_a_server_that_stops_sending_is_a_read_timeout() -> None:
    """A stall past ``stall_s`` fails that request with a timeout, through the asyncio stream."""
    with StandInServer(Knobs(ttft_s=30.0, tpot_s=0.0)) as server:
        url = f"{server.url}/v1/completions"
        body = {"model": "m", "prompt": "x", "max_tokens": 2, "stream": True}
        timeouts = Timeouts(connect_s=5.0, stall_s=0.2, request_s=20.0)
        got: list[Sample] = []
        asyncio.run(run_closed_loop(url, [(body, 1)], 1, timeouts, got))
    assert got[0].error.startswith("ReadTimeout")
