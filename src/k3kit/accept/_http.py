"""A streaming OpenAI-compatible client timed like ``vllm bench serve``.

The HTTP/1.1 underneath is :mod:`k3kit.accept._net` (h11 on asyncio): separate connect and
stall timeouts (a stalled server is a read timeout, not a hang), keep-alive connections as many
as the concurrency, no proxy from the environment between the buyer and their own server, no
redirect followed. It replaced httpx, whose per-request machinery put accept's TTFT 8-17 %
above vLLM's own client at 32 streams (docs/performance.md).

Timing follows vLLM's client exactly (``lib/endpoint_request_func.py``) so
that the numbers mean what the receipt's definitions say -- with one difference that matters
against a lying server: vLLM starts TTFT at the first chunk carrying ``choices``, even one with
no text, so a server that sends an empty chunk at once and the first token a second later gets a
TTFT of ~0. Here only a chunk that carries generated text (a token) is timed: TTFT is the first
such chunk minus the send time, each later one adds one inter-token gap, E2E is the last one, and
chunks without text (a chat role-only delta, padding) are counted but never timed. The output
token count is the server's ``usage.completion_tokens`` -- which this client only
records, with the streamed text and the chunk count, for :mod:`k3kit.accept.tokens` to hold
against what was streamed (a server's self-report is never taken on its word). Server bytes are
parsed by the one bounded strict parser (:func:`server_json`), per event, as they arrive, so a
hostile number or nesting fails that one request, never the run. The clock is
``time.perf_counter`` (monotonic) unless a caller injects another (tests do).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from k3kit._canonical import measurement_loads
from k3kit._text import shown
from k3kit.accept._net import Client, HTTPError, Response, json_body
from k3kit.errors import K3kitError
from k3kit.formats.documents import MAX_DOCUMENT_BYTES

#: A clock in seconds; ``time.perf_counter`` unless a test injects a deterministic one.
Clock = Callable[[], float]

MAX_ERROR_CHARS = 200
MAX_LINE_BYTES = 1024 * 1024
MAX_BODY_BYTES = MAX_DOCUMENT_BYTES  # a JSON answer is held whole, as a document is
#: The streamed text one request may carry (kept only until its tokens are counted).
MAX_TEXT_CHARS = 4 * 1024 * 1024
#: Nesting a server's JSON may have: a chat answer with tool calls is 8 deep.
MAX_SERVER_DEPTH = 16
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
    #: Send to the end of the stream (``[DONE]``): how long the request held its client slot.
    #: Not E2E: a server that waits after its last token keeps the slot busy without it showing
    #: in E2E, so throughput from E2E (Little's law) would count that wait as free.
    held_s: float = 0.0
    output_len: int = 0
    error: str = ""
    #: What was asked (``max_tokens``, ``ignore_eos``) and what came back: the number of events
    #: carrying ``choices`` and of those carrying text (the timed ones), the streamed text
    #: (dropped once counted), the server's own ``usage.completion_tokens`` (``None`` when it
    #: sent none) and the generated token ids it streamed (vLLM's ``return_token_ids``; ``None``
    #: when it sent none): both are its say-so until :mod:`k3kit.accept.tokens` checks them.
    max_tokens: int = 0
    ignore_eos: bool = False
    chunks: int = 0
    text_chunks: int = 0
    text: list[str] = field(default_factory=list, repr=False)
    text_chars: int = 0
    usage: int | None = None
    token_ids: list[int] | None = field(default=None, repr=False)
    #: When the last event of ids without text after the last text arrived (from the send; 0.0
    #: for none): a streaming detokenizer withholds the ids of an unfinished character, and a
    #: count that includes them must be charged the time they took to come.
    tail_end_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error == ""


@dataclass(frozen=True)
class Timeouts:
    connect_s: float = 10.0
    stall_s: float = 60.0  # longest silence between two chunks
    request_s: float = 3600.0  # the whole request, whatever the chunks do


def client(concurrency: int, timeouts: Timeouts) -> Client:
    """Keep-alive connections for ``concurrency`` requests at a time, never following a
    redirect nor an environment's proxy; an ``https://`` server's certificate is verified
    (the CA bundle is loaded when one is first contacted: ~30 ms of CPU a plain-HTTP run
    never spends)."""
    return Client(concurrency, timeouts.connect_s, timeouts.stall_s)


def _short(exc: BaseException) -> str:
    """The error as one printable line: it quotes server bytes (an error body), which reach the
    buyer's terminal and the signed report, so a CR or ESC from the server is shown escaped."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return shown(text)[:MAX_ERROR_CHARS]


def _check_identity(response: Response) -> None:
    if response.headers.get("content-encoding", "identity").lower() not in ("", "identity"):
        raise ValueError("the server compressed its answer although asked not to")


