"""The one home of ``huggingface_hub``: resolve, list, read and download from a Hub endpoint.

``pin`` and ``pull`` talk to the Hub only through :class:`HfHub`, which implements the small
``HubClient`` protocol that ``pin`` declares (``pin`` never imports this module; the CLI wires them
together). Keeping the third-party client here means ``verify`` (the trusted base on the GPU node)
never loads it, and every foreign exception is turned into a :class:`~k3kit.errors.K3kitError` in
one place, with a stable code and advice (see :func:`translate`).

Tokens: a token is passed in by the caller (the CLI reads ``--token-env VAR``) and is only ever
handed to huggingface_hub, which sends it as ``Authorization`` to the Hub origin and not to a CDN on
another origin. No saved or ambient token is used (``token=False`` when none is given). Messages
built here never contain it: they are composed from status codes, paths and the server's short
error text, and any occurrence of the token in that text is masked. Foreign exceptions are not
chained (``from None``) so a traceback cannot carry their text either.
"""

from __future__ import annotations

import errno
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx2
from huggingface_hub import HfApi, RepoFile, get_session, hf_hub_download, hf_hub_url
from huggingface_hub.errors import (
    FileMetadataError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils.tqdm import disable_progress_bars

from k3kit.errors import EnvironmentProblem, K3kitError

T = TypeVar("T")

DEFAULT_ENDPOINT = "https://huggingface.co"
# Failures worth another attempt after a pause; anything else (auth, not found) will not heal.
TRANSIENT_CODES = frozenset(
    {"HUB_UNAVAILABLE", "HUB_RATE_LIMITED", "HUB_UNREACHABLE", "HUB_DOWNLOAD_FAILED"}
)
# Failures that doom every other file of the same pull: stop scheduling downloads at once.
FATAL_CODES = frozenset({"HUB_AUTH", "HUB_REPO_NOT_FOUND", "HUB_REVISION_NOT_FOUND"})
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_ACCESS_HINT = (
    "for a private or gated repo pass --token-env VAR, naming an environment variable that holds "
    "a token with access (for a gated model, request access on its page first)"
)


@dataclass(frozen=True)
class HubFile:
    """One file of a tree listing, as the Hub declares it (nothing here has been checked)."""

    path: str
    size: int
    blob_id: str  # git blob sha1; for an LFS file, the sha1 of its pointer text
    lfs_sha256: str | None  # the LFS oid (sha256 of the content, as declared by the uploader)
    lfs_size: int | None
    xet_hash: str | None  # only when the Hub gives a real 64-hex one (gated repos redact it)


class HfHub:
    """``HubClient`` for pinning and the downloader for pulling, backed by huggingface_hub.

    ``attempts`` bounds how often a transient failure (5xx, 429, network, short body) is tried
    in total; the pause doubles from ``backoff`` seconds. The client library retries some of
    these itself first (429 and connection drops), so a failure that reaches the caller has
    really persisted.
    """

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        token: str | None = None,
        *,
        attempts: int = 3,
        backoff: float = 2.0,
        timeout: float = 30.0,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._token: str | bool = token if token else False
        self._attempts = max(1, attempts)
        self._backoff = backoff
        self._timeout = timeout
        self._api = HfApi(endpoint=self.endpoint, token=self._token)
        disable_progress_bars()  # levels below the CLI never print; the CLI shows its own progress

    def __repr__(self) -> str:  # never show the token, even in a debugger or a log line
        return f"HfHub(endpoint={self.endpoint!r}, token={'set' if self._token else 'none'})"

    # -- the HubClient protocol (pin) ---------------------------------------------------------

    def resolve(self, repo: str, revision: str) -> str:
        """The 40-hex commit ``revision`` (branch, tag, short or full sha) names right now.

        Always asks the Hub (``model_info``), never huggingface_hub's cached ``refs/``: a pin
        must not silently fall back to a stale local answer.
        """
        info = self._retrying(
            lambda: self._api.model_info(repo, revision=revision, timeout=self._timeout),
            repo=repo,
            revision=revision,
        )
        sha = info.sha or ""
        if not _HEX40.match(sha) or (_HEX40.match(revision) and sha != revision):
            raise EnvironmentProblem(
                f"{self.endpoint} resolved {repo}@{revision} to {sha!r}, not a 40-hex commit",
                code="HUB_BAD_ANSWER",
            )
        return sha

    def list_files(self, repo: str, commit: str) -> list[HubFile]:
        """Every file at ``commit`` (all pages of the recursive tree listing, no expansion)."""

        def listing() -> list[HubFile]:
            out = []
            for entry in self._api.list_repo_tree(
                repo, revision=commit, recursive=True, expand=False
            ):
                if not isinstance(entry, RepoFile):  # a RepoFolder
                    continue
                lfs = entry.lfs
                xet = entry.xet_hash if entry.xet_hash and _HEX64.match(entry.xet_hash) else None
                out.append(
                    HubFile(
                        path=entry.path,
                        size=entry.size,
                        blob_id=entry.blob_id,
                        lfs_sha256=None if lfs is None else lfs.sha256,
                        lfs_size=None if lfs is None else lfs.size,
                        xet_hash=xet,
                    )
                )
            return out

        return self._retrying(listing, repo=repo, revision=commit)

    def read_file(self, repo: str, commit: str, path: str, max_bytes: int) -> bytes:
        """The bytes of one (small) file at ``commit``; refuses more than ``max_bytes``."""
        url = hf_hub_url(repo, path, revision=commit, endpoint=self.endpoint)
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}

        def fetch() -> bytes:
            chunks: list[bytes] = []
            total = 0
            with get_session().stream(
                "GET", url, headers=headers, follow_redirects=True, timeout=self._timeout
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _status_error(response)
                for chunk in response.iter_bytes():
                    total += len(chunk)
                    if total > max_bytes:
                        raise EnvironmentProblem(
                            f"{path} in {repo}@{commit[:12]} is larger than {max_bytes} bytes "
                            "although the Hub lists it as a small (non-LFS) file",
                            code="HUB_BAD_ANSWER",
                        )
                    chunks.append(chunk)
            return b"".join(chunks)

        return self._retrying(fetch, repo=repo, revision=commit, path=path)

    # -- downloading (pull) -------------------------------------------------------------------

    def download(
        self, repo: str, commit: str, path: str, *, cache_dir: Path | None, local_dir: Path | None
    ) -> Path:
        """Fetch one file at ``commit`` into a cache (``cache_dir``) or a plain ``local_dir``.

        Returns where it landed (the snapshot entry or the plain file). The bytes are NOT
        checked here (huggingface_hub compares sizes only): the caller hashes them.
        """
        result = self._retrying(
            lambda: hf_hub_download(
                repo,
                path,
                revision=commit,
                cache_dir=cache_dir,
                local_dir=local_dir,
                endpoint=self.endpoint,
                token=self._token,
            ),
            repo=repo,
            revision=commit,
            path=path,
        )
        return Path(str(result))

    # -- errors -------------------------------------------------------------------------------

    def _retrying(
        self,
        call: Callable[[], T],
        *,
        repo: str,
        revision: str,
        path: str | None = None,
    ) -> T:
        delay = self._backoff
        for attempt in range(1, self._attempts + 1):
            try:
                return call()
            except K3kitError as exc:
                err: K3kitError = exc
            except Exception as exc:
                translated = translate(exc, self.endpoint, repo, revision, path)
                if translated is None:
                    raise
                err = translated
            err = _masked(err, self._token)
            if err.code not in TRANSIENT_CODES or attempt == self._attempts:
                if err.code in TRANSIENT_CODES and self._attempts > 1:
                    err.message += f" (after {self._attempts} attempts)"
                raise err from None
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover


def _masked(err: K3kitError, token: str | bool) -> K3kitError:
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


def _status_error(response: httpx2.Response) -> Exception:
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


def translate(
    exc: BaseException, endpoint: str, repo: str, revision: str, path: str | None
) -> K3kitError | None:
    """Map an exception from huggingface_hub/httpx2 to a K3kitError (exit 4), or None.

    huggingface_hub wraps some HEAD failures in ``LocalEntryNotFoundError`` (it first looks for
    a cached copy), so the cause chain is searched for the HTTP status that really happened.
    """
    where = f"{repo}@{revision[:12] if _HEX40.match(revision) else revision}"
    what = f"{path} in {where}" if path else where
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 10:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    for item in chain:
        code = getattr(item, "code", None) if isinstance(item, _Coded) else None
        if isinstance(item, GatedRepoError) or code == "HUB_AUTH":
            return EnvironmentProblem(
                f"{endpoint}: {repo} is gated and this request is not authorised",
                code="HUB_AUTH",
                hint=_ACCESS_HINT,
            )
        if isinstance(item, RevisionNotFoundError) or code == "HUB_REVISION_NOT_FOUND":
            return EnvironmentProblem(
                f"{endpoint}: revision {revision!r} not found in {repo}",
                code="HUB_REVISION_NOT_FOUND",
                hint="check the branch, tag or commit (`k3kit pin` records the commit it found)",
            )
        if isinstance(item, RepositoryNotFoundError) or code == "HUB_REPO_NOT_FOUND":
            return EnvironmentProblem(
                f"{endpoint}: repository {repo} not found (or private and not authorised)",
                code="HUB_REPO_NOT_FOUND",
                hint="check ORG/NAME; " + _ACCESS_HINT,
            )
        if isinstance(item, RemoteEntryNotFoundError) or code == "HUB_FILE_NOT_FOUND":
            return EnvironmentProblem(f"{endpoint}: {what} not found", code="HUB_FILE_NOT_FOUND")
        status: int | None = None
        server: str | None = None
        if isinstance(item, HfHubHTTPError) and item.response is not None:
            status = item.response.status_code
            server = item.server_message
        elif isinstance(item, _HttpStatus):
            status, server = item.status, item.server_message
        if status is not None:
            return _from_status(status, _short(server), endpoint, repo, what)
        if isinstance(item, FileMetadataError):
            return EnvironmentProblem(
                f"{endpoint} did not answer like a Hugging Face Hub for {what}: "
                + _short(str(item)),
                code="HUB_BAD_ANSWER",
            )
        if isinstance(item, httpx2.TransportError) and not isinstance(
            item, httpx2.ConnectError | httpx2.ConnectTimeout | httpx2.ProxyError
        ):
            return EnvironmentProblem(
                f"the connection to {endpoint} broke off while fetching {what} "
                f"({type(item).__name__})",
                code="HUB_DOWNLOAD_FAILED",
                hint="rerun: the pull resumes and keeps every file already verified",
            )
        if isinstance(item, httpx2.TransportError):
            return EnvironmentProblem(
                f"cannot reach {endpoint} for {what}: {type(item).__name__}",
                code="HUB_UNREACHABLE",
                hint="check the network, proxy and --endpoint; a rerun resumes the pull",
            )
        if isinstance(item, OSError) and str(item).startswith("Consistency check failed"):
            return EnvironmentProblem(
                f"download of {what} ended short: the connection broke or the server sent "
                "the wrong length",
                code="HUB_DOWNLOAD_FAILED",
                hint="rerun: the pull resumes and keeps every file already verified",
            )
    if isinstance(exc, LocalEntryNotFoundError):
        return EnvironmentProblem(
            f"cannot fetch {what} from {endpoint}: {_short(str(exc))}", code="HUB_UNREACHABLE"
        )
    if isinstance(exc, OSError) and exc.errno is not None:
        return EnvironmentProblem(
            f"local I/O error while fetching {what}: {errno.errorcode.get(exc.errno, exc.errno)} "
            f"{exc.strerror or ''}".rstrip(),
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
