"""python-tuf's exceptions to k3kit's registered codes, in this one place.

Why one table: every refusal the buyer can meet on ``update`` must be a stable code a script can
branch on, and an exception python-tuf adds later (or raises for a reason this table did not
foresee) must still fail closed with a registered code, never exit 70. The table is read in
order, most specific class first (``DownloadLengthMismatchError`` is a ``DownloadError``,
``EqualVersionNumberError`` a ``BadVersionNumberError``). A transport failure (python-tuf's
``DownloadError``, or urllib3's own error raised mid-stream, e.g. a body shorter than the
server's Content-Length) is ``CHANNEL_UNREACHABLE`` (exit 4); anything else python-tuf raises is
``CHANNEL_INVALID`` (exit 1): the channel is refused, not trusted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import urllib3
from tuf.api import exceptions as tuf_errors

from k3kit.errors import EnvironmentProblem, K3kitError, VerificationError

_FIX_CLOCK = "check this machine's clock; if it is right, the publisher must re-sign the channel"

#: (python-tuf class, code, what it means for the buyer, the fix)
_TABLE: tuple[tuple[type[BaseException], str, str, str], ...] = (
    (
        tuf_errors.ExpiredMetadataError,
        "CHANNEL_FROZEN",
        "the channel's signed metadata has expired: the server is frozen (it keeps serving an "
        "old view) or the publisher stopped re-signing",
        f"use another mirror of the channel or ask the publisher; {_FIX_CLOCK}",
    ),
    (
        tuf_errors.BadVersionNumberError,
        "CHANNEL_ROLLBACK",
        "the server offered metadata older than what this node already trusts (a rollback)",
        "use another mirror; this node keeps the newer metadata it saw and refuses older",
    ),
    (
        tuf_errors.LengthOrHashMismatchError,
        "CHANNEL_INCONSISTENT",
        "a file's bytes are not the length and hashes its signed parent lists (metadata mixed "
        "from two versions of the channel, or a changed kit)",
        "use another mirror, or ask its operator to copy the channel again as one whole",
    ),
    (
        tuf_errors.DownloadLengthMismatchError,
        "CHANNEL_INCONSISTENT",
        "the server sent more bytes than the signed length of the file",
        "use another mirror, or ask its operator to copy the channel again as one whole",
    ),
    (
        tuf_errors.UnsignedMetadataError,
        "CHANNEL_UNTRUSTED",
        "metadata is not signed by enough of the keys the trusted root names for its role "
        "(a revoked or unknown key signed it)",
        "do not use this channel until the publisher re-signs it with the keys of its root",
    ),
)

_UNREACHABLE_FIX = "check the --from URL and the network; nothing was installed"


def channel_error(exc: BaseException, *, where: str) -> K3kitError:
    """The registered error for ``exc`` raised by python-tuf while doing ``where``."""
    if isinstance(exc.__cause__, K3kitError):  # k3kit's own fetcher refused (a redirect)
        return exc.__cause__
    for cls, code, meaning, fix in _TABLE:
        if isinstance(exc, cls):
            return VerificationError(f"{where}: {meaning} ({exc})", code=code, hint=fix)
    if isinstance(exc, tuf_errors.DownloadError | urllib3.exceptions.HTTPError):
        return EnvironmentProblem(
            f"{where}: the channel's server did not deliver ({type(exc).__name__}: {exc})",
            code="CHANNEL_UNREACHABLE",
            hint=_UNREACHABLE_FIX,
        )
    return VerificationError(
        f"{where}: the channel was refused ({type(exc).__name__}: {exc})",
        code="CHANNEL_INVALID",
        hint="the channel's metadata is malformed or refused by python-tuf; use another mirror "
        "or ask the publisher",
    )


@contextmanager
def tuf_refusals(where: str) -> Iterator[None]:
    """Run a python-tuf call; whatever it raises leaves as a registered k3kit error.

    k3kit's own errors and OSErrors (the local disk: the CLI names those) pass unchanged; every
    other exception, python-tuf's or one of its dependencies', is mapped by :func:`channel_error`.
    """
    try:
        yield
    except (K3kitError, OSError, KeyboardInterrupt):
        raise
    except Exception as exc:  # fail closed: a registered code, never exit 70
        raise channel_error(exc, where=where) from exc
