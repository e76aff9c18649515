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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlencode, urlsplit

import httpx

from k3kit._fs import open_nofollow
from k3kit._policy import (
    Deadline,
    ReadTooSlow,
    UnusableEnvironment,
    client_from_env,
    is_loopback,
    join_url,
    redirect_refusal,
    same_origin,
    split_url,
    url_refusal,
)
from k3kit.errors import EnvironmentProblem, InputError, VerificationError
from k3kit.oci.auth import (
    TOKEN,
    Challenge,
    Credential,
    auth_failed,
    auth_required,
    credential_for,
    parse_challenge,
    untrusted_json,
)

_MAX_REDIRECTS = 5
_CHUNK = 1024 * 1024
_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
_MAX_TOKEN_ANSWER = 64 * 1024
_MAX_OTHER_ANSWER = 64 * 1024  # the body of an answer only its status and headers are read from
# httpx.InvalidURL is not an httpx.HTTPError: a URL httpx will not send is the server's fault too.
_TRANSPORT = (httpx.HTTPError, httpx.InvalidURL)
Body = bytes | Callable[[], Iterator[bytes]] | None
_Content = bytes | Iterator[bytes] | None
"""A request body; a callable makes a fresh stream, so a request answered 401 can be resent."""


def origin_of(url: str) -> str:
    """``url``'s origin as printed (never a ``user:password@``); compare with ``same_origin``."""
    parts = split_url(url)
    if parts is None:
        return "(a URL that cannot be read)"
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


