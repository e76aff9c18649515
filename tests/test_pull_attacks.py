"""`k3kit pull` under attack: planted links, a lying hub, a stalled or absent hub, Ctrl-C.

Each test drives the real CLI (a subprocess, or in-process where a seam must be patched) and the
real huggingface_hub client against the loopback test hub. The invariant checked after every
attack on the weights folder: nothing outside DIR changed (a sentinel tree is fingerprinted
before and after), and the exit code says the pull did not simply succeed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from k3kit.hub import translate
from k3kit.pull import quarantine_dir
from k3kit.weights import repo_folder_name
from tests.conftest import KeyFiles, refusing_url, run_k3kit
from tests.cotenant import COTENANT_UID, cotenant_python, needs_root, shared_folder
from tests.hubkit import (
    REPO,
    ServedKit,
    as_json,
    invoke,
    make_served_kit,
    resolve_gets,
    serve,
    skip_sleeps,
)
from tests.testhub.server import OVERSIZE, STALL_S, TestHub

SHARD1 = "model-00001-of-00002.safetensors"


@pytest.fixture
def hub() -> Iterator[TestHub]:
    yield from serve()


@pytest.fixture
def served(hub: TestHub, tmp_path: Path, signing_key: KeyFiles) -> ServedKit:
    return make_served_kit(hub, tmp_path, signing_key)


@pytest.fixture
def sentinel(tmp_path: Path) -> Path:
    """A tree outside DIR that an attack points links at: it must never change."""
    root = tmp_path / "elsewhere"
    (root / "sub").mkdir(parents=True)
    (root / "precious.txt").write_bytes(b"do not touch\n")
    (root / "sub" / "config.json").write_bytes(b"x" * 49)  # config.json's size, other bytes
    (root / "link").symlink_to("precious.txt")
    return root


def fingerprint(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry under ``root``: mode, mtime and content (or link target), links not followed."""
    out: dict[str, tuple[int, int, str]] = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(base) / name
            st = p.lstat()
            if p.is_symlink():
                what = os.readlink(p)
            elif p.is_file():
                what = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                what = "dir"
            out[str(p.relative_to(root))] = (st.st_mode, st.st_mtime_ns, what)
    return out


