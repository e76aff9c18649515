"""A loopback, standard-library-only stand-in for the Hugging Face Hub.

k3kit pins and pulls weights through the real ``huggingface_hub`` client, so its tests need a
server that speaks the part of the Hub protocol that huggingface_hub 2.4.0 uses for read-only work
(model info, refs, paginated tree listing, paths-info, ``/resolve`` with an LFS redirect to a CDN on
another origin) without touching the internet. The shapes follow ``shared/notes/hub.md`` §9.

Why these choices:

* Two servers: the Hub sends LFS files to a CDN on a different origin, and the client treats that
  redirect specially (it does not follow it on HEAD and drops ``Authorization``), so the storage
  server listens on a second port.
* Hashes are real (``gitobjects``): ``oid`` is the git blob sha1 (of the pointer text for LFS
  files), directories carry git tree hashes, commits are git commit hashes.
* Files given as paths are hashed once at commit time and streamed from disk on every request, so
  large weights are never held in memory. They must not change after the commit.
* Faults (``set_fault``) let tests observe how the client, and k3kit above it, reacts to corrupt
  bytes, dropped connections and error statuses. ``xetHash`` is never emitted (no Xet protocol);
  run the client with ``HF_HUB_DISABLE_XET=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import socket
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from tests.testhub.gitobjects import Blob, Commit, folder_files

_BODY_FAULTS = frozenset({"wrong_bytes", "drop", "oversized", "stall_body"})
_STATUS_FAULTS = frozenset({"5xx", "401", "404", "429"})
_OTHER_FAULTS = frozenset({"stall", "declared_oversized"})
FAULT_MODES = _BODY_FAULTS | _STATUS_FAULTS | _OTHER_FAULTS
#: How long the "stall" faults hold a request (or until the hub stops): a client's own timeout
#: must fire well before; tests use it as a structural margin instead of a wall-clock figure.
STALL_S = 120
OVERSIZE = 2**30  # what "oversized" sends (or "declared_oversized" declares) instead of the file
_INVERT = bytes(range(255, -1, -1))  # wrong_bytes: same length, every byte different
_SHA_LIKE = re.compile(r"[0-9a-f]{7,40}")
_SECURITY = {
    "status": "safe",
    "avScan": {"virusFound": False, "virusNames": None},
    "pickleImportScan": None,
}


@dataclass(frozen=True)
class RequestRecord:
    """One answered request. ``path`` is raw (still URL-encoded), without the query string.

    ``auth`` tells whether an ``Authorization`` header came with it (it must not reach storage).
    """

    server: str  # "api" or "storage"
    method: str
    path: str
    query: str
    status: int
    range: str | None
    auth: bool


@dataclass
class _Repo:
    private_token: str | None = None
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def resolve(self, rev: str) -> Commit | None:
        """Branch, tag, ``refs/heads/x``, ``refs/tags/x``, full sha or unique prefix (>= 7 hex)."""
        for prefix, table in (("refs/heads/", self.branches), ("refs/tags/", self.tags)):
            if rev.startswith(prefix):
                sha = table.get(rev.removeprefix(prefix))
                return None if sha is None else self.commits[sha]
        sha = self.branches.get(rev) or self.tags.get(rev)
        if sha is None and _SHA_LIKE.fullmatch(rev):
            found = [s for s in self.commits if s.startswith(rev)]
            sha = found[0] if len(found) == 1 else None
        return None if sha is None else self.commits[sha]


@dataclass
class _Fault:
    mode: str
    path: str | None
    times: int | None
    server: str | None


class TestHub:
    """Loopback Hub (API server + storage/CDN server), usable as a context manager.

    ``commit`` and ``set_fault`` may be called before or while the hub runs. ``requests`` logs
    every answered request in order (appended before the answer is sent, so a client that got
    its answer always finds the record). ``errors`` collects tracebacks of server bugs: tests
    should expect it to stay empty.
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self, page_size: int = 1000, lfs_redirect: bool = True, rate_limit: int | None = None
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        if rate_limit is not None and rate_limit < 1:
            raise ValueError("rate_limit must be >= 1 byte/s")
        self.page_size = page_size
        self.lfs_redirect = lfs_redirect
        # Bytes/s per connection for file bodies served from disk: a stand-in for a network
        # link, so benchmarks can measure a download that is bound by bandwidth, not by CPU.
        self.rate_limit = rate_limit
        self.requests: list[RequestRecord] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._repos: dict[str, _Repo] = {}
        self._blobs: dict[str, Blob] = {}  # sha256 -> blob: what the storage server serves
        self._paths: dict[str, set[str]] = {}  # sha256 -> repo paths, for path-bound faults
        self._fault: _Fault | None = None
        self._servers: list[_Server] = []
        self.stopping = threading.Event()  # releases handlers held by the stall faults
        self.oversized_sent = 0  # body bytes the "oversized" fault got out before the client left

    @property
    def url(self) -> str:
        """Base URL of the API server, e.g. ``http://127.0.0.1:PORT`` (pass as ``endpoint=``)."""
        return self._base(0)

    @property
    def storage_url(self) -> str:
        """Base URL of the storage (CDN) server that LFS redirects point to."""
        return self._base(1)

    def open_connections(self) -> int:
        """Connections a handler still serves (both servers); 0 once every handler has finished,
        so what they would report (``errors``) is complete: a test waits for this, not a sleep."""
        return sum(len(srv.connections) for srv in list(self._servers))

    def _base(self, index: int) -> str:
        if not self._servers:
            raise RuntimeError("TestHub is not started")
        return f"http://127.0.0.1:{self._servers[index].server_port}"

    def add_repo(self, repo_id: str, *, private_token: str | None = None) -> None:
        """Create an empty repo; with ``private_token`` only ``Bearer <token>`` may read it."""
        with self._lock:
            if repo_id in self._repos:
                raise ValueError(f"repo {repo_id} already exists")
            self._repos[repo_id] = _Repo(private_token)

    def commit(
        self,
        repo_id: str,
        files: Mapping[str, bytes | Path],
        *,
        branch: str = "main",
        tag: str | None = None,
        message: str = "",
        sha: str | None = None,
    ) -> str:
        """Make ``files`` (a full snapshot) the new head of ``branch``; return the commit sha.

        The repo is created (public) if needed. The sha is a git commit hash over the tree, the
        parent (the branch's previous head) and a timestamp derived from the repo's commit count,
        so the same sequence of commits always yields the same shas. ``tag`` (re)points a tag.
        ``sha`` serves the snapshot under that commit id instead (``scripts/dev_hub.py`` serves a
        lock's files at the commit the lock pins, whatever tool made that id).
        """
        if sha is not None and not re.fullmatch(r"[0-9a-f]{40}", sha):
            raise ValueError("sha must be 40 lowercase hex digits")
        if _SHA_LIKE.fullmatch(branch) or _SHA_LIKE.fullmatch(tag or ""):
            raise ValueError("branch and tag names must not look like commit shas")
        blobs = {p: Blob.create(p, src) for p, src in sorted(files.items())}  # slow: outside lock
        with self._lock:
            repo = self._repos.get(repo_id) or _Repo()
            n = len(repo.commits)
            commit = Commit.create(
                blobs,
                repo.branches.get(branch),
                message or f"Commit {n + 1}",
                stamp=1_700_000_000 + n,
            )  # raises on bad paths: no change yet
            if sha is not None:
                commit = dataclasses.replace(commit, sha=sha)
            sha = commit.sha
            self._repos[repo_id] = repo
            repo.commits[sha] = commit
            repo.branches[branch] = sha
            if tag:
                repo.tags[tag] = sha
            for path, blob in blobs.items():
                if blob.lfs:
                    self._blobs.setdefault(blob.sha256, blob)
                    self._paths.setdefault(blob.sha256, set()).add(path)
        return sha

    def set_fault(
        self,
        mode: str | None,
        *,
        path: str | None = None,
        times: int | None = None,
        server: str | None = None,
    ) -> None:
        """Inject one fault (replacing any previous one); ``None`` clears it.

        ``wrong_bytes`` (every byte inverted, same length) and ``drop`` (full headers, half the
        requested bytes, then the connection is closed) act on file bodies: GET ``/resolve``
        answered 200/206 and storage GET. The status modes answer any matching request instead:
        ``5xx`` = 503; ``401`` with ``X-Error-Code: RepoNotFound`` (the Hub's answer without a
        token); ``404`` with ``EntryNotFound`` on ``/resolve``, ``RepoNotFound`` on other API
        routes, no code on storage; ``429`` with ``Retry-After: 0``.
        ``oversized``: a body of 1 GiB (no Content-Length, then the connection closes) for the
        file; ``declared_oversized``: ``/resolve`` declares 1 GiB (X-Linked-Size / Content-Length);
        ``stall``: the request is accepted and never answered (until the hub stops);
        ``stall_body``: headers and the first 64 KiB, then nothing.
        ``path`` restricts the fault to one repo file (its ``/resolve`` and storage requests),
        ``server`` to ``"api"`` or ``"storage"``; ``times`` is how many requests it hits before
        clearing itself (``None`` = until cleared).
        """
        if mode is not None and mode not in FAULT_MODES:
            raise ValueError(f"unknown fault mode {mode!r}; expected one of {sorted(FAULT_MODES)}")
        if server not in (None, "api", "storage"):
            raise ValueError("server must be None, 'api' or 'storage'")
        with self._lock:
            self._fault = None if mode is None else _Fault(mode, path, times, server)

    def _take_fault(self, server: str, paths: set[str] | None, modes: frozenset[str]) -> str | None:
        """Return the fault mode that hits this request, if any, and count it down."""
        with self._lock:
            f = self._fault
            if f is None or f.mode not in modes or f.server not in (None, server):
                return None
            if f.path is not None and (paths is None or f.path not in paths):
                return None
            if f.times is not None:
                f.times -= 1
                if f.times <= 0:
                    self._fault = None
            return f.mode

    def reset_log(self) -> None:
        """Forget the requests logged so far."""
        with self._lock:
            self.requests.clear()

    def start(self) -> TestHub:
        """Bind both servers to free ports on 127.0.0.1 and serve them from daemon threads."""
        if not self._servers:
            self._servers = [_Server(self, "api"), _Server(self, "storage")]
            for srv in self._servers:
                threading.Thread(
                    target=srv.serve_forever,
                    kwargs={"poll_interval": 0.05},
                    name=f"testhub-{srv.role}",
                    daemon=True,
                ).start()
        return self

    def stop(self) -> None:
        """Stop serving and cut open keep-alive connections.

        Cutting matters: the client pools connections process-wide, and a pooled connection to a
        stopped hub must not keep reaching its old handler thread.
        """
        self.stopping.set()
        for srv in self._servers:
            srv.shutdown()
            srv.server_close()
            srv.close_connections()
        self._servers = []

    def __enter__(self) -> TestHub:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, hub: TestHub, role: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hub, self.role = hub, role
        self.connections: set[socket.socket] = set()

    def close_connections(self) -> None:
        for conn in list(self.connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up mid-answer are normal; anything else is a hub bug worth keeping."""
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            self.hub.errors.append(traceback.format_exc())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client expects; every answer has a length
    disable_nagle_algorithm = True  # headers and body go out in two writes: avoid 40 ms stalls
    timeout = 60
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.connections.add(self.connection)
        self._status: int | None = None

    def finish(self) -> None:
        self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log lives in ``TestHub.requests``."""

    def send_response(self, code: int, message: str | None = None) -> None:
        split = urlsplit(getattr(self, "path", ""))
        headers = getattr(self, "headers", None)  # absent when the request line was malformed
        record = RequestRecord(
            self.server.role,
            getattr(self, "command", ""),
            split.path,
            split.query,
            code,
            headers.get("Range") if headers else None,
            bool(headers and "Authorization" in headers),
        )
        with self.server.hub._lock:
            self.server.hub.requests.append(record)
        self._status = code
        super().send_response(code, message)

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        self._status = None
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        split = urlsplit(self.path)
        parts = [unquote(p) for p in split.path.split("/")[1:]]  # split first: keeps %2F in revs
        if self.server.hub._take_fault(self.server.role, None, frozenset({"stall"})):
            self.server.hub.stopping.wait(STALL_S)  # accepted, never answered
            self.close_connection = True
            return
        try:
            if self.server.role == "storage":
                self._storage(parts)
            else:
                self._api(parts, parse_qs(split.query), parse_qs(body.decode()))
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        except Exception:
            self.server.hub.errors.append(traceback.format_exc())
            if self._status is None:
                self._error(500, None, "internal test hub error")
            self.close_connection = True

    def _api(
        self, parts: list[str], query: dict[str, list[str]], form: dict[str, list[str]]
    ) -> None:
        hub = self.server.hub
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo_id, rest, file_path = f"{parts[2]}/{parts[3]}", parts[4:], None
        elif len(parts) >= 5 and parts[2] == "resolve":
            repo_id, rest, file_path = f"{parts[0]}/{parts[1]}", parts[2:], "/".join(parts[4:])
        else:
            return self._error(404, None, "no such route on the test hub")
        if fault := hub._take_fault(
            "api", None if file_path is None else {file_path}, _STATUS_FAULTS
        ):
            return self._fault_status(fault, "EntryNotFound" if file_path else "RepoNotFound")
        rev = "main"
        if rest and rest[0] in ("revision", "paths-info"):
            rev = "/".join(rest[1:])
        elif rest and rest[0] in ("tree", "resolve") and len(rest) >= 2:
            rev = rest[1]
        elif rest and rest != ["refs"]:
            return self._error(404, None, "no such route on the test hub")
        with hub._lock:  # look up under the lock, answer outside it (send_response takes it)
            repo = hub._repos.get(repo_id)
            token = None if repo is None else repo.private_token
            refs = self._refs(repo, "include_prs" in query) if repo and rest == ["refs"] else {}
            commit = None if repo is None or rest == ["refs"] else repo.resolve(rev)
        if repo is None:
            return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
        if token is not None and self.headers.get("Authorization") is None:
            return self._error(401, "RepoNotFound", "Invalid username or password.")
        if token is not None and self.headers.get("Authorization") != f"Bearer {token}":
            return self._error(403, None, "Your token has no access to this repository")
        if rest == ["refs"]:
            return self._json(refs)
        if commit is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        if file_path is not None:
            return self._resolve(commit, file_path)
        expand = _flag(query, "expand") or _flag(form, "expand")
        if not rest or rest[0] == "revision":
            return self._json(self._info(repo_id, commit, token is not None, _flag(query, "blobs")))
        if rest[0] == "paths-info" and self.command == "POST":
            wanted = dict.fromkeys(form.get("paths", []))
            return self._json(
                [
                    _entry(commit, p, expand)
                    for p in wanted
                    if p in commit.files or (p and p in commit.trees)
                ]
            )
        if rest[0] == "tree":
            return self._tree(commit, "/".join(rest[2:]), _flag(query, "recursive"), expand, query)
        return self._error(404, None, "no such route on the test hub")

    def _refs(self, repo: _Repo, include_prs: bool) -> dict[str, Any]:
        def refs(table: dict[str, str], kind: str) -> list[dict[str, str]]:
            return [
                {"name": n, "ref": f"refs/{kind}/{n}", "targetCommit": s}
                for n, s in sorted(table.items())
            ]

        out = {
            "branches": refs(repo.branches, "heads"),
            "converts": [],
            "tags": refs(repo.tags, "tags"),
        }
        return out | ({"pullRequests": []} if include_prs else {})

    def _info(self, repo_id: str, commit: Commit, private: bool, blobs: bool) -> dict[str, Any]:
        siblings: list[dict[str, Any]] = []
        for path, blob in sorted(commit.files.items()):
            sibling: dict[str, Any] = {"rfilename": path}
            if blobs:
                sibling |= {"size": blob.size, "blobId": blob.oid}
                if blob.lfs:
                    sibling["lfs"] = {
                        "sha256": blob.sha256,
                        "size": blob.size,
                        "pointerSize": blob.pointer_size,
                    }
            siblings.append(sibling)
        return {
            "_id": repo_id,
            "id": repo_id,
            "modelId": repo_id,
            "author": repo_id.split("/")[0],
            "sha": commit.sha,
            "lastModified": commit.date,
            "private": private,
            "disabled": False,
            "gated": False,
            "tags": [],
            "siblings": siblings,
        }

    def _tree(
        self, commit: Commit, base: str, recursive: bool, expand: bool, query: dict[str, list[str]]
    ) -> None:
        """Cursor pagination as on the Hub: ``Link: <next url>; rel="next"`` repeats the query."""
        if base and base not in commit.trees:
            return self._error(
                404, "EntryNotFound", f"{base} does not exist", {"X-Repo-Commit": commit.sha}
            )
        prefix = f"{base}/" if base else ""
        names = sorted(
            p
            for p in (*commit.trees, *commit.files)
            if p.startswith(prefix) and p != base and (recursive or "/" not in p[len(prefix) :])
        )
        cursor = query.get("cursor", ["0"])[0]
        if not cursor.isdigit():
            return self._error(400, None, "bad cursor")
        start, size = int(cursor), min(self.server.hub.page_size, 50 if expand else 1000)
        headers = {}
        if start + size < len(names):
            params = {k: v for k, v in query.items() if k != "cursor"}
            params["cursor"] = [str(start + size)]
            next_url = f"{self.server.hub.url}{urlsplit(self.path).path}?{urlencode(params, True)}"
            headers["Link"] = f'<{next_url}>; rel="next"'
        self._json([_entry(commit, p, expand) for p in names[start : start + size]], headers)

    def _resolve(self, commit: Commit, path: str) -> None:
        blob = commit.files.get(path)
        headers = {"X-Repo-Commit": commit.sha}
        if blob is None:
            return self._error(404, "EntryNotFound", f"{path} does not exist", headers)
        if blob.lfs and self.server.hub.lfs_redirect:
            big = self.server.hub._take_fault("api", {path}, frozenset({"declared_oversized"}))
            headers |= {
                "Location": f"{self.server.hub.storage_url}/lfs/{blob.sha256}",
                "X-Linked-Etag": f'"{blob.sha256}"',
                "X-Linked-Size": str(OVERSIZE if big else blob.size),
            }
            return self._send(302, b"", headers)
        self._content(blob, blob.sha256 if blob.lfs else blob.oid, {path}, headers)

    def _storage(self, parts: list[str]) -> None:
        hub = self.server.hub
        sha = parts[1] if len(parts) == 2 and parts[0] == "lfs" else ""
        with hub._lock:
            blob, paths = hub._blobs.get(sha), set(hub._paths.get(sha, ()))
        if fault := hub._take_fault("storage", paths, _STATUS_FAULTS):
            return self._fault_status(fault, None)
        if blob is None or self.command not in ("GET", "HEAD"):
            return self._error(404, None, "no such object")
        self._content(blob, sha, paths, {})

    def _content(self, blob: Blob, etag: str, paths: set[str], headers: dict[str, str]) -> None:
        """Serve a file body with Range support, applying ``wrong_bytes``/``drop`` on GET."""
        span = _parse_range(self.headers.get("Range"), blob.size)
        if span is None:
            return self._error(
                416, None, "range not satisfiable", {"Content-Range": f"bytes */{blob.size}"}
            )
        start, end, status = span
        headers |= {
            "ETag": f'"{etag}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
            "Content-Length": str(end - start),
        }
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{blob.size}"
        fault = None
        if self.command == "GET":
            fault = self.server.hub._take_fault(self.server.role, paths, _BODY_FAULTS)
        if fault == "oversized":
            return self._oversized(blob, headers)
        self._send(status, None, headers)
        if self.command != "GET":
            return
        if fault is None and isinstance(blob.source, Path) and end > start:
            with blob.source.open("rb") as f:  # zero-copy: keeps multi-GB benchmarks CPU-light
                if self.server.hub.rate_limit is None:
                    self.connection.sendfile(f, start, end - start)
                else:
                    _paced_sendfile(self.connection, f, start, end, self.server.hub.rate_limit)
            return
        if fault == "stall_body":
            self.wfile.write(next(blob.chunks(start, min(end, start + 65536)), b""))
            self.wfile.flush()
            self.server.hub.stopping.wait(STALL_S)
            self.close_connection = True
            return
        stop = start + (end - start) // 2 if fault == "drop" else end
        for chunk in blob.chunks(start, stop):
            self.wfile.write(chunk.translate(_INVERT) if fault == "wrong_bytes" else chunk)
        if fault == "drop":  # the client sees a body shorter than Content-Length
            self.close_connection = True

    def _oversized(self, blob: Blob, headers: dict[str, str]) -> None:
        """Answer with 1 GiB where the file belongs: no length, the end is the connection's."""
        headers = {k: v for k, v in headers.items() if k != "Content-Length"}
        self._send(200, None, headers | {"Connection": "close"})
        self.close_connection = True
        piece = (next(blob.chunks(0, blob.size), b"") or b"\0") * 16
        piece = (piece * (2**20 // len(piece) + 1))[: 2**20]
        hub = self.server.hub
        while hub.oversized_sent < OVERSIZE and not hub.stopping.is_set():
            self.wfile.write(piece)
            with hub._lock:
                hub.oversized_sent += len(piece)

    def _fault_status(self, mode: str, not_found_code: str | None) -> None:
        if mode == "404":
            return self._error(404, not_found_code, "Not found (test hub fault)")
        if mode == "401":
            return self._error(401, "RepoNotFound", "Invalid username or password.")
        if mode == "429":
            return self._error(429, None, "Too Many Requests (fault)", {"Retry-After": "0"})
        return self._error(503, None, "Service Unavailable (test hub fault)")

    def _error(
        self, status: int, code: str | None, message: str, headers: dict[str, str] | None = None
    ) -> None:
        extra = {"X-Error-Message": message} | ({"X-Error-Code": code} if code else {})
        self._send(status, json.dumps({"error": message}).encode(), extra | (headers or {}))

    def _json(self, obj: object, headers: dict[str, str] | None = None) -> None:
        self._send(
            200,
            json.dumps(obj).encode(),
            {"Content-Type": "application/json; charset=utf-8"} | (headers or {}),
        )

    def _send(self, status: int, body: bytes | None, headers: dict[str, str]) -> None:
        """Send status and headers, then ``body`` unless it is None (caller streams) or HEAD."""
        self.send_response(status)
        if body is not None:
            headers = {"Content-Length": str(len(body))} | headers
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)


def _paced_sendfile(conn: socket.socket, f: Any, start: int, end: int, rate: int) -> None:
    """Send bytes ``[start, end)`` of ``f`` at about ``rate`` bytes/s (in 50 ms slices)."""
    chunk = max(64 * 1024, rate // 20)
    began = time.monotonic()
    offset = start
    while offset < end:
        n = min(chunk, end - offset)
        conn.sendfile(f, offset, n)
        offset += n
        ahead = (offset - start) / rate - (time.monotonic() - began)
        if ahead > 0:
            time.sleep(ahead)


def _flag(params: dict[str, list[str]], name: str) -> bool:
    return params.get(name, ["false"])[-1].lower() in ("1", "true")


def _entry(commit: Commit, path: str, expand: bool) -> dict[str, Any]:
    """A tree / paths-info entry. ``lastCommit`` is the served commit, not a history walk."""
    blob = commit.files.get(path)
    entry: dict[str, Any]
    if blob is None:
        entry = {"type": "directory", "oid": commit.trees[path], "size": 0, "path": path}
    else:
        entry = {"type": "file", "oid": blob.oid, "size": blob.size, "path": path}
        if blob.lfs:
            entry["lfs"] = {"oid": blob.sha256, "size": blob.size, "pointerSize": blob.pointer_size}
    if expand:
        entry["lastCommit"] = {"id": commit.sha, "title": commit.title, "date": commit.date}
        if blob is not None:
            entry["securityFileStatus"] = _SECURITY
    return entry


def _parse_range(value: str | None, size: int) -> tuple[int, int, int] | None:
    """``(start, end, status)`` for one ``bytes=`` range; None = 416; anything odd = whole file."""
    m = re.fullmatch(r"bytes=(\d*)-(\d*)", (value or "").strip())
    if m is None or m[1] == m[2] == "":
        return 0, size, 200
    if m[1] == "":  # suffix range: the last N bytes
        n = int(m[2])
        return (max(size - n, 0), size, 206) if n > 0 and size > 0 else None
    start = int(m[1])
    if m[2] and int(m[2]) < start:
        return 0, size, 200
    end = min(int(m[2]) + 1, size) if m[2] else size
    return (start, end, 206) if start < size else None


def main(argv: list[str] | None = None) -> int:
    """Serve folders as repos until Ctrl-C; prints the URL first, then ``repo branch sha``."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.testhub.server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--repo", action="append", required=True, metavar="ORG/NAME=FOLDER")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument("--no-redirect", action="store_true", help="serve LFS files with 200")
    parser.add_argument(
        "--rate-mib",
        type=float,
        metavar="MIB_PER_S",
        help="pace file bodies read from disk to this many MiB/s per connection",
    )
    args = parser.parse_args(argv)
    rate = None if args.rate_mib is None else max(1, int(args.rate_mib * 2**20))
    hub = TestHub(page_size=args.page_size, lfs_redirect=not args.no_redirect, rate_limit=rate)
    shas = []
    for spec in args.repo:
        repo_id, sep, folder = spec.partition("=")
        if not sep or repo_id.count("/") != 1 or not Path(folder).is_dir():
            parser.error(f"--repo wants ORG/NAME=FOLDER with an existing folder, got {spec!r}")
        shas.append((repo_id, hub.commit(repo_id, folder_files(Path(folder)), branch=args.branch)))
    with hub:
        print(hub.url, flush=True)
        for repo_id, sha in shas:
            print(f"{repo_id} {args.branch} {sha}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
