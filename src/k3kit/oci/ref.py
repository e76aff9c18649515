"""``oci://`` references: parsed once, with the transport rule, before any request is made.

Why a parser of our own: the reference decides where the bytes come from and whether they can be
read or changed on the way. ``oci://HOST[:PORT]/REPO:TAG`` or ``oci://HOST[:PORT]/REPO@sha256:HEX``
(the grammar of the OCI distribution spec); the registry is reached over https, and over plain
http only when it is on this machine (127.0.0.1, ::1, localhost), the same exception the hub
policy makes (:mod:`k3kit.hub.policy`). ``oci+http://`` asks for plain http explicitly and is
refused off loopback (``OCI_PLAIN_HTTP``) rather than silently upgraded or downgraded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from k3kit._policy import is_loopback
from k3kit.errors import InputError

_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_REPO = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_HOST = re.compile(r"[A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]")
_FORM = "oci://HOST[:PORT]/REPO:TAG or oci://HOST[:PORT]/REPO@sha256:HEX"


@dataclass(frozen=True)
class Reference:
    """A parsed reference: ``base`` is the registry's origin (scheme decided), ``repo`` its
    repository, and exactly one of ``tag`` and ``digest``."""

    base: str
    host: str
    repo: str
    tag: str | None
    digest: str | None

    def pinned(self, digest: str) -> str:
        """The reference of ``digest`` in this repository, as a user would type it."""
        return f"oci://{self.host}/{self.repo}@{digest}"

    def require_digest(self, verb: str) -> str:
        """The digest, or ``OCI_TAG_NOT_PINNED``: a tag is whatever the registry says today."""
        if self.digest is None:
            raise InputError(
                f"{verb} takes a kit by digest, not by tag: a registry (or anyone who can push "
                f"to it) can move the tag {self.tag!r} to another kit",
                code="OCI_TAG_NOT_PINNED",
                hint=f"use oci://{self.host}/{self.repo}@sha256:HEX (`k3kit push` prints it; "
                "`skopeo inspect` shows a tag's digest)",
            )
        return self.digest


def is_oci(text: str) -> bool:
    """Whether a source argument names a registry rather than a file."""
    return text.startswith(("oci://", "oci+http://"))


def parse(text: str, *, repository_only: bool = False) -> Reference:
    """Parse ``text``; ``OCI_REF_INVALID`` or ``OCI_PLAIN_HTTP`` (exit 3) when it cannot be used.

    ``repository_only``: ``oci://HOST[:PORT]/REPO`` with neither tag nor digest, for a caller
    that takes the digest from signed metadata of its own (``update --from-registry``): a tag or
    digest there would be a second, unsigned answer to "which bytes".
    """
    explicit_http = text.startswith("oci+http://")
    parts = urlsplit(text)
    if parts.scheme not in ("oci", "oci+http") or parts.query or parts.fragment:
        raise _invalid(text)
    if "@" in parts.netloc:  # user:password@ would go nowhere safe
        raise _invalid(text)
    host = parts.netloc
    name = parts.hostname or ""
    if not name or not _HOST.fullmatch(host.rsplit(":", 1)[0] if not host.endswith("]") else host):
        raise _invalid(text)
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in range
    except ValueError as exc:
        raise _invalid(text) from exc
    repo, tag, digest = _split_path(text, parts.path.lstrip("/"), repository_only)
    loopback = is_loopback(name)
    if explicit_http and not loopback:
        raise InputError(
            f"refusing plain http to the registry {host}: anyone on the path could read or "
            "change what is pulled or pushed",
            code="OCI_PLAIN_HTTP",
            hint=f"use oci://{host}/… (https); plain http is only for a registry on this machine",
        )
    scheme = "http" if loopback else "https"
    return Reference(f"{scheme}://{host}", host, repo, tag, digest)


def _split_path(text: str, path: str, repository_only: bool) -> tuple[str, str | None, str | None]:
    if repository_only:
        if not _REPO.fullmatch(path):
            raise _invalid(text, form="oci://HOST[:PORT]/REPO (no tag, no digest)")
        return path, None, None
    if "@" in path:
        repo, digest = path.split("@", 1)
        if not DIGEST.fullmatch(digest) or not _REPO.fullmatch(repo):
            raise _invalid(text)
        return repo, None, digest
    repo, sep, tag = path.rpartition(":")
    if not sep or not _REPO.fullmatch(repo) or not _TAG.fullmatch(tag):
        raise _invalid(text)
    return repo, tag, None


def _invalid(text: str, *, form: str = _FORM) -> InputError:
    return InputError(
        f"{text!r} is not a registry reference k3kit can use",
        code="OCI_REF_INVALID",
        hint=f"write {form} (a lower-case repository; sha256 digests only)",
    )
