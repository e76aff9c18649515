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

from k3kit.accept._http import Sample, Timeouts, post_json, run_closed_loop
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
