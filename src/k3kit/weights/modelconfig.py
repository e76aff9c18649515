"""Facts from a model's ``config.json``, accepted only when its bytes are the locked ones.

The context length, layer count, KV heads and head size decide whether a profile's context
length is possible and how much KV cache a GPU holds (preflight's memory budget). A publisher's
``package.toml`` can misstate them; the checkpoint's own ``config.json`` cannot, once its sha256
equals the one in ``weights.lock.json``. Multimodal configs keep the language model's values
under ``text_config``, which is read when the top level lacks them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from k3kit._fs import read_capped
from k3kit.errors import InputError
from k3kit.models.kit import ModelConfigFacts
from k3kit.models.lock import WeightsLock

MAX_CONFIG_BYTES = 4 * 1024 * 1024
CONTEXT_KEYS = ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions")


def _first_int(doc: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for section in (doc, doc.get("text_config")):
        if not isinstance(section, dict):
            continue
        for key in keys:
            value = section.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def facts_from_config(doc: dict[str, Any], sha256: str) -> ModelConfigFacts:
    heads = _first_int(doc, ("num_attention_heads", "n_head"))
    hidden = _first_int(doc, ("hidden_size", "n_embd", "d_model"))
    head_dim = _first_int(doc, ("head_dim",))
    if head_dim is None and heads and hidden and hidden % heads == 0:
        head_dim = hidden // heads
    dtype = doc.get("torch_dtype") or doc.get("dtype")
    return ModelConfigFacts(
        sha256=sha256,
        context_length=_first_int(doc, CONTEXT_KEYS),
        layers=_first_int(doc, ("num_hidden_layers", "n_layer", "num_layers")),
        kv_heads=_first_int(doc, ("num_key_value_heads",)) or heads,
        head_dim=head_dim,
        torch_dtype=dtype if isinstance(dtype, str) and len(dtype) <= 40 else None,
    )


def read_model_config(path: Path, lock: WeightsLock) -> ModelConfigFacts:
    """Read ``path`` once, hash it, compare with the lock's ``config.json``, then parse it."""
    data = read_capped(
        path, MAX_CONFIG_BYTES, what="model config", error=InputError, code="INPUT_MISSING"
    )
    digest = hashlib.sha256(data).hexdigest()
    locked = [f for f in lock.files if f.path == "config.json"]
    if not locked:
        raise InputError(
            f"{path}: the lock lists no config.json, so its facts cannot be trusted",
            code="MODEL_CONFIG_NOT_LOCKED",
        )
    if locked[0].sha256 != digest:
        raise InputError(
            f"{path}: sha256 {digest} is not the locked config.json's {locked[0].sha256}",
            code="MODEL_CONFIG_MISMATCH",
            hint="pass the config.json of the pinned commit",
        )
    try:
        # Plain JSON (model configs carry floats, which k3kit's signed documents never do);
        # the bytes are already the locked ones, and the size is capped above.
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path}: not JSON: {exc}", code="BAD_INPUT") from exc
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not a JSON object", code="BAD_INPUT")
    return facts_from_config(doc, digest)
