"""accept's HTTP/1.1 client: h11 on one asyncio protocol per connection, and nothing else.

Why not httpx: at 32 streams its per-request machinery (request building, auth and redirect
layers, httpcore's pool and locks, a cancel scope or timer around every read) cost ~3 ms of CPU
per request more than vLLM's own aiohttp client, spent on one event loop while the other
requests' clocks run: accept's TTFT was 8-17 % above the reference's (docs/performance.md). A
request here is one ``h11`` serialisation and one ``transport.write``; the answer is parsed by
``h11`` (strict, bounded headers, chunked framing) as it arrives.

What a hostile server can do is bounded the same way as before: a read never waits longer than
``stall_s`` for bytes (:class:`ReadTimeout`), a connect longer than ``connect_s``; the socket is
paused while more than :data:`_BUFFER` bytes wait to be parsed, so a server that sends faster
than this client parses cannot grow memory; redirects are never followed (a 3xx is an answer
like any other non-200); no proxy is ever used; an ``https://`` server's certificate is verified
against certifi's CA bundle (what httpx did), loaded only when such a server is first contacted.

Timing: each block of bytes is stamped by the caller's clock in ``data_received``, the moment
the event loop hands it over, before anything is parsed; the stamp travels with the bytes, so a
line is timed when the bytes that completed it arrived, whatever this client did in between.
"""

from __future__ import annotations

import asyncio
import json
import select
import ssl
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import h11

#: A clock in seconds (``time.perf_counter`` unless a test injects another).
Clock = Callable[[], float]

#: The most received bytes held unparsed before the socket is paused.
_BUFFER = 64 * 1024


class HTTPError(Exception):
    """Anything that stopped a request before a complete answer: the name says which."""


class InvalidURL(HTTPError):
    pass


class ConnectError(HTTPError):
    pass


class ConnectTimeout(HTTPError):
    pass


class ReadTimeout(HTTPError):
    pass


class WriteTimeout(HTTPError):
    pass


class ReadError(HTTPError):
    pass


class RemoteProtocolError(HTTPError):
    """The server broke HTTP/1.1 (h11 said so) or hung up mid-answer."""


class _Target:
    """Where a URL points: scheme, host, port, the request target and the Host header."""

    __slots__ = ("host", "host_header", "port", "target", "tls")

    def __init__(self, url: str) -> None:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise InvalidURL(f"not a URL: {url[:80]!r}") from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidURL(f"not an http:// or https:// URL: {url[:80]!r}")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = port or (443 if self.tls else 80)
        name = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = name if port is None else f"{name}:{port}"
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


class _Connection(asyncio.Protocol):
    """One connection: received bytes queued with their stamps, read by one request at a time."""

    def __init__(self, key: tuple[str, int, bool], stall_s: float) -> None:
        self.key = key
        self.h11 = h11.Connection(h11.CLIENT)
        self.clock: Clock = _no_clock
        #: Whether arriving bytes are stamped at once: from the end of an answer's head on.
        #: Bytes of the head itself are not (the head is not timed, and a test's injected clock
        #: counts its readings); body bytes that came with the head are stamped when parsed.
        self.timing = False
        self._stall_s = stall_s
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._chunks: deque[tuple[bytes, float | None]] = deque()
        self._buffered = 0
        self._paused = False
        self._eof = False
        self._lost: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._deadline = 0.0
        self._watchdog: asyncio.TimerHandle | None = None
        self._drained: asyncio.Future[None] | None = None

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._chunks.append((data, self.clock() if self.timing else None))
        self._buffered += len(data)
        if self._buffered > _BUFFER and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # close the transport: a half-closed connection is no use to a client

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._lost = exc
        self._wake()
        if self._drained is not None and not self._drained.done():
            self._drained.set_exception(ReadError(_named(exc) or "connection closed"))

    def pause_writing(self) -> None:
        self._drained = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # -- used by requests ------------------------------------------------------------------
    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def write(self, data: bytes) -> None:
        """Send ``data``; wait (at most ``stall_s``) only if the transport's buffer is full."""
        if self._transport is None or self._transport.is_closing():
            raise ReadError("connection closed")
        self._transport.write(data)
        if self._drained is not None:
            try:
                async with asyncio.timeout(self._stall_s):
                    await self._drained
            except TimeoutError as exc:
                raise WriteTimeout(f"no progress sending for {self._stall_s:g} s") from exc

    async def read(self) -> tuple[bytes, float | None]:
        """The next block of received bytes and when it arrived (None: not stamped); ``b""``
        at the end of the stream; :class:`ReadTimeout` after ``stall_s`` without any."""
        if not self._chunks and not self._eof:
            self._waiter = self._loop.create_future()
            self._deadline = self._loop.time() + self._stall_s
            if self._watchdog is None:
                self._watchdog = self._loop.call_at(self._deadline, self._check_stall)
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self._chunks:
            data, at = self._chunks.popleft()
            self._buffered -= len(data)
            self._resume()
            return data, at
        if isinstance(self._lost, Exception):
            raise ReadError(_named(self._lost))
        return b"", None

    def take(self) -> bytes | None:
        """The next block already received, or None: never waits."""
        if not self._chunks:
            return None
        data, _ = self._chunks.popleft()
        self._buffered -= len(data)
        self._resume()
        return data

    def _resume(self) -> None:
        if self._paused and self._buffered <= _BUFFER and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    def _check_stall(self) -> None:
        """The one timer of a connection: fires at the earliest deadline a read may have, and
        either times the waiting read out or re-arms for the current read's deadline (cheaper
        than a timer per read: one per ``stall_s`` of silence)."""
        self._watchdog = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._loop.time() >= self._deadline:
            waiter.set_exception(ReadTimeout(f"no bytes from the server for {self._stall_s:g} s"))
        else:
            self._watchdog = self._loop.call_at(self._deadline, self._check_stall)

    def reusable(self) -> bool:
        """Whether an idle kept-alive connection may carry another request: the server has not
        closed it nor sent bytes nobody asked for (a server may hang up an idle connection).

        The one gate every reuse passes. Bytes nobody asked for may wait in three places: the
        socket, this protocol's queue, and h11's own buffer (the rest of a block that also
        carried the end of the last answer). Any of them would be parsed as the next request's
        answer, before that request was even sent: a server that writes two answers to one
        request would have the second served to the next request with a TTFT of ~0.
        """
        if self._eof or self._chunks or self._transport is None or self._transport.is_closing():
            return False
        if self.h11.trailing_data[0]:
            return False
        sock = self._transport.get_extra_info("socket")
        return sock is not None and not _readable(sock)

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._transport is not None:
            self._transport.close()