async def _lines(response: Response) -> AsyncIterator[tuple[str, float]]:
    """The answer's lines, each with the time the bytes that completed it arrived, and each
    refused as soon as it grows past :data:`MAX_LINE_BYTES`.

    Every line one block of bytes completes is timed when that block arrived
    (:mod:`k3kit.accept._net` stamps it before anything is parsed), however long this client
    then takes to parse it and the lines before it: a server's single write of a whole answer
    has inter-token gaps of 0, which is what it is. This reader holds at most one cap's worth
    plus one block, so a server that never sends a newline cannot grow one string without end.
    """
    _check_identity(response)
    pending = b""
    async for chunk, arrived in response.chunks():
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if len(line) > MAX_LINE_BYTES:
                raise ValueError("server-sent line over 1 MiB")
            yield line.removesuffix(b"\r").decode("utf-8", errors="replace"), arrived
        if len(pending) > MAX_LINE_BYTES:
            raise ValueError("server-sent line over 1 MiB")
    if pending:
        yield pending.removesuffix(b"\r").decode("utf-8", errors="replace"), response.arrived


async def _read_capped(response: Response, cap: int) -> bytes:
    """At most ``cap`` bytes of the answer (``ValueError`` beyond it): never an endless read."""
    _check_identity(response)
    data = bytearray()
    async for chunk, _ in response.chunks():
        data += chunk
        if len(data) > cap:
            raise ValueError(f"answer over {cap // (1024 * 1024)} MiB")
    return bytes(data)


async def _first_bytes(response: Response, n: int) -> str:
    """The start of an error answer, for the message; the rest is never read."""
    data = b""
    async for chunk, _ in response.chunks():
        data += chunk
        if len(data) >= n:
            break
    return data[:n].decode("utf-8", errors="replace")


def server_json(data: str | bytes, what: str = "server-sent event") -> dict[str, Any]:
    """One JSON object from the server, parsed strictly and bounded (``ValueError`` otherwise).

    The one parser for every byte a server sends accept: duplicate keys, NaN, integers beyond
    2^53 (``10^400``, ``2^53+1``), deep nesting and oversize input are refused here, when they
    arrive, so they fail one request instead of crashing the run after the measurement.
    """
    raw = data.encode("utf-8", errors="replace") if isinstance(data, str) else data
    try:
        obj = measurement_loads(
            raw, source=what, max_bytes=MAX_BODY_BYTES, max_depth=MAX_SERVER_DEPTH
        )
    except K3kitError as exc:
        raise ValueError(
            exc.message.replace(f"{what}: not strict JSON", f"{what} is not JSON")
        ) from exc
    if not isinstance(obj, dict):
        raise ValueError(f"{what} is not a JSON object")
    return obj


