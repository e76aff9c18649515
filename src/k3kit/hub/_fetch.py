"""Download one file's body with a hard cap at the locked size, a timeout and a cancel flag.

Why not ``hf_hub_download``: it writes into the cache by path (following whatever links are
planted under the cache folder), keeps reading however many bytes the server sends (a 256 KiB
file answered with 1 GiB was downloaded in full, twice, and kept), cannot be cancelled between
chunks (Ctrl-C waited for every transfer in flight), and its shared HTTP client is closed by
one failing thread while others still use it (exit 70). The metadata still comes from the real
client (``get_hf_file_metadata``: the Hub's HEAD with its redirect rules); the body is streamed
here with a client this module owns, into a sink the caller opened safely, and:

* a declared size (``X-Linked-Size``/``Content-Length`` on HEAD, ``Content-Length`` on GET)
  that differs from the lock is refused before the body is read;
* no more than ``size`` bytes are handed to the sink; the read stops within one chunk past it;
* ``cancel`` is checked between chunks, so Ctrl-C stops a transfer at its next chunk;
* ``Accept-Encoding: identity`` and raw reads: a compressed answer cannot expand past the cap.
"""

from __future__ import annotations

import threading
from typing import Protocol

import httpx2

from k3kit._digest import Cancelled
from k3kit._policy import Deadline, pace_client
from k3kit.errors import EnvironmentProblem, VerificationError
from k3kit.hub._errors import status_error


class Sink(Protocol):
    def restart(self) -> None: ...

    def write(self, data: bytes) -> None: ...


def check_declared(declared: int | None, size: int, what: str, where: str) -> None:
    if declared is not None and declared != size:
        raise VerificationError(
            f"the hub declares {what} as {declared} bytes ({where}), the lock pins {size}; "
            "refused before downloading",
            code="HUB_SIZE_MISMATCH",
            hint="the hub does not serve the pinned bytes at this commit; do not deploy",
        )


#: What the sink is given at a time: the pieces the network delivers (up to 64 KiB) are gathered
#: to this, as ``iter_raw(CHUNK)`` gathered them before, so pull's sink (hashes, a part file,
#: progress) is still called once per MiB.
CHUNK = 1024 * 1024


def _receive(
    response: httpx2.Response,
    deadline: Deadline,
    *,
    size: int,
    what: str,
    sink: Sink,
    cancel: threading.Event,
) -> int:
    """The body into ``sink`` in :data:`CHUNK` pieces; the bytes received. The deadline and
    Ctrl-C are looked at as each network piece arrives: ``iter_raw(CHUNK)`` looked only once a
    whole MiB had come, which a slow sender never completes."""
    got = 0
    pending = bytearray()
    for piece in deadline.paced(response.iter_raw()):
        if cancel.is_set():
            raise Cancelled
        got += len(piece)
        if got > size:
            raise VerificationError(
                f"the hub sent more than the {size} bytes pinned for {what}; stopped after "
                f"{got} bytes and kept none of them",
                code="HUB_OVERSIZED",
                hint="the hub does not serve the pinned bytes at this commit; do not deploy",
            )
        pending += piece
        if len(pending) >= CHUNK:
            sink.write(bytes(pending))
            pending.clear()
    if pending:
        sink.write(bytes(pending))
    return got


def stream_body(
    client: httpx2.Client,
    url: str,
    headers: dict[str, str],
    *,
    size: int,
    what: str,
    sink: Sink,
    cancel: threading.Event,
) -> None:
    """GET ``url`` into ``sink``: exactly ``size`` bytes, or an error. The body has an overall
    deadline (:class:`k3kit._policy.Deadline`, as the registry's and channel's reads): the
    client's timeout bounds each read, not the body, and a hub or mirror sending a byte every
    9 s would otherwise hold a pull forever without ever tripping it. Past it this raises
    :class:`k3kit._policy.ReadTooSlow`, which the hub client's error mapping turns into
    ``HUB_TIMEOUT`` (``_errors.translate``), as for its small reads."""
    sink.restart()
    deadline = Deadline(size)  # from the request on, and active: a slow head counts too
    with (
        deadline,
        pace_client(client).stream(
            "GET", url, headers={**headers, "Accept-Encoding": "identity"}
        ) as response,
    ):
        if response.status_code >= 400:
            raise status_error(response)
        encoding = response.headers.get("Content-Encoding", "identity").lower()
        if encoding not in ("", "identity"):
            raise EnvironmentProblem(
                f"{what} came {encoding}-encoded although an identity body was asked for",
                code="HUB_BAD_ANSWER",
            )
        length = response.headers.get("Content-Length")
        # ASCII digits only: "\xb2" (superscript two, a latin-1 header byte) passes isdigit()
        # and then crashes int()
        declared = int(length) if length and length.isascii() and length.isdigit() else None
        check_declared(declared, size, what, "GET")
        got = _receive(response, deadline, size=size, what=what, sink=sink, cancel=cancel)
    if got != size:
        raise EnvironmentProblem(
            f"download of {what} ended short ({got} of {size} bytes): the connection broke "
            "or the server sent the wrong length",
            code="HUB_DOWNLOAD_FAILED",
            hint="rerun: the pull resumes and keeps every file already verified",
        )
