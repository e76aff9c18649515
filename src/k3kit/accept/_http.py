"""The one home of httpx: a streaming OpenAI-compatible client timed like ``vllm bench serve``.

Why httpx: it is async, streams server-sent events line by line, has separate connect/read/write
timeouts (a stalled server is a read timeout, not a hang), a connection pool whose size is the
concurrency, and ``trust_env=False`` so that no proxy from the environment sits between the buyer
and their own server. Timing follows vLLM's client exactly (``lib/endpoint_request_func.py``) so
that the numbers mean what the receipt's definitions say: TTFT is the first chunk carrying
``choices`` minus the send time, each later chunk adds one inter-token gap, E2E is the last chunk,
and the output token count is the server's ``usage.completion_tokens``. The clock is
``time.perf_counter`` (monotonic).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

MAX_ERROR_CHARS = 200
MAX_LINE_BYTES = 1024 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024
#: Compressed answers are refused: a small compressed chunk can expand without bound before any
#: cap applies, and a local server has no reason to compress.
IDENTITY = {"accept-encoding": "identity"}


@dataclass
class Sample:
    """One timed request; ``error`` is empty for a success, as in vLLM's result files."""

    input_len: int
    start_s: float = 0.0
    ttft_s: float = 0.0
    itl_s: list[float] = field(default_factory=list)
    latency_s: float = 0.0
    output_len: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.error == ""


@dataclass(frozen=True)
class Timeouts:
    connect_s: float = 10.0
    stall_s: float = 60.0  # longest silence between two chunks
    request_s: float = 3600.0  # the whole request, whatever the chunks do


def client(concurrency: int, timeouts: Timeouts) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    timeout = httpx.Timeout(
        connect=timeouts.connect_s, read=timeouts.stall_s, write=timeouts.stall_s, pool=None
    )
    return httpx.AsyncClient(limits=limits, timeout=timeout, trust_env=False)


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:MAX_ERROR_CHARS]


def _check_identity(response: httpx.Response) -> None:
    if response.headers.get("content-encoding", "identity").lower() not in ("", "identity"):
        raise ValueError("the server compressed its answer although asked not to")


async def _lines(response: httpx.Response) -> AsyncIterator[str]:
    """The answer's lines, each refused as soon as it grows past :data:`MAX_LINE_BYTES`.

    httpx's ``aiter_lines`` holds a whole line before returning it, so a server that never sends
    a newline grows one string until the request times out (an hour); this reader holds at most
    one cap's worth plus one network read.
    """
    _check_identity(response)
    pending = b""
    async for chunk in response.aiter_raw():
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if len(line) > MAX_LINE_BYTES:
                raise ValueError("server-sent line over 1 MiB")
            yield line.removesuffix(b"\r").decode("utf-8", errors="replace")
        if len(pending) > MAX_LINE_BYTES:
            raise ValueError("server-sent line over 1 MiB")
    if pending:
        yield pending.removesuffix(b"\r").decode("utf-8", errors="replace")


async def _read_capped(response: httpx.Response, cap: int) -> bytes:
    """At most ``cap`` bytes of the answer (``ValueError`` beyond it): never an endless read."""
    _check_identity(response)
    data = bytearray()
    async for chunk in response.aiter_raw():
        data += chunk
        if len(data) > cap:
            raise ValueError(f"answer over {cap // (1024 * 1024)} MiB")
    return bytes(data)


async def _first_bytes(response: httpx.Response, n: int) -> str:
    """The start of an error answer, for the message; the rest is never read."""
    data = b""
    async for chunk in response.aiter_raw():
        data += chunk
        if len(data) >= n:
            break
    return data[:n].decode("utf-8", errors="replace")


def _loads(data: str) -> object:
    try:
        return json.loads(data)
    except RecursionError as exc:  # deep nesting is bad input, not a crash
        raise ValueError("server-sent JSON nested too deeply") from exc


async def _consume(response: httpx.Response, sample: Sample, sent: float) -> None:
    last = sent
    done = False
    async for line in _lines(response):
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        now = time.perf_counter()
        obj = _loads(data)
        if not isinstance(obj, dict):
            raise ValueError("server-sent event is not a JSON object")
        if obj.get("choices"):
            if sample.ttft_s == 0.0:
                sample.ttft_s = now - sent
            else:
                sample.itl_s.append(now - last)
            last = now
        elif isinstance(obj.get("usage"), dict):
            tokens = obj["usage"].get("completion_tokens")
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
                sample.output_len = tokens
    if not done:
        raise ValueError("the stream ended without [DONE]")
    if sample.ttft_s == 0.0:
        raise ValueError("no token was streamed")
    sample.latency_s = last - sent


async def stream_completion(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], input_len: int, timeouts: Timeouts
) -> Sample:
    """POST one streaming completion; every failure becomes ``Sample.error``, never an exception.

    Cancellation (Ctrl-C) is the one exception that passes through: it must stop the run.
    """
    sample = Sample(input_len=input_len)
    sent = time.perf_counter()
    sample.start_s = sent
    try:
        async with asyncio.timeout(timeouts.request_s):
            async with http.stream("POST", url, json=body, headers=IDENTITY) as response:
                if response.status_code != 200:
                    text = await _first_bytes(response, 120)
                    raise ValueError(f"HTTP {response.status_code}: {text}")
                await _consume(response, sample, sent)
    except (httpx.HTTPError, ValueError, TimeoutError, OSError) as exc:
        what = "request timed out" if isinstance(exc, TimeoutError) else _short(exc)
        sample.error = what or "failed"
    if sample.ok and sample.output_len == 0:
        # No usage block: count streamed chunks, as vLLM does when the server sends no usage.
        sample.output_len = 1 + len(sample.itl_s)
    return sample


async def run_closed_loop(
    url: str,
    bodies: list[tuple[dict[str, Any], int]],
    concurrency: int,
    timeouts: Timeouts,
    collected: list[Sample],
    on_done: Callable[[Sample], None] | None = None,
) -> float:
    """Send ``bodies`` with ``concurrency`` clients; append each sample as it ends; return the
    duration (first send to last completion). ``collected`` keeps what finished if cancelled."""
    queue = list(reversed(bodies))
    async with client(concurrency, timeouts) as http:
        start = time.perf_counter()

        async def worker() -> None:
            while queue:
                body, input_len = queue.pop()
                sample = await stream_completion(http, url, body, input_len, timeouts)
                collected.append(sample)
                if on_done is not None:
                    on_done(sample)

        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(bodies)))))
        return time.perf_counter() - start


async def post_json(
    url: str, body: dict[str, Any], timeouts: Timeouts
) -> tuple[int, dict[str, Any] | None, str]:
    """One non-streaming POST: (HTTP status, JSON object or None, error text or "")."""
    try:
        async with client(1, timeouts) as http, asyncio.timeout(timeouts.request_s):
            async with http.stream("POST", url, json=body, headers=IDENTITY) as response:
                raw = await _read_capped(response, MAX_BODY_BYTES)
            try:
                obj = json.loads(raw)
            except (ValueError, RecursionError):
                return response.status_code, None, f"not JSON: {raw[:120]!r}"
            if not isinstance(obj, dict):
                return response.status_code, None, "the answer is not a JSON object"
            return response.status_code, obj, ""
    except (httpx.HTTPError, TimeoutError, OSError, ValueError) as exc:
        return 0, None, _short(exc) or "request failed"
