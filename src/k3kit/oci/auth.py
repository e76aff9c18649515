"""Registry credentials: where they are read from, and the one rule for where they may be sent.

Real registries (Harbor, Artifactory, ECR, a private ``distribution``) answer 401 until the
client authenticates, with either ``WWW-Authenticate: Basic realm=...`` or the token flow of the
distribution spec (``Bearer realm=...,service=...,scope=...``: ask the realm for a token, with
Basic credentials when there are any, then send ``Authorization: Bearer TOKEN``).

Where credentials come from (containers-auth.json(5), the files ``podman login`` and
``docker login`` write): ``$REGISTRY_AUTH_FILE`` when it is set (and only it), else
``$XDG_RUNTIME_DIR/containers/auth.json``, then ``$DOCKER_CONFIG/config.json`` (default
``~/.docker/config.json``); the first file with an ``auths`` entry for the registry wins. An
entry is ``{"auth": base64("user:password")}`` keyed by ``HOST[:PORT]`` (an ``https://`` prefix
and a path such as ``/v1/`` are ignored) or ``HOST[:PORT]/NAMESPACE`` (the longest match
wins); a key's host matches in any case and without its default port (``Registry.Example`` and
``registry.example:443`` are ``https://registry.example``), and only as a whole host.
A file may instead name a credential helper (``credHelpers`` for the registry, else
``credsStore`` for all): then that program is asked, as docker does (:mod:`k3kit.oci.credhelper`:
found on PATH by the rule for programs k3kit runs, bounded in time and output, never echoed);
its "no login" answer moves on to the next file. ``identitytoken`` (an OAuth2 refresh token) is
not used: k3kit does not make that exchange.

Why the rule is strict: a credential is sent only to the origin (scheme, host and port) it is
stored for. A token realm on another host gets an anonymous request (a registry that names
someone else's token service could otherwise collect a token for it); a blob redirect to object
storage never carries the ``Authorization`` header. Nothing here ever prints a password, a
token or the ``auth`` string: a :class:`Credential`'s repr hides them, and every error names the
registry and the file, never what was in it.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from k3kit._fs import NotRegularFile, check_trust_anchor, open_regular
from k3kit._policy import origin as server_of
from k3kit.errors import EnvironmentProblem, InputError
from k3kit.oci import credhelper

MAX_AUTH_FILE_BYTES = 1024 * 1024
_PARAM = re.compile(r'([A-Za-z][A-Za-z0-9_-]*)=(?:"([^"]*)"|([^\s,"]*))')
TOKEN = re.compile(r"[\x21-\x7e]{1,8192}")  # what may go into an Authorization header


@dataclass(frozen=True)
class Credential:
    """A user name and password for one registry; ``origin`` is where they may go."""

    origin: str
    source: Path
    username: str = field(repr=False)
    password: str = field(repr=False)
    helper: str | None = None  # the credential helper that gave it, when one did

    def where(self) -> str:
        """Where it came from, as errors name it: the file, and the helper when there is one."""
        via = f", through the credential helper docker-credential-{self.helper}"
        return f"{self.source}{via if self.helper else ''}"

    def basic(self) -> str:
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")


@dataclass(frozen=True)
class Challenge:
    """A parsed ``WWW-Authenticate``: ``scheme`` is ``basic`` or ``bearer``."""

    scheme: str
    params: dict[str, str]


def auth_files() -> list[Path]:
    """The files credentials are read from, in order (see the module's docstring)."""
    named = os.environ.get("REGISTRY_AUTH_FILE")
    if named:
        return [Path(named)]
    files = []
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        files.append(Path(runtime) / "containers" / "auth.json")
    docker = os.environ.get("DOCKER_CONFIG")
    files.append(Path(docker) / "config.json" if docker else Path.home() / ".docker/config.json")
    return files


def credential_for(origin: str, repo: str) -> Credential | None:
    """The credential stored for ``origin`` (``https://HOST[:PORT]``) and ``repo``, or None."""
    parts = urlsplit(origin)
    host = parts.netloc
    server = _server(parts.netloc, parts.scheme)
    if server is None:
        return None
    for path in auth_files():
        doc = _document(path)
        helper = _helper_for(doc, path, server, parts.scheme, repo)
        if helper is not None:
            answer = credhelper.ask(helper, host)
            if answer is None:  # the helper has no login for it: the next file may
                continue
            return Credential(origin, path, answer.username, answer.secret, helper)
        found = _lookup(_auths(doc, path), server, parts.scheme, repo)
        if found is not None:
            username, password = _decode(found, path, host)
            return Credential(origin, path, username, password)
    return None


def _helper_for(
    doc: dict[str, object], path: Path, server: tuple[str, str, int | None], scheme: str, repo: str
) -> str | None:
    """The credential helper ``doc`` names for ``server``: its ``credHelpers`` entry (keys
    compared as ``auths`` keys are), else its ``credsStore``, else None (docker's order)."""
    helpers = doc.get("credHelpers", {})
    if not isinstance(helpers, dict):
        raise _file_invalid(path, "its credHelpers is not an object")
    name = _lookup(helpers, server, scheme, repo)
    if name is None:
        name = doc.get("credsStore")
    if name is None or name == "":
        return None
    if not credhelper.valid_name(name):
        raise _file_invalid(
            path,
            "it names a credential helper that is no plain program name "
            "(letters, digits, '.', '_', '-'; looked up on PATH as docker-credential-NAME)",
        )
    assert isinstance(name, str)
    return name


def _server(netloc: str, scheme: str) -> tuple[str, str, int | None] | None:
    """``HOST[:PORT]`` as the server it names on ``scheme``: :func:`k3kit._policy.origin`, the
    one origin rule (host in lower case, as DNS names are case-insensitive, RFC 4343; the
    scheme's default port when none is written). So ``Registry.Example``,
    ``registry.example:443`` and ``https://registry.example`` are one server, and
    ``registry.example:5000`` or ``registry.example.evil`` are others. None for a name that is no
    host (an unclosed ``[``, a port that is no number in range, a ``user@``): no match."""
    if "@" in netloc or "/" in netloc or "?" in netloc or "#" in netloc:
        return None
    return server_of(f"{scheme}://{netloc}")


def _document(path: Path) -> dict[str, object]:
    """The JSON object of the credentials file ``path`` ({} when the file does not exist)."""
    raw = _read_auth_file(path)
    if raw is None:
        return {}
    doc = untrusted_json(raw)
    if doc is None:
        raise _file_invalid(path, "it is not JSON")
    if not isinstance(doc, dict):
        raise _file_invalid(path, "it is not a JSON object")
    return doc


def _auths(doc: dict[str, object], path: Path) -> dict[str, object]:
    """The ``auths`` object of the credentials file ``path``."""
    auths = doc.get("auths", {})
    if not isinstance(auths, dict):
        raise _file_invalid(path, "its auths is not an object")
    return auths


def _read_auth_file(path: Path) -> bytes | None:
    """The bytes of the credentials file ``path``, or None when there is none.

    The file decides which account k3kit logs in as, and it is found in place: so it is judged
    as a trust anchor is (:func:`check_trust_anchor`: refused, ``OCI_AUTH_FILE_UNSAFE``, when
    another user could have written or swapped it), opened without blocking (a FIFO planted
    there must not hang k3kit), and read only as a regular file under the size cap. A link is
    followed (dotfile managers link ``config.json``), but the link must be ours or root's."""
    check_trust_anchor(path, "the registry credentials file", code="OCI_AUTH_FILE_UNSAFE")
    try:
        fd, st = open_regular(path, follow_symlinks=True)
    except FileNotFoundError:
        return None
    except NotRegularFile as exc:
        raise _file_invalid(path, "it is not a regular file") from exc
    except OSError as exc:
        raise _file_invalid(path, f"it cannot be read ({exc.strerror})") from exc
    with os.fdopen(fd, "rb") as f:
        raw = f.read(MAX_AUTH_FILE_BYTES + 1) if st.st_size <= MAX_AUTH_FILE_BYTES else b""
    if st.st_size > MAX_AUTH_FILE_BYTES or len(raw) > MAX_AUTH_FILE_BYTES:
        raise _file_invalid(path, f"it is over {MAX_AUTH_FILE_BYTES} bytes")
    return raw


def untrusted_json(raw: bytes) -> object:
    """``raw`` parsed as JSON, or None when it is not JSON k3kit can read: not UTF-8, not
    JSON, or nested deeper than the parser's recursion (``[[[[…`` raises ``RecursionError``,
    which is no ``ValueError``). The one parse of bytes someone else wrote here (a credentials
    file, a token service's answer), so neither can end in a traceback."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


def _lookup(
    entries: dict[str, object], server: tuple[str, str, int | None], scheme: str, repo: str
) -> object | None:
    """The entry for ``server`` and ``repo``: ``HOST`` or ``HOST/NAMESPACE`` keys, longest wins.

    A key's host is compared as the server it names (:func:`_server`: case-insensitive, the
    default port filled in), never as a prefix or suffix; its namespace exactly, by segments."""
    best: tuple[int, object] | None = None
    for key, value in entries.items():
        name = _normalise(key)
        scope = name.split("/", 1)
        if _server(scope[0], scheme) != server:
            continue
        if len(scope) == 2 and not (repo == scope[1] or repo.startswith(scope[1] + "/")):
            continue
        if best is None or len(name) > best[0]:
            best = (len(name), value)
    return None if best is None else best[1]


def _normalise(key: str) -> str:
    """``https://HOST/v1/`` and ``HOST`` name the same registry (docker login writes both)."""
    for prefix in ("https://", "http://"):
        key = key.removeprefix(prefix)
    key = key.rstrip("/")
    return key.removesuffix("/v1").removesuffix("/v2")


