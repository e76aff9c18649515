"""The hashing engine: digests equal the reference libraries, reads stop when told, buffers reused.

Speed is not asserted here (benchmarks/bench_verify.py measures it); these tests pin down the
behaviour the speed relies on: correct digests on every read path, cancellation within one buffer,
a stamp that notices a file changing under the reader, and early exit across files.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import blake3
import pytest

from k3kit._canonical import model_bytes, sha256_of_model
from k3kit._digest import (
    BUFFER_BUDGET,
    CHUNK,
    MIN_CHUNK,
    PIPELINE_DEPTH,
    SMALL_BYTES,
    Cancelled,
    FileStamp,
    NotRegularFile,
    StreamHash,
    digest_file,
    hash_fd,
    read_size,
    sha256_hex,
)
from k3kit.models import _lite, lite
from k3kit.weights.hashpool import HashJob, plan, run_jobs
from k3kit.weights.vcache import COARSE_SETTLE_NS, SETTLE_NS, settled
from tests.conftest import GoldenKit

SMALL = 4096  # a small buffer makes multi-read paths cheap to exercise


def _write(path: Path, size: int, seed: int = 0) -> bytes:
    data = blake3.blake3(f"seed-{seed}".encode()).digest(length=size)
    path.write_bytes(data)
    return data


def _hash_fd_of(
    path: Path, algorithms: tuple[str, ...], **options: Any
) -> tuple[dict[str, str], int]:
    """``hash_fd`` of ``path`` opened plainly (the read paths under test, not the safe open)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return hash_fd(fd, algorithms, **options)
    finally:
        os.close(fd)


@pytest.mark.parametrize("size", [0, 1, SMALL - 1, SMALL, SMALL + 1, 5 * SMALL + 7])
@pytest.mark.parametrize("blake3_threads", [1, 2])
def test_digests_match_reference_on_every_read_path(
    tmp_path: Path, size: int, blake3_threads: int
) -> None:
    data = _write(tmp_path / "f", size)
    digests, total = _hash_fd_of(
        tmp_path / "f", ("sha256", "blake3"), blake3_threads=blake3_threads, buffer=bytearray(SMALL)
    )
    assert total == size
    assert digests == {
        "sha256": hashlib.sha256(data).hexdigest(),
        "blake3": blake3.blake3(data).hexdigest(),
    }


# sha256 of up to SMALL_BYTES is cryptography's, of more hashlib's (verify imports no hashlib):
# around the switch, with reads smaller and larger than it, the digest is hashlib's of the bytes
@pytest.mark.parametrize("size", [SMALL_BYTES - 1, SMALL_BYTES, SMALL_BYTES + 1, 3 * SMALL_BYTES])
@pytest.mark.parametrize("buffer_size", [SMALL, SMALL_BYTES, CHUNK])
def test_sha256_is_hashlibs_on_both_sides_of_the_small_file_switch(
    tmp_path: Path, size: int, buffer_size: int
) -> None:
    data = _write(tmp_path / "f", size)
    digests, total = _hash_fd_of(tmp_path / "f", ("sha256",), buffer=bytearray(buffer_size))
    assert (digests, total) == ({"sha256": hashlib.sha256(data).hexdigest()}, size)
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()
    stream = StreamHash(("sha256",))
    for start in range(0, size, SMALL):
        stream.update(data[start : start + SMALL])
    assert stream.hexdigests() == {"sha256": hashlib.sha256(data).hexdigest()}


def test_sha256_hex_of_bytes_in_memory_is_hashlibs() -> None:
    for data in (b"", b"abc", bytes(range(256)) * 300):
        assert sha256_hex(data) == hashlib.sha256(data).hexdigest()
        assert sha256_hex(memoryview(bytearray(data))) == hashlib.sha256(data).hexdigest()
    record = _lite.read(lite.DsseSignature, {"keyid": "k", "sig": "c2ln"}, source="test")
    assert sha256_of_model(record) == hashlib.sha256(model_bytes(record)).hexdigest()


