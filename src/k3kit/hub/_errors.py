"""Turn huggingface_hub and httpx2 failures into K3kitErrors with a stable code and advice.

Every hub failure a user can meet is an environment problem (exit 4): the repo, revision or file
is not there, access is refused (gated repo, missing or wrong token), the hub is down or
rate-limiting, or the connection broke. huggingface_hub sometimes wraps the real failure (a HEAD
that failed becomes ``LocalEntryNotFoundError`` after it looked for a cached copy), so the cause
chain is searched for the HTTP status that really happened.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

import httpx2
from huggingface_hub.errors import (
    FileMetadataError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from k3kit._policy import ReadTooSlow
from k3kit._values import is_lower_hex
from k3kit.errors import EnvironmentProblem, K3kitError

# Failures worth another attempt after a pause; anything else (auth, not found) will not heal.
TRANSIENT_CODES = frozenset(
    {"HUB_UNAVAILABLE", "HUB_RATE_LIMITED", "HUB_UNREACHABLE", "HUB_TIMEOUT", "HUB_DOWNLOAD_FAILED"}
)
# Failures that doom every other file of the same pull: stop scheduling downloads at once (a hub
# that cannot be reached or stalls, after the retries, would only fail each file the same way).
FATAL_CODES = frozenset(
    {"HUB_AUTH", "HUB_REPO_NOT_FOUND", "HUB_REVISION_NOT_FOUND", "HUB_UNREACHABLE", "HUB_TIMEOUT"}
)
_ACCESS_HINT = (
    "for a private or gated repo pass --token-env VAR, naming an environment variable that holds "
    "a token with access (for a gated model, request access on its page first)"
)


def masked(err: K3kitError, token: str | bool) -> K3kitError:
    if isinstance(token, str) and token:
        err.message = err.message.replace(token, "***")
        if err.hint:
            err.hint = err.hint.replace(token, "***")
    return err


class _HttpStatus(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.server_message = message


def status_error(response: httpx2.Response) -> Exception:
    """An error for a failed plain GET, shaped like huggingface_hub's so one translator serves."""
    code = response.headers.get("X-Error-Code")
    message = response.headers.get("X-Error-Message") or response.reason_phrase
    if code == "RepoNotFound":
        return _Coded("HUB_REPO_NOT_FOUND", response.status_code, message)
    if code == "RevisionNotFound":
        return _Coded("HUB_REVISION_NOT_FOUND", response.status_code, message)
    if code == "EntryNotFound":
        return _Coded("HUB_FILE_NOT_FOUND", response.status_code, message)
    if code == "GatedRepo":
        return _Coded("HUB_AUTH", response.status_code, message)
    return _HttpStatus(response.status_code, message)


class _Coded(_HttpStatus):
    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(status, message)
        self.code = code


def _short(text: str | None, limit: int = 200) -> str:
    first = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return first[:limit]


@dataclass(frozen=True)
class _Where:
    """What a failed request was for, as the messages name it."""

    endpoint: str
    repo: str
    revision: str
    what: str  # "PATH in REPO@REV", or "REPO@REV" for a request about the repository


def translate(
    exc: BaseException, endpoint: str, repo: str, revision: str, path: str | None
) -> K3kitError | None:
    """Map an exception from huggingface_hub/httpx2 to a K3kitError (exit 4), or None.

    huggingface_hub wraps some HEAD failures in ``LocalEntryNotFoundError`` (it first looks for
    a cached copy), so the cause chain is searched for the HTTP status that really happened.
    Each link is asked, in order: is it one of the hub's own errors, does it carry an HTTP
    status, is it a transport failure; the first answer wins.
    """
    where = f"{repo}@{revision[:12] if is_lower_hex(revision, 40) else revision}"
    w = _Where(endpoint, repo, revision, f"{path} in {where}" if path else where)
    for item in _cause_chain(exc):
        found = _from_hub_error(item, w) or _from_http_status(item, w) or _from_transport(item, w)
        if found is not None:
            return found
    return _from_local(exc, w)


def _cause_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it, at most ten deep (a cycle cannot loop)."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 10:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


def _from_hub_error(item: BaseException, w: _Where) -> K3kitError | None:
    """huggingface_hub's typed errors, or the test hub's coded ones, each to its code."""
    code = getattr(item, "code", None) if isinstance(item, _Coded) else None
    if isinstance(item, GatedRepoError) or code == "HUB_AUTH":
        return EnvironmentProblem(
            f"{w.endpoint}: {w.repo} is gated and this request is not authorised",
            code="HUB_AUTH",
            hint=_ACCESS_HINT,
        )
    if isinstance(item, RevisionNotFoundError) or code == "HUB_REVISION_NOT_FOUND":
        return EnvironmentProblem(
            f"{w.endpoint}: revision {w.revision!r} not found in {w.repo}",
            code="HUB_REVISION_NOT_FOUND",
            hint="check the branch, tag or commit (`k3kit pin` records the commit it found)",
        )
    if isinstance(item, RepositoryNotFoundError) or code == "HUB_REPO_NOT_FOUND":
        return EnvironmentProblem(
            f"{w.endpoint}: repository {w.repo} not found (or private and not authorised)",
            code="HUB_REPO_NOT_FOUND",
            hint="check ORG/NAME; " + _ACCESS_HINT,
        )
    if isinstance(item, RemoteEntryNotFoundError) or code == "HUB_FILE_NOT_FOUND":
        return EnvironmentProblem(f"{w.endpoint}: {w.what} not found", code="HUB_FILE_NOT_FOUND")
    return None


