"""The one place the card makes text from a kit or receipt safe to display: control characters.

Why: Markdown and HTML escaping stop markup, not characters. A signed description carrying ESC
(a terminal that ``cat``s card.md runs the escape sequence), CR, a C1 control, or a bidi override
(U+202E turns "evil.exe" into what reads as "exe.live") reached card.md and card.html raw, so a
publisher's field could repaint what a buyer reads. Every string the card renders passes
:func:`plain`; the finished document then passes :func:`scrub`, which catches anything a template
or a formatter let through. Such characters are shown as visible ``\\uXXXX`` escapes rather than
dropped, so a reader sees that something odd was signed.
"""

from __future__ import annotations

import re

# C0 (but for TAB and LF, which :func:`scrub` keeps), DEL, C1, the bidi embedding, override,
# isolate and mark characters, and the Unicode line and paragraph separators.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_WHITESPACE = re.compile("[\t\n]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def plain(value: object) -> str:
    """One field as one line of displayable text: TAB and LF become spaces, every other control
    or bidi character a visible escape."""
    return _UNSAFE.sub(_escape, _WHITESPACE.sub(" ", str(value)))


def scrub(document: str) -> str:
    """A whole rendered document: its own line feeds and tabs kept, everything else escaped."""
    return _UNSAFE.sub(_escape, document)