# A kit file's read buffer is fitted to the size fstat gave (fitted_buffer) and its sha256 held
# in memory up to SMALL_BYTES: a writer who grows or shrinks the file between that fstat and the
# reads (a co-tenant racing verify) must get the digest of the bytes actually read, never one of
# the size first seen, whichever side of the switch the file lands on.
@pytest.mark.parametrize(
    ("size", "grown"),
    [
        (0, SMALL_BYTES + 1),
        (10, SMALL_BYTES - 10),
        (10, SMALL_BYTES - 9),
        (SMALL_BYTES, 1),
        (SMALL_BYTES - 1, 2 * CHUNK + 3),
        (SMALL_BYTES + 1, -(SMALL_BYTES + 1)),
        (SMALL_BYTES + 1, -2),
    ],
)
def test_a_file_resized_between_its_stat_and_its_reads_is_hashed_as_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, grown: int
) -> None:
    import k3kit._digest as digest

    path = tmp_path / "f"
    _write(path, size)
    final = _write(tmp_path / "g", size + grown, seed=1) if grown > 0 else None
    fitted = digest.fitted_buffer

    def resized_after_stat(stat_size: int) -> bytearray:
        assert stat_size == size  # the size seen before the race
        if final is None:
            os.truncate(path, size + grown)
        else:
            path.write_bytes(final)
        return fitted(stat_size)

    monkeypatch.setattr(digest, "fitted_buffer", resized_after_stat)
    result = digest.hash_file(path)
    data = path.read_bytes()
    assert len(data) == size + grown  # the race was run
    assert result == ({"sha256": hashlib.sha256(data).hexdigest()}, len(data))


