"""The verification cache and the verify command's speed options, through the real CLI.

A file is only recorded once its timestamps are older than ``SETTLE_NS`` (vcache's racy-timestamp
rule), so the weights copies used here are made once per module and aged together with one short
sleep; every test gets its own copy (its own inodes) and its own state directory.
"""

from __future__ import annotations

import errno
import json
import os
import pty
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from k3kit._canonical import model_bytes
from k3kit._fs import atomic_write
from k3kit.models import WeightsLock
from k3kit.publish.kit import build, sign
from k3kit.signing.keys import load_private
from k3kit.weights.pin import pin_local
from k3kit.weights.vcache import COARSE_SETTLE_NS, SETTLE_NS
from tests.conftest import EXAMPLE, REPO, GoldenKit, run_k3kit

N_FILES = 5  # the golden stand-in weights: three shards, config.json, STAND_IN_README.txt


@dataclass
class Aged:
    plain: list[Path]
    caches: list[Path]  # HF cache roots (snapshot symlinks into blobs/)


@pytest.fixture(scope="module")
def aged(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Aged:
    root = tmp_path_factory.mktemp("aged")
    plain = [
        Path(shutil.copytree(golden.snapshot, root / f"plain-{i}", symlinks=False))
        for i in range(24)
    ]
    cache_root = golden.snapshot.parents[2]
    caches = [
        Path(shutil.copytree(cache_root, root / f"cache-{i}", symlinks=True)) for i in range(1)
    ]
    stamps = [p.stat() for d in plain for p in d.iterdir()]
    coarse = all(s.st_ctime_ns % 10**9 == 0 for s in stamps)
    time.sleep(((COARSE_SETTLE_NS if coarse else SETTLE_NS) + 200_000_000) / 1e9)
    return Aged(plain, caches)


@pytest.fixture
def weights_copy(aged: Aged) -> Path:
    return aged.plain.pop()


def verify(
    golden: GoldenKit, weights: Path, state: Path, *extra: str | Path, kit: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = run_k3kit(
        "verify",
        kit or golden.kit,
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--state-dir",
        state,
        "--json",
        *extra,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc, json.loads(proc.stdout)


def facts(report: dict[str, Any]) -> dict[str, Any]:
    return report["weights"]  # type: ignore[no-any-return]


def state_file(state: Path) -> Path:
    files = list((state / "verify").iterdir())
    assert len(files) == 1
    return files[0]


def test_unchanged_files_come_from_the_cache_without_being_read(
    golden: GoldenKit, weights_copy: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    proc, first = verify(golden, weights_copy, state)
    assert proc.returncode == 0, proc.stderr
    assert facts(first)["files_hashed"] == N_FILES
    assert facts(first)["files_from_cache"] == 0
    assert facts(first)["cache"] == {"status": "empty", "saved": True}
    written = state_file(state).stat().st_mtime_ns

    proc, second = verify(golden, weights_copy, state)
    assert proc.returncode == 0, proc.stderr
    w = facts(second)
    assert (w["files_hashed"], w["bytes_hashed"], w["files_from_cache"]) == (0, 0, N_FILES)
    assert w["bytes_from_cache"] == sum(p.stat().st_size for p in weights_copy.iterdir())
    assert w["cache"]["status"] == "loaded"
    assert "5 unchanged since verified" in proc.stderr

    path = state_file(state)
    assert path.stat().st_mtime_ns == written  # nothing changed, nothing rewritten
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    doc = json.loads(path.read_bytes())
    assert sorted(doc["records"]) == sorted(str(p.resolve()) for p in weights_copy.iterdir())


def test_snapshot_links_are_recorded_under_the_blob_they_resolve_to(
    golden: GoldenKit, aged: Aged, tmp_path: Path
) -> None:
    cache_root = aged.caches.pop()
    state = tmp_path / "state"
    assert verify(golden, cache_root, state)[0].returncode == 0
    proc, again = verify(golden, cache_root, state)
    assert proc.returncode == 0, proc.stderr
    assert facts(again)["files_from_cache"] == N_FILES
    keys = json.loads(state_file(state).read_bytes())["records"]
    assert all(Path(k).parent.name == "blobs" for k in keys)
    assert all(Path(k).parent.parent.parent == cache_root.resolve() for k in keys)


def test_content_change_with_mtime_restored_is_caught_because_ctime_moved(
    golden: GoldenKit, weights_copy: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    assert verify(golden, weights_copy, state)[0].returncode == 0
    shard = weights_copy / "model-00002-of-00003.safetensors"
    before = shard.stat()
    with shard.open("r+b") as handle:  # same size, one byte different
        handle.seek(before.st_size // 2)
        byte = handle.read(1)
        handle.seek(before.st_size // 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = shard.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns

    proc, report = verify(golden, weights_copy, state)
    assert proc.returncode == 1
    weights_check = report["checks"][-1]
    assert weights_check["code"] == "WEIGHTS_DIGEST_MISMATCH"
    assert [p["path"] for p in weights_check["problems"]] == [shard.name]
    assert facts(report)["files_from_cache"] == N_FILES - 1
    assert facts(report)["files_hashed"] == 1
    records = json.loads(state_file(state).read_bytes())["records"]
    assert str(shard.resolve()) not in records  # a failed file is forgotten, never kept


def _second_kit(golden: GoldenKit, root: Path) -> Path:
    """Another signed kit over the same weights whose lock differs (a later pin time)."""
    lock = pin_local(
        golden.snapshot, repo=REPO, revision=golden.snapshot.name, pinned_at="2026-11-02T00:00:00Z"
    )
    lock_path = root / "weights.lock.json"
    atomic_write(lock_path, model_bytes(lock), force=True)
    build(EXAMPLE / "package.toml", lock_path, root / "kit")
    sign(
        root / "kit",
        load_private(golden.key.private, None),
        EXAMPLE / "claims.toml",
        issued_at="2026-11-02T00:00:00Z",
    )
    return root / "kit"


def test_another_lock_never_reuses_the_records(
    golden: GoldenKit, weights_copy: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    other_kit = _second_kit(golden, tmp_path / "other")
    assert verify(golden, weights_copy, state)[0].returncode == 0
    proc, other = verify(golden, weights_copy, state, kit=other_kit)
    assert proc.returncode == 0, proc.stderr
    assert facts(other)["files_from_cache"] == 0
    assert facts(other)["files_hashed"] == N_FILES
    # The first kit's records are kept apart and still valid for it.
    proc, first_again = verify(golden, weights_copy, state)
    assert facts(first_again)["files_from_cache"] == N_FILES
    assert len(list((state / "verify").iterdir())) == 2


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xffnot json at all")


def _duplicate_key(path: Path) -> None:
    text = path.read_text()
    path.write_text(text.replace('"records":{', '"records":{"/x":1,"/x":2,', 1))


def _other_lock(path: Path) -> None:
    doc = json.loads(path.read_bytes())
    doc["lock_sha256"] = "0" * 64
    path.write_text(json.dumps(doc))


def _world_writable(path: Path) -> None:
    path.chmod(0o666)


def _symlink(path: Path) -> None:
    real = path.with_name("elsewhere.json")
    path.rename(real)
    path.symlink_to(real)


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path, 0o600)


def _huge_integer(path: Path) -> None:
    """More digits than Python converts (4,300): must not be exit 70, nor break later runs."""
    doc = json.loads(path.read_bytes())
    huge = '"records": {"/x": ' + "9" * 5000 + ", "
    path.write_text(json.dumps(doc).replace('"records": {', huge, 1))


def _deep_nesting(path: Path) -> None:
    path.write_text("[" * 200_000 + "]" * 200_000)


def _huge_sparse(path: Path) -> None:
    """1 TiB by size, refused by its size before a byte is read."""
    os.truncate(path, 1 << 40)


def _wrong_types(path: Path) -> None:
    doc = json.loads(path.read_bytes())
    key = next(iter(doc["records"]))
    doc["records"][key] = {"algorithm": ["blake3"], "digest": 7, "stamp": {"a": None}}
    path.write_text(json.dumps(doc))


def _records_a_list(path: Path) -> None:
    doc = json.loads(path.read_bytes())
    doc["records"] = [1, "two", None]
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    "damage",
    [
        _truncate,
        _garbage,
        _duplicate_key,
        _other_lock,
        _world_writable,
        _symlink,
        _fifo,
        _huge_integer,
        _deep_nesting,
        _huge_sparse,
        _wrong_types,
        _records_a_list,
    ],
)
def test_a_damaged_or_untrusted_state_file_is_ignored_and_everything_rehashed(
    golden: GoldenKit, weights_copy: Path, tmp_path: Path, damage: Any
) -> None:
    state = tmp_path / "state"
    assert verify(golden, weights_copy, state)[0].returncode == 0
    damage(state / "verify" / next((state / "verify").iterdir()).name)
    proc, report = verify(golden, weights_copy, state)
    assert proc.returncode == 0, proc.stderr
    assert facts(report)["cache"]["status"].startswith("ignored (")
    assert (facts(report)["files_hashed"], facts(report)["files_from_cache"]) == (N_FILES, 0)
    # The damaged file was replaced by a clean one that the next run trusts.
    proc, healed = verify(golden, weights_copy, state)
    assert facts(healed)["files_from_cache"] == N_FILES


def test_full_rehashes_and_catches_what_a_forged_record_hides(
    golden: GoldenKit, weights_copy: Path, tmp_path: Path
) -> None:
    """The documented limit: whoever can rewrite the state (or the clock) can hide a change."""
    state = tmp_path / "state"
    assert verify(golden, weights_copy, state)[0].returncode == 0
    proc, full = verify(golden, weights_copy, state, "--full")
    assert proc.returncode == 0, proc.stderr
    assert facts(full)["cache"]["status"] == "bypassed (--full)"
    assert (facts(full)["files_hashed"], facts(full)["files_from_cache"]) == (N_FILES, 0)

    shard = weights_copy / "model-00001-of-00003.safetensors"
    with shard.open("r+b") as handle:
        handle.seek(100)
        handle.write(b"\x00" * 8)
    st = shard.stat()
    path = state_file(state)
    doc = json.loads(path.read_bytes())
    doc["records"][str(shard.resolve())]["stamp"] = (
        f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    )
    path.write_text(json.dumps(doc))
    path.chmod(0o600)

    proc, fooled = verify(golden, weights_copy, state)
    assert proc.returncode == 0  # the forged record is trusted: that is the cache's stated limit
    assert facts(fooled)["files_from_cache"] == N_FILES
    proc, caught = verify(golden, weights_copy, state, "--full")
    assert proc.returncode == 1
    assert caught["checks"][-1]["code"] == "WEIGHTS_DIGEST_MISMATCH"


def test_records_are_per_algorithm(golden: GoldenKit, weights_copy: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    _, first = verify(golden, weights_copy, state)
    assert facts(first)["algorithm"] == "blake3"
    _, sha = verify(golden, weights_copy, state, "--algorithm", "sha256")
    assert facts(sha)["algorithm"] == "sha256"
    assert facts(sha)["files_from_cache"] == 0
    _, sha_again = verify(golden, weights_copy, state, "--algorithm", "sha256")
    assert facts(sha_again)["files_from_cache"] == N_FILES


def test_files_with_a_future_mtime_are_never_recorded(
    golden: GoldenKit, weights_copy: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    future = time.time_ns() + 3600 * 10**9
    for p in weights_copy.iterdir():
        os.utime(p, ns=(future, future))
    verify(golden, weights_copy, state)
    proc, again = verify(golden, weights_copy, state)
    assert proc.returncode == 0, proc.stderr
    assert (facts(again)["files_hashed"], facts(again)["files_from_cache"]) == (N_FILES, 0)
    assert json.loads(state_file(state).read_bytes())["records"] == {}


def test_an_unwritable_state_dir_is_a_note_not_a_failure(
    golden: GoldenKit, weights: Path, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    proc, report = verify(golden, weights, tmp_path / "a-file" / "state")
    assert proc.returncode == 0, proc.stderr
    assert facts(report)["cache"]["saved"] is False
    assert "verification cache not saved" in facts(report)["cache"]["note"]
    assert "note: verification cache not saved" in proc.stderr


def test_first_mismatch_stops_the_run(golden: GoldenKit, weights: Path, tmp_path: Path) -> None:
    lock = WeightsLock.model_validate_json(golden.lock.read_bytes())
    first = min(lock.files, key=lambda f: (-f.size, f.path))  # the order files are hashed in
    with (weights / first.path).open("r+b") as handle:
        handle.write(b"\x00")
    proc, report = verify(golden, weights, tmp_path / "state", "--workers", "1")
    assert proc.returncode == 1
    assert [p["path"] for p in report["checks"][-1]["problems"]] == [first.path]
    assert facts(report)["files_hashed"] == 1
    assert facts(report)["bytes_hashed"] == first.size
    proc, every = verify(golden, weights, tmp_path / "state2", "--all-errors")
    assert facts(every)["files_hashed"] == N_FILES


def test_verify_imports_neither_huggingface_hub_nor_jinja2(
    golden: GoldenKit, weights: Path, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "k3kit",
            "verify",
            golden.kit,
            "--trust",
            golden.key.public,
            "--weights",
            weights,
            "--state-dir",
            tmp_path / "s",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "k3kit.node.verify" in imported and "k3kit.weights.hashpool" in imported
    assert not {m for m in imported if m.split(".")[0] in ("huggingface_hub", "jinja2")}
    code = (
        "import sys, k3kit.node.verify; print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('huggingface_hub', 'jinja2', 'k3kit.weights.pin', 'k3kit.render')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_progress_only_on_a_terminal_and_never_with_quiet(
    golden: GoldenKit, weights: Path, tmp_path: Path
) -> None:
    proc, _ = verify(golden, weights, tmp_path / "s1")
    assert "ETA" not in proc.stderr and "\r" not in proc.stderr

    def on_tty(*extra: str) -> str:
        leader, follower = pty.openpty()
        with subprocess.Popen(
            [
                sys.executable,
                "-m",
                "k3kit",
                "verify",
                str(golden.kit),
                "--trust",
                str(golden.key.public),
                "--weights",
                str(weights),
                "--full",
                "--state-dir",
                str(tmp_path / "s2"),
                *extra,
            ],
            stderr=follower,
            stdout=subprocess.DEVNULL,
        ) as child:
            os.close(follower)
            chunks = []
            while True:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # EIO: the child closed its end
                    break
                if not data:
                    break
                chunks.append(data)
            assert child.wait(timeout=120) == 0
        os.close(leader)
        return b"".join(chunks).decode()

    shown = on_tty()
    assert "verifying weights:" in shown and "ETA" in shown and "B/s," in shown
    assert "verdict: VERIFIED" in shown
    quiet = on_tty("--quiet")
    assert "verifying weights:" not in quiet
    assert quiet.strip().splitlines() == ["verdict: VERIFIED"]


@pytest.mark.parametrize("order", ["first-saves-first", "second-saves-first"])
def test_concurrent_runs_merge_their_records_and_never_resurrect_a_failure(
    tmp_path: Path, order: str
) -> None:
    """Two runs over one state file (unit level: the settle rule is satisfied by passing a later
    start time, which the CLI tests cannot do without sleeping)."""
    from k3kit._digest import digest_file
    from k3kit.weights.vcache import VerifyCache

    files = {}
    for name in ("a", "b", "c"):
        (tmp_path / name).write_bytes(name.encode() * 1000)
        files[name] = digest_file(tmp_path / name, ("sha256",))
    later = time.time_ns() + 10 * SETTLE_NS
    state, lock = tmp_path / "state", "1" * 64

    def remember(cache: VerifyCache, name: str) -> None:
        d = files[name]
        assert cache.remember(str(tmp_path / name), d, "sha256", d.digests["sha256"], later)

    seed = VerifyCache(state, lock)
    remember(seed, "c")
    seed.save()
    first, second = VerifyCache(state, lock), VerifyCache(state, lock)  # both load {c}
    remember(first, "a")
    second.forget(str(tmp_path / "c"))  # the second run found c changed
    remember(second, "b")
    for cache in (first, second) if order == "first-saves-first" else (second, first):
        cache.save()
    records = json.loads((state / "verify" / f"{lock}.json").read_bytes())["records"]
    assert sorted(Path(k).name for k in records) == ["a", "b"]


def _hold_open_for_writing(path: Path) -> subprocess.Popen[str]:
    """A real writer: another process with ``path`` open O_WRONLY until it is killed."""
    code = (
        "import os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
        "print('open', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "open\n"
    return proc


def test_a_file_a_writer_holds_open_is_verified_but_never_recorded(
    golden: GoldenKit, weights_copy: Path, tmp_path: Path
) -> None:
    """A write() in flight (or one that will land later through a writable descriptor) may change
    the bytes without moving the times again: such a file is never vouched for by the cache."""
    state = tmp_path / "state"
    shard = sorted(weights_copy.glob("*.safetensors"))[0]
    writer = _hold_open_for_writing(shard)
    try:
        proc, report = verify(golden, weights_copy, state)
    finally:
        writer.kill()
        writer.wait()
    assert proc.returncode == 0, proc.stderr
    note = facts(report)["cache"]["note"]
    assert note == "cache not used for 1 file(s): a process has it open for writing"
    records = json.loads(state_file(state).read_bytes())["records"]
    assert str(shard.resolve()) not in records
    assert len(records) == N_FILES - 1
    # Once the writer is gone the next run hashes it again (and may record it then).
    _, again = verify(golden, weights_copy, state)
    assert (facts(again)["files_hashed"], facts(again)["files_from_cache"]) == (1, N_FILES - 1)


def test_a_lease_is_broken_by_a_writer_that_opens_during_the_read(tmp_path: Path) -> None:
    from k3kit.weights._lease import ReadLease

    path = tmp_path / "f"
    path.write_bytes(b"x" * 1024)
    lease = ReadLease(path)
    assert lease.note is None and lease.intact()
    writer = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys\n"
            "try:\n    os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)\n"
            "except BlockingIOError:\n    print('blocked')\n",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert writer.stdout == "blocked\n"  # O_NONBLOCK: refused at once, and the break is started
    assert not lease.intact()
    assert lease.note == "a process opened it for writing while it was read"
    assert lease.fd is None  # released at once, so the writer waits no longer
    with open(path, "r+b"):
        pass


def _new_fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _new_symlink(path: Path) -> Path:
    path.with_name("target").write_bytes(b"x")
    path.symlink_to("target")
    return path


@pytest.mark.parametrize(
    ("make", "note"),
    [
        (lambda p: p, "cannot open for a lease: No such file or directory"),
        (_new_symlink, "cannot open for a lease: Too many levels of symbolic links"),
        (_new_fifo, "no lease: not a regular file"),
        (lambda p: (p.mkdir(), p)[1], "no lease: not a regular file"),
    ],
    ids=["missing", "symlink", "fifo", "directory"],
)
def test_a_lease_is_refused_with_its_reason(
    tmp_path: Path, make: Callable[[Path], Path], note: str
) -> None:
    """Every lease refusal is a note that keeps the file out of the cache, never a crash."""
    from k3kit.weights._lease import ReadLease

    lease = ReadLease(make(tmp_path / "f"))
    assert lease.fd is None and lease.note == note
    assert not lease.intact()
    lease.release()  # releasing a lease never taken is harmless


def test_no_lease_while_this_process_holds_the_file_open_for_writing(tmp_path: Path) -> None:
    from k3kit.weights._lease import ReadLease

    path = tmp_path / "f"
    path.write_bytes(b"x")
    with open(path, "ab"):
        lease = ReadLease(path)
        assert lease.fd is None and lease.note == "a process has it open for writing"
    lease = ReadLease(path)
    assert lease.note is None and lease.intact()
    lease.release()
    lease.release()
    assert lease.fd is None


def test_an_os_without_leases_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    from k3kit.weights._lease import ReadLease

    monkeypatch.delattr(fcntl, "F_SETLEASE")
    (tmp_path / "f").write_bytes(b"x")
    lease = ReadLease(tmp_path / "f")
    assert lease.note == "this OS has no file leases" and not lease.intact()


@pytest.mark.parametrize(
    ("err", "note"),
    [
        (errno.EAGAIN, "a process has it open for writing"),
        (errno.EACCES, "no lease: not the file's owner and no CAP_LEASE"),
        (errno.EPERM, "no lease: not the file's owner and no CAP_LEASE"),
        (errno.EINVAL, "no lease: this filesystem does not support file leases"),
        (errno.EIO, "no lease: Input/output error"),
    ],
    ids=["EAGAIN", "EACCES", "EPERM", "EINVAL", "EIO"],
)
def test_each_lease_refusal_errno_has_its_reason(err: int, note: str) -> None:
    from k3kit.weights._lease import _lease_refusal

    assert _lease_refusal(OSError(err, os.strerror(err))) == note


_LOCK = "c" * 64
_GOOD_RECORD = {"algorithm": "sha256", "digest": "d" * 64, "stamp": "1:2:3:4:5"}


def _state(**changes: Any) -> bytes:
    doc: dict[str, Any] = {
        "schema": "k3kit.verify-cache/v1",
        "lock_sha256": _LOCK,
        "records": {"/w/model.safetensors": dict(_GOOD_RECORD)},
    }
    doc.update(changes)
    return json.dumps(doc).encode()


def _record(**changes: Any) -> bytes:
    return _state(records={"/w/a": {**_GOOD_RECORD, **changes}})


STATE_DISTRUSTED = [
    ("not JSON", b"{", "verification cache"),
    ("a float", _state(extra=0.5), "verification cache"),
    ("an extra top-level field", _state(extra=1), "unexpected top-level fields"),
    ("another schema", _state(schema="k3kit.verify-cache/v0"), "schema is not"),
    ("another weight lock", _state(lock_sha256="e" * 64), "written for another weight lock"),
    ("records a list", _state(records=[]), "records is not a bounded object"),
    ("a relative key", _state(records={"w/a": _GOOD_RECORD}), "not an absolute path"),
    ("a NUL in a key", _state(records={"/w/a\x00b": _GOOD_RECORD}), "not an absolute path"),
    ("a record field too many", _record(size=3), "unexpected fields"),
    ("an unknown algorithm", _record(algorithm="md5"), "unknown algorithm"),
    ("a short digest", _record(digest="d" * 63), "not 64 hex digits"),
    ("an upper-case digest", _record(digest="D" * 64), "not 64 hex digits"),
    ("a stamp that is not a stamp", _record(stamp="1:2:3"), "stamp is malformed"),
    ("a stamp that is a number", _record(stamp=12345), "stamp is malformed"),
]


@pytest.mark.parametrize(
    ("data", "why"), [c[1:] for c in STATE_DISTRUSTED], ids=[c[0] for c in STATE_DISTRUSTED]
)
def test_a_state_file_that_is_not_exactly_ours_is_distrusted(data: bytes, why: str) -> None:
    """A distrusted state file costs a re-hash, never a verdict: every departure is named."""
    from k3kit._fs import UntrustedState
    from k3kit.weights.vcache import _parse

    with pytest.raises(UntrustedState, match=re.escape(why)):
        _parse(data, _LOCK)


def test_a_well_formed_state_file_is_read() -> None:
    from k3kit.weights.vcache import Record, _parse

    assert _parse(_state(), _LOCK) == {
        "/w/model.safetensors": Record("sha256", "d" * 64, "1:2:3:4:5")
    }


def test_a_cache_folder_in_a_link_loop_is_refused_not_raised(tmp_path: Path) -> None:
    """The folder check's OSError (a link loop, a stale NFS handle) is a refused cache: every
    file is hashed, the report says why; it never becomes the run's error."""
    from k3kit.weights.vcache import VerifyCache

    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    cache = VerifyCache(loop, "0" * 64)
    assert cache.status.startswith("refused (STATE_DIR_UNSAFE"), cache.status