def pull(served: ServedKit, dest: Path, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    return run_k3kit(
        "pull", served.kit, "--endpoint", served.hub.url, "--dir", dest, "--json", *extra
    )


def codes(proc: subprocess.CompletedProcess[str]) -> set[tuple[str, str]]:
    out = json.loads(proc.stdout)
    return {(p["code"], p["path"]) for p in out["problems"] + out["errors"]}


def part_files(dest: Path) -> list[str]:
    return [str(p) for p in dest.rglob("*") if ".k3kit-part-" in p.name]


# --- 1. links planted under DIR ------------------------------------------------------------


def test_pull_refuses_a_link_in_a_parent_folder(
    served: ServedKit, tmp_path: Path, sentinel: Path
) -> None:
    """`DIR/extra -> /elsewhere`: the lock's extra/*.txt would land outside DIR."""
    dest = tmp_path / "plain"
    dest.mkdir()
    (dest / "extra").symlink_to(sentinel / "sub")
    before = fingerprint(sentinel)
    proc = pull(served, dest, "--layout", "plain")
    assert proc.returncode == 1, proc.stderr
    assert {("PULL_LINK_PLANTED", "extra/copy.txt"), ("PULL_LINK_PLANTED", "extra/notes.txt")} <= (
        codes(proc)
    )
    assert fingerprint(sentinel) == before
    assert (dest / "extra").is_symlink()  # reported, not removed: it is not a file's name
    assert (dest / "config.json").read_bytes() == served.files["config.json"]  # others pulled


def test_pull_refuses_a_snapshot_folder_link(
    served: ServedKit, tmp_path: Path, sentinel: Path
) -> None:
    """`snapshots/<commit> -> /elsewhere`: links and blobs would be written through it."""
    dest = tmp_path / "cache"
    snaps = dest / repo_folder_name(REPO) / "snapshots"
    snaps.mkdir(parents=True)
    (snaps / served.commit).symlink_to(sentinel / "sub")
    before = fingerprint(sentinel)
    proc = pull(served, dest)
    assert proc.returncode == 1, proc.stderr
    snap_rel = f"{repo_folder_name(REPO)}/snapshots/{served.commit}"
    assert ("PULL_LINK_PLANTED", snap_rel) in codes(proc)
    assert fingerprint(sentinel) == before
    assert resolve_gets(served.hub) == []  # nothing is fetched through a planted folder link


@pytest.mark.parametrize("where", ["blobs", f"{repo_folder_name(REPO)}/blobs"])
@pytest.mark.parametrize("target", ["sentinel", "/"])
def test_pull_refuses_a_planted_blobs_link(
    served: ServedKit, tmp_path: Path, sentinel: Path, where: str, target: str
) -> None:
    """`DIR/blobs -> /` or the repo's `blobs -> /`: every path would become an allowed target."""
    dest = tmp_path / "cache"
    link = dest / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(sentinel if target == "sentinel" else Path("/"))
    before = fingerprint(sentinel)
    proc = pull(served, dest)
    assert proc.returncode == 1, proc.stderr
    assert ("PULL_LINK_PLANTED", where) in codes(proc)
    assert fingerprint(sentinel) == before
    assert link.is_symlink() and resolve_gets(served.hub) == []


def test_planted_blob_link_and_a_quarantine_across_filesystems(
    served: ServedKit, tmp_path: Path, sentinel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quarantine rename fails with EXDEV: the bad entry inside DIR is deleted, never the
    target of a planted link (before: `os.unlink(realpath)` deleted the file outside DIR)."""
    dest = tmp_path / "cache"
    assert pull(served, dest).returncode == 0
    snap = dest / repo_folder_name(REPO) / "snapshots" / served.commit
    blob_cfg = Path(os.path.realpath(snap / "config.json"))
    blob_cfg.unlink()
    blob_cfg.symlink_to(sentinel / "sub" / "config.json")  # right size, outside DIR
    blob_tok = Path(os.path.realpath(snap / "tokenizer_config.json"))
    blob_tok.chmod(0o644)
    blob_tok.write_bytes(b"X" * len(served.files["tokenizer_config.json"]))  # wrong bytes
    before = fingerprint(sentinel)

    def cross_device(*_: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr("k3kit.pull._quarantine._rename", cross_device)
    result = invoke("pull", served.kit, "--endpoint", served.hub.url, "--dir", dest, "--json")
    assert result.exit_code == 0, result.stderr
    out = as_json(result)
    assert [(q["path"], q["moved_to"]) for q in out["quarantined"]] == [
        ("tokenizer_config.json", None)
    ]  # deleted inside DIR, as it could not be moved
    assert "removing config.json" in result.stderr
    assert fingerprint(sentinel) == before
    assert (snap / "config.json").read_bytes() == served.files["config.json"]
    assert not Path(os.path.realpath(snap / "config.json")).is_relative_to(sentinel)


# --- 2. the quarantine base ----------------------------------------------------------------


def test_a_planted_quarantine_link_is_refused(
    served: ServedKit, tmp_path: Path, sentinel: Path
) -> None:
    dest = tmp_path / "cache"
    quarantine_dir(dest).symlink_to(sentinel)
    before = fingerprint(sentinel)
    served.hub.set_fault("wrong_bytes", path=SHARD1)  # a pull that would need the quarantine
    proc = pull(served, dest)
    assert proc.returncode == 4, proc.stderr
    assert "quarantine folder" in proc.stderr and "refusing to write through it" in proc.stderr
    assert fingerprint(sentinel) == before
    assert resolve_gets(served.hub) == []


# --- 3. a hub that answers with more than the lock pins ------------------------------------


def test_an_oversized_answer_stops_at_the_locked_size(served: ServedKit, tmp_path: Path) -> None:
    """256 KiB pinned, 1 GiB sent: at most locked size + one chunk read, nothing kept."""
    served.hub.set_fault("oversized", path=SHARD1)
    dest = tmp_path / "cache"
    began = time.monotonic()
    proc = pull(served, dest)
    elapsed = time.monotonic() - began
    assert proc.returncode == 1, proc.stderr
    assert ("HUB_OVERSIZED", SHARD1) in codes(proc)
    out = json.loads(proc.stdout)
    small = sum(len(b) for p, b in served.files.items() if p != SHARD1 and p != "extra/copy.txt")
    locked = len(served.files[SHARD1])
    assert out["bytes_downloaded"] <= small + locked  # never more than the pin reaches the disk
    assert served.hub.oversized_sent < 64 * 2**20, served.hub.oversized_sent  # not the 1 GiB
    assert served.hub.oversized_sent < OVERSIZE
    q = quarantine_dir(dest)
    assert not q.exists() or all(p.stat().st_size <= locked for p in q.rglob("*") if p.is_file())
    blobs = dest / repo_folder_name(REPO) / "blobs"
    assert all(p.stat().st_size <= locked for p in blobs.iterdir())
    assert part_files(dest) == []
    print(
        f"\noversized answer: server sent {served.hub.oversized_sent} B before the client "
        f"hung up; {elapsed:.2f} s"
    )


def test_a_declared_size_other_than_the_lock_is_refused_before_download(
    served: ServedKit, tmp_path: Path
) -> None:
    served.hub.set_fault("declared_oversized", path=SHARD1)
    proc = pull(served, tmp_path / "cache")
    assert proc.returncode == 1, proc.stderr
    assert ("HUB_SIZE_MISMATCH", SHARD1) in codes(proc)
    storage_gets = [r for r in served.hub.requests if r.server == "storage" and r.method == "GET"]
    sha1 = hashlib.sha256(served.files[SHARD1]).hexdigest()
    assert not any(sha1 in r.path for r in storage_gets)  # its body was never requested


# --- 4. identity includes ctime ------------------------------------------------------------


def test_a_rewrite_with_the_old_mtime_restored_is_not_verified(
    served: ServedKit, tmp_path: Path
) -> None:
    from k3kit.hub import HfHub
    from k3kit.pull import pull as pull_weights

    dest = tmp_path / "plain"

    def tamper(rel: str, _size: int) -> None:
        if rel == "config.json":  # just verified: other bytes, same size, same mtime
            f = dest / rel
            st = f.stat()
            time.sleep(0.05)  # past the kernel's coarse timestamp tick
            f.chmod(0o644)
            f.write_bytes(f.read_bytes().upper())
            os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
            f.chmod(st.st_mode)
            assert f.stat().st_mtime_ns == st.st_mtime_ns and f.stat().st_ino == st.st_ino

    report = pull_weights(
        served.lock, dest, downloader=HfHub(served.hub.url), layout="plain", on_file_done=tamper
    )
    assert report.exit_code == 1
    assert [(p.code, p.path) for p in report.problems] == [("PULL_NOT_VERIFIED", "config.json")]


# --- 5. hub failures: one line, bounded time, never 70 -------------------------------------


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(("ERROR", "error:"))]


def test_an_unreachable_hub_fails_with_one_line(
    served: ServedKit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """How long the retries may take is judged on a fake clock below (the retry budget), never
    by this machine's speed; the pauses between attempts are skipped (the CLI runs in-process),
    the attempts themselves are not."""
    skip_sleeps(monkeypatch)
    with refusing_url() as refused:
        proc = run_k3kit("pull", served.kit, "--endpoint", refused, "--dir", tmp_path / "w")
    assert proc.returncode == 4, proc.stderr
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and "HUB_UNREACHABLE" in lines[0], proc.stderr
    assert "Retry" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_hub_that_accepts_then_stalls_fails_before_it_would_answer(
    served: ServedKit, tmp_path: Path
) -> None:
    """The hub holds every request for STALL_S; the pull must give up on its own, well before.
    The margin is structural (a pull that waited for the hub could not end before it lets go),
    not a wall-clock figure; the retry budget itself is checked on a fake clock below."""
    served.hub.set_fault("stall")
    proc = run_k3kit(
        "pull",
        served.kit,
        *("--endpoint", served.hub.url, "--dir", tmp_path / "w", "--timeout", "1"),
        timeout=STALL_S / 2,  # raises TimeoutExpired (a failure) if the pull waits on the hub
    )
    assert proc.returncode == 4, proc.stderr
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and "HUB_TIMEOUT" in lines[0], proc.stderr
    # --timeout reached the client: with 1 s a retry could only end past the 2.5 s deadline, so
    # there is none whatever the load (the default 10 s would retry: "after 2 attempts").
    assert "attempts" not in lines[0], lines[0]
    assert part_files(tmp_path / "w") == []


class FakeClock:
    """The hub client's clock, advanced only by what the test says takes time: a stalled read
    costs its timeout, a pause its seconds. The verdict is the same on any machine."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []
        self.calls: list[float] = []  # when each attempt started

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def _attempts(monkeypatch: pytest.MonkeyPatch, timeout: float, cost: float) -> FakeClock:
    """Call a hub whose every answer fails after ``cost`` seconds (the read timeout for a stall,
    0 for a refused connection) with HUB_TIMEOUT; return the clock, counting the calls on it."""
    import k3kit.hub as hub_module
    from k3kit.errors import EnvironmentProblem
    from k3kit.hub import HfHub

    clock = FakeClock()
    monkeypatch.setattr(hub_module, "time", clock)

    def stalled() -> None:
        clock.calls.append(clock.now)
        clock.now += cost
        raise EnvironmentProblem("stalled", code="HUB_TIMEOUT")

    client = HfHub("http://127.0.0.1:9", timeout=timeout)
    with pytest.raises(EnvironmentProblem) as caught:
        client._retrying(stalled, repo=REPO, revision="0" * 40)
    assert caught.value.code == "HUB_TIMEOUT"
    return clock


def test_a_stalling_hub_costs_at_most_the_deadline_on_a_fake_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--timeout 1: one attempt (a retry would end past 2.5 s); the default 10 s: two attempts,
    2 s apart, 22 s in all, under the 25 s deadline; no attempt starts that could end after it."""
    short = _attempts(monkeypatch, timeout=1, cost=1)
    assert short.calls == [0.0] and short.pauses == [] and short.now <= 2.5
    default = _attempts(monkeypatch, timeout=10, cost=10)
    assert default.calls == [0.0, 12.0] and default.pauses == [2.0]
    assert default.now == 22.0 <= 25.0


def test_a_refusing_hub_is_tried_three_times_on_a_fake_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A refused connection fails at once: three attempts, 2 s then 4 s apart, 6 s in all."""
    clock = _attempts(monkeypatch, timeout=10, cost=0)
    assert clock.calls == [0.0, 2.0, 6.0] and clock.pauses == [2.0, 4.0]


def test_a_closed_shared_client_is_a_network_error_not_a_bug() -> None:
    """huggingface_hub closes its shared client while other threads use it (was exit 70)."""
    exc = RuntimeError("Cannot send a request, as the client has been closed.")
    err = translate(exc, "http://hub", REPO, "0" * 40, "a.bin")
    assert err is not None and err.code == "HUB_UNREACHABLE" and int(err.exit_code) == 4


# --- 6. Ctrl-C -----------------------------------------------------------------------------


def test_ctrl_c_mid_download_stops_at_once_and_leaves_no_partial_file(
    served: ServedKit, tmp_path: Path
) -> None:
    """'At once' is structural, not timed: the hub holds the body for STALL_S and the pull's
    read timeout is 600 s, so a pull that waited for either after Ctrl-C could not end within
    STALL_S / 2 (communicate raises TimeoutExpired: a failure) however slow the machine."""
    served.hub.set_fault("stall_body", path=SHARD1)  # 64 KiB arrive, then nothing
    dest = tmp_path / "cache"
    argv = [sys.executable, "-m", "k3kit", "pull", str(served.kit), "--endpoint", served.hub.url]
    proc = subprocess.Popen(
        [*argv, "--dir", str(dest), "--timeout", "600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + STALL_S / 2  # a hang guard only: the wait is for an event
        while not part_files(dest) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert part_files(dest), "the download never started"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=STALL_S / 2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert part_files(dest) == [], stderr
    assert "Traceback" not in stderr and "interrupted" in stderr


# --- 7. special files ----------------------------------------------------------------------


def test_a_fifo_at_a_file_name_is_a_problem_never_opened(served: ServedKit, tmp_path: Path) -> None:
    dest = tmp_path / "plain"
    dest.mkdir()
    os.mkfifo(dest / "config.json")
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
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert ("PULL_PATH_BLOCKED", "config.json") in codes(proc)
    assert (dest / "config.json").is_fifo()


_PLANT_FILES = """
import os, shutil, sys
src, dest = sys.argv[1], sys.argv[2]
for top, _dirs, files in os.walk(src):
    for name in files:
        rel = os.path.relpath(os.path.join(top, name), src)
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copyfile(os.path.join(src, rel), os.path.join(dest, rel))
        os.chmod(os.path.join(dest, rel), 0o444)
"""


@needs_root
def test_genuine_weights_a_cotenant_planted_in_a_shared_dir_are_not_verified(
    served: ServedKit,
) -> None:
    """The attack: DIR is a sticky shared folder (like /tmp); the co-tenant (uid 65534) plants
    every weight file first, with the genuine bytes. A resumed pull would hash them, call them
    verified and hand them to launch, and the co-tenant could swap them after that (before this
    fix: exit 0, tried). Files and folders found in place that another user owns are refused
    (exit 1), never "present"."""
    with shared_folder() as dest, shared_folder(0o755) as genuine:
        for name, data in served.files.items():
            (genuine / name).parent.mkdir(parents=True, exist_ok=True)
            (genuine / name).write_bytes(data)
            (genuine / name).chmod(0o644)
        for folder in [genuine, *(p for p in genuine.rglob("*") if p.is_dir())]:
            folder.chmod(0o755)
        cotenant_python(_PLANT_FILES, str(genuine), str(dest))
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
            timeout=60,
        )
        assert proc.returncode == 1, proc.stderr
        found = codes(proc)
        # Files the co-tenant owns, and folders they made (a nested file's folder), are refused.
        allowed = {"PULL_FILE_FOREIGN", "PULL_PATH_BLOCKED", "PULL_NOT_VERIFIED"}
        assert {c for c, _ in found} <= allowed, found
        assert ("PULL_FILE_FOREIGN", "config.json") in found, found
        assert json.loads(proc.stdout)["ok"] is False
        assert all((dest / name).stat().st_uid == COTENANT_UID for name in served.files)


def test_a_genuine_file_others_can_write_is_not_verified_in_place(
    served: ServedKit, tmp_path: Path
) -> None:
    """Our own genuine file, but world-writable: anyone could rewrite it after it is hashed."""
    dest = tmp_path / "plain"
    dest.mkdir()
    (dest / "config.json").write_bytes(served.files["config.json"])
    (dest / "config.json").chmod(0o666)
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
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert ("PULL_FILE_FOREIGN", "config.json") in codes(proc)
    assert "can be written by others (mode 0666)" in proc.stdout
