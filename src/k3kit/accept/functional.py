"""The functional promises of a profile, each checked with one request and reported like a claim.

A kit that enables a tool-call parser promises structured ``tool_calls`` (a model that answers a
tool request with text that merely looks like a call breaks every agent built on it); a reasoning
parser promises reasoning separated from the answer; ``max-model-len`` promises that a prompt near
that length is accepted. A promise the profile does not make is not checked and not listed.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

from k3kit._text import shown
from k3kit.accept._http import Timeouts, post_json, server_json
from k3kit.accept.prompts import PromptBuilder
from k3kit.accept.workload import Promises
from k3kit.models.acceptance import Verdict

CONTEXT_MARGIN = 64  # room for the special tokens and chat markup a server may add
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _chat(base: str, body: dict[str, Any], timeouts: Timeouts) -> tuple[dict[str, Any] | None, str]:
    """One chat completion: (the first choice's message, "") or (None, why it failed)."""
    status, obj, error = asyncio.run(post_json(f"{base}/v1/chat/completions", body, timeouts))
    if status != 200 or obj is None:
        return None, f"HTTP {status}: {error}"
    choices = obj.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            return message, ""
    return {}, ""


def _verdict(claim: str, ok: bool, reason: str) -> Verdict:
    return Verdict(
        run="functional",
        claim=claim,
        verdict="reproduced" if ok else "not reproduced",
        reason=shown(reason)[:1000],  # it may quote the server: one printable line
    )


def _tool_calls(base: str, model: str, parser: str, timeouts: Timeouts) -> Verdict:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
        "tools": [TOOL],
        "tool_choice": "auto",
        "temperature": 0,
        "max_tokens": 256,
    }
    claim = f"tool_calls ({parser})"
    message, failed = _chat(base, body, timeouts)
    if message is None:
        return _verdict(claim, False, failed)
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        text = str(message.get("content") or "")[:120]
        return _verdict(claim, False, f"no structured tool_calls; answered with text: {text!r}")
    function = calls[0].get("function") if isinstance(calls[0], dict) else None
    if not isinstance(function, dict) or function.get("name") != "get_weather":
        return _verdict(claim, False, "tool_calls[0] does not call get_weather")
    try:  # the server's bytes: the one bounded parser, so deep nesting is a verdict, not a crash
        arguments = server_json(str(function.get("arguments")), "tool_calls[0].function.arguments")
    except ValueError as exc:
        return _verdict(claim, False, str(exc))
    return _verdict(claim, True, f"structured call get_weather({json.dumps(arguments)[:80]})")


def _reasoning(base: str, model: str, parser: str, timeouts: Timeouts) -> Verdict:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Is 391 a prime number? Think, then answer."}],
        "temperature": 0,
        "max_tokens": 512,
    }
    claim = f"reasoning_separated ({parser})"
    message, failed = _chat(base, body, timeouts)
    if message is None:
        return _verdict(claim, False, failed)
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    content = message.get("content")
    if not isinstance(reasoning, str) or not reasoning.strip():
        return _verdict(claim, False, "no reasoning_content (or reasoning) beside the answer")
    if isinstance(content, str) and reasoning.strip() in content:
        return _verdict(claim, False, "the reasoning is repeated inside the answer")
    return _verdict(claim, True, f"{len(reasoning)} characters of reasoning, answer separate")


def _max_context(
    base: str, model: str, length: int, builder: PromptBuilder, timeouts: Timeouts
) -> Verdict:
    tokens = max(1, length - CONTEXT_MARGIN)
    prompt = builder.prompt(tokens, random.Random(length))  # noqa: S311
    body = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0}
    status, obj, error = asyncio.run(post_json(f"{base}/v1/completions", body, timeouts))
    claim = f"max_context ({length})"
    if status != 200 or obj is None or not (obj.get("choices")):
        return _verdict(claim, False, f"a {tokens}-token prompt was refused: HTTP {status} {error}")
    return _verdict(claim, True, f"a {tokens}-token prompt was accepted")


def check_promises(
    base: str, promises: Promises, builder: PromptBuilder, timeouts: Timeouts
) -> list[Verdict]:
    out = []
    model = promises.served_model_name
    if promises.tool_call_parser:
        out.append(_tool_calls(base, model, promises.tool_call_parser, timeouts))
    if promises.reasoning_parser:
        out.append(_reasoning(base, model, promises.reasoning_parser, timeouts))
    if promises.max_model_len:
        out.append(_max_context(base, model, promises.max_model_len, builder, timeouts))
    return out
