"""A server that lies about what it streamed never gets a claim *reproduced*, nor exit 70.

Each test is the attack as a server operator would mount it against ``k3kit accept``: a real HTTP
server on 127.0.0.1 (``tests.standin_server`` with ``lie=...``), the real CLI in a subprocess,
the buyer's real key signing the report. What the server reports about itself (``usage``) is
held against what it streamed (the verified tokenizer over the streamed text); its JSON is
parsed by the one bounded parser as it arrives, so hostile numbers and nesting fail requests, not
the run. The honest counterpart: a server that merges tokens into fewer chunks, as vLLM V1 does
when its API server falls behind, still reproduces.

The honest servers here run at half the signed delays (100 ms TTFT, 5 ms per token against 200 ms
and 10 ms claimed), so no verdict below depends on how busy the machine is: the honest server has
a 2x margin, and a lie fails through its structure (token counts, chunk counts, a per-token time
no decoding reaches). The lying servers of ``_lying`` therefore wait only 20 ms before their
first token (test_accept's ``NOT_ABOUT_TIME``), still 5 ms per next one: their verdicts do not
depend on the time to the first token, and the 7 requests of a test cost 0.6 s less.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from k3kit.accept import _http
from k3kit.accept._http import Sample, Timeouts, client, stream_completion
from k3kit.accept.tokens import check_sample
from k3kit.models.acceptance import ACCEPTANCE_PAYLOAD_TYPE
from k3kit.signing.keys import load_public
from k3kit.signing.sign import verify_envelope
from tests.standin_server import DEEP
from tests.test_accept import NOT_ABOUT_TIME, SLOW_TTFT_S, _accept, _by_claim, _server
from tests.test_accept import acceptkit as acceptkit  # the shared signed kit (a fixture)

FAST = {"ttft_s": 0.1, "tpot_s": 0.005}
ONE_POINT = ("--points", "1", "--requests", "6")
#: For an honest server whose verdict must be "reproduced": the median's interval over n requests
#: runs from order statistic x(3) to x(10) at n = 12 but from the minimum to the maximum at n = 6
#: (audit.stats.median_ci_ranks), so at 6 one request stalled by a busy machine made TPOT
#: inconclusive (seen at a load average of 6); at 12 it takes three.
HONEST_POINT = ("--points", "1", "--requests", "12")


def _lying(kit: dict[str, Path], tmp: Path, **knobs: Any) -> tuple[int, dict[str, Any], str]:
    with _server(kit, **NOT_ABOUT_TIME, **knobs) as server:
        proc, result = _accept(kit, server.url, tmp / "out", *ONE_POINT)
    assert proc.returncode not in (0, 70), proc.stderr
    return proc.returncode, result, proc.stderr


def _signed_predicate(kit: dict[str, Path], out: Path) -> dict[str, Any]:
    verified = verify_envelope(
        (out / "acceptance.dsse.json").read_bytes(),
        [load_public(kit["pub"])],
        expected_type=ACCEPTANCE_PAYLOAD_TYPE,
        source="report",
    )
    predicate: dict[str, Any] = json.loads(verified.payload)["predicate"]
    return predicate


def _all_failed(result: dict[str, Any], why: str) -> None:
    assert result["verdict"] == "not reproduced"
    point = result["points"][0]
    assert point["failed"] == point["requests"] == 6, point
    assert all(why in error for error in point["errors"]), point["errors"]
    completed = _by_claim(result)[("interactive-c1", "completed")]
    assert completed["verdict"] == "not reproduced"
    # nothing that failed is measured: no latency or throughput claim is reproduced
    assert not [v for v in result["verdicts"] if v["verdict"] == "reproduced"]


def test_short_stream_with_big_usage_is_refused(acceptkit: dict[str, Path], tmp_path: Path) -> None:
    """One short chunk per request, ``usage.completion_tokens`` = 16: was reproduced, TPOT 0."""
    code, result, _ = _lying(acceptkit, tmp_path, lie="short_stream")
    assert code == 1
    _all_failed(result, "reported 16 output tokens but streamed text of 1")


def test_empty_chunks_are_refused(acceptkit: dict[str, Path], tmp_path: Path) -> None:
    """Sixteen chunks of empty text and a usage of 16: the gaps are real, the tokens are not."""
    code, result, _ = _lying(acceptkit, tmp_path, lie="empty_chunks")
    assert code == 1
    _all_failed(result, "streamed text of 0")


def test_usage_times_a_million_is_refused(acceptkit: dict[str, Path], tmp_path: Path) -> None:
    code, result, _ = _lying(acceptkit, tmp_path, lie="usage_x1e6")
    assert code == 1
    _all_failed(result, "reported 16000000 output tokens")


@pytest.mark.parametrize("lie", ["usage_huge", "usage_2p53"])
def test_usage_beyond_the_interoperable_range_fails_requests_not_the_run(
    lie: str, acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """``completion_tokens`` of 10^400 or 2^53 + 1 crashed the run after the measurement
    (exit 70); now each request fails as it arrives and the report is signed, not reproduced."""
    code, result, stderr = _lying(acceptkit, tmp_path, lie=lie)
    assert code == 1 and "Traceback" not in stderr
    _all_failed(result, "integer")
    assert _signed_predicate(acceptkit, tmp_path / "out")["points"][0]["failed"] == 6


def test_deeply_nested_event_fails_requests_not_the_run(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    code, result, _ = _lying(acceptkit, tmp_path, lie="deep_event")
    assert code == 1
    _all_failed(result, "server-sent event is not JSON")


def test_deeply_nested_tool_arguments_are_a_verdict_not_a_crash(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    code, result, stderr = _lying(acceptkit, tmp_path, tool_mode="deep")
    assert code == 1 and "Traceback" not in stderr
    tool = next(v for v in result["functional"] if v["claim"].startswith("tool_calls"))
    assert tool["verdict"] == "not reproduced" and "arguments" in tool["reason"]
    assert f"{DEEP}" not in tool["reason"]  # the refusal names the limit, not the bytes


def test_whole_stream_in_one_write_is_not_reproduced(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """Every token's chunk in one write: counts agree, and every chunk arrived in the same
    network read, so every gap between tokens is 0 (timed per read, not after parsing: on a busy
    machine the parsing alone was 0.12 ms a chunk, above the 0.1 ms floor, and the lie was
    *reproduced* once). TPOT and ITL of ~0 are never *reproduced*."""
    code, result, _ = _lying(acceptkit, tmp_path, lie="one_write")
    assert code == 1 and result["verdict"] == "not reproduced"
    tpot = _by_claim(result)[("interactive-c1", "tpot_ms.p50")]
    assert tpot["verdict"] == "not reproduced" and "no decoding reaches" in tpot["reason"]


def test_one_write_read_by_a_slow_client_still_has_no_gaps(
    acceptkit: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI failure of the last round, made certain: every event's parse takes 2 ms (a busy
    machine, exaggerated), and the sixteen chunks of one write still share one arrival time.
    Timing each piece as httpx hands it on (h11 yields one HTTP chunk at a time) gave gaps of
    the parse time, which a lying server was credited with as decoding."""
    real = _http.server_json

    def slow(data: str | bytes, what: str = "server-sent event") -> dict[str, Any]:
        time.sleep(0.002)
        return real(data, what)

    monkeypatch.setattr(_http, "server_json", slow)
    body = {"model": "m", "prompt": "hi", "max_tokens": 16, "stream": True, "ignore_eos": True}
    with _server(acceptkit, **FAST, lie="one_write") as server:

        async def one() -> Sample:
            async with client(1, Timeouts()) as http:
                url = f"{server.url}/v1/completions"
                return await stream_completion(http, url, body, 1, Timeouts())

        sample = asyncio.run(one())
    assert sample.error == "" and sample.text_chunks == 16
    assert sample.itl_s == [0.0] * 15, sample.itl_s


