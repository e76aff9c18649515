"""Engine versions as the engines write them, and the one rule that matches them.

Engines report PEP 440 versions, and the builds people actually run carry more than a release:
vLLM appends a local label naming the build target (``0.32.0+cpu``, ``0.33.0+cu129``,
``0.9.2+rocm634``), SGLang publishes post releases (``0.5.2.post1``) and release candidates
(``0.5.0rc2``), vLLM has four-part releases (``0.10.1.1``). A hand-written pattern refused most of
them, so a kit could not state the engine it was measured with. The text is parsed by
``packaging.version`` (the parser pip uses) and kept in its canonical form, so two spellings of one
version cannot both be pinned.

The package states how the engine found at launch must match the pin (``version_match``):

* ``exact`` (the default): the same version, local label included — a ``+cpu`` build is not a
  ``+cu129`` build;
* ``same-release``: the same public version (everything before ``+``) with any local label, for a
  kit whose settings hold for every build of one release (the publisher says so by choosing it).

The same rule serves ``build`` (the pin), ``launch`` (the engine's ``--version``) and the receipt
(the evidence's ``engine_version``).
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # packaging is imported where a version is parsed, not by verify's start-up
    from packaging.version import Version

VersionMatch = Literal["exact", "same-release"]
VERSION_MATCHES: tuple[VersionMatch, ...] = ("exact", "same-release")

#: Longer than any engine's version; a bound for text that reaches messages.
MAX_VERSION_CHARS = 64


# Canonical PEP 440 exactly as ``packaging``'s ``Version.__str__`` writes it: an epoch only when
# it is not 0, numbers without leading zeros, ``a``/``b``/``rc``, ``.postN``, ``.devN``, a
# lower-case local label whose all-digit parts have no leading zeros. Text that matches IS
# canonical (tests/test_engine_version.py checks it against packaging), so the documents' rule
# accepts it without importing packaging (~3 ms of verify's start-up, docs/performance.md);
# any other text is judged by packaging itself, with its messages.
_NUM = r"(?:0|[1-9][0-9]*)"
_LOCAL_PART = rf"(?:{_NUM}|[0-9]*[a-z][a-z0-9]*)"
_CANONICAL_PATTERN = (
    rf"(?:[1-9][0-9]*!)?{_NUM}(?:\.{_NUM})*(?:(?:a|b|rc){_NUM})?(?:\.post{_NUM})?"
    rf"(?:\.dev{_NUM})?(?:\+{_LOCAL_PART}(?:\.{_LOCAL_PART})*)?"
)


def _is_canonical(text: str) -> bool:
    """Whether ``text`` matches the canonical pattern above.

    A release and nothing else (``0.33.0``, ``0.10.1.1``) is checked part by part: ASCII digits
    without a leading zero, the pattern's ``{_NUM}(\\.{_NUM})*`` exactly. Compiling the whole
    pattern costs about 0.7 ms, paid by launch only when an engine reports more than a release
    (``0.32.0+cpu``); tests/test_engine_version.py holds both ways to packaging's verdicts."""
    parts = text.split(".")
    if all(p.isascii() and p.isdigit() and (p == "0" or p[0] != "0") for p in parts):
        return True
    return _canonical_pattern().fullmatch(text) is not None


@functools.cache
def _canonical_pattern() -> re.Pattern[str]:
    return re.compile(_CANONICAL_PATTERN, re.ASCII)


def check_engine_version(text: str) -> None:
    """:func:`parse_engine_version`'s verdict without its ``Version``: what reading a document
    needs. ``ValueError`` (the same message) for text that is not canonical PEP 440."""
    if len(text) <= MAX_VERSION_CHARS and _is_canonical(text):
        return
    parse_engine_version(text)


def parse_engine_version(text: str) -> Version:
    """``text`` as a PEP 440 version in canonical form; ``ValueError`` naming the rule otherwise.

    Canonical means ``str(Version(text)) == text``: ``v0.32.0`` or ``0.32.0-post1`` would parse
    but are spelled differently by every engine, so the pin says what the engine prints."""
    if not text or len(text) > MAX_VERSION_CHARS or not text.isascii() or not text.isprintable():
        raise ValueError(f"an engine version is 1-{MAX_VERSION_CHARS} printable ASCII characters")
    from packaging.version import InvalidVersion, Version

    try:
        version = Version(text)
    except InvalidVersion as exc:
        raise ValueError(
            f"{text!r} is not a PEP 440 version (e.g. 0.32.0, 0.32.0+cpu, 0.5.2.post1)"
        ) from exc
    if str(version) != text:
        raise ValueError(f"write the engine version as {str(version)!r} (its canonical form)")
    return version


def release_of(text: str) -> str:
    """The public version (no local label): the key of an engine's flag snapshot, because a
    ``+cpu`` and a ``+cu129`` build of one release parse the same flags.

    Canonical text (every pin a kit can carry) is its own public version up to the ``+``;
    packaging is imported only for other text (about 3 ms of CPU on every launch)."""
    if _is_canonical(text):
        return text.partition("+")[0]
    from packaging.version import Version

    return Version(text).public


def version_matches(pinned: str, found: str, rule: VersionMatch) -> bool:
    """Whether an engine reporting ``found`` is the one a kit pinned at ``pinned`` under ``rule``.

    ``found`` is text an engine (or evidence) wrote: anything that is not a PEP 440 version
    never matches.

    Both texts canonical (a pin always is; so is what vLLM and SGLang print): ``str(Version(t))
    == t`` for them (tests/test_engine_version.py), so the rule compares the texts themselves,
    without importing packaging; any other text is parsed by packaging, as before."""
    if _is_canonical(pinned) and _is_canonical(found):
        if rule == "exact":
            return pinned == found
        return pinned.partition("+")[0] == found.partition("+")[0]
    from packaging.version import InvalidVersion, Version

    try:
        want, got = Version(pinned), Version(found)
    except InvalidVersion:
        return False
    if rule == "exact":
        return str(want) == str(got)
    return want.public == got.public
