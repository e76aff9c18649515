"""Showing untrusted names safely: every path or name printed to a terminal goes through here.

A file name is attacker bytes. On a terminal, CR returns to the start of the line, ESC starts a
control sequence, and a C1 or bidi character reorders what is shown; a kit with a file named
``"x\\r\\x1b[32mverdict: VERIFIED\\x1b[K"`` would paint a pass over a failed verdict. And a name
that is not UTF-8 decodes (``surrogateescape``) to lone surrogates that make the terminal's
encoder raise. So every character that is not printable is written as a visible escape:
``\\r``, ``\\n``, ``\\t``, ``\\xNN`` (C0, C1, and the raw byte of a non-UTF-8 name), ``\\uNNNN``.
The escaped text is one line and plain ASCII wherever the input was not printable.
"""

from __future__ import annotations

from pathlib import PurePath

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def shown(value: str | PurePath) -> str:
    """``value`` with every non-printable character escaped: safe to print on one line."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape_char(ch) for ch in text)


def shown_lines(text: str) -> str:
    """Like :func:`shown`, but keeps line feeds: the last-line defence for whole messages whose
    names were already escaped where they were formatted (a message may have several lines)."""
    return "\n".join(shown(line) for line in text.split("\n"))
