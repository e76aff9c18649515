"""`k3kit pin ORG/NAME`: real huggingface_hub client, real loopback hub, real bytes."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from k3kit.errors import EnvironmentProblem, InputError
from k3kit.hub import HfHub, HubFile
from k3kit.models import PinSource
from k3kit.weights.pin import git_blob_sha1, pin_hub, select
from tests.conftest import FIXED_TIME, run_k3kit
from tests.hubkit import REPO, SHARD, SHARD2, NoSleep, files_v1, invoke, serve, sha256, skip_sleeps
from tests.testhub.server import TestHub

TOKEN = "hf_k3kitTestTokenThatMustNeverLeak0123"


@pytest.fixture
def hub() -> Iterator[TestHub]:
    yield from serve()


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> NoSleep:
    return skip_sleeps(monkeypatch)


def read_lock(path: Path) -> dict[str, Any]:
    lock: dict[str, Any] = json.loads(path.read_bytes())
    return lock


def test_pin_branch_resolves_to_commit_with_served_sha256(hub: TestHub, tmp_path: Path) -> None:
    files = files_v1()
    old = hub.commit(REPO, files, tag="v1")
    files2 = {**files, "model-00002-of-00002.safetensors": SHARD[:1000]}
    new = hub.commit(REPO, files2)  # main moved on; the tag stayed
    out = tmp_path / "lock.json"
    proc = run_k3kit("pin", REPO, "--revision", "main", "--endpoint", hub.url, "-o", out)
    assert proc.returncode == 0, proc.stderr
    lock = read_lock(out)
    assert lock["commit"] == new != old
    assert lock["source"] == {
        "kind": "hub",
        "endpoint": hub.url,
        "requested_revision": "main",
        "pinned_at": lock["source"]["pinned_at"],
        "sha256_source": "hub-lfs",
        "include": [],
        "exclude": [],
    }
    got = {f["path"]: f for f in lock["files"]}
    assert set(got) == set(files2)
    for path, data in files2.items():
        assert got[path]["sha256"] == sha256(data), path
        assert got[path]["size"] == len(data)
        assert got[path]["lfs"] is path.endswith(".safetensors")
        if not got[path]["lfs"]:
            assert got[path]["git_blob_sha1"] == git_blob_sha1(data)
        assert "blake3" not in got[path]  # nothing was hashed locally
    # the tag still names the old content; a short sha resolves too
    for rev in ("v1", old[:10]):
        proc = run_k3kit(
            "pin",
            REPO,
            "--revision",
            rev,
            "--endpoint",
            hub.url,
            "-o",
            tmp_path / f"{rev}.json",
            "--json",
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["commit"] == old
        shard = {f["path"]: f for f in read_lock(tmp_path / f"{rev}.json")["files"]}
        assert shard["model-00002-of-00002.safetensors"]["sha256"] == sha256(SHARD2)


def test_pin_96_files_bounded_requests_and_no_lfs_bytes(tmp_path: Path) -> None:
    shards = {
        f"model-{i:05d}-of-00090.safetensors": i.to_bytes(4, "big") * 64 for i in range(1, 91)
    }
    small = {
        "config.json": b"{}\n",
        "generation_config.json": b'{"do_sample": true}\n',
        "tokenizer_config.json": b"{}\n",
        "chat_template.jinja": b"{{ messages }}\n",
        "model.safetensors.index.json": b'{"weight_map": {}}\n',
        "README.md": b"# K3\n",
    }
    page = 25
    with TestHub(page_size=page) as paged:
        paged.commit(REPO, {**shards, **small})
        paged.reset_log()
        out = tmp_path / "lock.json"
        proc = run_k3kit("pin", REPO, "--revision", "main", "--endpoint", paged.url, "-o", out)
        assert proc.returncode == 0, proc.stderr
        requests = list(paged.requests)
    lock = read_lock(out)
    assert lock["file_count"] == 96
    pages = math.ceil(96 / page)  # no folders in this repo: 96 entries
    tree_calls = [r for r in requests if "/tree/" in r.path]
    assert len(tree_calls) == pages
    # 1 resolve + the tree pages + one GET per small file, nothing else
    assert len(requests) == 1 + pages + len(small), [(r.method, r.path) for r in requests]
    assert not [r for r in requests if r.server == "storage"]  # zero LFS bytes
    fetched = {r.path.rsplit("/", 1)[-1] for r in requests if "/resolve/" in r.path}
    assert fetched == set(small)
    assert all(r.method == "GET" for r in requests)


def test_pin_include_exclude(hub: TestHub, tmp_path: Path) -> None:
    hub.commit(REPO, files_v1())
    out = tmp_path / "lock.json"
    proc = run_k3kit(
        "pin",
        REPO,
        "--revision",
        "main",
        "--endpoint",
        hub.url,
        "-o",
        out,
        "--include",
        "*.safetensors",
        "--include",
        "*.json",
        "--exclude",
        "extra/",
    )
    assert proc.returncode == 0, proc.stderr
    lock = read_lock(out)
    assert [f["path"] for f in lock["files"]] == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "tokenizer_config.json",
    ]
    assert lock["source"]["include"] == ["*.safetensors", "*.json"]
    assert lock["source"]["exclude"] == ["extra/"]
    proc = run_k3kit(
        "pin",
        REPO,
        "--revision",
        "main",
        "--endpoint",
        hub.url,
        "-o",
        tmp_path / "none.json",
        "--include",
        "*.gguf",
    )
    assert proc.returncode == 3
    assert "--include '*.gguf' matches no file" in proc.stderr
    assert not (tmp_path / "none.json").exists()


def test_select_patterns() -> None:
    paths = ["a.json", "sub/b.json", "sub/c.bin", "d.bin"]
    assert select(paths, [], ["sub/"]) == ["a.json", "d.bin"]
    assert select(paths, ["*.json"], []) == ["a.json", "sub/b.json"]
    with pytest.raises(InputError):
        select(paths, [], ["*"])


def test_pin_hash_local_checks_and_adds_blake3(hub: TestHub, tmp_path: Path) -> None:
    files = files_v1()
    hub.commit(REPO, files)
    local = tmp_path / "local"
    for path, data in files.items():
        (local / path).parent.mkdir(parents=True, exist_ok=True)
        (local / path).write_bytes(data)
    out = tmp_path / "lock.json"
    proc = run_k3kit(
        "pin", REPO, "--revision", "main", "--endpoint", hub.url, "--hash-local", local, "-o", out
    )
    assert proc.returncode == 0, proc.stderr
    lock = read_lock(out)
    assert lock["source"]["sha256_source"] == "hub-lfs+local-hash"
    assert all(len(f["blake3"]) == 64 for f in lock["files"])
    # one changed byte in the local copy: the hub's sha256 is not confirmed -> exit 1
    shard = local / "model-00001-of-00002.safetensors"
    shard.write_bytes(b"\xff" + shard.read_bytes()[1:])
    proc = run_k3kit(
        "pin",
        REPO,
        "--revision",
        "main",
        "--endpoint",
        hub.url,
        "--hash-local",
        local,
        "-o",
        tmp_path / "bad.json",
    )
    assert proc.returncode == 1
    assert "disagrees with the hub's sha256" in proc.stderr
    assert "model-00001-of-00002.safetensors" in proc.stderr
    # a local file the revision does not have: not a copy of it -> exit 3
    shutil.copy(local / "config.json", local / "stray.json")
    shard.write_bytes(SHARD)
    proc = run_k3kit(
        "pin",
        REPO,
        "--revision",
        "main",
        "--endpoint",
        hub.url,
        "--hash-local",
        local,
        "-o",
        tmp_path / "stray.json",
    )
    assert proc.returncode == 3 and "stray.json: not a file of" in proc.stderr


def test_pin_errors_exit_4_with_cause(hub: TestHub, tmp_path: Path) -> None:
    hub.commit(REPO, files_v1())
    cases = [
        (["org/absent"], "HUB_REPO_NOT_FOUND", "repository org/absent not found"),
        (
            [REPO, "--revision", "no-such-branch"],
            "HUB_REVISION_NOT_FOUND",
            "revision 'no-such-branch' not found",
        ),
    ]
    for args, _code, text in cases:
        rev = [] if "--revision" in args else ["--revision", "main"]
        proc = run_k3kit("pin", *args, *rev, "--endpoint", hub.url, "-o", tmp_path / "x.json")
        assert proc.returncode == 4, proc.stderr
        assert text in proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "x.json").exists()


def test_pin_bad_input_exit_3(hub: TestHub, tmp_path: Path) -> None:
    for args, text in [
        (["not-a-repo", "--revision", "main", "--endpoint", hub.url], "not a repo id"),
        (
            [REPO, "--revision", "main", "--endpoint", "http://user:secret@127.0.0.1:1"],
            "--endpoint must be an http(s) URL without credentials",
        ),
        (
            [REPO, "--revision", "main", "--endpoint", hub.url, "--token-env", "K3KIT_UNSET_VAR"],
            "--token-env K3KIT_UNSET_VAR: the variable is not set",
        ),
    ]:
        proc = run_k3kit("pin", *args, "-o", tmp_path / "x.json")
        assert proc.returncode == 3, proc.stderr
        assert text in proc.stderr
    proc = run_k3kit(
        "pin",
        REPO,
        "--local",
        tmp_path,
        "--revision",
        "0" * 40,
        "--hash-local",
        tmp_path,
        "-o",
        tmp_path / "x.json",
    )
    assert proc.returncode == 2 and "--local pins a local copy" in proc.stderr


def test_pin_unreachable_and_rate_limited_exit_4(no_sleep: NoSleep, tmp_path: Path) -> None:
    with TestHub() as dead:
        url = dead.url
    result = invoke("pin", REPO, "--revision", "main", "--endpoint", url, "-o", tmp_path / "x")
    assert result.exit_code == 4 and f"cannot reach {url}" in result.stderr
    with TestHub() as limited:
        limited.commit(REPO, files_v1())
        limited.set_fault("429", server="api")
        result = invoke(
            "pin", REPO, "--revision", "main", "--endpoint", limited.url, "-o", tmp_path / "x"
        )
        assert result.exit_code == 4
        assert "rate-limiting requests (HTTP 429)" in result.stderr
        assert "after 3 attempts" in result.stderr and "hint: wait" in result.stderr
        assert no_sleep.sleeps[:2] == [2.0, 4.0]  # k3kit's own backoff between attempts
        # a short burst is absorbed by the retries
        limited.set_fault("429", server="api", times=2)
        result = invoke(
            "pin", REPO, "--revision", "main", "--endpoint", limited.url, "-o", tmp_path / "y"
        )
        assert result.exit_code == 0, result.stderr


def test_pin_small_file_with_wrong_bytes_is_refused(hub: TestHub, tmp_path: Path) -> None:
    hub.commit(REPO, files_v1())
    hub.set_fault("wrong_bytes", path="config.json")
    proc = run_k3kit(
        "pin", REPO, "--revision", "main", "--endpoint", hub.url, "-o", tmp_path / "x.json"
    )
    assert proc.returncode == 4
    assert "config.json: the hub served" in proc.stderr and "its listing says" in proc.stderr


def test_token_is_used_but_never_shown_or_stored(hub: TestHub, tmp_path: Path) -> None:
    hub.add_repo(REPO, private_token=TOKEN)
    hub.commit(REPO, files_v1())
    env = {"K3KIT_TEST_TOKEN": TOKEN, "K3KIT_WRONG_TOKEN": "hf_wrong" + TOKEN[::-1]}
    no_token = run_k3kit(
        "pin", REPO, "--revision", "main", "--endpoint", hub.url, "-o", tmp_path / "a.json"
    )
    assert no_token.returncode == 4 and "--token-env" in no_token.stderr
    wrong = run_k3kit(
        "pin",
        REPO,
        "--revision",
        "main",
        "--endpoint",
        hub.url,
        "--token-env",
        "K3KIT_WRONG_TOKEN",
        "-o",
        tmp_path / "b.json",
        env=env,
    )
    assert wrong.returncode == 4 and "refused access" in wrong.stderr
    assert "--token-env" in wrong.stderr
    good = run_k3kit(
        "--debug",
        "pin",
        REPO,
        "--revision",
        "main",
        "--endpoint",
        hub.url,
        "--token-env",
        "K3KIT_TEST_TOKEN",
        "-o",
        tmp_path / "c.json",
        "--json",
        env=env,
    )
    assert good.returncode == 0, good.stderr
    for proc in (no_token, wrong, good):
        for secret in env.values():
            assert secret not in proc.stdout + proc.stderr
    assert TOKEN not in (tmp_path / "c.json").read_text()
    assert "Bearer" not in (tmp_path / "c.json").read_text()
    api = [r for r in hub.requests if r.server == "api"]
    assert api and all(r.auth for r in api[-3:])


def test_hub_masks_a_token_echoed_by_the_server() -> None:
    """A hostile server could put the token in its error text; the message must not carry it."""
    client = HfHub("http://127.0.0.1:9", TOKEN, attempts=1)
    assert TOKEN not in repr(client)

    def echo() -> None:
        raise EnvironmentProblem(
            f"server said: bad token {TOKEN}", code="HUB_AUTH", hint=f"Bearer {TOKEN}"
        )

    with pytest.raises(EnvironmentProblem) as info:
        client._retrying(echo, repo=REPO, revision="main")
    assert TOKEN not in info.value.message and TOKEN not in (info.value.hint or "")
    assert "***" in info.value.message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_pin_source_is_strict() -> None:
    base: dict[str, Any] = {"requested_revision": "main", "pinned_at": FIXED_TIME}
    PinSource(kind="hub", endpoint="https://huggingface.co", sha256_source="hub-lfs", **base)
    bads: list[dict[str, Any]] = [
        {"kind": "hub", "sha256_source": "hub-lfs"},  # no endpoint
        {"kind": "hub", "endpoint": "https://u:p@hf.co", "sha256_source": "hub-lfs"},
        {"kind": "hub", "endpoint": "https://hf.co/?token=x", "sha256_source": "hub-lfs"},
        {"kind": "local", "endpoint": "https://hf.co", "sha256_source": "local-hash"},
        {"kind": "local", "sha256_source": "hub-lfs"},
    ]
    for bad in bads:
        with pytest.raises(ValueError):
            PinSource(**base, **bad)


def test_pin_hub_in_process_records_xet_only_when_real(hub: TestHub) -> None:
    """The lock keeps a 64-hex xet hash and drops a redacted one (gated repos send ****)."""

    class Listing:
        endpoint = hub.url

        def __init__(self) -> None:
            self.real = HfHub(hub.url)

        def resolve(self, repo: str, revision: str) -> str:
            return self.real.resolve(repo, revision)

        def list_files(self, repo: str, commit: str) -> list[HubFile]:
            from dataclasses import replace

            out: list[HubFile] = []
            for f in self.real.list_files(repo, commit):
                if f.path.endswith("1-of-00002.safetensors"):
                    f = replace(f, xet_hash="ab" * 32)
                elif f.path.endswith("2-of-00002.safetensors"):
                    f = replace(f, xet_hash="*" * 64)
                out.append(f)
            return out

        def read_file(self, repo: str, commit: str, path: str, max_bytes: int) -> bytes:
            return self.real.read_file(repo, commit, path, max_bytes)

    hub.commit(REPO, files_v1())
    lock = pin_hub(Listing(), repo=REPO, revision="main", pinned_at=FIXED_TIME)
    by_path = {f.path: f for f in lock.files}
    assert by_path["model-00001-of-00002.safetensors"].xet_hash == "ab" * 32
    assert by_path["model-00002-of-00002.safetensors"].xet_hash is None
