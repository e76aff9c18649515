"""Prompts of an exact token length, built with the model's own tokenizer (the one home of
``tokenizers``).

The receipt says "32768 input tokens"; a prompt only has that length under the model's tokenizer,
so the tokenizer comes from the weights folder the buyer just verified, and its bytes are checked
against the signed lock before they are parsed (a tokenizer swapped after verification would make
every prompt a different length). Prompts are words drawn (seeded) from a pool of vocabulary
entries that each encode to exactly one token after a space, then the count is checked with the
tokenizer itself and trimmed or extended until it is exact.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

from tokenizers import Tokenizer

from k3kit.errors import InputError, VerificationError
from k3kit.formats.documents import read_bounded
from k3kit.models import WeightsLock

TOKENIZER_FILE = "tokenizer.json"
MAX_TOKENIZER_BYTES = 64 * 1024 * 1024
POOL_SIZE = 2000


class PromptBuilder:
    """Exact-length prompts for one tokenizer; ``prompt(n, rng)`` is deterministic in ``rng``."""

    def __init__(self, tokenizer: Tokenizer, source: str) -> None:
        # A tokenizer.json may pad or truncate (MiniLM's pads to 128, truncates at 512): a count
        # must see every token and nothing else.
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self.tokenizer, self.source = tokenizer, source
        self.pool = self._pool()
        if len(self.pool) < 50:
            raise InputError(
                f"{source}: too few single-token words to build prompts ({len(self.pool)})",
                code="TOKENIZER_UNUSABLE",
            )

    def _pool(self) -> list[str]:
        vocab = sorted(self.tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        words = []
        for _token, token_id in vocab:
            text = self.tokenizer.decode([token_id]).strip()
            if text.isascii() and text.isalpha() and 3 <= len(text) <= 12:
                words.append(text)
        words = sorted(set(words))
        pool: list[str] = []
        for start in range(0, len(words), 4096):
            batch = words[start : start + 4096]
            spaced = [" " + w for w in batch]
            encoded = self.tokenizer.encode_batch(spaced, add_special_tokens=False)
            pool += [w for w, e in zip(batch, encoded, strict=True) if len(e.ids) == 1]
            if len(pool) >= POOL_SIZE:
                break
        return pool[:POOL_SIZE]

    def count(self, text: str) -> int:
        """The number of tokens of ``text`` (without special tokens).

        Through ``encode_batch_fast`` where the installed library has it (recent releases; an
        older one counts with ``encode_batch``): the same ids without the character offsets,
        which are most of ``encode``'s cost on a long text (a 1,048,576-token prompt: 1.0 s
        against 3.2 s here). The count is ``len`` of the ``Encoding``, so the ids are never
        copied into a Python list."""
        fast = getattr(self.tokenizer, "encode_batch_fast", None)
        encode = self.tokenizer.encode_batch if fast is None else fast
        return len(encode([text], add_special_tokens=False)[0])

    def decode(self, ids: list[int]) -> str | None:
        """The text of ``ids`` as the engine streams it (special tokens kept, as accept asks);
        None when an id is outside the vocabulary: ``tokenizers`` decodes an unknown id to
        nothing, which would let a server pad its count with ids that add no text."""
        size = self.tokenizer.get_vocab_size(with_added_tokens=True)
        if any(i >= size for i in ids):
            return None
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def prompt(self, tokens: int, rng: random.Random) -> str:
        """A prompt of exactly ``tokens`` tokens (without special tokens).

        The words are drawn with one ``rng.choices`` call, not a Python loop of ``rng.choice``
        (a max_context prompt is a million words); the same ``rng`` state gives the same text.
        The count of the whole text is the judge: a tokenizer may split the first word (it has no
        space before it) or merge words, so the words are trimmed or extended until it agrees."""
        words = rng.choices(self.pool, k=tokens)
        for _ in range(32):
            text = " ".join(words)
            have = self.count(text)
            if have == tokens:
                return text
            if have > tokens:
                del words[max(1, len(words) - (have - tokens)) :]
            else:
                words += rng.choices(self.pool, k=tokens - have)
        raise InputError(
            f"{self.source}: could not build a prompt of exactly {tokens} tokens",
            code="PROMPT_LENGTH",
        )


def load_builder(weights_root: Path, lock: WeightsLock) -> PromptBuilder:
    """The tokenizer of the verified weights, its bytes checked against the signed lock."""
    entry = next((f for f in lock.files if f.path == TOKENIZER_FILE), None)
    if entry is None:
        raise InputError(
            f"the weights have no {TOKENIZER_FILE}: prompts of an exact token length need the "
            "model's own tokenizer",
            code="TOKENIZER_MISSING",
            hint="accept needs a Hugging Face fast tokenizer (tokenizer.json) in the weights",
        )
    # A cache snapshot links into blobs/; the verifier already held those links to its policy.
    data = read_bounded(
        Path(os.path.realpath(weights_root / TOKENIZER_FILE)),
        MAX_TOKENIZER_BYTES,
        what=TOKENIZER_FILE,
        error=VerificationError,
        code="TOKENIZER_CHANGED",
    )
    if len(data) != entry.size or hashlib.sha256(data).hexdigest() != entry.sha256:
        raise VerificationError(
            f"{TOKENIZER_FILE} changed after the weights were verified", code="TOKENIZER_CHANGED"
        )
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except (UnicodeDecodeError, Exception) as exc:  # the library raises plain Exception
        raise InputError(
            f"{TOKENIZER_FILE}: not a tokenizer the tokenizers library can read: {exc}",
            code="TOKENIZER_UNUSABLE",
        ) from exc
    return PromptBuilder(tokenizer, TOKENIZER_FILE)