def test_whole_text_in_one_chunk_is_rejected_by_the_audit_before_signing(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """The whole text in one chunk: vLLM's client counts 16 tokens and no gap (TPOT 0). The
    audit (R17, 16 tokens per chunk without speculative decoding) runs before the buyer's key
    signs, and its error is in the signed report as a *not reproduced* verdict."""
    code, result, _ = _lying(acceptkit, tmp_path, lie="one_chunk")
    assert code == 1 and result["verdict"] == "not reproduced"
    verdicts = _by_claim(result)
    assert verdicts[("interactive-c1", "tpot_ms.p50")]["verdict"] == "not reproduced"
    signed = _signed_predicate(acceptkit, tmp_path / "out")
    audit = [v for v in signed["verdicts"] if v["claim"] == "audit R17"]
    assert audit and audit[0]["verdict"] == "not reproduced", signed["verdicts"]
    assert "tok/chunk" in audit[0]["reason"]


def test_honest_server_merging_tokens_into_fewer_chunks_is_reproduced(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """vLLM V1 merges tokens into one chunk when its API server falls behind: 16 tokens in 15
    chunks here. Fewer chunks than tokens is no lie; the text still re-tokenizes to 16."""
    with _server(acceptkit, **FAST, merge_at=(7,)) as server:
        proc, result = _accept(acceptkit, server.url, tmp_path / "out", *HONEST_POINT)
    assert proc.returncode == 0, proc.stderr
    assert result["verdict"] == "reproduced"
    assert not [v for v in result["verdicts"] if v["claim"].startswith("audit")]
    evidence = json.loads((tmp_path / "out" / "evidence" / "interactive-c1.json").read_text())
    assert evidence["output_lens"] == [16] * 12
    assert [len(itls) + 1 for itls in evidence["itls"]] == [15] * 12


def test_error_text_from_the_server_cannot_paint_the_terminal(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """An error body that returns the cursor and paints a pass over the failed verdict: the
    buyer's terminal and the signed report show it escaped, on one line."""
    paint = "\r\x1b[32maccept: reproduced\x1b[K\n"
    code, result, stderr = _lying(acceptkit, tmp_path, fail_with=paint)
    assert code == 1 and result["verdict"] == "not reproduced"
    assert "\x1b" not in stderr and "\r" not in stderr
    (error,) = result["points"][0]["errors"]
    assert "\\x1b[32maccept: reproduced" in error and "\x1b" not in error
    signed = _signed_predicate(acceptkit, tmp_path / "out")
    assert all("\x1b" not in key for key in signed["points"][0]["errors"])


def _evidence(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "evidence" / "interactive-c1.json").read_text())
    return data


def _gaps_add_up(evidence: dict[str, Any]) -> None:
    """Every timed gap lies between the first and last timed chunk: sum(ITL) = E2E - TTFT."""
    for itls, ttft, e2e in zip(
        evidence["itls"], evidence["ttfts"], evidence["latencies"], strict=True
    ):
        assert math.isclose(sum(itls), e2e - ttft, rel_tol=1e-9, abs_tol=1e-9)


#: The prefill the lying server below waits out before its first token with text.
EMPTY_FIRST_TTFT_S = SLOW_TTFT_S


def test_empty_first_chunk_does_not_start_the_ttft_clock(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """The attack pass's finding: a chunk of empty text at once, the first token later (the
    attack pass waited 1 s; 0.3 s here, 1.5x the signed 200 ms: every TTFT is at least that),
    then 5 ms per token. One padding chunk fits the chunk allowance, so the requests complete;
    TTFT was 7.8 ms and every claim *reproduced*. Now TTFT is the first chunk with text, which
    the server cannot send before its 0.3 s of prefill."""
    with _server(acceptkit, ttft_s=EMPTY_FIRST_TTFT_S, tpot_s=0.005, lie="empty_first") as server:
        proc, result = _accept(acceptkit, server.url, tmp_path / "out", *ONE_POINT)
    assert proc.returncode == 1, proc.stderr
    assert result["points"][0]["failed"] == 0, result["points"]
    ttft = _by_claim(result)[("interactive-c1", "ttft_ms.p50")]
    assert ttft["verdict"] == "not reproduced", ttft
    evidence = _evidence(tmp_path / "out")
    assert min(evidence["ttfts"]) >= EMPTY_FIRST_TTFT_S  # the server slept before its first token
    assert [len(itls) + 1 for itls in evidence["itls"]] == [16] * 6  # the empty one is no gap
    _gaps_add_up(evidence)
    signed = _signed_predicate(acceptkit, tmp_path / "out")
    assert any(
        v["claim"] == "ttft_ms.p50" and v["verdict"] == "not reproduced" for v in signed["verdicts"]
    )


def test_a_space_before_the_first_token_is_a_padded_stream(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """The same lie with a chunk of one space, which is text: the tokenizer drops it, so the
    count still agrees, but 17 chunks with text cannot carry 16 tokens one or more each."""
    code, result, _ = _lying(acceptkit, tmp_path, lie="space_first")
    assert code == 1
    _all_failed(result, "17 chunks with text for 16 tokens")


def test_empty_chunks_between_tokens_are_not_inter_token_gaps(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """Three empty chunks in the middle of three gaps (within the chunk allowance): counted as
    gaps they would split three real gaps in two and pull ITL down. They are not timed: each
    request has 15 gaps for 16 tokens, and the gaps add up to E2E - TTFT, the TPOT numerator."""
    with _server(acceptkit, **FAST, lie="empty_between") as server:
        proc, result = _accept(acceptkit, server.url, tmp_path / "out", *ONE_POINT)
    assert proc.returncode in (0, 1), proc.stderr  # the verdicts are timing; this is structure
    assert result["points"][0]["failed"] == 0, result["points"]
    evidence = _evidence(tmp_path / "out")
    assert evidence["output_lens"] == [16] * 6
    assert [len(itls) + 1 for itls in evidence["itls"]] == [16] * 6
    _gaps_add_up(evidence)


def test_honest_chunk_without_text_before_the_first_token_still_reproduces(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """A chunk with no text sent together with the first token (as vLLM's chat server sends its
    role-only delta) is no lie: 17 chunks for 16 tokens fits the allowance, 16 are timed."""
    with _server(acceptkit, **FAST, lead_chunk=True) as server:
        proc, result = _accept(acceptkit, server.url, tmp_path / "out", *HONEST_POINT)
    assert proc.returncode == 0, proc.stderr
    assert result["verdict"] == "reproduced"
    assert not [v for v in result["verdicts"] if v["claim"].startswith("audit")]
    evidence = _evidence(tmp_path / "out")
    assert [len(itls) + 1 for itls in evidence["itls"]] == [16] * 12


def _chat_sample(kit: dict[str, Path], **knobs: Any) -> Sample:
    """One streamed chat completion from a real server, read and checked as accept reads one."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}
    body |= {"stream": True, "ignore_eos": True}
    with _server(kit, **knobs) as server:

        async def one() -> Sample:
            async with client(1, Timeouts()) as http:
                url = f"{server.url}/v1/chat/completions"
                return await stream_completion(http, url, body, 1, Timeouts())

        sample = asyncio.run(one())
    tokenizer = Tokenizer.from_file(str(kit["weights"] / "tokenizer.json"))
    tokenizer.no_padding()  # MiniLM's file pads to 128, as accept's prompt builder knows
    tokenizer.no_truncation()
    check_sample(sample, lambda t: len(tokenizer.encode(t, add_special_tokens=False).ids))
    return sample


def test_honest_chat_stream_with_a_role_only_first_delta_is_counted_and_timed(
    acceptkit: dict[str, Path],
) -> None:
    """vLLM's chat stream opens with ``{"role": "assistant", "content": ""}`` (vLLM's own client
    starts TTFT there). It carries no token: it is counted as a chunk, not timed, and the
    stream's 16 content deltas are the 16 tokens."""
    sample = _chat_sample(acceptkit, **FAST, lead_chunk=True)
    assert sample.ok, sample.error
    assert (sample.output_len, sample.chunks, sample.text_chunks) == (16, 17, 16)
    assert len(sample.itl_s) == 15 and sample.ttft_s >= 0.1


def test_chat_role_only_delta_sent_at_once_does_not_start_the_ttft_clock(
    acceptkit: dict[str, Path],
) -> None:
    """The chat form of the lie: the role-only delta at once, the first content 0.3 s later."""
    sample = _chat_sample(acceptkit, ttft_s=SLOW_TTFT_S, tpot_s=0.005, lie="empty_first")
    assert sample.ok, sample.error
    assert sample.ttft_s >= SLOW_TTFT_S  # the server slept that long before its first content
    assert (sample.chunks, sample.text_chunks) == (17, 16)


def test_holding_the_stream_open_after_the_last_token_is_no_free_throughput(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """At concurrency 4 the server streams 16 tokens fast, then holds each stream open 0.5 s
    before ``[DONE]``: the client's slot is busy, so the node delivers a quarter of what E2E
    suggests. Throughput from E2E (Little's law) counted the wait as free and reproduced the
    signed 182.9 tok/s; the time each request held its slot does not."""
    with _server(acceptkit, **FAST, hold_s=0.5) as server:
        proc, result = _accept(
            acceptkit, server.url, tmp_path / "out", "--points", "4", "--requests", "8"
        )
    assert proc.returncode == 1, proc.stderr
    assert result["points"][0]["failed"] == 0, result["points"]
    throughput = _by_claim(result)[("interactive-c4", "output_tok_s")]
    assert throughput["verdict"] == "not reproduced", throughput


# --- generated ids (vLLM's return_token_ids): a witness only when they are the text ----------


def test_honest_words_generated_in_pieces_are_counted_by_their_ids(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """An honest server whose model generates four of sixteen words in two pieces each (as a
    real vLLM did: 28 tokens of text for 32 ids) and streams its ids, as vLLM does when asked
    (accept asks: ``return_token_ids``): the ids decode to the text, so the count holds."""
    with _server(acceptkit, **FAST, send_ids=True, split_words=4) as server:
        proc, result = _accept(acceptkit, server.url, tmp_path / "out", *HONEST_POINT)
        measured = [body for body in server.knobs.seen if body.get("ignore_eos")]
        assert measured and all(body.get("return_token_ids") is True for body in measured)
    assert proc.returncode == 0, proc.stderr
    assert result["verdict"] == "reproduced"
    assert result["points"][0]["failed"] == 0


def test_the_same_pieces_without_ids_are_not_believed(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """Without ids, 16 reported tokens for text of 12 is beyond the re-tokenization allowance:
    the limit the ids lift, shown so that it stays deliberate."""
    code, result, _ = _lying(acceptkit, tmp_path, split_words=4)
    assert code == 1
    _all_failed(result, "reported 16 output tokens but streamed text of 12")


def test_ids_outside_the_vocabulary_do_not_pad_the_count(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """Twelve words, usage 16, and four ids past the vocabulary that ``tokenizers`` decodes to
    nothing, so the ids still 'decode to the text': no witness, and the plain check refuses."""
    code, result, _ = _lying(acceptkit, tmp_path, lie="ids_pad_unknown")
    assert code == 1
    _all_failed(result, "reported 16 output tokens but streamed text of 12")


def test_text_split_into_twice_the_ids_is_refused(
    acceptkit: dict[str, Path], tmp_path: Path
) -> None:
    """Eight words sent as sixteen ids that decode to them exactly: a true account of the text
    in pieces no model needs, doubling the count; beyond the ids' 25 % it is refused."""
    code, result, _ = _lying(acceptkit, tmp_path, lie="ids_split_all")
    assert code == 1
    _all_failed(result, "reported 16 token ids but streamed text of 8")


def _raw_stream(events: list[tuple[float, dict[str, Any]]]) -> Sample:
    """One completion read by accept's client from a real loopback server that writes exactly
    these events (each after its own pause), then ``[DONE]``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (await reader.readline()) not in (b"\r\n", b""):
            pass  # the request head; the body is never read (the answer does not depend on it)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        writer.write(b"transfer-encoding: chunked\r\n\r\n")
        for pause, obj in [*events, (0.0, {})]:
            await asyncio.sleep(pause)
            data = b"data: " + (json.dumps(obj).encode() if obj else b"[DONE]") + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def run() -> Sample:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        body = {"model": "m", "prompt": "hi", "max_tokens": 5, "stream": True}
        async with server, client(1, Timeouts()) as http:
            url = f"http://127.0.0.1:{port}/v1/completions"
            return await stream_completion(http, url, body, 1, Timeouts())

    return asyncio.run(run())


def _choice(text: str, ids: list[int]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": text, "token_ids": ids}]}


def test_ids_withheld_after_the_last_text_are_counted_with_the_time_they_arrived() -> None:
    """vLLM sends each generated id in an event of its own, with empty text while its
    detokenizer withholds half a character. Those after the last text are noted with the time
    the last of them arrived (0.1 s of server pauses after the text here), so a count that
    includes them is charged that time; an id-only event before more text is no tail."""
    sample = _raw_stream(
        [
            (0.0, _choice("a", [1])),
            (0.0, _choice("", [2])),  # withheld, then released with the next text
            (0.0, _choice("b", [3])),
            (0.05, _choice("", [4])),
            (0.05, _choice("", [5])),
        ]
    )
    assert sample.ok, sample.error
    assert (sample.chunks, sample.text_chunks) == (5, 2)
    assert sample.token_ids == [1, 2, 3, 4, 5]
    assert sample.tail_end_s - sample.latency_s >= 0.1  # the server's own two pauses