def test_a_kit_file_grown_past_the_small_file_switch_while_hashed_is_changed(
    kit: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verify's kit_files step: the walk saw the listed size, then the file grew past SMALL_BYTES
    before its bytes were read (the hasher switched engines mid-file): KIT_FILE_CHANGED."""
    import k3kit._digest as digest
    from k3kit.formats.documents import read_document
    from k3kit.formats.manifest import diff_tree

    manifest = read_document(
        kit / "MANIFEST.json", lite.Manifest, max_bytes=1 << 24, code="MANIFEST_MALFORMED"
    ).model
    target = kit / "kit.json"
    original = target.read_bytes()
    fitted = digest.fitted_buffer
    grown: list[int] = []

    def grows(size: int) -> bytearray:
        if size == len(original) and target.read_bytes() == original:
            with target.open("ab") as f:
                f.write(b" " * (SMALL_BYTES + 1))
            grown.append(size)
        return fitted(size)

    monkeypatch.setattr(digest, "fitted_buffer", grows)
    differences = diff_tree(kit, manifest).differences
    assert grown  # the race was run
    assert [(d.code, d.path) for d in differences] == [("KIT_FILE_CHANGED", "kit.json")]


@pytest.mark.parametrize("size", [0, SMALL_BYTES, SMALL_BYTES + 1])
def test_a_publishers_kit_file_at_the_small_file_switch_verifies_and_one_flipped_byte_does_not(
    kit: Path, golden: GoldenKit, size: int
) -> None:
    """The corpus cases ``kit_file_of_*_256_kib_*`` refuse a changed file at the switch; the
    genuine one, signed at that size, must verify (or those refusals prove nothing)."""
    from k3kit.node.verify import verify_dir
    from k3kit.signing.keys import load_public
    from tests.launchkit import hand_signed

    hand_signed(kit, golden.key, "README.md", lambda data: (data * (size // len(data) + 1))[:size])
    keys = [load_public(golden.key.public)]
    assert verify_dir(kit, keys).ok
    readme = kit / "README.md"
    data = bytearray(readme.read_bytes())
    assert len(data) == size
    if data:  # an empty file has no byte to flip
        data[-1] ^= 1
        readme.write_bytes(bytes(data))
        checks = {c.id: c.code for c in verify_dir(kit, keys).checks}
        assert checks["kit_files"] == "KIT_FILE_CHANGED", checks


@pytest.mark.parametrize("blake3_threads", [1, 2])
def test_cancel_stops_a_large_file_within_one_buffer(tmp_path: Path, blake3_threads: int) -> None:
    _write(tmp_path / "big", 64 * SMALL)
    cancel = threading.Event()
    consumed: list[int] = []

    def first_read_then_cancel(n: int) -> None:
        consumed.append(n)
        cancel.set()

    with pytest.raises(Cancelled):
        digest_file(
            tmp_path / "big",
            ("blake3",),
            blake3_threads=blake3_threads,
            buffer=bytearray(SMALL),
            cancel=cancel,
            on_bytes=first_read_then_cancel,
        )
    assert consumed == [SMALL]  # one buffer hashed, 63 left unread by the hasher


def test_stamp_notices_a_file_changing_during_the_read(tmp_path: Path) -> None:
    path = tmp_path / "f"
    _write(path, 8 * SMALL)
    grown = False

    def append_once(_n: int) -> None:
        nonlocal grown
        if not grown:
            grown = True
            with path.open("ab") as handle:
                handle.write(b"x")

    result = digest_file(path, ("sha256",), buffer=bytearray(SMALL), on_bytes=append_once)
    assert not result.stable
    quiet = digest_file(path, ("sha256",), buffer=bytearray(SMALL))
    assert quiet.stable
    assert quiet.before == FileStamp.of(path.stat())


def test_digest_file_refuses_symlinks_and_special_files(tmp_path: Path) -> None:
    _write(tmp_path / "real", 10)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(OSError):  # O_NOFOLLOW: ELOOP, never the target's bytes
        digest_file(tmp_path / "link", ("sha256",))
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFile):
        digest_file(tmp_path / "fifo", ("sha256",))


def test_read_size_keeps_total_buffer_memory_bounded() -> None:
    assert read_size(1) == CHUNK
    for workers in (1, 2, 16, 64, 256, 10_000):
        size = read_size(workers)
        assert MIN_CHUNK <= size <= CHUNK
        assert size * workers <= max(BUFFER_BUDGET, MIN_CHUNK * workers)


def test_plan_puts_spare_workers_inside_files_only_for_blake3() -> None:
    one = plan(1, 8, "blake3")
    assert (one.threads, one.inner(0)) == (1, 8)
    three = plan(3, 8, "blake3")
    assert (three.threads, [three.inner(i) for i in range(3)]) == (3, [2, 2, 2])
    even = plan(96, 8, "blake3")
    assert even.threads == 8 and {even.inner(i) for i in range(96)} == {1}
    # 96 shards on 64 cores: one full round, then 32 files with two threads each.
    tail = plan(96, 64, "blake3")
    assert [tail.inner(i) for i in (0, 63, 64, 95)] == [1, 1, 2, 2]
    assert plan(1, 8, "sha256").inner(0) == 1
    assert plan(96, 64, "sha256").inner(95) == 1
    big = plan(2, 64, "blake3")
    assert big.threads * PIPELINE_DEPTH * big.pipelined_chunk <= BUFFER_BUDGET
    assert big.threads * big.chunk <= BUFFER_BUDGET


def _jobs(tmp_path: Path, sizes: list[int], bad: set[int]) -> list[HashJob]:
    jobs = []
    for i, size in enumerate(sizes):
        data = _write(tmp_path / f"f{i:02d}", size, seed=i)
        want = hashlib.sha256(data).hexdigest()
        if i in bad:
            want = hashlib.sha256(b"something else").hexdigest()
        jobs.append(HashJob(f"f{i:02d}", tmp_path / f"f{i:02d}", size, want))
    return jobs


def test_first_mismatch_stops_every_later_file(tmp_path: Path) -> None:
    # Biggest first: with one worker the bad file (index 0, largest) is hashed first, and the
    # worker raises the stop flag before it can pick up the next file.
    sizes = [40 * SMALL] + [SMALL] * 20
    pool = run_jobs(_jobs(tmp_path, sizes, {0}), "sha256", workers=1)
    assert [r.job.name for r in pool.results] == ["f00"]
    assert pool.results[0].problem is not None
    assert pool.results[0].problem[0] == "DIGEST_MISMATCH"
    assert pool.cancelled == 20
    assert pool.bytes_read == 40 * SMALL


def test_all_errors_hashes_everything_and_reports_each_bad_file(tmp_path: Path) -> None:
    sizes = [3 * SMALL, SMALL, 2 * SMALL, SMALL]
    progress: list[tuple[int, int]] = []
    pool = run_jobs(
        _jobs(tmp_path, sizes, {1, 3}),
        "sha256",
        workers=2,
        stop_on_first=False,
        on_progress=lambda done, total: progress.append((done, total)),
    )
    assert sorted(r.job.name for r in pool.results if not r.ok) == ["f01", "f03"]
    assert len(pool.results) == 4
    assert pool.bytes_read == sum(sizes)
    assert progress[-1] == (sum(sizes), sum(sizes))


def test_settle_rule_needs_older_timestamps_on_coarse_filesystems() -> None:
    now = 1_800_000_000_123_456_789
    fine = FileStamp(1, 2, 3, now - SETTLE_NS - 1, now - SETTLE_NS - 1)
    assert settled(fine, now)
    assert not settled(FileStamp(1, 2, 3, now - 10, now - 10), now)
    assert not settled(FileStamp(1, 2, 3, now + 10**12, now - SETTLE_NS * 5), now)  # future mtime
    whole = (now // 10**9) * 10**9 - SETTLE_NS  # whole-second stamps: a 1-2 s granularity fs
    assert not settled(FileStamp(1, 2, 3, whole, whole), now)
    older = whole - COARSE_SETTLE_NS
    assert settled(FileStamp(1, 2, 3, older, older), now)
