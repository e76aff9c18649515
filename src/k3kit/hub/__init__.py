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

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx2
from huggingface_hub import HfApi, RepoFile, get_hf_file_metadata, get_session, hf_hub_url
from huggingface_hub.utils.tqdm import disable_progress_bars

from k3kit._digest import Cancelled
from k3kit._policy import (
    READ_FLOOR_RATE,
    Deadline,
    UnusableEnvironment,
    client_from_env,
    pace_client,
    same_origin,
)
from k3kit._values import is_lower_hex
from k3kit.errors import EnvironmentProblem, InputError, K3kitError
from k3kit.hub._errors import (
    FATAL_CODES,
    TRANSIENT_CODES,
    masked,
    status_error,
    translate,
)
from k3kit.hub._fetch import Sink, check_declared, stream_body
from k3kit.hub.policy import DEFAULT_ENDPOINT, refuse_token_over_plain_http

__all__ = ["DEFAULT_ENDPOINT", "FATAL_CODES", "TRANSIENT_CODES", "HfHub", "HubFile", "translate"]

T = TypeVar("T")

#: How long the hub may take over one API answer (a model's info, a whole tree listing with its
#: pages): 256 s, written as the size that gives it at the floor rate, since a Deadline is sized
#: in bytes. Listings of real model repositories are KBs to a few MBs, seconds even on a slow
#: link; the point is a bound, not a tight one.
API_ANSWER_BYTES = 256 * READ_FLOOR_RATE


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
    in total; the pause doubles from ``backoff`` seconds. ``timeout`` bounds each wait for the
    network (connect, each read); ``deadline`` (default 2.5 x timeout) bounds one call with all
    its retries: no attempt starts that could end after it. huggingface_hub's own retries are
    off on the download path (``get_hf_file_metadata`` does not retry), so one line per failure.
    """

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        token: str | None = None,
        *,
        attempts: int = 3,
        backoff: float = 2.0,
        timeout: float = 10.0,
        deadline: float | None = None,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        if token:  # whoever builds a client, a token never leaves in clear (hub/policy.py)
            refuse_token_over_plain_http(self.endpoint)
        self._token: str | bool = token if token else False
        self._attempts = max(1, attempts)
        self._backoff = backoff
        self._timeout = timeout
        self._deadline = deadline if deadline is not None else 2.5 * timeout
        # The body client is ours alone: huggingface_hub closes its shared client when a
        # connection fails, under the feet of other threads still downloading (exit 70 before).
        # Every read of it (a body's head too) waits at most what is left of the active
        # Deadline (_policy.pace_client); huggingface_hub's shared session is paced where used.
        try:
            self._client = client_from_env(
                lambda: httpx2.Client(follow_redirects=True, timeout=httpx2.Timeout(timeout))
            )
        except UnusableEnvironment as exc:
            raise InputError(
                f"cannot reach {self.endpoint} through this environment's proxy or TLS "
                f"settings: {exc}",
                code="BAD_PROXY_SETTING",
                hint="fix or unset HTTPS_PROXY / HTTP_PROXY / ALL_PROXY (and SSL_CERT_FILE)",
            ) from None
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
            lambda: _bounded(
                lambda: self._api.model_info(repo, revision=revision, timeout=self._timeout)
            ),
            repo=repo,
            revision=revision,
        )
        sha = info.sha or ""
        if not is_lower_hex(sha, 40) or (is_lower_hex(revision, 40) and sha != revision):
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
                xet = entry.xet_hash
                xet = xet if is_lower_hex(xet, 64) else None
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

        return self._retrying(lambda: _bounded(listing), repo=repo, revision=commit)

    def read_file(self, repo: str, commit: str, path: str, max_bytes: int) -> bytes:
        """The bytes of one (small) file at ``commit``; refuses more than ``max_bytes``."""
        url = hf_hub_url(repo, path, revision=commit, endpoint=self.endpoint)
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}

        def fetch() -> bytes:
            chunks: list[bytes] = []
            total = 0
            deadline = Deadline(max_bytes)  # the body's, not each read's (stream_body's docs)
            with (
                deadline,
                _session().stream(
                    "GET", url, headers=headers, follow_redirects=True, timeout=self._timeout
                ) as response,
            ):
                if response.status_code >= 400:
                    response.read()
                    raise status_error(response)
                for chunk in deadline.paced(response.iter_bytes()):
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

    def fetch(
        self,
        repo: str,
        commit: str,
        path: str,
        *,
        size: int,
        sink: Sink,
        cancel: threading.Event,
    ) -> None:
        """Stream one file at ``commit`` into ``sink``: exactly ``size`` bytes or an error.

        The bytes are NOT checked here: the caller hashes them. See ``k3kit.hub._fetch`` for why
        the body does not go through ``hf_hub_download``.
        """
        url = hf_hub_url(repo, path, revision=commit, endpoint=self.endpoint)
        what = f"{path} in {repo}@{commit[:12]}"

        def attempt() -> None:
            if cancel.is_set():
                raise Cancelled
            with Deadline(0):  # a HEAD: its head is all there is (the floor, 60 s)
                _session()
                meta = get_hf_file_metadata(
                    url, token=self._token, timeout=self._timeout, endpoint=self.endpoint
                )
            if meta.commit_hash != commit:
                raise EnvironmentProblem(
                    f"{self.endpoint} answered for commit {meta.commit_hash!r} when asked for "
                    f"{what}",
                    code="HUB_BAD_ANSWER",
                )
            check_declared(meta.size, size, what, "HEAD")
            location = meta.location or url
            same = same_origin(location, self.endpoint)
            auth = {"Authorization": f"Bearer {self._token}"} if self._token and same else {}
            stream_body(
                self._client, location, auth, size=size, what=what, sink=sink, cancel=cancel
            )

        self._retrying(attempt, repo=repo, revision=commit, path=path, cancel=cancel)

    # -- errors -------------------------------------------------------------------------------

    def _retrying(
        self,
        call: Callable[[], T],
        *,
        repo: str,
        revision: str,
        path: str | None = None,
        cancel: threading.Event | None = None,
    ) -> T:
        """Call, retrying transient failures; never past ``deadline`` seconds in all, so a hub
        that is down or stalls fails in about that long, whatever the number of attempts."""
        delay = self._backoff
        began = time.monotonic()
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
            err = masked(err, self._token)
            late = time.monotonic() - began + delay + self._timeout > self._deadline
            if err.code not in TRANSIENT_CODES or attempt == self._attempts or late:
                if err.code in TRANSIENT_CODES and attempt > 1:
                    err.message += f" (after {attempt} attempts)"
                raise err from None
            _pause(delay, cancel)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover


def _bounded(call: Callable[[], T]) -> T:
    """``call`` (huggingface_hub API requests through its shared session) under one active
    Deadline for :data:`API_ANSWER_BYTES`: a hub dribbling a head or a body cannot hold it."""
    with Deadline(API_ANSWER_BYTES):
        _session()
        return call()


def _session() -> httpx2.Client:
    """huggingface_hub's shared client, its reads paced by the active Deadline (idempotent;
    outside a Deadline nothing changes, so other users of huggingface_hub see no difference)."""
    return pace_client(get_session())


def _pause(seconds: float, cancel: threading.Event | None) -> None:
    """Wait between attempts; a Ctrl-C (``cancel``) ends the wait at once."""
    if cancel is None:
        time.sleep(seconds)
    elif cancel.wait(seconds):
        raise Cancelled