class Registry:
    """One registry origin (``https://HOST`` or a loopback ``http://HOST``); use as a context.

    Authentication (:mod:`k3kit.oci.auth`) happens on the first 401 the registry's own origin
    answers: the credential for this origin and ``repo`` is looked up then (not before: a
    registry that needs none never makes k3kit read a credentials file), and the resulting
    ``Authorization`` is sent to this origin only, never to a redirect's target.
    """

    def __init__(self, base: str, repo: str = "") -> None:
        self.base = base.rstrip("/")
        self.repo = repo
        loopback = is_loopback(urlsplit(self.base).hostname)
        # A proxy named in the environment is for the outside world, not for this machine.
        # Every read (status line and headers too) waits at most what is left of the active
        # Deadline: a head dribbled a byte at a time cannot outlast it (_policy.pace_client).
        try:
            self._client = client_from_env(
                lambda: httpx.Client(
                    follow_redirects=False, timeout=_TIMEOUT, trust_env=not loopback
                )
            )
        except UnusableEnvironment as exc:
            raise InputError(
                f"cannot reach {self.base} through this environment's proxy or TLS settings: {exc}",
                code="BAD_PROXY_SETTING",
                hint="fix or unset HTTPS_PROXY / HTTP_PROXY / ALL_PROXY (and SSL_CERT_FILE); "
                "a registry on this machine is reached without them",
            ) from None
        self._authorization: str | None = None
        self._credential: Credential | None = None
        self._looked_up = False
        self._withheld_from: str | None = None  # a token realm on another origin

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
        deadline = Deadline(cap)
        with deadline, self._stream("GET", path, headers=headers) as resp:
            if resp.status_code == 404:
                return None
            self.check(resp, path)
            return _read_capped(resp, cap, what=path, deadline=deadline)

    def fetch_blob(self, repo: str, digest: str, size: int, out: BinaryIO) -> None:
        """Stream blob ``digest`` into ``out``: refused past ``size`` bytes (the descriptor's)
        and unless exactly ``size`` bytes hashing to ``digest`` arrived."""
        path = f"/v2/{repo}/blobs/{digest}"
        deadline = Deadline(size)
        with deadline, self._stream("GET", path, headers={"Accept-Encoding": "identity"}) as resp:
            self.check(resp, path)
            announced = _announced(resp)
            if announced is not None and announced > size:
                raise _oversized(digest, size, f"it announces {announced}")
            hasher, seen = hashlib.sha256(), 0
            for chunk in deadline.paced(resp.iter_raw()):
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
        self.check(resp, f"/v2/{repo}/blobs/{digest}")
        return True

    def push_blob(self, repo: str, digest: str, size: int, source: Path | bytes) -> None:
        """Upload one blob monolithically (POST, then PUT ?digest=), unless it is there already."""
        if self.has_blob(repo, digest):
            return
        start = f"/v2/{repo}/blobs/uploads/"
        resp = self._send("POST", start)
        self.check(resp, start)
        location = self._same_origin(
            join_url(self.base + start, resp.headers.get("Location", ""))
            or resp.headers.get("Location", "")
        )
        sep = "&" if "?" in location else "?"
        body: Body = source if isinstance(source, bytes) else (lambda: _file_chunks(source))
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        done = self._send("PUT", f"{location}{sep}digest={digest}", headers=headers, body=body)
        self.check(done, start)

    def put_manifest(
        self, repo: str, reference: str, data: bytes, media_type: str
    ) -> httpx.Headers:
        path = f"/v2/{repo}/manifests/{reference}"
        resp = self._send("PUT", path, headers={"Content-Type": media_type}, body=data)
        self.check(resp, path)
        return resp.headers

    # -- authentication --------------------------------------------------------------------

    def auth_for(self, url: str) -> dict[str, str]:
        """The ``Authorization`` header for ``url``: only when it is this registry's origin."""
        if self._authorization is None or not same_origin(url, self.base):
            return {}
        return {"Authorization": self._authorization}

    def credential(self) -> Credential | None:
        if not self._looked_up:
            self._credential = credential_for(self.base, self.repo)
            self._looked_up = True
        return self._credential

    def authenticate(self, resp: httpx.Response) -> None:
        """Answer the registry's 401 ``resp``: set the ``Authorization`` to resend with, or
        raise (nothing to send, or the same thing again)."""
        challenge = parse_challenge(resp.headers.get_list("WWW-Authenticate"))
        if challenge is None:
            raise self.refused("its 401 names no Basic or Bearer challenge")
        cred = self.credential()
        if challenge.scheme == "basic":
            if cred is None:
                raise self.refused("it asks for Basic credentials")
            value = cred.basic()
        else:
            value = "Bearer " + self._token(challenge, cred)
        if value == self._authorization:
            raise self.refused("it answered 401 to them")
        self._authorization = value

    def refused(self, why: str) -> EnvironmentProblem:
        """The error for a 401 k3kit cannot (or can no longer) answer."""
        cred = self.credential()
        if self._withheld_from is not None:
            why += (
                f"; its token service is on another origin ({self._withheld_from}), and k3kit "
                f"sends the credentials for {self.base} to {self.base} only"
            )
        if cred is None or self._withheld_from is not None:
            return auth_required(self.base, why)
        return auth_failed(self.base, cred.where(), why)

    def _token(self, challenge: Challenge, cred: Credential | None) -> str:
        """A bearer token from the challenge's realm (the distribution token flow): with the
        Basic credential when the realm is this registry's own origin, anonymous otherwise."""
        realm = challenge.params.get("realm", "")
        why = url_refusal(realm) or redirect_refusal(realm, self.base)
        if why is not None:
            raise EnvironmentProblem(
                f"the registry {self.base} sends k3kit for a token to "
                f"{_without_userinfo(realm)!r}: {why}",
                code="OCI_AUTH_REALM_REFUSED",
                hint="the registry's token service must be https (plain http only on this "
                "machine); ask its operator",
            )
        query = urlencode({k: v for k in ("service", "scope") if (v := challenge.params.get(k))})
        url = f"{realm}{'&' if '?' in realm else '?'}{query}" if query else realm
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        if cred is not None and same_origin(realm, self.base):
            headers["Authorization"] = cred.basic()
        elif cred is not None:
            self._withheld_from = origin_of(realm)
        deadline = Deadline(_MAX_TOKEN_ANSWER)
        try:
            with deadline, self._client.stream("GET", url, headers=headers) as resp:
                if resp.status_code in (401, 403):
                    raise self.refused(f"its token service answered {resp.status_code}")
                body = bytearray()
                for chunk in deadline.paced(resp.iter_raw()):
                    body += chunk
                    if len(body) > _MAX_TOKEN_ANSWER:  # no token is that long: not read on
                        body.clear()
                        break
                ok = resp.is_success
        except _TRANSPORT as exc:
            raise _unreachable(origin_of(realm), exc) from exc
        except ReadTooSlow as exc:
            raise _too_slow(origin_of(realm), "its token answer", exc) from exc
        return _token_from(bytes(body) if ok else b"", self.base)

    def check(self, resp: httpx.Response, path: str) -> None:
        """Raise the registered error for a failed answer to ``path`` (401/403 are about
        credentials; the message never holds them)."""
        if resp.is_success:
            return
        if resp.status_code in (401, 403) and same_origin(str(resp.url), self.base):
            raise self.refused(f"it answered {resp.status_code} to {path}")
        _raise_for(resp, path)

    # -- transport -------------------------------------------------------------------------

    def _same_origin(self, url: str) -> str:
        if not same_origin(url, self.base):
            raise EnvironmentProblem(
                f"the registry sent an upload to {_without_userinfo(url)!r}, outside {self.base}",
                code="OCI_REDIRECT_REFUSED",
            )
        return url

    def _send(
        self, method: str, path: str, *, headers: dict[str, str] | None = None, body: Body = None
    ) -> httpx.Response:
        """One request, resent once after answering a 401 of this registry's origin."""
        url = path if path.startswith(("http://", "https://")) else self.base + path
        for attempt in range(2):
            content = body() if callable(body) else body
            sent = {**(headers or {}), **self.auth_for(url)}
            resp = self._answer(method, url, sent, content)
            if resp.status_code != 401 or not same_origin(url, self.base) or attempt:
                return resp
            self.authenticate(resp)
        raise AssertionError("unreachable")  # pragma: no cover

    def _answer(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        content: bytes | Iterator[bytes] | None,
    ) -> httpx.Response:
        """One request whose answer matters only by its status and headers (a HEAD, an upload,
        a manifest PUT): its body, if any, is read up to 64 KiB under the same overall deadline
        as every other body (:class:`Deadline`), then dropped."""
        deadline = Deadline(_MAX_OTHER_ANSWER)
        request = self._client.build_request(method, url, headers=headers, content=content)
        try:
            with deadline:
                resp = self._client.send(request, stream=True)
                try:
                    seen = 0
                    for chunk in deadline.paced(resp.iter_raw()):
                        seen += len(chunk)
                        if seen > _MAX_OTHER_ANSWER:
                            break
                finally:
                    resp.close()
        except _TRANSPORT as exc:
            raise _unreachable(self.base, exc) from exc
        except ReadTooSlow as exc:
            what = f"its answer to {method} {_without_userinfo(url)}"
            raise _too_slow(self.base, what, exc) from exc
        return resp

    def _stream(self, method: str, path: str, *, headers: dict[str, str]) -> _Streamed:
        return _Streamed(self, method, self.base + path, headers)


