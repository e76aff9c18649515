"""Network stand-ins for the redirect attacks: a server "off this machine" (127.0.0.2, which
k3kit does not count as this machine, over TLS with its own certificate, trusted through
SSL_CERT_FILE as a real CA's would be) and a local service on 127.0.0.1 that records every
request it gets (what a request forgery would reach)."""

from __future__ import annotations

import http.server
import socketserver
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

OFF_MACHINE = "127.0.0.2"

#: How often a test server's loop looks for a shutdown request. socketserver's default, 0.5 s,
#: made every ``shutdown()`` wait up to half a second: half a second of every test that stopped
#: a server. Only the stop gets faster; requests are answered as they arrive either way.
POLL_S = 0.02


def serve_in_thread(server: socketserver.BaseServer) -> threading.Thread:
    """Start ``server.serve_forever`` on a daemon thread that notices ``shutdown()`` within
    :data:`POLL_S`; the one way every stand-in HTTP server of the tests is run."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True
    )
    thread.start()
    return thread


@contextmanager
def serving(server: socketserver.BaseServer) -> Iterator[None]:
    """Run ``server`` for the block; stop it, close its socket and wait for its thread after."""
    thread = serve_in_thread(server)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


#: The environment a buyer's command gets: the test's certificate trusted, no proxy in between.
def tls_env(cert: Path) -> dict[str, str]:
    return {"SSL_CERT_FILE": str(cert), "NO_PROXY": "*", "no_proxy": "*"}


def self_signed(folder: Path, host: str) -> tuple[Path, Path]:
    """A certificate for ``host`` (an IP) and its key, as a registry off this machine has one."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "registry.crt", folder / "registry.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A local service on this machine: records every request it is sent, answers 404."""

    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def recording_server(hits: list[str], host: str = "127.0.0.1") -> http.server.ThreadingHTTPServer:
    handler = type("Recorder", (_Recorder,), {"hits": hits})
    server = http.server.ThreadingHTTPServer((host, 0), handler)
    serve_in_thread(server)
    return server


@contextmanager
def redirector(host: str, target: str, tls: tuple[Path, Path] | None = None) -> Iterator[int]:
    """A server on ``host`` (over TLS with ``tls`` = (cert, key)) that answers every GET with a
    307 to ``target``; yields its port."""

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(307)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer((host, 0), Redirect)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    with serving(server):
        yield int(server.server_address[1])


@contextmanager
def loopback(
    handler: type[http.server.BaseHTTPRequestHandler], stop: threading.Event | None = None
) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 (a port the kernel picks) for the block; yields
    ``HOST:PORT``. ``stop`` is set first on the way out, so a handler still dribbling or
    stalling a body ends before the server is shut down."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    with serving(server):
        try:
            yield f"127.0.0.1:{server.server_address[1]}"
        finally:
            if stop is not None:
                stop.set()
