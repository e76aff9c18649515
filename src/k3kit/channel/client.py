"""``k3kit update``: python-tuf's updater finds the newest release the buyer is entitled to, and
``k3kit install``'s own code path installs it.

Order of trust: the pinned channel root (a trust anchor, ``--channel-root``) is the updater's
bootstrap; python-tuf walks the root chain, then timestamp, snapshot and targets, refusing a
freeze, a rollback, a mix-and-match and any role not signed by its threshold (mapped to codes by
:mod:`k3kit.channel.errors`). Only then are the release entries read. Nothing the server says
about itself is used: lengths and hashes come from the signed metadata (python-tuf stops reading
at the signed length and checks the hash before the file is handed over). The kit archive then
goes through :func:`k3kit.node.install.install` unchanged (receipt signature against the
publisher's trust, manifest, every member) and its receipt must name the package, version and
kit checksum its signed channel entry names.

The updater's memory (the newest root, timestamp and snapshot this node accepted, which is what
makes a rollback detectable) lives in the state folder, under ``channel/<id of the pinned
root>``, checked like every state folder (:func:`k3kit._fs.private_dir`) and holding nothing
another user wrote: whoever could replace ``timestamp.json`` there could roll the node back.
"""

from __future__ import annotations

import hashlib
import http.client
import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urljoin

import urllib3
from tuf.api import exceptions as tuf_exceptions
from tuf.api.metadata import TargetFile
from tuf.ngclient import Updater, UpdaterConfig
from tuf.ngclient.urllib3_fetcher import Urllib3Fetcher

from k3kit._fs import check_trust_anchor, foreign_entry, owned_staging, private_dir, read_capped
from k3kit._policy import (
    Deadline,
    ReadTooSlow,
    failed_read,
    read_wait,
    redirect_refusal,
    url_refusal,
)
from k3kit._values import parse_timestamp
from k3kit.archive import admit_download
from k3kit.channel.errors import tuf_refusals
from k3kit.channel.repository import MAX_METADATA_BYTES, Release
from k3kit.channel.term import Term
from k3kit.errors import EnvironmentProblem, InputError, VerificationError
from k3kit.node.install import Installed, install_fetched
from k3kit.node.verify import Report, TrustSource
from k3kit.signing.trust import RollbackPolicy
from k3kit.signing.trust.root import with_channel_roots

Progress = Callable[[int, int], None]
"""Called as ``progress(bytes_so_far, signed_length)`` while the kit downloads."""


@dataclass(frozen=True)
class Entry(Release):
    """A release entry of the channel, read from verified targets metadata: what the publisher
    wrote (:class:`Release`) and the verified target python-tuf downloads it by."""

    target: TargetFile = field(compare=False, repr=False)

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, **self.custom(), "length": self.target.length}


@dataclass(frozen=True)
class Request:
    """What the buyer asked for."""

    url: str
    channel: str
    channel_root: Path
    into: Path
    state_dir: Path
    package: str | None = None
    version: str | None = None
    term: Term | None = None
    registry: str | None = None  # oci://HOST/REPO: the kit's bytes from there, by signed digest


@dataclass(frozen=True)
class Updated:
    installed: Installed
    entry: Entry
    newest: Entry
    skipped_out_of_term: list[Entry]
    term: Term | None