class _Streamed:
    """A streamed GET that follows redirects by hand: each hop must be https, or http back to
    this machine (an S3-style blob redirect is normal; a downgrade to plain http is not)."""

    def __init__(self, reg: Registry, method: str, url: str, headers: dict[str, str]) -> None:
        self._reg, self._method, self._url, self._headers = reg, method, url, headers
        self._resp: httpx.Response | None = None

    def __enter__(self) -> httpx.Response:
        """Each hop carries the ``Authorization`` only when it is the registry's own origin (a
        blob store a redirect names never sees it); a 401 of that origin is answered once."""
        url, answered = self._url, False
        for _ in range(_MAX_REDIRECTS + 2):
            headers = {**self._headers, **self._reg.auth_for(url)}
            request = self._reg._client.build_request(self._method, url, headers=headers)
            try:
                self._resp = self._reg._client.send(request, stream=True)
            except _TRANSPORT as exc:
                raise _unreachable(self._reg.base, exc) from exc
            except ReadTooSlow as exc:  # its head, past the caller's active Deadline
                raise _too_slow(self._reg.base, _without_userinfo(url), exc) from exc
            if self._resp.status_code == 401 and same_origin(url, self._reg.base) and not answered:
                self._resp.close()
                self._reg.authenticate(self._resp)
                answered = True
                continue
            if not self._resp.is_redirect:
                return self._resp
            location = self._resp.headers.get("Location", "")
            target = join_url(url, location) or location  # refused next if it is no URL
            self._resp.close()
            url = _allowed_hop(target, self._reg.base)
        raise EnvironmentProblem(
            f"the registry redirected more than {_MAX_REDIRECTS} times", code="OCI_REDIRECT_REFUSED"
        )

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        """Also maps a connection that breaks while the body streams (a registry closing
        early, a read timeout, a body past its overall deadline) to
        ``OCI_REGISTRY_UNREACHABLE``: never a traceback."""
        if self._resp is not None:
            self._resp.close()
        if isinstance(exc, _TRANSPORT):
            raise _unreachable(self._reg.base, exc) from exc
        if isinstance(exc, ReadTooSlow):
            raise _too_slow(self._reg.base, _without_userinfo(self._url), exc) from exc


