"""A profile's env names: what the build accepts, every node's launch accepts.

The build's rule (k3kit.models.package.Profile) and launch's rule for engine.env lines
(k3kit.node.launch) are two patterns; a name the first takes and the second refuses is a kit that
verifies and starts on no node (ENGINE_ENV_MALFORMED). Checked exhaustively over short names from
an alphabet of the characters that broke it before (a non-ASCII capital, a full-width letter, a
digit first, lower case), in-process: no kit is built.
"""

from __future__ import annotations

import itertools

import pydantic
import pytest

from k3kit.models.package import RENDERED_ENV, Profile
from k3kit.node.launch import _ENV_KEY

_ALPHABET = ("A", "Z", "a", "0", "9", "_", "\u00c9", "\uff21", "\u0661", "-", " ", "\n")


def _build_accepts(name: str) -> bool:
    try:
        Profile.model_validate(
            {
                "description": "d",
                "served_model_name": "m",
                "serve": {"max-model-len": 4096},
                "env": {name: "1"},
            }
        )
    except pydantic.ValidationError:
        return False
    return True


def test_every_env_name_the_build_accepts_launch_accepts() -> None:
    accepted = []
    for length in (1, 2, 3):
        for chars in itertools.product(_ALPHABET, repeat=length):
            name = "".join(chars)
            if _build_accepts(name):
                accepted.append(name)
                assert _ENV_KEY.fullmatch(name), name
    # the rule is not vacuous: the ordinary UPPER_SNAKE_CASE names are taken
    assert {"A", "A_9", "_A", "AZ9", "__A"} <= set(accepted)


@pytest.mark.parametrize("name", ["VLLM_USE_V1", "NCCL_P2P_DISABLE", "CUDA_VISIBLE_DEVICES"])
def test_the_usual_engine_env_names_are_accepted(name: str) -> None:
    assert _build_accepts(name)


def test_a_name_k3kit_renders_itself_is_refused() -> None:
    for name in RENDERED_ENV:
        assert _ENV_KEY.fullmatch(name) and not _build_accepts(name)


def test_the_build_still_takes_every_ascii_name_the_old_rule_and_launch_both_took() -> None:
    """The rule was narrowed to what launch takes, and no further: an ASCII name the old test
    (``isalnum`` with ``_`` as a letter, and ``isupper``) accepted and launch accepts (``_1A``,
    ``_9Z``) still builds; the first narrowed pattern refused those."""

    def old(name: str) -> bool:
        return name.replace("_", "A").isalnum() and name.isupper()

    for length in (1, 2, 3):
        for chars in itertools.product(_ALPHABET, repeat=length):
            name = "".join(chars)
            if name.isascii() and old(name) and _ENV_KEY.fullmatch(name):
                assert _build_accepts(name) or name in RENDERED_ENV, name
    assert _build_accepts("_1A") and _build_accepts("_9Z")
