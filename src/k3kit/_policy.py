"""The policies for names that come from untrusted bytes: paths and URLs.

Paths (locks, manifests, archives): the one path policy lives at the bottom layer so that the
models can refuse an unsafe path when a document is loaded, before any code can join it onto a
directory: a lock naming ``../victim`` must fail to parse, not depend on every caller remembering
to check.

URLs (the hub's, a registry's, their redirects): plain http is fine to this machine, nowhere
else. It was written out in the hub policy and would have been written again for OCI registries;
two copies drift (one learns ``::1``, the other does not). Anything off loopback needs https.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # urllib.parse and ipaddress are imported where a URL is really parsed
    from urllib.parse import SplitResult

_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")
_RESERVED_SEGMENTS = {".", ".."}
MAX_PATH_BYTES = 4096
MAX_SEGMENT_BYTES = 255
MAX_DEPTH = 32


def path_problem(rel: str) -> str | None:
    """Why a relative path is unsafe to create from untrusted input, or None when it is fine.

    The policy is deliberately narrow (ASCII letters, digits, ``._-``, NFC, no empty, ``.`` or
    ``..`` segments, no trailing dot) so that one name cannot mean two files on another
    filesystem.
    """
    if not rel or rel.startswith("/") or "\\" in rel or "\x00" in rel:
        return "absolute, empty or contains a backslash or NUL"
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # a non-UTF-8 name, as os.fsdecode's surrogateescape shows it
        return "not valid UTF-8"
    # ASCII text is its own NFC form, so unicodedata (~0.3 ms of CPU to import on every node
    # start, where every kit path is ASCII) is imported only for a path that is not
    if not rel.isascii():
        import unicodedata

        if unicodedata.normalize("NFC", rel) != rel:
            return "not NFC-normalised"
    if len(rel.encode()) > MAX_PATH_BYTES:
        return "path too long"
    parts = rel.split("/")
    if len(parts) > MAX_DEPTH:
        return "path too deep"
    for part in parts:
        if part in _RESERVED_SEGMENTS or not part:
            return "empty, '.' or '..' segment"
        if not _SEGMENT.fullmatch(part):
            return f"segment {part!r} has characters outside [A-Za-z0-9._-]"
        if part.endswith("."):
            return f"segment {part!r} ends with a dot"
        if len(part.encode()) > MAX_SEGMENT_BYTES:
            return "segment too long"
    return None


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str | None) -> bool:
    """``host`` (a URL's hostname: no port, no brackets) names this machine."""
    return host in LOOPBACK


def plain_http_off_loopback(url: str) -> bool:
    """True when ``url`` is plain http to another machine: what a token, a kit or a redirect
    must never be sent over."""
    parts = split_url(url)  # a URL that is none is refused by the callers, with its own words
    return parts is not None and parts.scheme == "http" and not is_loopback(parts.hostname)


# lower-case: urlsplit lowers it. A pattern's text, compiled on first use (re's cache): only a
# URL is matched against it, and compiling it at import cost every node start ~0.1 ms of CPU.
_HOSTNAME = r"[a-z0-9_][a-z0-9_.-]{0,252}"


def split_url(url: str) -> SplitResult | None:
    """``url`` split, or None when it is no URL a client may be pointed at: a host that is not
    an ASCII name or an IP literal (``[::1``, a space, ``é``), or a port that is not a number in
    range. A server writes many of the URLs k3kit compares (a token realm, a redirect's
    ``Location``), and :func:`urllib.parse.urlsplit` and its ``.port`` raise ``ValueError`` on
    such bytes: every policy below asks here, so none can crash on them and all fail closed."""
    # imported on use: urllib.parse (with ipaddress) is ~3.5 ms of CPU on every node start, and
    # verify of a kit folder parses no URL (the models import this module for the path policy)
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number in range
    except ValueError:
        return None
    host = parts.hostname or ""
    if re.fullmatch(_HOSTNAME, host) or _ip_literal(host):
        return parts
    return None


def _ip_literal(host: str) -> bool:
    import ipaddress  # imported on use, as urllib.parse in split_url

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def join_url(base: str, location: str) -> str | None:
    """A server's ``Location`` resolved against ``base``, or None when it is no URL at all
    (:func:`split_url`): the one way a redirect target is computed before the policies judge it."""
    from urllib.parse import urljoin  # imported on use, as in split_url

    try:
        joined = urljoin(base, location)
    except ValueError:
        return None
    return joined if split_url(joined) is not None else None


def url_refusal(url: str) -> str | None:
    """Why ``url`` may not be handed to one of k3kit's clients, or None: only http(s), no
    ``user:password@`` (urllib3 would send it as Basic auth, and every message naming the URL
    would print it), and plain http only to this machine. The one check of every base URL a
    person types (``update --from``); the registry's references get the same rule in their own
    grammar (:mod:`k3kit.oci.ref`)."""
    parts = split_url(url)
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        return "it is not an http(s) URL with a host"
    if parts.username is not None or parts.password is not None:
        return "it carries a user name or password, which would be sent and printed"
    if plain_http_off_loopback(url):
        return "it is plain http to another machine: anyone on the path could read what is fetched"
    return None


def origin(url: str) -> tuple[str, str, int | None] | None:
    """``url``'s origin (scheme, lower-case host, port with the scheme's default filled in), or
    None for a URL :func:`split_url` refuses."""
    parts = split_url(url)
    if parts is None:
        return None
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return (parts.scheme, (parts.hostname or "").lower(), port)


def same_origin(url: str, other: str) -> bool:
    """Whether a credential meant for ``other`` may go to ``url``: the one test every client
    that sends a token or password asks (the hub's downloads, a registry's requests, redirects
    and token realms), so none can compare by string and another by host alone. A URL that is
    no URL is nobody's origin: never the same, never raising."""
    mine = origin(url)
    return mine is not None and mine == origin(other)


def redirect_refusal(url: str, origin: str) -> str | None:
    """Why a redirect from ``origin`` to ``url`` may not be followed, or None: only http(s), no
    plain http off this machine (a downgrade anyone on the path reads), and into this machine
    only from a server on it (a remote server redirecting to 127.0.0.1 would make the node send
    a request to its own local services: a request forgery). Every client that follows
    redirects by hand (the registry's, the channel's) asks this."""
    from urllib.parse import urlsplit  # imported on use, as in split_url

    parts = split_url(url)
    if parts is None:
        return "it is not a URL (its host or port cannot be read)"
    if parts.scheme not in ("http", "https") or plain_http_off_loopback(url):
        return "only https is followed (plain http only on this machine)"
    if is_loopback(parts.hostname) and not is_loopback(urlsplit(origin).hostname):
        return "a server off this machine may not send the node to this machine"
    return None


# -- how long a body may take -------------------------------------------------------------------

READ_FLOOR_SECONDS = 60.0
"""Every body may take at least this long, however small (a token answer on a slow link)."""
READ_FLOOR_RATE = 64 * 1024
"""Bytes a second below which a body is given up. Kits, manifests, receipts and channel
metadata are KB to MB (weights never travel this way), so 64 KiB/s (about 0.5 Mbit/s) is a link
far slower than any a GPU node has, and a kit at the 512 MiB archive cap still gets 2.3 hours."""


class ReadTooSlow(Exception):
    """A body did not arrive within :func:`read_deadline` of its start (the caller maps it to
    its own registered code: this layer imports no error type)."""


def read_deadline(size: int) -> float:
    """Seconds a body of at most ``size`` bytes may take in all: ``max(READ_FLOOR_SECONDS,
    size / READ_FLOOR_RATE)``. A per-read timeout alone bounds the gap between two bytes, not
    the body: a server sending one byte every 29 s never trips a 30 s read timeout, and a
    64 KiB token answer would take 22 days."""
    return max(READ_FLOOR_SECONDS, size / READ_FLOOR_RATE)


class Deadline:
    """The overall deadline of one read of at most ``size`` bytes, started when made (before
    the request, so slow headers count too). :meth:`paced` checks it as each piece of the body
    arrives. Used as a context (``with deadline:``) it is also the *active* deadline of this
    thread's network reads (:func:`read_wait`): every socket read the clients make inside the
    block, the status line and headers included, waits at most what is left of it. Without
    that, a server sending the head one byte every (read timeout - 1) seconds was bounded only
    by how many header bytes its client accepts (h11: 100 KiB, a month at 29 s a byte)."""

    def __init__(self, size: int) -> None:
        self.seconds = read_deadline(size)
        self._ends = time.monotonic() + self.seconds
        self._tokens: list[Token[Deadline | None]] = []

    def __enter__(self) -> Deadline:
        self._tokens.append(_ACTIVE.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.reset(self._tokens.pop())

    def check(self) -> None:
        if time.monotonic() > self._ends:
            raise ReadTooSlow(
                f"not complete after {self.seconds:.0f} s (k3kit allows "
                f"max({READ_FLOOR_SECONDS:.0f} s, size at {READ_FLOOR_RATE // 1024} KiB/s))"
            )

    def bound(self, timeout: float | None) -> float:
        """How long one read may wait now: ``timeout`` cut to what is left (at least 1 ms, so
        a socket is never made non-blocking), or :class:`ReadTooSlow` when nothing is."""
        self.check()
        left = max(self._ends - time.monotonic(), 0.001)
        return left if timeout is None else min(timeout, left)

    def paced(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """``chunks`` as they arrive; :class:`ReadTooSlow` once the deadline has passed."""
        for chunk in chunks:
            self.check()
            yield chunk


_Client = TypeVar("_Client")
_ACTIVE: ContextVar[Deadline | None] = ContextVar("k3kit_read_deadline", default=None)


def read_wait(timeout: float | None) -> float | None:
    """How long a network read may wait now: ``timeout`` (the client's per-read timeout), cut
    to what is left of the deadline active in this context (:class:`Deadline` as a context),
    or :class:`ReadTooSlow` when it has passed. The one question every client's socket reads
    ask (:class:`PacedBackend` for httpx's, the channel's ``_PacedSocketIO`` for urllib3's)."""
    active = _ACTIVE.get()
    return timeout if active is None else active.bound(timeout)


def failed_read() -> None:
    """After a read failed (its wait cut short by :func:`read_wait`, most often): raise
    :class:`ReadTooSlow` instead when the active deadline has passed, so the caller reports
    "too slowly" and not a bare timeout; otherwise return and let the caller re-raise."""
    active = _ACTIVE.get()
    if active is not None:
        active.check()


class PacedStream:
    """An httpcore network stream (httpx's and httpx2's, duck-typed: this layer imports
    neither) whose reads wait at most :func:`read_wait`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            data: bytes = self._inner.read(max_bytes, read_wait(timeout))
        except Exception:
            failed_read()
            raise
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> PacedStream:
        return PacedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class PacedBackend:
    """An httpcore network backend whose streams are :class:`PacedStream`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> PacedStream:
        return PacedStream(self._inner.connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> PacedStream:
        return PacedStream(self._inner.connect_unix_socket(*args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class UnusableEnvironment(Exception):
    """An HTTP client could not be built from this process's environment (the caller maps it
    to its registered code, ``BAD_PROXY_SETTING``: this layer imports no error type)."""


def client_from_env(make: Callable[[], _Client]) -> _Client:
    """``make()`` (an ``httpx.Client`` or ``httpx2.Client`` that reads its proxies and CA files
    from the environment), paced (:func:`pace_client`). The one constructor of every such client
    k3kit builds: a client reads ``HTTPS_PROXY``, ``ALL_PROXY``, ``SSL_CERT_FILE`` when it is
    built, and one it cannot use (``socks5://`` without socksio, ``ftp://``, a port that is no
    number) raised ImportError or ValueError there: exit 70 from a variable a site's image or
    shell profile set. It is :class:`UnusableEnvironment`, naming the cause (a proxy URL may hold a
    password, so the message is the client's own words about it, never the variable's value)."""
    try:
        client = make()
    except Exception as exc:
        raise UnusableEnvironment(f"{type(exc).__name__}: {_without_urls(str(exc))}") from None
    return pace_client(client)


def _without_urls(text: str) -> str:
    """``text`` with anything URL-like (which may carry ``user:password@``) replaced."""
    return re.sub(r"[A-Za-z][A-Za-z0-9+.-]*://\S*|URL\('[^']*'\)", "(a URL)", text)


def pace_client(client: _Client) -> _Client:
    """``client`` (an ``httpx.Client`` or ``httpx2.Client``) with every connection pool it
    sends through (its transport and each proxy mount) reading via :class:`PacedBackend`;
    idempotent. httpx offers no public hook for its network backend, so this reaches into
    ``_transport``/``_mounts``/``_pool``; a client whose layout is not that is refused (a
    RuntimeError the tests meet on an upgrade) rather than left unbounded."""
    held: Any = client
    transports = [t for t in (held._transport, *held._mounts.values()) if t is not None]
    pools: list[Any] = [getattr(t, "_pool", None) for t in transports]
    if not pools or not all(hasattr(p, "_network_backend") for p in pools):
        raise RuntimeError(f"{type(client).__name__}: no connection pool to pace reads on")
    for pool in pools:
        if not isinstance(pool._network_backend, PacedBackend):
            pool._network_backend = PacedBackend(pool._network_backend)
    return client