def _allowed_hop(url: str, origin: str) -> str:
    """A redirect the registry's client may follow (:func:`redirect_refusal`, the one rule)."""
    why = redirect_refusal(url, origin)
    if why is None:
        return url
    raise EnvironmentProblem(
        f"the registry {origin} redirected to {_without_userinfo(url)!r}: {why}",
        code="OCI_REDIRECT_REFUSED",
        hint="ask the registry's operator to serve blobs over https from another host",
    )


def _announced(resp: httpx.Response) -> int | None:
    """The ``Content-Length`` the server announces, when it is ASCII digits (``str.isdigit``
    also takes ``²``, which ``int`` refuses), else None: only ever used to refuse early, the
    bytes read are counted either way."""
    value = resp.headers.get("Content-Length", "")
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 20 else None


def _read_capped(resp: httpx.Response, cap: int, *, what: str, deadline: Deadline) -> bytes:
    announced = _announced(resp)
    if announced is not None and announced > cap:
        raise _too_big(what, cap)
    body = bytearray()
    for chunk in deadline.paced(resp.iter_raw()):
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
        hint="see the registry's own log for why; retry when it is healthy",
    )


def _without_userinfo(url: str) -> str:
    """``url`` as it may be printed: a ``user:password@`` in it is dropped, and a URL that
    cannot be split is not printed at all (where its password ends cannot be known)."""
    parts = split_url(url)
    if parts is None:
        return "(a URL that cannot be read)"
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def _token_from(body: bytes, origin: str) -> str:
    """The ``token`` (or ``access_token``) of a token service's JSON answer; anything else is
    the registry's error, not a crash, and the answer is never echoed (it may hold a token)."""
    doc = untrusted_json(body)
    token = None
    if isinstance(doc, dict):
        token = doc.get("token") or doc.get("access_token")
    if not isinstance(token, str) or not TOKEN.fullmatch(token):
        raise EnvironmentProblem(
            f"the token service of {origin} did not answer with a token",
            code="OCI_REGISTRY_ERROR",
            hint="ask the registry's operator to check its token service",
        )
    return token


def _unreachable(base: str, exc: Exception) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"cannot reach the registry {base}: {type(exc).__name__}: {exc}",
        code="OCI_REGISTRY_UNREACHABLE",
    )


def _too_slow(base: str, what: str, exc: ReadTooSlow) -> EnvironmentProblem:
    """A body past its overall deadline: the registry is unreachable in practice (a stalling
    or hostile server, or a link far too slow); the same code and exit as one that is down."""
    return EnvironmentProblem(
        f"the registry {base} sent {what} too slowly: {exc}",
        code="OCI_REGISTRY_UNREACHABLE",
        hint="the registry (or the network to it) stalls; retry, or use a mirror nearer the "
        "node (docs/oci.md, 'Transport')",
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