class _CountingFetcher(Urllib3Fetcher):
    """python-tuf's own fetcher, reporting the bytes of target downloads as they arrive, and
    holding every download to the overall deadline of :class:`k3kit._policy.Deadline` (python-tuf
    bounds only the gap between two reads: a server sending a byte every 29 s would hold a
    16 KiB timestamp for five days)."""

    def __init__(self, on_progress: Progress | None) -> None:
        super().__init__(app_user_agent="k3kit-update")
        self.on_progress = on_progress
        self.expected = 0
        self._max_length = 0

    @contextmanager
    def download_file(self, url: str, max_length: int) -> Iterator[IO[bytes]]:
        """python-tuf's, remembering ``max_length`` (the signed length, or python-tuf's cap for
        the role) for the deadline of this one download."""
        self._max_length = max_length
        with super().download_file(url, max_length) as file:
            yield file

    def _fetch(self, url: str) -> Iterator[bytes]:
        """The body of ``url`` under one Deadline: active while the request is made and its
        head read (each socket read waits at most what is left of it), then checked as each
        piece of the body arrives."""
        deadline = Deadline(self._max_length)
        try:
            with deadline:
                pieces = self._followed(url)
        except ReadTooSlow as exc:
            slow = _too_slow(exc)
            raise slow from slow.__cause__
        chunks = self._paced(pieces, deadline)
        if self.on_progress is None or "/targets/" not in url:
            return chunks
        return self._counted(chunks, self.on_progress)

    def _paced(self, chunks: Iterator[bytes], deadline: Deadline) -> Iterator[bytes]:
        """``chunks`` under ``deadline``: past it, python-tuf's own ``SlowRetrievalError``
        (a ``DownloadError``, so ``CHANNEL_UNREACHABLE``) carrying k3kit's message."""
        try:
            yield from deadline.paced(chunks)
        except ReadTooSlow as exc:
            slow = _too_slow(exc)
            raise slow from slow.__cause__

    def _followed(self, url: str) -> Iterator[bytes]:
        """python-tuf's GET (its ``_fetch``, same status and timeout handling) with redirects
        followed by hand, each hop by the one redirect rule (:func:`redirect_refusal`):
        urllib3 alone follows any, to plain http or into this machine."""
        origin = url
        for _ in range(_MAX_REDIRECTS + 1):
            response = self._get(url)
            location = response.get_redirect_location()
            if not location:
                if response.status >= 400:
                    response.close()
                    raise tuf_exceptions.DownloadHTTPError(
                        f"HTTP error occurred with status {response.status}", response.status
                    )
                return self._pieces(response)
            response.close()
            url = _hop(urljoin(url, location), origin)
        raise EnvironmentProblem(
            f"the channel's server redirected more than {_MAX_REDIRECTS} times",
            code="CHANNEL_REDIRECT_REFUSED",
        )

    def _get(self, url: str) -> urllib3.BaseHTTPResponse:
        """One GET through python-tuf's proxy-aware pool managers, each made to read through
        :class:`_PacedSocketIO` (so the active Deadline bounds the head too)."""
        parts = urllib3.util.parse_url(url)
        manager = self._proxy_env.get_pool_manager(parts.scheme, parts.host)
        manager.pool_classes_by_scheme = _PACED_POOLS
        try:
            return manager.request(
                "GET",
                url,
                preload_content=False,
                redirect=False,
                timeout=urllib3.Timeout(self.socket_timeout),
            )
        except urllib3.exceptions.MaxRetryError as exc:
            if isinstance(exc.reason, urllib3.exceptions.TimeoutError):
                raise tuf_exceptions.SlowRetrievalError from exc
            raise

    def _pieces(self, response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
        """python-tuf's ``_chunks`` (same timeout handling), reading with ``read1``: each piece
        as it arrives, so the deadline is checked then (``stream`` waits for a whole
        ``chunk_size``, which a dribbling server can take days to fill)."""
        try:
            while piece := response.read1(self.chunk_size):
                yield piece
        except urllib3.exceptions.TimeoutError as exc:
            raise tuf_exceptions.SlowRetrievalError from exc
        except urllib3.exceptions.MaxRetryError as exc:
            if isinstance(exc.reason, urllib3.exceptions.TimeoutError):
                raise tuf_exceptions.SlowRetrievalError from exc
            raise
        finally:
            response.release_conn()

    def _counted(self, chunks: Iterator[bytes], report: Progress) -> Iterator[bytes]:
        done = 0
        for chunk in chunks:
            done += len(chunk)
            report(done, self.expected)
            yield chunk


def _too_slow(exc: ReadTooSlow) -> tuf_exceptions.SlowRetrievalError:
    """A file (its head or its body) past its Deadline: python-tuf's own
    ``SlowRetrievalError`` (a ``DownloadError``), caused by k3kit's ``CHANNEL_UNREACHABLE``
    (which :func:`k3kit.channel.errors.channel_error` reports); raise it ``from`` its cause."""
    problem = EnvironmentProblem(
        f"the channel's server sent a file too slowly: {exc}",
        code="CHANNEL_UNREACHABLE",
        hint="the server (or the network to it) stalls; retry, or use another mirror of the "
        "channel",
    )
    error = tuf_exceptions.SlowRetrievalError(str(problem))
    error.__cause__ = problem
    return error


class _PacedSocketIO(io.RawIOBase):
    """A socket's read side, as ``http.client`` (and so urllib3) reads a response from it,
    each read waiting at most :func:`k3kit._policy.read_wait` of the socket's own timeout.
    Wraps ``sock.makefile``'s own raw file, which keeps the socket open until it is closed."""

    def __init__(self, sock: Any) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)
        self._base = sock.gettimeout()

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int | None:
        self._sock.settimeout(read_wait(self._base))
        try:
            got: int | None = self._raw.readinto(b)
        except OSError:
            failed_read()
            raise
        return got

    def fileno(self) -> int:
        return int(self._raw.fileno())

    def close(self) -> None:
        self._raw.close()
        super().close()


