"""Every hub failure a user can meet, one row each: its code, its exit code 4, and its advice.

The end-to-end pull tests drive the real client into most of these against the local hub; this
table holds the translator to every row, including failures the local hub cannot stage (a
closed client, a short download, a full local disk) and the cause chains huggingface_hub wraps
them in.
"""

from __future__ import annotations

import errno

import httpx2
import pytest
from huggingface_hub.errors import FileMetadataError, LocalEntryNotFoundError

from k3kit.errors import EnvironmentProblem
from k3kit.hub._errors import FATAL_CODES, TRANSIENT_CODES, masked, status_error, translate

ENDPOINT = "http://127.0.0.1:9"
REPO = "org/model"
COMMIT = "a" * 40


def _status(status: int, error_code: str | None = None, message: str | None = None) -> Exception:
    headers = {}
    if error_code:
        headers["X-Error-Code"] = error_code
    if message:
        headers["X-Error-Message"] = message
    return status_error(httpx2.Response(status, headers=headers))


def _wrapped(inner: Exception) -> BaseException:
    """How huggingface_hub reports a failed HEAD: a cache miss whose cause is the real failure."""
    try:
        try:
            raise inner
        except Exception as exc:
            raise LocalEntryNotFoundError("cannot find the requested files in the cache") from exc
    except LocalEntryNotFoundError as outer:
        return outer


CASES = [
    (
        "repo missing",
        _status(404, "RepoNotFound"),
        "HUB_REPO_NOT_FOUND",
        "repository org/model not found",
    ),
    (
        "revision missing",
        _status(404, "RevisionNotFound"),
        "HUB_REVISION_NOT_FOUND",
        "revision 'main' not found",
    ),
    (
        "file missing",
        _status(404, "EntryNotFound"),
        "HUB_FILE_NOT_FOUND",
        "a.bin in org/model@main not found",
    ),
    ("gated", _status(403, "GatedRepo"), "HUB_AUTH", "is gated"),
    (
        "bad token",
        _status(401, message="Invalid credentials"),
        "HUB_AUTH",
        "(HTTP 401) (Invalid credentials)",
    ),
    ("plain 404", _status(404), "HUB_NOT_FOUND", "not found (HTTP 404)"),
    ("rate limited", _status(429), "HUB_RATE_LIMITED", "rate-limiting"),
    (
        "server error",
        _status(503, message="maintenance"),
        "HUB_UNAVAILABLE",
        "(HTTP 503) for a.bin in org/model@main (maintenance)",
    ),
    ("request timeout status", _status(408), "HUB_UNAVAILABLE", "HTTP 408"),
    ("teapot", _status(418), "HUB_HTTP_ERROR", "answered HTTP 418"),
    (
        "404 inside a cache miss",
        _wrapped(_status(404, "RepoNotFound")),
        "HUB_REPO_NOT_FOUND",
        "not found",
    ),
    (
        "not a hub",
        FileMetadataError("no X-Repo-Commit header"),
        "HUB_BAD_ANSWER",
        "did not answer like a Hugging Face Hub",
    ),
    ("stalled read", httpx2.ReadTimeout("timed out"), "HUB_TIMEOUT", "stopped answering"),
    ("connect timeout", httpx2.ConnectTimeout("timed out"), "HUB_UNREACHABLE", "ConnectTimeout"),
    ("refused", httpx2.ConnectError("refused"), "HUB_UNREACHABLE", "cannot reach"),
    ("cut mid-body", httpx2.RemoteProtocolError("peer closed"), "HUB_DOWNLOAD_FAILED", "broke off"),
    (
        "client closed by another thread",
        RuntimeError("the client has been closed."),
        "HUB_UNREACHABLE",
        "connection was reset",
    ),
    (
        "short download",
        OSError("Consistency check failed: file should be of size 10"),
        "HUB_DOWNLOAD_FAILED",
        "ended short",
    ),
    (
        "offline cache miss",
        LocalEntryNotFoundError("offline"),
        "HUB_UNREACHABLE",
        "cannot fetch a.bin",
    ),
    (
        "local disk full",
        OSError(errno.ENOSPC, "No space left on device"),
        "LOCAL_IO_ERROR",
        "ENOSPC No space left on device",
    ),
]


@pytest.mark.parametrize(
    ("exc", "code", "words"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_hub_failure_has_its_code(exc: BaseException, code: str, words: str) -> None:
    err = translate(exc, ENDPOINT, REPO, "main", "a.bin")
    assert isinstance(err, EnvironmentProblem), err
    assert err.code == code and int(err.exit_code) == 4
    assert words in err.message, err.message


def test_a_commit_is_shortened_in_messages() -> None:
    err = translate(_status(404), ENDPOINT, REPO, COMMIT, "a.bin")
    assert err is not None and f"{REPO}@{COMMIT[:12]} " in err.message + " "
    assert COMMIT not in err.message


def test_what_is_not_a_hub_failure_is_left_to_the_caller() -> None:
    assert translate(ValueError("a bug"), ENDPOINT, REPO, "main", None) is None


def test_a_cause_loop_ends() -> None:
    a, b = ValueError("a"), ValueError("b")
    a.__cause__, b.__cause__ = b, a
    assert translate(a, ENDPOINT, REPO, "main", None) is None


def test_transient_and_fatal_codes_are_codes_translate_returns() -> None:
    returned = {case[2] for case in CASES}
    assert returned >= TRANSIENT_CODES | FATAL_CODES
    # A pull retries what may heal and never what will not.
    assert not {"HUB_AUTH", "HUB_REPO_NOT_FOUND", "HUB_REVISION_NOT_FOUND"} & TRANSIENT_CODES


def test_a_token_is_never_shown() -> None:
    err = EnvironmentProblem("GET failed with hf_secret in the URL", hint="token hf_secret")
    assert masked(err, "hf_secret").message == "GET failed with *** in the URL"
    assert err.hint == "token ***"
    assert masked(EnvironmentProblem("x hf_secret"), True).message == "x hf_secret"
