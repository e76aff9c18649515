"""A stand-in OpenAI-compatible streaming server on 127.0.0.1 whose delays each test sets.

Plain asyncio over TCP (HTTP/1.1, keep-alive, chunked server-sent events), so nothing about its
timing comes from a framework: each completion waits ``ttft_s`` before its first token and
``tpot_s`` before each next one (both times ``slowdown``), streams ``max_tokens`` one-token
chunks, then a usage chunk and ``[DONE]``, as vLLM does with ``stream_options.include_usage``.
Each token's text is a word that is one token under common tokenizers (`` the``, `` of``...), so
the streamed text re-tokenizes to the reported count, as a real engine's does.
Knobs: ``drop_every`` closes every k-th stream mid-way; ``merge_at`` sends the tokens at those
indices together with the next one in one chunk (vLLM V1 does so when its API server falls
behind: honest, fewer chunks than tokens); ``lie`` makes the server lie about what it streamed
(see :data:`LIES`); ``tool_mode`` answers tool requests with structured ``tool_calls``, with
plain text, or with arguments nested 100,000 deep (``deep``); ``reasoning`` separates reasoning
content; ``fail_with`` answers every streamed completion with HTTP 500 and that text;
``max_len`` refuses longer prompts (counted with the same tokenizer the client uses). Any other
path is a 404, as vLLM answers it: ``vllm bench serve`` probes ``/tokenize`` and falls back when
it is absent, so a 200 there would be a lie it could act on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

#: The lies a server can tell about its stream, each as an attacker would write it:
#: ``short_stream`` streams one short chunk and reports ``max_tokens`` in ``usage``;
#: ``one_write`` sends every token chunk in one write after the first-token delay;
#: ``one_chunk`` sends the whole text in one chunk (vLLM's client would count one token's gap);
#: ``empty_chunks`` streams ``max_tokens`` chunks of empty text and reports them all;
#: ``usage_x1e6`` streams honestly and reports 10^6 times the tokens;
#: ``usage_huge`` reports ``completion_tokens`` = 10^400, ``usage_2p53`` = 2^53 + 1 (both
#: written as JSON integers); ``deep_event`` nests a chunk's ``logprobs`` 100,000 deep;
#: ``empty_first`` sends a chunk of empty text (a role-only delta on chat) at once and the first
#: token only after ``ttft_s``; ``space_first`` does the same with a chunk of one space;
#: ``empty_between`` sends an empty chunk in the middle of three gaps between tokens.
LIES = (
    "short_stream",
    "one_write",
    "one_chunk",
    "empty_chunks",
    "usage_x1e6",
    "usage_huge",
    "usage_2p53",
    "deep_event",
    "empty_first",
    "space_first",
    "empty_between",
    "ids_pad_unknown",
    "ids_split_all",
)
#: ``ids_pad_unknown`` streams 12 one-token words and pads the generated ids (``token_ids``, as
#: vLLM's ``return_token_ids`` sends them) to ``max_tokens`` with ids outside the vocabulary,
#: which ``tokenizers`` decodes to nothing; ``ids_split_all`` streams half as many words, each
#: in two ids (``play`` + ``##ing``), so the ids decode to the text and number ``max_tokens``.
WORDS = (" the", " of", " and", " to", " in", " is", " was", " for")
DEEP = 100_000


class Readings(Protocol):
    """How many times the client has read its clock (read from the server's thread)."""

    readings: int


@dataclass
class Knobs:
    ttft_s: float = 0.05
    tpot_s: float = 0.01
    slowdown: float = 1.0
    drop_every: int = 0
    merge_at: tuple[int, ...] = ()
    lie: str = ""
    fail_with: str = ""
    tool_mode: str = "structured"
    reasoning: bool = True
    max_len: int | None = None
    tokenizer: Path | None = None
    #: Honest: send a chunk without text right before the first token, as vLLM's chat server
    #: sends its role-only delta (on /v1/completions: a chunk of empty text).
    lead_chunk: bool = False
    #: A lie in time, not in bytes: wait this long after the last token before the usage chunk
    #: and ``[DONE]``, holding the client's slot while E2E (to the last token) does not grow.
    hold_s: float = 0.0
    #: Honest, as vLLM with ``return_token_ids``: each chunk carries its generated ids, and
    #: ``split_words`` of the words are generated in two pieces (``play`` + ``##ing``), which
    #: the text re-tokenizes as one token (a model need not generate the canonical pieces).
    send_ids: bool = False
    split_words: int = 0
    #: A clock the client reads once per network read (a test's injected clock, with a
    #: ``readings`` count): each token is then written only after the client has read the one
    #: before, so every token is its own read however busy the machine, without real delays.
    lockstep: Readings | None = None
    seen: list[dict[str, Any]] = field(default_factory=list)
    count: int = 0


class StandInServer:
    def __init__(self, knobs: Knobs) -> None:
        self.knobs = knobs
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._tok: Any = None
        if knobs.tokenizer is not None:
            from tokenizers import Tokenizer

            self._tok = Tokenizer.from_file(str(knobs.tokenizer))
            self._tok.no_padding()
            self._tok.no_truncation()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _count(self, prompt: str) -> int:
        """The prompt's tokens, special ones included (as an engine counts them), without the
        character offsets ``encode`` also computes: a max_context prompt is a million tokens,
        and the offsets were two thirds of counting it."""
        encode = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)
        return len(encode([prompt])[0])

    def __enter__(self) -> StandInServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        # Connections a client keeps alive leave their handlers waiting for a next request:
        # end them before the loop stops, not as "Task was destroyed" noise at collection.
        done = asyncio.run_coroutine_threadsafe(self._end_handlers(), self.loop)
        with contextlib.suppress(Exception):
            done.result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    async def _end_handlers(self) -> None:
        handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0, limit=64 * 1024 * 1024)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                length = 0
                for line in lines[1:]:
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                body = json.loads(await reader.readexactly(length)) if length else {}
                if not await self._respond(path, body, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            with contextlib.suppress(RuntimeError):  # the loop may already be stopping
                writer.close()

    def _plain(self, writer: asyncio.StreamWriter, status: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )

    async def _respond(self, path: str, body: dict[str, Any], w: asyncio.StreamWriter) -> bool:
        k = self.knobs
        k.seen.append({key: v for key, v in body.items() if key != "prompt"})
        chat = path == "/v1/chat/completions"
        if chat and body.get("stream"):
            return await self._stream(body, w, chat=True, prompt_tokens=0)
        if chat:
            self._plain(w, 200, self._chat(body))
            await w.drain()
            return True
        if path != "/v1/completions":
            self._plain(w, 404, {"error": {"message": f"no route {path}"}})
            await w.drain()
            return True
        prompt_tokens = self._count(body["prompt"]) if self._tok else 0
        if k.max_len is not None and prompt_tokens > k.max_len:
            self._plain(w, 400, {"error": {"message": "prompt too long"}})
            await w.drain()
            return True
        if not body.get("stream"):
            self._plain(w, 200, {"choices": [{"text": "x", "index": 0}]})
            await w.drain()
            return True
        if k.fail_with:  # an error answer whose text the client quotes
            data = k.fail_with.encode()
            w.write(b"HTTP/1.1 500 X\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
            await w.drain()
            return True
        return await self._stream(body, w, chat=False, prompt_tokens=prompt_tokens)

    async def _stream(
        self, body: dict[str, Any], w: asyncio.StreamWriter, *, chat: bool, prompt_tokens: int
    ) -> bool:
        """One streamed answer: token chunks timed by the knobs, a usage chunk, ``[DONE]``."""
        k = self.knobs
        k.count += 1
        drop = k.drop_every and k.count % k.drop_every == 0
        w.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        tokens = int(body.get("max_tokens", 16))
        if k.lie in ("short_stream", "one_write", "one_chunk"):
            await asyncio.sleep(k.ttft_s * k.slowdown)
            texts = [WORDS[0]] if k.lie == "short_stream" else self._texts(tokens)
            texts = ["".join(texts)] if k.lie == "one_chunk" else texts
            w.write(b"".join(self._chunk({"choices": [{"index": 0, "text": t}]}) for t in texts))
            await w.drain()
        else:
            pieces = self._id_pieces(tokens) if self._ids_mode() else None
            texts = [t for t, _ in pieces] if pieces else self._texts(tokens)
            if k.lie in ("empty_first", "space_first"):  # at once, before any prefill
                self._event(w, self._token_event("" if k.lie == "empty_first" else " ", chat))
                await w.drain()
            for i, text in enumerate(texts):
                delay = (k.ttft_s if i == 0 else k.tpot_s) * k.slowdown
                if k.lie == "empty_between" and i in (4, 8, 12):
                    await asyncio.sleep(delay / 2)
                    self._event(w, self._token_event("", chat))
                    delay /= 2
                await asyncio.sleep(delay)
                if drop and i == len(texts) // 2:
                    return False  # the connection closes mid-stream
                if i == 0 and k.lead_chunk:
                    self._event(w, self._token_event("", chat))
                ids = pieces[i][1] if pieces and self._ids_sent() else None
                mark = k.lockstep.readings if k.lockstep is not None else 0
                self._event(w, self._token_event(text, chat, ids))
                await w.drain()
                await self._until_read(mark)
        if k.hold_s:
            await asyncio.sleep(k.hold_s)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens}
        raw = json.dumps({"choices": [], "usage": usage})
        if k.lie == "usage_x1e6":
            raw = raw.replace(
                f'"completion_tokens": {tokens}', f'"completion_tokens": {tokens * 10**6}'
            )
        if k.lie in ("usage_huge", "usage_2p53"):
            value = "1" + "0" * 400 if k.lie == "usage_huge" else str(2**53 + 1)
            raw = raw.replace(f'"completion_tokens": {tokens}', f'"completion_tokens": {value}')
        w.write(self._frame(f"data: {raw}\n\n".encode()))
        w.write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
        await w.drain()
        return True

    async def _until_read(self, mark: int) -> None:
        """With ``lockstep``: wait until the client's clock has been read since ``mark`` (taken
        before this token was written). The client reads its clock once per block of bytes it
        receives, and nothing else is in flight, so that reading is this token's arrival. The
        wait is bounded, so a client that never reads lets the stream go on (and its test fail
        on the merged reads), never hang."""
        gate = self.knobs.lockstep
        if gate is None:
            return
        deadline = self.loop.time() + 30
        while gate.readings == mark and self.loop.time() < deadline:
            await asyncio.sleep(0.001)

    def _texts(self, tokens: int) -> list[str]:
        """One text per chunk: a word per token, merged at ``merge_at`` (fewer chunks, honest)."""
        texts: list[str] = []
        carry = ""
        for i in range(tokens):
            word = "" if self.knobs.lie == "empty_chunks" else WORDS[i % len(WORDS)]
            if i in self.knobs.merge_at and i < tokens - 1:
                carry += word
                continue
            texts.append(carry + word)
            carry = ""
        return texts

    def _token_event(
        self, text: str, chat: bool = False, ids: list[int] | None = None
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "text": text}
        if chat:
            # vLLM's chat stream: the first delta names the role and has empty content.
            delta = {"content": text} if text else {"role": "assistant", "content": ""}
            choice = {"index": 0, "delta": delta}
        if ids is not None:
            choice["token_ids"] = ids
        return {"choices": [choice]}

    def _ids_mode(self) -> bool:
        return self._ids_sent() or self.knobs.split_words > 0

    def _ids_sent(self) -> bool:
        return self.knobs.send_ids or self.knobs.lie in ("ids_pad_unknown", "ids_split_all")

    def _id_pieces(self, tokens: int) -> list[tuple[str, list[int]]]:
        """``tokens`` generated ids, one per chunk, each chunk's text the growth of the decoded
        prefix (as vLLM's incremental detokenizer streams it)."""
        k, tok = self.knobs, self._tok
        word_ids = [tok.token_to_id(w.strip()) for w in WORDS]
        split = [tok.token_to_id("play"), tok.token_to_id("##ing")]
        splits = tokens // 2 if k.lie == "ids_split_all" else k.split_words
        ids: list[int] = []
        while len(ids) < tokens:
            if splits and len(ids) <= tokens - 2:
                ids += split
                splits -= 1
            else:
                ids.append(word_ids[len(ids) % len(word_ids)])
        pad = 4 if k.lie == "ids_pad_unknown" else 0
        real = ids[: tokens - pad]
        pieces, before = [], ""
        for n in range(1, len(real) + 1):
            text = tok.decode(real[:n], skip_special_tokens=False)
            pieces.append((text[len(before) :], [real[n - 1]]))
            before = text
        if pad:  # ids past the vocabulary ride on the last chunk: no text of their own
            pieces[-1] = (pieces[-1][0], pieces[-1][1] + [10**6] * pad)
        return pieces

    def _frame(self, data: bytes) -> bytes:
        return f"{len(data):x}\r\n".encode() + data + b"\r\n"

    def _chunk(self, obj: dict[str, Any]) -> bytes:
        return self._frame(f"data: {json.dumps(obj)}\n\n".encode())

    def _event(self, w: asyncio.StreamWriter, obj: dict[str, Any]) -> None:
        data = json.dumps(obj)
        if self.knobs.lie == "deep_event":  # written as text: Python's own encoder would recurse
            data = data.replace('"index": 0', '"index": 0, "logprobs": ' + "[" * DEEP + "]" * DEEP)
        w.write(self._frame(f"data: {data}\n\n".encode()))

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "391 = 17 x 23, not prime."}
        if body.get("tools"):
            if self.knobs.tool_mode in ("structured", "deep"):
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                }
            if self.knobs.tool_mode == "deep":
                deep = "[" * DEEP + "]" * DEEP
                message["tool_calls"][0]["function"]["arguments"] = '{"city": ' + deep + "}"
            elif self.knobs.tool_mode == "text":
                message["content"] = '<tool_call>get_weather {"city": "Paris"}</tool_call>'
        elif self.knobs.reasoning:
            message["reasoning_content"] = "Try small primes: 391 / 17 = 23."
        return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
