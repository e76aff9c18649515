"""The registry client: the few OCI distribution calls k3kit makes, over httpx, and nothing else.

Why not oras-py (docs/oci.md): it downloads a blob without checking its digest or size, hands back
a manifest parsed from JSON (so its digest cannot be checked on the bytes received), follows any
redirect with its credentials, and brings ``requests`` and ``jsonschema``. Here every read is
bounded before it starts, redirects are followed by hand and only to https (or back to this
machine), and whatever a caller trusts is hashed by the caller from the bytes read here: the
registry's ``Docker-Content-Digest`` header is never read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urljoin, urlsplit

import httpx

from k3kit._fs import open_nofollow
from k3kit._policy import is_loopback, redirect_refusal
from k3kit.errors import EnvironmentProblem, VerificationError

_MAX_REDIRECTS = 5
_CHUNK = 1024 * 1024
_TIMEOUT = httpx.Timeout(30.0, connect=10.0)


class Registry:
    """One registry origin (``https://HOST`` or a loopback ``http://HOST``); use as a context."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        loopback = is_loopback(urlsplit(self.base).hostname)
        # A proxy named in the environment is for the outside world, not for this machine.
        self._client = httpx.Client(
            follow_redirects=False, timeout=_TIMEOUT, trust_env=not loopback
        )

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    # -- reads -----------------------------------------------------------------------------

    def get_small(self, path: str, *, accept: str, cap: int) -> bytes | None:
        """The body of ``GET path`` (at most ``cap`` bytes), or None on 404.

        ``identity``, as for blobs: a digest is over the bytes the registry stores, so a body a
        proxy compressed on the way would read as another manifest (found by the attack pass).
        """
        headers = {"Accept": accept, "Accept-Encoding": "identity"}
        with self._stream("GET", path, headers=headers) as resp:
            if resp.status_code == 404:
                return None
            _raise_for(resp, path)
            return _read_capped(resp, cap, what=path)

    def fetch_blob(self, repo: str, digest: str, size: int, out: BinaryIO) -> None:
        """Stream blob ``digest`` into ``out``: refused past ``size`` bytes (the descriptor's)
        and unless exactly ``size`` bytes hashing to ``digest`` arrived."""
        path = f"/v2/{repo}/blobs/{digest}"
        with self._stream("GET", path, headers={"Accept-Encoding": "identity"}) as resp:
            _raise_for(resp, path)
            announced = resp.headers.get("Content-Length", "")
            if announced.isdigit() and int(announced) > size:
                raise _oversized(digest, size, f"it announces {announced}")
            hasher, seen = hashlib.sha256(), 0
            for chunk in resp.iter_raw(_CHUNK):
                seen += len(chunk)
                if seen > size:
                    raise _oversized(digest, size, "more arrived")
                hasher.update(chunk)
                out.write(chunk)
        got = "sha256:" + hasher.hexdigest()
        if seen != size or got != digest:
            raise VerificationError(
                f"the registry's blob {digest[:19]}… is {seen} bytes hashing to {got[:19]}…; "
                f"its manifest says {size} bytes, {digest[:19]}…",
                code="OCI_DIGEST_MISMATCH",
                hint="the registry (or its storage) serves other bytes than were pushed: "
                "push the kit again from its signed archive",
            )

    # -- writes ----------------------------------------------------------------------------

    def has_blob(self, repo: str, digest: str) -> bool:
        resp = self._send("HEAD", f"/v2/{repo}/blobs/{digest}")
        if resp.status_code == 404:
            return False
        _raise_for(resp, f"/v2/{repo}/blobs/{digest}")
        return True

    def push_blob(self, repo: str, digest: str, size: int, source: Path | bytes) -> None:
        """Upload one blob monolithically (POST, then PUT ?digest=), unless it is there already."""
        if self.has_blob(repo, digest):
            return
        start = f"/v2/{repo}/blobs/uploads/"
        resp = self._send("POST", start)
        _raise_for(resp, start)
        location = self._same_origin(urljoin(self.base + start, resp.headers.get("Location", "")))
        sep = "&" if "?" in location else "?"
        body = source if isinstance(source, bytes) else _file_chunks(source)
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        done = self._send("PUT", f"{location}{sep}digest={digest}", headers=headers, content=body)
        _raise_for(done, start)

    def put_manifest(
        self, repo: str, reference: str, data: bytes, media_type: str
    ) -> httpx.Headers:
        path = f"/v2/{repo}/manifests/{reference}"
        resp = self._send("PUT", path, headers={"Content-Type": media_type}, content=data)
        _raise_for(resp, path)
        return resp.headers

    # -- transport -------------------------------------------------------------------------

    def _same_origin(self, url: str) -> str:
        if not url.startswith(self.base + "/"):
            raise EnvironmentProblem(
                f"the registry sent an upload to {url!r}, outside {self.base}",
                code="OCI_REDIRECT_REFUSED",
            )
        return url

    def _send(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        url = path if path.startswith(("http://", "https://")) else self.base + path
        try:
            return self._client.request(method, url, **kwargs)  # type: ignore[arg-type]
        except httpx.HTTPError as exc:
            raise _unreachable(self.base, exc) from exc

    def _stream(self, method: str, path: str, *, headers: dict[str, str]) -> _Streamed:
        return _Streamed(self, method, self.base + path, headers)


class _Streamed:
    """A streamed GET that follows redirects by hand: each hop must be https, or http back to
    this machine (an S3-style blob redirect is normal; a downgrade to plain http is not)."""

    def __init__(self, reg: Registry, method: str, url: str, headers: dict[str, str]) -> None:
        self._reg, self._method, self._url, self._headers = reg, method, url, headers
        self._resp: httpx.Response | None = None

    def __enter__(self) -> httpx.Response:
        url = self._url
        for _ in range(_MAX_REDIRECTS + 1):
            request = self._reg._client.build_request(self._method, url, headers=self._headers)
            try:
                self._resp = self._reg._client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise _unreachable(self._reg.base, exc) from exc
            if not self._resp.is_redirect:
                return self._resp
            target = urljoin(url, self._resp.headers.get("Location", ""))
            self._resp.close()
            url = _allowed_hop(target, self._reg.base)
        raise EnvironmentProblem(
            f"the registry redirected more than {_MAX_REDIRECTS} times", code="OCI_REDIRECT_REFUSED"
        )

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        """Also maps a connection that breaks while the body streams (a registry closing
        early, a read timeout) to ``OCI_REGISTRY_UNREACHABLE``: never a traceback."""
        if self._resp is not None:
            self._resp.close()
        if isinstance(exc, httpx.HTTPError):
            raise _unreachable(self._reg.base, exc) from exc


def _allowed_hop(url: str, origin: str) -> str:
    """A redirect the registry's client may follow (:func:`redirect_refusal`, the one rule)."""
    why = redirect_refusal(url, origin)
    if why is None:
        return url
    raise EnvironmentProblem(
        f"the registry {origin} redirected to {url!r}: {why}",
        code="OCI_REDIRECT_REFUSED",
        hint="ask the registry's operator to serve blobs over https from another host",
    )


def _read_capped(resp: httpx.Response, cap: int, *, what: str) -> bytes:
    announced = resp.headers.get("Content-Length", "")
    if announced.isdigit() and int(announced) > cap:
        raise _too_big(what, cap)
    body = bytearray()
    for chunk in resp.iter_raw(_CHUNK):
        body += chunk
        if len(body) > cap:
            raise _too_big(what, cap)
    return bytes(body)


def _file_chunks(path: Path) -> Iterator[bytes]:
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        while chunk := os.read(fd, _CHUNK):
            yield chunk
    finally:
        os.close(fd)


def _raise_for(resp: httpx.Response, path: str) -> None:
    if resp.is_success:
        return
    if resp.status_code == 404:
        raise EnvironmentProblem(
            f"the registry has nothing at {path} (404)",
            code="OCI_NOT_FOUND",
            hint="check the repository and digest (`skopeo inspect` lists what is there)",
        )
    raise EnvironmentProblem(
        f"the registry answered {resp.status_code} to {path}",
        code="OCI_REGISTRY_ERROR",
        hint="401/403: k3kit sends no credentials yet; use a registry (or mirror) it can read",
    )


def _unreachable(base: str, exc: Exception) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"cannot reach the registry {base}: {type(exc).__name__}: {exc}",
        code="OCI_REGISTRY_UNREACHABLE",
    )


def _oversized(digest: str, size: int, why: str) -> VerificationError:
    return VerificationError(
        f"the registry's blob {digest[:19]}… is larger than the {size} bytes its manifest "
        f"says ({why}); nothing more was read",
        code="OCI_BLOB_OVERSIZED",
        hint="the registry (or its storage) was changed: push the kit again from its archive",
    )


def _too_big(what: str, cap: int) -> VerificationError:
    return VerificationError(
        f"the registry's answer to {what} is over {cap} bytes; not read",
        code="OCI_MANIFEST_INVALID",
    )
