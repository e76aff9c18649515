"""A stand-in OpenAI-compatible streaming server on 127.0.0.1 whose delays each test sets.

Plain asyncio over TCP (HTTP/1.1, keep-alive, chunked server-sent events), so nothing about its
timing comes from a framework: each completion waits ``ttft_s`` before its first token and
``tpot_s`` before each next one (both times ``slowdown``), streams ``max_tokens`` one-token
chunks, then a usage chunk and ``[DONE]``, as vLLM does with ``stream_options.include_usage``.
Knobs: ``drop_every`` closes every k-th stream mid-way; ``tool_mode`` answers tool requests with
structured ``tool_calls`` or with plain text; ``reasoning`` separates reasoning content;
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
from typing import Any


@dataclass
class Knobs:
    ttft_s: float = 0.05
    tpot_s: float = 0.01
    slowdown: float = 1.0
    drop_every: int = 0
    tool_mode: str = "structured"
    reasoning: bool = True
    max_len: int | None = None
    tokenizer: Path | None = None
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

    def __enter__(self) -> StandInServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

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
        if path == "/v1/chat/completions":
            self._plain(w, 200, self._chat(body))
            await w.drain()
            return True
        if path != "/v1/completions":
            self._plain(w, 404, {"error": {"message": f"no route {path}"}})
            await w.drain()
            return True
        prompt_tokens = len(self._tok.encode(body["prompt"]).ids) if self._tok else 0
        if k.max_len is not None and prompt_tokens > k.max_len:
            self._plain(w, 400, {"error": {"message": "prompt too long"}})
            await w.drain()
            return True
        if not body.get("stream"):
            self._plain(w, 200, {"choices": [{"text": "x", "index": 0}]})
            await w.drain()
            return True
        k.count += 1
        drop = k.drop_every and k.count % k.drop_every == 0
        w.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        tokens = int(body.get("max_tokens", 16))
        for i in range(tokens):
            await asyncio.sleep((k.ttft_s if i == 0 else k.tpot_s) * k.slowdown)
            if drop and i == tokens // 2:
                return False  # the connection closes mid-stream
            self._event(w, {"choices": [{"index": 0, "text": " tok"}]})
            await w.drain()
        self._event(
            w,
            {"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": tokens}},
        )
        w.write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
        await w.drain()
        return True

    def _event(self, w: asyncio.StreamWriter, obj: dict[str, Any]) -> None:
        data = f"data: {json.dumps(obj)}\n\n".encode()
        w.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "391 = 17 x 23, not prime."}
        if body.get("tools"):
            if self.knobs.tool_mode == "structured":
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
            else:
                message["content"] = '<tool_call>get_weather {"city": "Paris"}</tool_call>'
        elif self.knobs.reasoning:
            message["reasoning_content"] = "Try small primes: 391 / 17 = 23."
        return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