def _from_http_status(item: BaseException, w: _Where) -> K3kitError | None:
    """An HTTP status the hub answered with, whichever client raised it."""
    if isinstance(item, HfHubHTTPError) and item.response is not None:
        status, server = item.response.status_code, item.server_message
    elif isinstance(item, _HttpStatus):
        status, server = item.status, item.server_message
    else:
        return None
    return _from_status(status, _short(server), w.endpoint, w.repo, w.what)


def _from_transport(item: BaseException, w: _Where) -> K3kitError | None:
    """A connection that failed, stalled or broke off, or an answer that was not a hub's."""
    endpoint, what = w.endpoint, w.what
    if isinstance(item, FileMetadataError):
        return EnvironmentProblem(
            f"{endpoint} did not answer like a Hugging Face Hub for {what}: " + _short(str(item)),
            code="HUB_BAD_ANSWER",
        )
    if isinstance(item, ReadTooSlow):  # a body past its overall deadline (_fetch.stream_body)
        return EnvironmentProblem(
            f"{endpoint} sent {what} too slowly: {item}",
            code="HUB_TIMEOUT",
            hint="the hub or the network is too slow; rerun later (the pull resumes)",
        )
    if isinstance(item, httpx2.TimeoutException) and not isinstance(item, httpx2.ConnectTimeout):
        return EnvironmentProblem(
            f"{endpoint} stopped answering while serving {what} ({type(item).__name__})",
            code="HUB_TIMEOUT",
            hint="the hub or the network stalls; rerun later (the pull resumes)",
        )
    if isinstance(item, RuntimeError) and "client has been closed" in str(item):
        # huggingface_hub closes its shared client when one request fails to connect,
        # while other threads may still be using it: that is the same network failure.
        return EnvironmentProblem(
            f"cannot reach {endpoint} for {what}: the connection was reset",
            code="HUB_UNREACHABLE",
            hint="check the network, proxy and --endpoint; a rerun resumes the pull",
        )
    if isinstance(item, httpx2.TransportError):
        return _from_transport_error(item, w)
    if isinstance(item, OSError) and str(item).startswith("Consistency check failed"):
        return EnvironmentProblem(
            f"download of {what} ended short: the connection broke or the server sent "
            "the wrong length",
            code="HUB_DOWNLOAD_FAILED",
            hint="rerun: the pull resumes and keeps every file already verified",
        )
    return None


def _from_transport_error(item: httpx2.TransportError, w: _Where) -> K3kitError:
    """Never connected (unreachable) or broke off after connecting (resumable)."""
    if not isinstance(item, httpx2.ConnectError | httpx2.ConnectTimeout | httpx2.ProxyError):
        return EnvironmentProblem(
            f"the connection to {w.endpoint} broke off while fetching {w.what} "
            f"({type(item).__name__})",
            code="HUB_DOWNLOAD_FAILED",
            hint="rerun: the pull resumes and keeps every file already verified",
        )
    return EnvironmentProblem(
        f"cannot reach {w.endpoint} for {w.what}: {type(item).__name__}",
        code="HUB_UNREACHABLE",
        hint="check the network, proxy and --endpoint; a rerun resumes the pull",
    )


def _from_local(exc: BaseException, w: _Where) -> K3kitError | None:
    """No link of the chain was the hub's: no cached copy, or a local I/O failure."""
    if isinstance(exc, LocalEntryNotFoundError):
        return EnvironmentProblem(
            f"cannot fetch {w.what} from {w.endpoint}: {_short(str(exc))}",
            code="HUB_UNREACHABLE",
        )
    if isinstance(exc, OSError) and exc.errno is not None:
        return EnvironmentProblem(
            f"local I/O error while fetching {w.what}: "
            f"{errno.errorcode.get(exc.errno, exc.errno)} {exc.strerror or ''}".rstrip(),
            code="LOCAL_IO_ERROR",
        )
    return None


def _from_status(status: int, server: str, endpoint: str, repo: str, what: str) -> K3kitError:
    detail = f" ({server})" if server else ""
    if status in (401, 403):
        return EnvironmentProblem(
            f"{endpoint} refused access to {repo} (HTTP {status}){detail}",
            code="HUB_AUTH",
            hint=_ACCESS_HINT + "; check that the token is valid",
        )
    if status == 404:
        return EnvironmentProblem(f"{endpoint}: {what} not found (HTTP 404)", code="HUB_NOT_FOUND")
    if status == 429:
        return EnvironmentProblem(
            f"{endpoint} is rate-limiting requests (HTTP 429) for {what}",
            code="HUB_RATE_LIMITED",
            hint="wait a few minutes and rerun; a pull resumes where it stopped",
        )
    if status >= 500 or status == 408:
        return EnvironmentProblem(
            f"{endpoint} is unavailable (HTTP {status}) for {what}{detail}",
            code="HUB_UNAVAILABLE",
            hint="the Hub or its CDN is having trouble; rerun later",
        )
    return EnvironmentProblem(
        f"{endpoint} answered HTTP {status} for {what}{detail}", code="HUB_HTTP_ERROR"
    )