def _completion_tokens(usage: object) -> int | None:
    """``usage.completion_tokens`` as a count, or ``ValueError``: a usage block that does not
    say a count is a broken answer, not one to pass over."""
    if not isinstance(usage, dict):
        return None
    tokens = usage.get("completion_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ValueError(f"usage.completion_tokens is not a token count: {str(tokens)[:40]}")
    return tokens


#: Where a chunk's generated text is: ``text`` (completions), ``delta.content`` and the reasoning
#: fields vLLM's reasoning parsers fill (chat). A chat delta with only ``role`` carries none.
_DELTA_FIELDS = ("content", "reasoning_content", "reasoning")


def _choice_text(choice: object) -> str:
    """The generated text one ``choices[0]`` carries ("" for none); ``ValueError`` if a text
    field is not a string."""
    if not isinstance(choice, dict):
        return ""
    if "delta" in choice:
        delta = choice["delta"]
        if not isinstance(delta, dict):
            raise ValueError("choices[0].delta is not an object")
        values = [delta.get(name) for name in _DELTA_FIELDS]
    else:
        values = [choice.get("text")]
    parts = [v for v in values if v is not None]
    if not all(isinstance(v, str) for v in parts):
        raise ValueError("a streamed text field is not a string")
    return "".join(parts)


#: A token id is an index into a vocabulary: non-negative and far below 2^31 in every tokenizer.
MAX_TOKEN_ID = 2**31 - 1


def _add_ids(sample: Sample, choice: object) -> int:
    """Keep the chunk's generated token ids, if the server sent any (capped like the text), and
    return how many it carried."""
    ids = choice.get("token_ids") if isinstance(choice, dict) else None
    if ids is None:
        return 0
    if not isinstance(ids, list) or not all(type(i) is int and 0 <= i <= MAX_TOKEN_ID for i in ids):
        raise ValueError("choices[0].token_ids is not a list of token ids")
    if sample.token_ids is None:
        sample.token_ids = []
    sample.token_ids.extend(ids)
    if len(sample.token_ids) > MAX_TEXT_CHARS:
        raise ValueError(f"over {MAX_TEXT_CHARS} streamed token ids")
    return len(ids)


def _add_text(sample: Sample, choice: object) -> str:
    """Keep the chunk's text (capped) and return it."""
    text = _choice_text(choice)
    sample.text_chars += len(text)
    if sample.text_chars > MAX_TEXT_CHARS:
        raise ValueError(f"over {MAX_TEXT_CHARS} characters of streamed text")
    if text:
        sample.text.append(text)
    return text


async def _consume(response: Response, sample: Sample, sent: float, clock: Clock) -> None:
    """Read the stream into ``sample``, timing only the chunks that carry text (and noting the
    events of ids without text after the last of them: :func:`k3kit.accept.tokens._witnessed`).

    A chunk without text is no token: timing it would let a server start the TTFT clock before
    its prefill ends (an empty chunk at once, the first token a second later) or split a real
    gap between tokens into several small ones (empty chunks in between).
    """
    last = sent
    done = False
    async for line, now in _lines(response):
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        obj = server_json(data)
        choices = obj.get("choices")
        if choices:
            if not isinstance(choices, list):
                raise ValueError("choices is not a list")
            sample.chunks += 1
            carried = _add_ids(sample, choices[0])
            if _add_text(sample, choices[0]):
                if sample.text_chunks == 0:
                    sample.ttft_s = now - sent
                else:
                    sample.itl_s.append(now - last)
                sample.text_chunks += 1
                last = now
                sample.tail_end_s = 0.0
            elif carried and sample.text_chunks:
                sample.tail_end_s = now - sent
        usage = _completion_tokens(obj.get("usage"))
        if usage is not None:
            sample.usage = usage
    if not done:
        raise ValueError("the stream ended without [DONE]")
    if sample.chunks == 0:
        raise ValueError("no token was streamed")
    sample.latency_s = last - sent
    sample.held_s = clock() - sent


async def stream_completion(
    http: Client,
    url: str,
    body: dict[str, Any],
    input_len: int,
    timeouts: Timeouts,
    clock: Clock = time.perf_counter,
) -> Sample:
    """POST one streaming completion; every failure becomes ``Sample.error``, never an exception.

    Cancellation (Ctrl-C) is the one exception that passes through: it must stop the run.
    """
    sample = Sample(
        input_len=input_len,
        max_tokens=int(body.get("max_tokens", 0)),
        ignore_eos=bool(body.get("ignore_eos")),
    )
    sent = clock()
    sample.start_s = sent
    try:
        async with asyncio.timeout(timeouts.request_s):
            async with http.post(url, json_body(body), IDENTITY, clock) as response:
                if response.status_code != 200:
                    text = await _first_bytes(response, 120)
                    raise ValueError(f"HTTP {response.status_code}: {text}")
                await _consume(response, sample, sent, clock)
    except (HTTPError, ValueError, TimeoutError, OSError) as exc:
        what = "request timed out" if isinstance(exc, TimeoutError) else _short(exc)
        sample.error = what or "failed"
    return sample


async def run_closed_loop(
    url: str,
    bodies: list[tuple[dict[str, Any], int]],
    concurrency: int,
    timeouts: Timeouts,
    collected: list[Sample],
    on_done: Callable[[Sample], None] | None = None,
    *,
    check: Callable[[Sample], None] | None = None,
    clock: Clock = time.perf_counter,
) -> float:
    """Send ``bodies`` with ``concurrency`` clients; append each sample as it ends; return the
    duration (first send to last completion). ``collected`` keeps what finished if cancelled.

    ``check`` judges each sample as soon as it ends (accept counts its tokens there), so a
    stream's text is held for one request, never for the whole point.
    """
    queue = list(reversed(bodies))
    async with client(concurrency, timeouts) as http:
        start = clock()

        async def worker() -> None:
            while queue:
                body, input_len = queue.pop()
                sample = await stream_completion(http, url, body, input_len, timeouts, clock)
                if check is not None:
                    check(sample)
                collected.append(sample)
                if on_done is not None:
                    on_done(sample)

        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(bodies)))))
        return clock() - start


async def post_json(
    url: str, body: dict[str, Any], timeouts: Timeouts
) -> tuple[int, dict[str, Any] | None, str]:
    """One non-streaming POST: (HTTP status, JSON object or None, error text or "")."""
    try:
        async with client(1, timeouts) as http, asyncio.timeout(timeouts.request_s):
            async with http.post(url, json_body(body), IDENTITY, time.perf_counter) as response:
                raw = await _read_capped(response, MAX_BODY_BYTES)
            try:
                obj = server_json(raw, "the answer")
            except ValueError as exc:
                return response.status_code, None, f"{str(exc)[:120]}: {raw[:80]!r}"
            return response.status_code, obj, ""
    except (HTTPError, TimeoutError, OSError, ValueError) as exc:
        return 0, None, _short(exc) or "request failed"