def _decode(entry: object, path: Path, host: str) -> tuple[str, str]:
    auth = entry.get("auth") if isinstance(entry, dict) else None
    if not auth and isinstance(entry, dict) and entry.get("identitytoken"):
        raise _file_invalid(
            path,
            f"its entry for {host} holds an identity token (an OAuth2 refresh token), "
            "which k3kit does not exchange; log in with a user name and a password or "
            "robot-account token",
        )
    if not isinstance(auth, str) or not auth:
        raise _file_invalid(
            path, f"its entry for {host} has no auth, and it names no credential helper for it"
        )
    try:
        text = base64.b64decode(auth, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise _file_invalid(path, f"the auth of {host} is not base64 of user:password") from exc
    username, sep, password = text.partition(":")
    if not sep or not username or not password:
        raise _file_invalid(path, f"the auth of {host} is not base64 of user:password")
    return username, password


def parse_challenge(values: list[str]) -> Challenge | None:
    """The first Basic or Bearer challenge among ``WWW-Authenticate`` values, or None."""
    for value in values:
        scheme, _, rest = value.strip().partition(" ")
        if scheme.lower() in ("basic", "bearer"):
            params = {m[1].lower(): m[2] or m[3] for m in _PARAM.finditer(rest)}
            return Challenge(scheme.lower(), params)
    return None


def _file_invalid(path: Path, why: str) -> InputError:
    return InputError(
        f"the registry credentials file {path} cannot be used: {why}",
        code="OCI_AUTH_FILE_INVALID",
        hint="fix or re-create it with `podman login` or `docker login` (an auths entry of "
        "base64 user:password), or point REGISTRY_AUTH_FILE at another file",
    )


def auth_required(origin: str, why: str) -> EnvironmentProblem:
    """401 and no credential k3kit may send there."""
    files = ", ".join(str(p) for p in auth_files())
    return EnvironmentProblem(
        f"the registry {origin} asks for credentials: {why}",
        code="OCI_AUTH_REQUIRED",
        hint=f"log in (`podman login` / `docker login`) or set REGISTRY_AUTH_FILE; "
        f"k3kit reads {files} (docs/oci.md)",
    )


def auth_failed(origin: str, source: Path | str | None, why: str) -> EnvironmentProblem:
    """The credential was sent and refused (401 again, 403, or the token service said no);
    ``source`` is where it came from (:meth:`Credential.where`)."""
    where = f" (from {source})" if source is not None else ""
    return EnvironmentProblem(
        f"the registry {origin} refused the credentials{where}: {why}",
        code="OCI_AUTH_FAILED",
        hint="check the user name, password and its rights on this repository; log in again "
        "(`podman login` / `docker login`)",
    )