def _no_clock() -> float:
    return 0.0


def _named(exc: BaseException | None) -> str:
    return (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) if exc else ""


def _readable(sock: Any) -> bool:
    """Whether a read would return at once (bytes or end of stream); a socket gone counts."""
    fileno = sock.fileno()
    if fileno < 0:
        return True
    poll = select.poll()
    poll.register(fileno, select.POLLIN)
    return bool(poll.poll(0))


def _joined(fields: Any) -> dict[str, str]:
    """Header fields by lower-case name, a repeated name's values joined with ", " (as httpx
    read them): ``content-encoding: gzip`` then ``identity`` is "gzip, identity", not identity."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in fields:
        name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


class Response:
    """A request's answer: status and headers on entry; the body read with :meth:`chunks`.

    Leaving the ``async with`` hands the connection back for the next request if the answer
    was read to its end, and closes it otherwise (an unread body must not be taken for the
    next answer).
    """

    def __init__(self, client: Client, conn: _Connection, request: bytes) -> None:
        self._client = client
        self._conn = conn
        self._request = request
        self.status_code = 0
        self.headers: dict[str, str] = {}
        self._done = False
        self._at: float | None = None

    async def __aenter__(self) -> Response:
        conn = self._conn
        await conn.write(self._request)
        while True:
            event = await self._next_event()
            if isinstance(event, h11.Response):
                break
        conn.timing = True
        self.status_code = event.status_code
        self.headers = _joined(event.headers)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is None:
            self._settle()
        self._client._release(self._conn, clean=self._done and exc[0] is None)

    async def _next_event(self) -> Any:
        """The next h11 event of this answer, reading (and stamping) more bytes as needed."""
        conn = self._conn
        while True:
            try:
                event = conn.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise RemoteProtocolError(str(exc)) from exc
            if event is not h11.NEED_DATA:
                if event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
                    raise RemoteProtocolError("the server closed the connection mid-answer")
                return event
            data, at = await conn.read()
            if data:
                self._at = at
            try:
                conn.h11.receive_data(data)
            except h11.RemoteProtocolError as exc:
                raise RemoteProtocolError(str(exc)) from exc

    @property
    def arrived(self) -> float:
        """When the last block of bytes read for this answer arrived (a block not stamped on
        arrival, because it came with the head, is stamped now: once, and never earlier)."""
        if self._at is None:
            self._at = self._conn.clock()
        return self._at

    async def chunks(self) -> AsyncIterator[tuple[bytes, float]]:
        """The body, block by block, each with the time the bytes that completed it arrived."""
        while not self._done:
            event = await self._next_event()
            if isinstance(event, h11.Data):
                if event.data:
                    yield bytes(event.data), self.arrived
            elif isinstance(event, h11.EndOfMessage):
                self._done = True

    def _settle(self) -> None:
        """Parse what has already arrived to the end of the answer, never waiting: a caller
        that stops at ``[DONE]`` leaves the chunked terminator unparsed, and the connection
        can carry the next request only once it is. A server that sends more, or not yet,
        just costs its connection."""
        conn = self._conn
        try:
            while not self._done:
                event = conn.h11.next_event()
                if event is h11.NEED_DATA:
                    data = conn.take()
                    if data is None:
                        return
                    conn.h11.receive_data(data)
                elif isinstance(event, h11.EndOfMessage):
                    self._done = True
                elif not isinstance(event, h11.Data) or event.data:
                    return
        except h11.RemoteProtocolError:
            return


class Client:
    """Keep-alive connections to the servers one accept run talks to, at most ``concurrency``
    idle ones kept; a request that finds none idle opens one (accept never runs more
    requests at once than its concurrency, so that is the pool's size)."""

    def __init__(self, concurrency: int, connect_s: float, stall_s: float) -> None:
        self._keep = max(1, concurrency)
        self._connect_s = connect_s
        self._stall_s = stall_s
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._tls: ssl.SSLContext | None = None

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports' close callbacks run on this loop

    def post(self, url: str, body: bytes, headers: dict[str, str], clock: Clock) -> _Pending:
        """``async with client.post(...) as response``: the POST is sent on entry."""
        return _Pending(self, "POST", url, body, headers, clock)

    def get(self, url: str, clock: Clock) -> _Pending:
        return _Pending(self, "GET", url, None, {}, clock)

    async def _connection(self, target: _Target) -> _Connection:
        key = (target.host, target.port, target.tls)
        while self._idle:
            conn = self._idle.pop()
            if conn.key == key and conn.reusable():
                return conn
            self._drop(conn)
        context = self._context() if target.tls else None
        loop = asyncio.get_running_loop()
        conn = _Connection(key, self._stall_s)
        try:
            async with asyncio.timeout(self._connect_s):
                await loop.create_connection(
                    lambda: conn,
                    target.host,
                    target.port,
                    ssl=context,
                    server_hostname=target.host if context else None,
                )
        except TimeoutError as exc:
            conn.close()
            raise ConnectTimeout(f"no connection within {self._connect_s:g} s") from exc
        except (OSError, ssl.SSLError) as exc:
            conn.close()
            raise ConnectError(_named(exc)) from exc
        self._open.add(conn)
        return conn

    def _context(self) -> ssl.SSLContext:
        """Certificates checked against certifi's bundle, as httpx did; loaded once (~30 ms)."""
        if self._tls is None:
            import certifi

            self._tls = ssl.create_default_context(cafile=certifi.where())
        return self._tls

    def _release(self, conn: _Connection, *, clean: bool) -> None:
        h = conn.h11
        if clean and h.our_state is h11.DONE and h.their_state is h11.DONE:
            try:
                h.start_next_cycle()
            except h11.LocalProtocolError:
                clean = False
            else:
                if len(self._idle) < self._keep:
                    self._idle.append(conn)
                    return
        self._drop(conn)

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        self._open.discard(conn)


class _Pending:
    """One request not yet sent: sending, headers and release happen in ``async with``."""

    __slots__ = ("_body", "_client", "_clock", "_headers", "_method", "_response", "_url")

    def __init__(
        self,
        client: Client,
        method: str,
        url: str,
        body: bytes | None,
        headers: dict[str, str],
        clock: Clock,
    ) -> None:
        self._client = client
        self._method = method
        self._url = url
        self._body = body
        self._headers = headers
        self._clock = clock
        self._response: Response | None = None

    async def __aenter__(self) -> Response:
        target = _Target(self._url)
        conn = await self._client._connection(target)
        conn.clock, conn.timing = self._clock, False
        try:
            request = _serialise(conn.h11, target, self._method, self._body, self._headers)
        except h11.LocalProtocolError as exc:
            self._client._drop(conn)
            raise InvalidURL(f"cannot send that request: {exc}") from exc
        self._response = Response(self._client, conn, request)
        try:
            return await self._response.__aenter__()
        except BaseException:
            self._client._drop(conn)
            raise

    async def __aexit__(self, *exc: object) -> None:
        if self._response is not None:
            await self._response.__aexit__(*exc)


def _serialise(
    conn: h11.Connection,
    target: _Target,
    method: str,
    body: bytes | None,
    headers: dict[str, str],
) -> bytes:
    """The request's bytes, written by h11 (which refuses a target or header that would break
    the framing: a space, CR or LF from a URL)."""
    fields = [("Host", target.host_header), ("Accept", "*/*"), ("User-Agent", "k3kit")]
    fields += list(headers.items())
    if body is not None:
        fields += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    out = conn.send(h11.Request(method=method, target=target.target, headers=fields)) or b""
    if body:
        out += conn.send(h11.Data(data=body)) or b""
    return out + (conn.send(h11.EndOfMessage()) or b"")


def json_body(body: dict[str, Any]) -> bytes:
    """A request's JSON, compact and ASCII (NaN refused: no server parses it)."""
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode("ascii")


__all__ = [
    "Client",
    "ConnectError",
    "ConnectTimeout",
    "HTTPError",
    "InvalidURL",
    "ReadError",
    "ReadTimeout",
    "RemoteProtocolError",
    "Response",
    "WriteTimeout",
    "json_body",
]
