"""Hold each request's token count to what was streamed: the server's ``usage`` is a claim.

Every latency and throughput figure divides by an output token count, and the count a server
reports (``usage.completion_tokens``) is its own say-so: a server that streams one short chunk
and reports 16 tokens would otherwise show a TPOT of 0 and 16 tokens of throughput per request.
So each finished request is checked here, with the tokenizer of the verified weights over the
text the stream actually carried, before it counts:

* the streamed text, re-tokenized, must carry at least the reported count, less the
  re-tokenization allowance (text decoded from generated ids and encoded again can differ by a
  few tokens; the allowance is the audit's own, :data:`~k3kit.audit.context.RETOKENIZE_ABS`
  tokens or :data:`~k3kit.audit.consistency.RETOKENIZE_REL` of the count, so accept and audit
  agree). The check is one-sided: a count *below* the text's is kept as reported, because it
  can only lengthen TPOT and lower throughput, never flatter them, and an honest engine produces
  it (a real vLLM serving a random-weight model streamed text of 36-77 tokens for 32 generated
  ids: byte-level BPE merges gibberish differently when it is encoded again, ``make
  test-engine``);
* never more than ``max_tokens``, and under ``ignore_eos`` exactly ``max_tokens`` (the engine
  was told to generate that many; vLLM stops early only at the context limit, which it refuses
  up front);
* no more chunks than tokens (within the same allowance): each chunk carries at least one token
  (a chat stream's role-only first delta fits the allowance), so more is padding. Fewer chunks
  than tokens is honest: vLLM V1 merges tokens into one chunk when its API server falls behind
  (``RequestOutputCollector``) and speculative decoding emits several per step;
* at least one chunk with text, and no more chunks with text than tokens, with **no** allowance
  when the server reports a count (each timed chunk carries at least one generated token, so a
  server that pads the stream with a few-character chunk before its first real token cannot
  stay within the count) and never more than ``max_tokens``. Only these chunks are timed
  (:mod:`k3kit.accept._http`), so this is the bound that keeps the inter-token gaps honest.

The generated ids, where the server streams them (vLLM's ``return_token_ids``, which accept asks
for), are the better witness of the count when they hold up: every id in the verified
tokenizer's vocabulary, no more ids than bytes of text (every token carries at least one byte),
the ids decoded by that tokenizer *equal* to the streamed text (less the incomplete UTF-8 tail a
streaming detokenizer withholds at the end, the request's latency then running to the last
event of ids), and their number equal to
``usage`` where both are sent. Then the count is the number of ids, and the re-tokenized text
may fall short of it by :data:`ID_REL` (a model may generate a word in pieces that encode back
as one token: 28 tokens of text for 32 ids from a real vLLM serving a random-weight model,
``make test-engine``, which the plain allowance refused). Ids that do not decode to the text are
ignored (never a failure by themselves: a tokenizer's decoding may clean up spaces), and the
plain allowance applies; ids that hold up but disagree with ``usage`` fail the request (the
server contradicts itself).

A request that fails a check is a failed request (``Sample.error``): it counts against the
run's ``completed`` claim and adds nothing to any statistic. Without a usage block the count is
the re-tokenized text (vLLM's client counts chunks there; the text is the better witness).
"""

from __future__ import annotations

from collections.abc import Callable

from k3kit.accept._http import Sample
from k3kit.audit.consistency import RETOKENIZE_REL
from k3kit.audit.context import RETOKENIZE_ABS

#: No decoding delivers a token faster than this (10,000 tokens/s for one stream; the fastest
#: published single-stream rates are 2-3k tokens/s, i.e. 0.3-0.5 ms): a per-token time below it
#: is a stream written at once, never a measurement of decoding.
MIN_TOKEN_TIME_MS = 0.1

#: How far the re-tokenized text may fall short of a count its ids witness: 25 %, against 12.5 %
#: (4 of 32) seen from a real engine on a random-weight model; real models generate text in the
#: tokenizer's own pieces almost always, so the margin is for degenerate (ignore_eos) output.
#: It bounds what a server gains by splitting its text into more, smaller ids.
ID_REL = 0.25

#: A decoder of token ids with the verified tokenizer (None for ids outside its vocabulary).
Decode = Callable[[list[int]], "str | None"]


def allowance(tokens: int) -> int:
    """Tokens by which a re-tokenized count may honestly differ from the generated count."""
    return max(RETOKENIZE_ABS, int(RETOKENIZE_REL * tokens))


def id_allowance(tokens: int) -> int:
    """Tokens by which re-tokenized text may fall short of a count its ids witness."""
    return max(RETOKENIZE_ABS, int(ID_REL * tokens))


#: The most trailing ids whose withholding is examined (each costs one decode of the whole
#: sequence). A real vLLM on a random-weight model withheld 10 of 32 (ten copies of one lead
#: byte); a longer run of half characters is no witness and the text's own count stands.
MAX_WITHHELD_IDS = 64


