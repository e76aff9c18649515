"""`k3kit pull`: download a kit's pinned weights with the real client, verified as they land."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from k3kit.archive import pack
from k3kit.publish.kit import build, sign
from k3kit.pull import quarantine_dir
from k3kit.signing.keys import load_private
from k3kit.weights import repo_folder_name
from tests.conftest import EXAMPLE, FIXED_TIME, KeyFiles, run_k3kit
from tests.hubkit import (
    REPO,
    NoSleep,
    ServedKit,
    as_json,
    invoke,
    make_served_kit,
    resolve_gets,
    serve,
    sha256,
    skip_sleeps,
    unverified_files,
)
from tests.testhub.server import TestHub

SHARD1 = "model-00001-of-00002.safetensors"


@pytest.fixture
def hub() -> Iterator[TestHub]:
    yield from serve()


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> NoSleep:
    return skip_sleeps(monkeypatch)


@pytest.fixture
def served(hub: TestHub, tmp_path: Path, signing_key: KeyFiles) -> ServedKit:
    return make_served_kit(hub, tmp_path, signing_key)


def snapshot(dest: Path, served: ServedKit) -> Path:
    return dest / repo_folder_name(REPO) / "snapshots" / served.commit


def verify(served: ServedKit, weights: Path) -> tuple[int, dict[str, Any]]:
    proc = run_k3kit(
        "verify", served.kit, "--trust", served.key.public, "--weights", weights, "--json"
    )
    return proc.returncode, json.loads(proc.stdout)


def test_pull_cache_layout_then_verify_accepts_root_repo_and_snapshot(
    served: ServedKit, tmp_path: Path
) -> None:
    dest = tmp_path / "hf-cache"
    proc = run_k3kit(
        "pull",
        served.kit,
        "--dir",
        dest,
        "--endpoint",
        served.hub.url,
        "--trust",
        served.key.public,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] is True and result["kit"]["verified"] is True
    assert result["weights_root"] == str(snapshot(dest, served))
    assert result["files_downloaded"] == len(served.files) and result["quarantined"] == []
    assert "verdict: VERIFIED" in proc.stderr
    snap = snapshot(dest, served)
    for path, data in served.files.items():
        assert (snap / path).is_symlink() and (snap / path).read_bytes() == data
    # the lock's commit only: no branch ref was written, no other snapshot
    assert os.listdir(snap.parent) == [served.commit]
    for weights in (dest, dest / repo_folder_name(REPO), snap):
        code, report = verify(served, weights)
        assert code == 0, report
        assert report["weights"]["layout"] == "snapshot"


def test_pull_plain_layout_from_archive_then_verify(served: ServedKit, tmp_path: Path) -> None:
    archive = tmp_path / "k3.kit.tar.gz"
    pack(served.kit, archive)
    dest = tmp_path / "weights"
    proc = run_k3kit(
        "pull", archive, "--dir", dest, "--layout", "plain", "--json", "--trust", served.key.public
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["kit"]["verified"] is True
    assert result["endpoint"] == served.hub.url  # taken from the signed lock
    for path, data in served.files.items():
        assert (dest / path).read_bytes() == data and not (dest / path).is_symlink()
    code, report = verify(served, dest)
    assert code == 0, report
    assert report["weights"]["layout"] == "plain"


def test_an_unverified_lock_does_not_choose_the_endpoint_or_get_the_token(
    served: ServedKit, tmp_path: Path, no_sleep: NoSleep
) -> None:
    # Without --trust the lock is attacker-controlled: its endpoint must not be used, and the
    # token goes only where the user pointed (here $HF_ENDPOINT, a closed port).
    result = invoke(
        "pull",
        served.kit,
        "--dir",
        tmp_path / "w",
        "--token-env",
        "HUB_TOKEN",
        "--json",
        env={"HUB_TOKEN": "hf_secret_value"},
    )
    assert result.exit_code == 4, result.stderr
    assert "127.0.0.1:9" in result.stderr and "not verified" in result.stderr
    assert served.hub.requests == []
    assert "hf_secret_value" not in result.stderr + result.stdout


def test_a_token_is_never_sent_over_plain_http_to_a_remote_host(
    served: ServedKit, tmp_path: Path
) -> None:
    proc = run_k3kit(
        "pull",
        served.kit,
        "--dir",
        tmp_path / "w",
        "--endpoint",
        "http://hub.example.invalid",
        "--token-env",
        "HUB_TOKEN",
        env={"HUB_TOKEN": "hf_secret_value"},
    )
    assert proc.returncode == 3 and "plain http" in proc.stderr
    assert served.hub.requests == []


def test_pull_refuses_a_kit_that_does_not_verify(
    served: ServedKit, tmp_path: Path, other_key: KeyFiles
) -> None:
    dest = tmp_path / "w"
    proc = run_k3kit("pull", served.kit, "--dir", dest, "--trust", other_key.public)
    assert proc.returncode == 1
    assert "does not verify" in proc.stderr and "receipt_signature" in proc.stderr
    assert served.hub.requests == [] and not dest.exists()


def test_wrong_bytes_twice_exit_1_and_nothing_left_in_place(
    served: ServedKit, tmp_path: Path
) -> None:
    served.hub.set_fault("wrong_bytes", path=SHARD1)
    dest = tmp_path / "cache"
    proc = run_k3kit("pull", served.kit, "--endpoint", served.hub.url, "--dir", dest, "--json")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert [q["path"] for q in result["quarantined"]] == [SHARD1, SHARD1]
    assert [(p["code"], p["path"]) for p in result["problems"]] == [
        ("WEIGHTS_DIGEST_MISMATCH", SHARD1)
    ]
    assert "wrong bytes again after one re-fetch" in proc.stderr
    assert "NOT VERIFIED" in proc.stderr
    assert resolve_gets(served.hub).count(f"/lfs/{sha256(served.files[SHARD1])}") == 2
    # not in the snapshot, not under its blob name, nowhere in the weights folder
    snap = snapshot(dest, served)
    assert not os.path.lexists(snap / SHARD1)
    blobs = dest / repo_folder_name(REPO) / "blobs"
    assert sha256(served.files[SHARD1]) not in os.listdir(blobs)
    inverted = served.files[SHARD1].translate(bytes(range(255, -1, -1)))  # what the hub sent
    assert all((blobs / b).read_bytes() != inverted for b in os.listdir(blobs))
    # the evidence is beside the folder, with a record of what was expected
    q = quarantine_dir(dest)
    record = json.loads(next(q.rglob("quarantine.json")).read_bytes())
    assert {r["path"] for r in record["quarantined"]} == {SHARD1}
    moved = [Path(r["moved_to"]) for r in record["quarantined"]]
    assert all(m.is_file() and q in m.parents and dest not in m.parents for m in moved)
    assert all(sha256(m.read_bytes()) != sha256(served.files[SHARD1]) for m in moved)
    assert unverified_files(dest, served.lock) == []
    code, report = verify(served, dest)  # verify agrees and does not see the quarantine
    assert code == 1
    weights = report["checks"][-1]
    assert [(p["code"], p["path"]) for p in weights["problems"]] == [
        ("WEIGHTS_FILE_MISSING", SHARD1)
    ]


def test_wrong_bytes_once_is_quarantined_and_refetched(served: ServedKit, tmp_path: Path) -> None:
    served.hub.set_fault("wrong_bytes", path=SHARD1, times=1)
    dest = tmp_path / "plain"
    proc = run_k3kit(
        "pull",
        served.kit,
        "--endpoint",
        served.hub.url,
        "--dir",
        dest,
        "--layout",
        "plain",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [(q["path"], q["origin"]) for q in result["quarantined"]] == [(SHARD1, "downloaded")]
    assert f"quarantined {SHARD1}" in proc.stderr and "fetching" in proc.stderr
    assert (dest / SHARD1).read_bytes() == served.files[SHARD1]
    assert verify(served, dest)[0] == 0  # the sibling quarantine is not an extra file


def test_resume_after_interrupted_pull_downloads_only_what_is_missing(
    served: ServedKit, tmp_path: Path, no_sleep: NoSleep
) -> None:
    dest = tmp_path / "cache"
    served.hub.set_fault("drop", path=SHARD1)  # every attempt breaks off half-way
    first = invoke("pull", served.kit, "--endpoint", served.hub.url, "--dir", dest, "--json")
    assert first.exit_code == 4, first.stderr
    errors = as_json(first)["errors"]
    assert [(e["path"], e["code"]) for e in errors] == [(SHARD1, "HUB_DOWNLOAD_FAILED")]
    assert "rerun" in first.stderr and "INCOMPLETE" in first.stderr
    assert unverified_files(dest, served.lock) == []
    served.hub.set_fault(None)
    served.hub.reset_log()
    second = invoke("pull", served.kit, "--endpoint", served.hub.url, "--dir", dest, "--json")
    assert second.exit_code == 0, second.stderr
    result = as_json(second)
    assert result["files_downloaded"] == 1
    assert result["files_in_place"] == len(served.files) - 1
    fetched = resolve_gets(served.hub)
    assert fetched == [f"/lfs/{sha256(served.files[SHARD1])}"]  # nothing else re-downloaded
    assert verify(served, dest)[0] == 0


def test_rerun_finds_a_corrupted_file_on_disk(served: ServedKit, tmp_path: Path) -> None:
    dest = tmp_path / "cache"
    assert (
        run_k3kit("pull", served.kit, "--endpoint", served.hub.url, "--dir", dest).returncode == 0
    )
    blob = Path(os.path.realpath(snapshot(dest, served) / "config.json"))
    data = bytearray(blob.read_bytes())
    data[0] ^= 1
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))  # same size, one bit flipped
    served.hub.reset_log()
    proc = run_k3kit("pull", served.kit, "--endpoint", served.hub.url, "--dir", dest, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [(q["path"], q["origin"]) for q in result["quarantined"]] == [
        ("config.json", "found on disk")
    ]
    assert result["files_downloaded"] == 1
    assert [p for p in resolve_gets(served.hub)] == [f"/{REPO}/resolve/{served.commit}/config.json"]
    assert verify(served, dest)[0] == 0


def test_pull_into_a_folder_with_other_files_fails_like_verify(
    served: ServedKit, tmp_path: Path
) -> None:
    dest = tmp_path / "plain"
    dest.mkdir()
    (dest / "stray.bin").write_bytes(b"not in the lock")
    proc = run_k3kit(
        "pull",
        served.kit,
        "--endpoint",
        served.hub.url,
        "--dir",
        dest,
        "--layout",
        "plain",
        "--json",
    )
    assert proc.returncode == 1
    problems = json.loads(proc.stdout)["problems"]
    assert [(p["code"], p["path"]) for p in problems] == [("WEIGHTS_FILE_EXTRA", "stray.bin")]
    assert verify(served, dest)[0] == 1


def test_attack_pull_json_problem_records_keep_the_dataclass_shape(
    served: ServedKit, tmp_path: Path
) -> None:
    """Problem is no longer a dataclass (issue 23, seventh pass): ``pull --json`` writes each
    verification problem with ``as_json`` where it wrote ``dataclasses.asdict``; a script reading
    the old record (code, path, detail: no ``message``, no ``hint``) reads the same keys and
    values, and the problem still fails the pull."""
    dest = tmp_path / "plain"
    dest.mkdir()
    (dest / "stray.bin").write_bytes(b"not in the lock")
    argv: list[str | Path] = ["pull", served.kit, "--endpoint", served.hub.url, "--dir", dest]
    proc = run_k3kit(*argv, "--layout", "plain", "--json")
    assert proc.returncode == 1
    problems = json.loads(proc.stdout)["problems"]
    assert len(problems) == 1
    assert set(problems[0]) == {"code", "path", "detail"}
    assert (problems[0]["code"], problems[0]["path"]) == ("WEIGHTS_FILE_EXTRA", "stray.bin")
    assert problems[0]["detail"] and isinstance(problems[0]["detail"], str)


def test_pull_bad_input_exit_3(tmp_path: Path) -> None:
    proc = run_k3kit("pull", tmp_path / "absent", "--dir", tmp_path / "w")
    assert proc.returncode == 3 and "kit not found" in proc.stderr
    bad = tmp_path / "weights.lock.json"
    bad.write_text('{"schema": "k3kit.weights-lock/v1"}')
    proc = run_k3kit("pull", bad, "--dir", tmp_path / "w")
    assert proc.returncode == 3 and "weights.lock.json" in proc.stderr


# --- every fault mode: verified, or exit 1/4 with the cause, never an unverified file in place --

FAULTS = [
    # mode, times, expected exit, expected code (on the failing file)
    ("wrong_bytes", 1, 0, None),
    ("wrong_bytes", None, 1, "WEIGHTS_DIGEST_MISMATCH"),
    ("drop", 1, 0, None),
    ("drop", None, 4, "HUB_DOWNLOAD_FAILED"),
    ("5xx", 1, 0, None),
    ("5xx", None, 4, "HUB_UNAVAILABLE"),
    ("429", 2, 0, None),
    ("429", None, 4, "HUB_RATE_LIMITED"),
    ("401", 1, 4, "HUB_REPO_NOT_FOUND"),
    ("404", None, 4, "HUB_FILE_NOT_FOUND"),
]


@pytest.mark.parametrize(
    ("mode", "times", "exit_code", "code"),
    FAULTS,
    ids=[f"{m}-{'once' if t else 'always'}" for m, t, _, _ in FAULTS],
)
@pytest.mark.parametrize("layout", ["cache", "plain"])
def test_fault_modes(
    served: ServedKit,
    tmp_path: Path,
    no_sleep: NoSleep,
    layout: str,
    mode: str,
    times: int | None,
    exit_code: int,
    code: str | None,
) -> None:
    served.hub.set_fault(mode, path=SHARD1, times=times)
    dest = tmp_path / "w"
    result = invoke(
        "pull",
        served.kit,
        "--endpoint",
        served.hub.url,
        "--dir",
        dest,
        "--layout",
        layout,
        "--json",
    )
    assert result.exit_code == exit_code, result.stderr
    out = as_json(result)
    codes = {(e["path"], e["code"]) for e in out["errors"]}
    codes |= {(p["path"], p["code"]) for p in out["problems"]}
    if code is None:
        assert out["ok"] and not codes
    else:
        assert (SHARD1, code) in codes, codes
        assert code in result.stderr
    assert unverified_files(dest, served.lock) == []
    if exit_code == 0:
        assert (snapshot(dest, served) if layout == "cache" else dest).joinpath(
            SHARD1
        ).read_bytes() == served.files[SHARD1]


def test_storage_auth_failure_is_exit_4(
    served: ServedKit, tmp_path: Path, no_sleep: NoSleep
) -> None:
    served.hub.set_fault("401", server="storage")
    result = invoke(
        "pull", served.kit, "--endpoint", served.hub.url, "--dir", tmp_path / "w", "--json"
    )
    assert result.exit_code == 4
    # the fault answers like the Hub does for a private repo: 401 + X-Error-Code RepoNotFound
    assert {e["code"] for e in as_json(result)["errors"]} <= {"HUB_REPO_NOT_FOUND", "PULL_STOPPED"}
    assert "HUB_REPO_NOT_FOUND" in result.stderr
    assert "--token-env" in result.stderr
    assert unverified_files(tmp_path / "w", served.lock) == []


def test_private_repo_pull_uses_token_without_leaking_it(
    hub: TestHub, tmp_path: Path, signing_key: KeyFiles
) -> None:
    token = "hf_PullTokenThatMustNotAppear42"
    hub.add_repo(REPO, private_token=token)
    served = make_served_kit(hub, tmp_path, signing_key, token=token)
    dest = tmp_path / "w"
    denied = run_k3kit("pull", served.kit, "--endpoint", served.hub.url, "--dir", dest)
    assert denied.returncode == 4 and "--token-env" in denied.stderr
    ok = run_k3kit(
        "pull",
        served.kit,
        "--endpoint",
        served.hub.url,
        "--dir",
        dest,
        "--token-env",
        "K3KIT_T",
        "--json",
        env={"K3KIT_T": token},
    )
    assert ok.returncode == 0, ok.stderr
    for proc in (denied, ok):
        assert token not in proc.stdout + proc.stderr
    storage = [r for r in hub.requests if r.server == "storage"]
    assert storage and not any(r.auth for r in storage)  # the token never went to the CDN
    assert any(r.auth for r in hub.requests if r.server == "api")


def test_a_file_changed_after_hashing_is_not_verified(served: ServedKit, tmp_path: Path) -> None:
    """The verdict ties each digest to the file it was computed on (dev, inode, size, mtime)."""
    from k3kit.hub import HfHub
    from k3kit.pull import pull

    dest = tmp_path / "plain"

    def tamper(rel: str, _size: int) -> None:
        if rel == "config.json":  # just verified: swap in other bytes of the same length
            data = (dest / rel).read_bytes()
            (dest / rel).write_bytes(data.upper())

    report = pull(
        served.lock, dest, downloader=HfHub(served.hub.url), layout="plain", on_file_done=tamper
    )
    assert report.exit_code == 1
    assert [(p.code, p.path) for p in report.problems] == [("PULL_NOT_VERIFIED", "config.json")]


def test_a_planted_link_is_removed_not_followed(served: ServedKit, tmp_path: Path) -> None:
    dest = tmp_path / "cache"
    outside = tmp_path / "precious.txt"
    outside.write_bytes(b"x" * len(served.files["config.json"]))  # right size, wrong place
    snap = snapshot(dest, served)
    snap.mkdir(parents=True)
    (snap / "config.json").symlink_to(outside)
    proc = run_k3kit("pull", served.kit, "--endpoint", served.hub.url, "--dir", dest, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "a link that is not a blob of this cache" in proc.stderr
    assert outside.read_bytes() == b"x" * len(served.files["config.json"])  # untouched
    assert Path(os.path.realpath(snap / "config.json")).parent.name == "blobs"
    assert verify(served, dest)[0] == 0


def test_a_folder_where_a_file_belongs_is_reported_not_removed(
    served: ServedKit, tmp_path: Path
) -> None:
    dest = tmp_path / "plain"
    (dest / "config.json").mkdir(parents=True)
    proc = run_k3kit(
        "pull",
        served.kit,
        "--endpoint",
        served.hub.url,
        "--dir",
        dest,
        "--layout",
        "plain",
        "--json",
    )
    assert proc.returncode == 1
    problems = json.loads(proc.stdout)["problems"]
    assert [(p["code"], p["path"]) for p in problems] == [("PULL_PATH_BLOCKED", "config.json")]
    assert (dest / "config.json").is_dir()
    assert unverified_files(dest, served.lock) == []


def test_a_paced_hub_serves_the_same_bytes(tmp_path: Path) -> None:
    """The benchmark's network-link knob (rate_limit) changes timing only, never content."""
    from huggingface_hub import hf_hub_download

    data = random.Random(3).randbytes(300_000)  # same bytes on every run
    (tmp_path / "w.safetensors").write_bytes(data)
    with TestHub(rate_limit=50 * 2**20) as paced:
        sha = paced.commit(REPO, {"w.safetensors": tmp_path / "w.safetensors"})
        got = hf_hub_download(
            REPO,
            "w.safetensors",
            revision=sha,
            endpoint=paced.url,
            token=False,
            cache_dir=tmp_path / "c",
        )
    assert Path(got).read_bytes() == data


