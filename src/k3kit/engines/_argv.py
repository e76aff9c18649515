"""How an engine turns ``--config serve.yaml`` into command-line words, mirrored, so that values
are checked with the engine's own parsing rules and not only their keys.

Both engines flatten the YAML into argv before argparse sees it (read in their sources):

- vLLM 0.32-0.33, ``FlexibleArgumentParser.load_config_file`` (``vllm/utils/argparse_utils.py``):
  ``true`` -> ``--key``; ``false`` -> ``--no-key`` when that flag exists, else nothing; a list ->
  ``--key`` then ``str(item)`` for EACH item as its own word; a mapping -> ``--key <json>``;
  anything else -> ``--key str(value)``. ``parse_args`` then rewrites words starting with
  ``--``/``-O`` and reads any ``-``-word holding a ``.`` as a dotted option.
- SGLang 0.5.23, ``ConfigArgumentMerger._convert_config_to_args``
  (``sglang/srt/utils/server_args_config_parser.py``): a store-true flag -> ``--key`` when true;
  another boolean -> ``--key true|false``; a list on a one-value flag -> ``--key <json>``, on a
  many-value flag -> ``--key`` then each ``str(item)``; a mapping -> ``--key <json>``.

So ``ignore-patterns: ["*.pt", "--load-format", "dummy"]`` reaches vLLM's parser as
``--ignore-patterns *.pt --load-format dummy``: random weights under a verified kit. A value word
that starts with ``-`` is refused unless it is a plain negative integer (which argparse reads as a
number, and vLLM's rewriting leaves alone); a list on a flag that takes one value is refused too.
"""

from __future__ import annotations

import json
import re

from k3kit.engines._snapshot import EngineSnapshot, Option

_NEGATIVE_INT = re.compile(r"-[0-9]+")
_MANY = ("+", "*")


def _word(value: object) -> str:
    """``str(item)`` as the engines apply it to a YAML-loaded value."""
    return json.dumps(value) if isinstance(value, dict) else str(value)


def _vllm_words(snap: EngineSnapshot, key: str, value: object) -> list[str]:
    if isinstance(value, bool):
        if value:
            return [f"--{key}"]
        return [f"--no-{key}"] if f"no-{key}" in snap.options else []
    if isinstance(value, list):
        return [f"--{key}", *(_word(item) for item in value)] if value else []
    return [f"--{key}", _word(value)]


def _sglang_words(snap: EngineSnapshot, key: str, value: object) -> list[str]:
    opt = snap.options.get(key)
    if isinstance(value, bool):
        if opt is not None and opt.action == "_StoreTrueAction":
            return [f"--{key}"] if value else []
        return [f"--{key}", str(value).lower()]
    if isinstance(value, list):
        if opt is not None and opt.action == "_StoreAction" and opt.nargs is None:
            return [f"--{key}", json.dumps(value)]
        return [f"--{key}", *(_word(item) for item in value)] if value else []
    return [f"--{key}", _word(value)]


def config_words(snap: EngineSnapshot, key: str, value: object) -> list[str]:
    """The argv words ``snap.engine``'s own ``--config`` loader makes of ``key: value``."""
    words = _sglang_words if snap.engine == "sglang" else _vllm_words
    return words(snap, key, value)


def _takes_many(opt: Option | None) -> bool:
    return opt is not None and (
        opt.nargs in _MANY or (isinstance(opt.nargs, int) and opt.nargs > 1)
    )


def value_problems(snap: EngineSnapshot, key: str, value: object) -> list[str]:
    """Why the engine would not read ``key: value`` as one flag with its value (empty: it would)."""
    if isinstance(value, list) and not _takes_many(snap.options.get(key)):
        return [
            f"is a list, but `--{key}` takes one value: {snap.engine}'s config loader would pass "
            "each item as its own command-line word; give one value"
        ]
    words = config_words(snap, key, value)[1:]
    return [
        f"the value {word[:80]!r} starts with '-': {snap.engine}'s config loader passes it as "
        "its own command-line word, where it is read as an option (e.g. a hidden "
        "`--load-format dummy`); remove it"
        for word in words
        if word.startswith("-") and not _NEGATIVE_INT.fullmatch(word)
    ]