def _withheld(ids: list[int], text: str, decode: Decode) -> int | None:
    """How many trailing ids a streaming detokenizer withheld from ``text``, or None.

    vLLM decodes with ``tokenizers``' ``DecodeStream``, which emits nothing while the decoding so
    far ends in an incomplete UTF-8 sequence (U+FFFD), and a stream that ends there never emits
    it. So every longer prefix past the text must decode to the text plus something ending in
    U+FFFD, and the shortest that decodes to the text exactly is where the stream stopped
    emitting. Any complete character after the text, or ids that never reach it, is no account.
    """
    for kept in range(len(ids) - 1, max(-1, len(ids) - 1 - MAX_WITHHELD_IDS), -1):
        prefix = decode(ids[:kept])
        if prefix == text:
            return len(ids) - kept
        if prefix is None or not (prefix.endswith("\ufffd") and prefix.startswith(text)):
            return None
    return None


def _witnessed(sample: Sample, ids: list[int] | None, text: str, decode: Decode | None) -> bool:
    """Whether the streamed ids are an account of exactly the streamed text.

    The text may lack what a streaming detokenizer withholds at the end (:func:`_withheld`). The
    withheld ids may come in events of their own or merged with the last text (vLLM merges when
    its API server falls behind), so what holds a server to them is time and the count: the
    sample's latency is taken to the last event of ids, so the tokens they count are charged the
    time the server took to send them (vLLM's own client times every event so; the wait for them
    becomes one more inter-token gap, so E2E stays TTFT plus the gaps), and the count
    may exceed the text by no more than :func:`id_allowance`, the bound on a text split into
    smaller ids (the outside attack pass padded such ids onto a count; past that bound it fails).
    """
    if ids is None or decode is None:
        return False
    full = decode(ids)
    if full is None or len(ids) > len(full.encode("utf-8")):  # a token is at least one byte
        return False
    if full == text:
        return True
    if not (full.endswith("\ufffd") and full.startswith(text)):
        return False
    withheld = _withheld(ids, text, decode)
    # The ids before the withheld ones made the text, each at least one of its bytes (the check
    # above counts each U+FFFD of the tail as 3 bytes, which ids of lead bytes would exploit).
    if withheld is None or len(ids) - withheld > len(text.encode("utf-8")):
        return False
    if sample.tail_end_s > sample.latency_s:
        # One more gap, from the last text to the last id: the evidence's E2E stays TTFT plus
        # the sum of its gaps (the audit's R17), with the tail's tokens inside that last gap.
        sample.itl_s.append(sample.tail_end_s - sample.latency_s)
        sample.latency_s = sample.tail_end_s
    return True


def _problem(sample: Sample, streamed: int, ids: list[int] | None) -> str:
    """Why the sample's reported count cannot be believed, or "" when it can."""
    usage, grace = sample.usage, allowance
    if ids is not None:
        if usage is not None and usage != len(ids):
            return f"the server reported {usage} output tokens but streamed {len(ids)} token ids"
        usage, grace = len(ids), id_allowance
    if usage is not None and usage - streamed > grace(usage):
        what = "token ids" if ids is not None else "output tokens"
        return (
            f"the server reported {usage} {what} but streamed text of {streamed} "
            f"(allowed: +-{grace(usage)})"
        )
    return _count_problem(sample, streamed, usage)


def _count_problem(sample: Sample, streamed: int, usage: int | None) -> str:
    """Why the believed count (``usage``, or the text's when None) breaks what was asked."""
    count = streamed if usage is None else usage
    slack = 0 if usage is not None else allowance(count)  # re-tokenized: only about the count
    if count == 0:
        return "no token was streamed (empty text)"
    if sample.max_tokens and count > sample.max_tokens + slack:
        return f"{count} output tokens, more than max_tokens {sample.max_tokens}"
    if sample.ignore_eos and count + slack < sample.max_tokens:
        return f"{count} output tokens under ignore_eos (max_tokens {sample.max_tokens})"
    if sample.chunks > count + allowance(count):
        return f"{sample.chunks} chunks for {count} tokens: chunks without tokens"
    return _timed_problem(sample, count, exact=usage is not None)


def _timed_problem(sample: Sample, count: int, *, exact: bool) -> str:
    """Why the timed chunks (those with text) cannot each carry a token, or ""."""
    timed = sample.text_chunks
    if timed == 0:
        return "no chunk carried text"
    bound = count if exact else count + allowance(count)
    if sample.max_tokens:
        bound = min(bound, sample.max_tokens)
    if timed > bound:
        return f"{timed} chunks with text for {count} tokens (at most {bound}): padded stream"
    return ""


def check_sample(sample: Sample, count: Callable[[str], int], decode: Decode | None = None) -> None:
    """Set the sample's verified ``output_len``, or fail it; the streamed text and ids are then
    dropped."""
    text, sample.text = "".join(sample.text), []
    sent_ids, sample.token_ids = sample.token_ids, None
    if not sample.ok:
        return
    ids = sent_ids if _witnessed(sample, sent_ids, text, decode) else None
    streamed = count(text)
    problem = _problem(sample, streamed, ids)
    if problem:
        sample.error = problem[:200]
        return
    believed = len(ids) if ids is not None else sample.usage
    sample.output_len = streamed if believed is None else believed