def test_pull_into_an_unusable_dir_or_from_a_fifo_is_a_clean_error(
    served: ServedKit, tmp_path: Path
) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    proc = run_k3kit("pull", served.kit, "--endpoint", served.hub.url, "--dir", not_a_dir / "sub")
    assert proc.returncode == 4, proc.stderr
    assert "cannot create the weights folder" in proc.stderr
    fifo = tmp_path / "kit.fifo"
    os.mkfifo(fifo)
    proc = run_k3kit("pull", fifo, "--dir", tmp_path / "w")
    assert proc.returncode == 3 and "neither a kit directory nor a file" in proc.stderr


def test_a_signed_http_endpoint_still_never_gets_a_token(
    hub: TestHub, tmp_path: Path, signing_key: KeyFiles
) -> None:
    served = make_served_kit(hub, tmp_path, signing_key)
    lock = json.loads(served.lock_path.read_text())
    assert lock["source"]["endpoint"].startswith("http://127.0.0.1")
    # Re-sign the same kit with a lock whose (signed) endpoint is remote and plain http.
    from k3kit._canonical import dumps

    lock["source"]["endpoint"] = "http://hub.example.invalid"
    served.lock_path.write_bytes(dumps(lock))
    kit = tmp_path / "kit2"
    build(EXAMPLE / "package.toml", served.lock_path, kit)
    sign(
        kit, load_private(signing_key.private, None), EXAMPLE / "claims.toml", issued_at=FIXED_TIME
    )
    proc = run_k3kit(
        "pull",
        kit,
        "--dir",
        tmp_path / "w",
        "--trust",
        signing_key.public,
        "--token-env",
        "HUB_TOKEN",
        env={"HUB_TOKEN": "hf_secret_value"},
    )
    assert proc.returncode == 3 and "plain http" in proc.stderr
    assert "hf_secret_value" not in proc.stderr + proc.stdout