class _PacedResponse(http.client.HTTPResponse):
    """``http.client``'s response, reading its status line, headers and body through
    :class:`_PacedSocketIO` instead of ``sock.makefile``."""

    def __init__(self, sock: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        unpaced, self.fp = self.fp, io.BufferedReader(_PacedSocketIO(sock))
        unpaced.close()


class _PacedHTTPConnection(urllib3.connection.HTTPConnection):
    response_class = _PacedResponse


class _PacedHTTPSConnection(urllib3.connection.HTTPSConnection):
    response_class = _PacedResponse


class _PacedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _PacedHTTPConnection


class _PacedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _PacedHTTPSConnection


_PACED_POOLS: dict[str, type[urllib3.HTTPConnectionPool]] = {
    "http": _PacedHTTPPool,
    "https": _PacedHTTPSPool,
}
_MAX_REDIRECTS = 5


def _hop(url: str, origin: str) -> str:
    why = redirect_refusal(url, origin)
    if why is None:
        return url
    raise EnvironmentProblem(
        f"the channel's server redirected {origin} to {url}: {why}",
        code="CHANNEL_REDIRECT_REFUSED",
        hint="use a mirror that serves the channel over https without leaving its host",
    )


def metadata_folder(state_dir: Path, root_bytes: bytes) -> Path:
    """The updater's memory for the channel this root pins: one per root, not per URL, so a
    mirror of the same channel shares it (a rollback through a mirror is still a rollback)."""
    ident = hashlib.sha256(root_bytes).hexdigest()[:16]
    folder = private_dir(state_dir / "channel" / ident, what="channel metadata folder")
    # python-tuf's own convenience link to the newest root; never read (the pinned root is the
    # bootstrap, later roots are read from root_history/), so it is removed, not followed.
    link = folder / "root.json"
    if link.is_symlink():
        link.unlink()
    why = foreign_entry(folder, read_only=False)
    if why is not None:
        raise EnvironmentProblem(
            f"the channel metadata folder {folder} holds what another user could have put: {why}",
            code="STATE_DIR_UNSAFE",
            hint=f"remove {folder} (it is re-made from the channel) and keep the state folder "
            "yours alone",
        )
    return folder


def _text(custom: dict[str, Any], key: str, path: str) -> str:
    value = custom.get(key)
    if not isinstance(value, str) or not value or len(value) > 200:
        raise VerificationError(
            f"channel entry {path!r}: {key} is missing or not a short string",
            code="CHANNEL_INVALID",
        )
    return value


def _entry(path: str, target: TargetFile) -> Entry:
    """A release entry from a verified target; a malformed one is refused, not skipped."""
    custom = target.custom
    if not isinstance(custom, dict):
        raise VerificationError(
            f"channel entry {path!r} has no release fields", code="CHANNEL_INVALID"
        )
    sequence = custom.get("sequence")
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
        raise VerificationError(
            f"channel entry {path!r}: sequence is not a whole number", code="CHANNEL_INVALID"
        )
    released_at = _text(custom, "released_at", path)
    try:
        parse_timestamp(released_at)
    except ValueError as exc:
        raise VerificationError(f"channel entry {path!r}: {exc}", code="CHANNEL_INVALID") from exc
    return Entry(
        path=path,
        package=_text(custom, "package", path),
        version=_text(custom, "version", path),
        sequence=sequence,
        kit_sha256=_text(custom, "kit_sha256", path),
        released_at=released_at,
        target=target,
    )


def _releases(targets: dict[str, TargetFile], channel: str, package: str | None) -> list[Entry]:
    prefix = f"{channel}/"
    entries = [_entry(p, t) for p, t in targets.items() if p.startswith(prefix)]
    packages = sorted({e.package for e in entries})
    if package is None and len(packages) > 1:
        raise InputError(
            f"channel {channel!r} holds {len(packages)} packages ({', '.join(packages)})",
            code="CHANNEL_PACKAGE_AMBIGUOUS",
            hint="name one with --package",
        )
    chosen = [e for e in entries if package is None or e.package == package]
    if not chosen:
        raise VerificationError(
            f"channel {channel!r} lists no release of {package or 'any package'}",
            code="CHANNEL_NO_RELEASE",
            hint="check --channel and --package against what the publisher released",
        )
    return sorted(chosen, key=lambda e: e.sequence, reverse=True)


def choose(
    entries: list[Entry], version: str | None, term: Term | None
) -> tuple[Entry, list[Entry]]:
    """The release to install: ``version`` when named, else the newest (highest sequence) the
    term covers; returns it with the newer ones the term excludes. A named version out of term,
    or no release in term at all, is ``CHANNEL_OUT_OF_TERM``."""
    if version is not None:
        named = [e for e in entries if e.version == version]
        if not named:
            raise VerificationError(
                f"the channel lists no version {version!r} of {entries[0].package}",
                code="CHANNEL_NO_RELEASE",
                hint=f"versions listed: {', '.join(e.version for e in entries)}",
            )
        entries = named
    if term is not None and term.package != entries[0].package:
        raise VerificationError(
            f"the buyer receipt is for {term.package}, not {entries[0].package}",
            code="BUYER_RECEIPT_WRONG_KIT",
        )
    skipped = [
        e for e in entries if term is not None and not term.covers(parse_timestamp(e.released_at))
    ]
    allowed = [e for e in entries if e not in skipped]
    if not allowed:
        newest = entries[0]
        assert term is not None
        raise VerificationError(
            f"{newest.package} {newest.version} was released {newest.released_at}, after the "
            f"entitlement term of {term.licensee} ended {term.as_json()['ends_at']}",
            code="CHANNEL_OUT_OF_TERM",
            hint="renew the entitlement (a new buyer receipt) to receive releases after the term",
        )
    return allowed[0], skipped


def _expect(entry: Entry) -> Callable[[Report], None]:
    """The check ``install`` runs on a kit that verified, before it is moved into place: its own
    signed receipt must name the release the channel entry names."""

    def check(report: Report) -> None:
        receipt = report.facts.get("receipt")
        theirs = (entry.package, entry.version, entry.kit_sha256)
        mine = (
            receipt["kit"] if receipt else None,
            receipt["version"] if receipt else None,
            report.facts.get("kit_sha256"),
        )
        if theirs != mine:
            _mismatch(entry, theirs, mine)

    return check


def _mismatch(entry: Entry, theirs: tuple[Any, ...], mine: tuple[Any, ...]) -> None:
    if theirs != mine:
        raise VerificationError(
            f"the channel entry {entry.path} names {theirs}, the kit's receipt says {mine}",
            code="CHANNEL_TARGET_MISMATCH",
            hint="the publisher's channel and kit disagree; do not deploy it, tell the publisher",
        )


def _check_url(url: str) -> None:
    """The channel's URL, refused before any request (``CHANNEL_URL_REFUSED``): the URL itself
    is never echoed, since it may hold a password."""
    why = url_refusal(url)
    if why is not None:
        raise InputError(
            f"refusing the channel URL given with --from: {why}",
            code="CHANNEL_URL_REFUSED",
            hint="give https://HOST/PATH (plain http only to 127.0.0.1, ::1 or localhost), "
            "without user:password@",
        )


def _registry_ref(text: str) -> Any:
    """``oci://HOST/REPO`` parsed (httpx loaded only now: a plain update never imports it)."""
    from k3kit.oci.ref import parse

    return parse(text, repository_only=True)


def _from_registry(registry: str, entry: Entry, kit: Path) -> None:
    """The kit of ``entry`` from an OCI registry, by the sha256 and length of its **signed**
    TUF target: the kit's layer blob is the archive byte for byte, so that hash is its digest.
    No tag and no manifest is read (they are the registry's word); the bytes are streamed
    against the signed length and digest, then checked by python-tuf's own target check."""
    from k3kit.oci import fetch_blob_file
    from k3kit.oci.ref import DIGEST

    digest = f"sha256:{entry.target.hashes.get('sha256', '')}"
    if not DIGEST.fullmatch(digest):
        raise VerificationError(
            f"channel entry {entry.path} has no sha256 the registry can be asked by",
            code="CHANNEL_INVALID",
            hint="the publisher's channel must list each kit with its sha256 (k3kit publish does)",
        )
    fetch_blob_file(_registry_ref(registry), digest, entry.target.length, kit)
    with tuf_refusals(f"checking {entry.path} from {registry}"), kit.open("rb") as data:
        entry.target.verify_length_and_hashes(data)


def _source(request: Request, base: str, entry: Entry) -> str:
    """What the report calls the kit: where its bytes came from (the channel's target, or the
    registry and the signed digest), never the downloaded file, which is deleted on return.

    From a registry the signed digest is the kit archive's **blob**, and it is said so: written
    ``oci://HOST/REPO@sha256:…`` it read as a reference ``install oci://`` takes, which names a
    manifest (``k3kit push`` prints that one), and handed back there it was ``OCI_NOT_FOUND``.
    update reads no manifest (only the signed digest is trusted), so none is named."""
    if request.registry is None:
        return f"{entry.path} from {base}"
    blob = entry.target.hashes.get("sha256", "")
    return f"{entry.path} from {request.registry} (blob sha256:{blob})"


def update(
    request: Request,
    trusted: TrustSource,
    *,
    rollback: RollbackPolicy | None = None,
    on_progress: Progress | None = None,
) -> Updated:
    """Refresh the channel, choose a release, download it into a private staging folder inside
    ``request.into`` and install it as ``k3kit install`` does."""
    _check_url(request.url)
    if request.registry is not None:
        _registry_ref(request.registry)  # refused before any request, like the URL
    check_trust_anchor(request.channel_root, "--channel-root")
    root_bytes = read_capped(
        request.channel_root,
        MAX_METADATA_BYTES,
        what="channel root",
        error=InputError,
        code="CHANNEL_REPO_INVALID",
    )
    folder = metadata_folder(request.state_dir, root_bytes)
    base = request.url.rstrip("/")
    fetcher = _CountingFetcher(on_progress)
    with tuf_refusals(f"channel {base}"):
        updater = Updater(
            metadata_dir=str(folder),
            metadata_base_url=f"{base}/metadata/",
            target_base_url=f"{base}/targets/",
            fetcher=fetcher,
            config=UpdaterConfig(prefix_targets_with_hash=True),
            bootstrap=root_bytes,
        )
        updater.refresh()
        verified = updater._trusted_set.targets.targets  # the verified set
    # One root pins the channel and the kits: the kit is judged by the root the channel reached.
    trusted = with_channel_roots(trusted, root_bytes, folder / "root_history")
    entries = _releases(verified, request.channel, request.package)
    entry, skipped = choose(entries, request.version, request.term)
    # Downloaded into the private metadata folder: no other user can swap the file between
    # python-tuf's hash check and install's own reading of it.
    with owned_staging(folder, ".download-") as holder:
        kit = holder / entry.path.rsplit("/", 1)[1]
        fetcher.expected = entry.target.length
        admit_download(
            holder, entry.target.length, what=f"downloading {entry.path}", code="CHANNEL_INVALID"
        )
        if request.registry is None:
            with tuf_refusals(f"downloading {entry.path}"):
                updater.download_target(entry.target, str(kit))
        else:
            _from_registry(request.registry, entry, kit)
        installed = install_fetched(
            lambda _holder: kit,
            trusted,
            request.into,
            source=_source(request, base, entry),
            rollback=rollback,
            expect=_expect(entry),
        )
    return Updated(installed, entry, entries[0], skipped, request.term)
