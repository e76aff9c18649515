"""Attacks on a weights folder (and the node's verification state), without the key.

Each case starts from a private copy of the genuine weights (a plain folder, or the Hugging Face
cache with its snapshot links into ``blobs/``) and verifies the genuine kit against it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from tests.adversarial.corpus import Argv, Workbench, attack

CONFIG = "config.json"


def _verify(w: Workbench, weights: Path, *extra: str | Path) -> Argv:
    return ["verify", w.kit(), "--trust", w.trust, "--weights", weights, *extra]


def _shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.safetensors"))


def _repo(w: Workbench) -> Path:
    return w.snapshot().parents[1]


def _evil_config(folder: Path) -> None:
    path = folder / CONFIG
    if path.is_symlink():
        path.unlink()
    path.write_text('{"auto_map": {"AutoModel": "evil.Model"}}\n')


# -- moved from tests/test_verify_attacks.py -------------------------------------------------


@attack("WEIGHTS_DIGEST_MISMATCH")
def weights_shard_changed_by_one_byte(w: Workbench) -> Argv:
    shard = _shards(w.plain_weights())[1]
    with open(shard, "r+b") as handle:
        handle.seek(4096)
        byte = handle.read(1)
        handle.seek(4096)
        handle.write(bytes([byte[0] ^ 0x80]))
    return _verify(w, w.plain_weights())


@attack("WEIGHTS_FILE_MISSING")
def weights_missing_shard(w: Workbench) -> Argv:
    _shards(w.plain_weights())[0].unlink()
    return _verify(w, w.plain_weights())


@attack("WEIGHTS_FILE_EXTRA")
def weights_extra_file(w: Workbench) -> Argv:
    (w.plain_weights() / "modeling_evil.py").write_text("import os; os.system('id')\n")
    return _verify(w, w.plain_weights())


@attack("WEIGHTS_TRUNCATED")
def weights_truncated_shard(w: Workbench) -> Argv:
    shard = _shards(w.plain_weights())[2]
    os.truncate(shard, shard.stat().st_size - 1)
    return _verify(w, w.plain_weights())


@attack("WEIGHTS_SYMLINK_ESCAPE")
def weights_snapshot_symlink_escaping_blobs(w: Workbench) -> Argv:
    victim = _shards(w.snapshot())[0]
    outside = w.root / "outside.safetensors"
    shutil.copy(victim, outside)  # same bytes, but not in the repo's blobs/
    victim.unlink()
    victim.symlink_to(outside)
    return _verify(w, w.snapshot())


@attack("WEIGHTS_FILE_EXTRA")
def weights_hf_metadata_names_on_a_fifo_a_big_file_and_a_link(w: Workbench) -> Argv:
    meta = w.plain_weights() / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    os.mkfifo(meta / "config.json.metadata")
    (meta / "evil.safetensors.incomplete").write_bytes(b"\0" * (64 * 1024 + 1))
    (meta / "x.lock").symlink_to("/etc/passwd")
    return _verify(w, w.plain_weights())


@attack("WEIGHTS_FILE_EXTRA")
def weights_file_hidden_under_hf_metadata_folder(w: Workbench) -> Argv:
    meta = w.plain_weights() / ".cache" / "huggingface"
    (meta / "download").mkdir(parents=True)
    (meta / "download" / "config.json.metadata").write_text("sha\netag\n0\n")  # excused
    (meta / "evil.safetensors").write_bytes(b"hidden")  # not huggingface_hub's bookkeeping
    return _verify(w, w.plain_weights())


# -- one folder, two meanings ------------------------------------------------------------------


@attack("WEIGHTS_AMBIGUOUS")
def weights_plain_folder_holding_a_genuine_cache(w: Workbench) -> Argv:
    """Verified as a cache root, the genuine nested snapshot would pass while an engine started
    on the folder itself loads its loose, unverified config.json and shards."""
    plain = w.plain_weights()
    _evil_config(plain)
    shutil.copytree(_repo(w), plain / _repo(w).name, symlinks=True)
    return _verify(w, plain)


@attack("WEIGHTS_AMBIGUOUS")
def weights_snapshot_folder_holding_a_nested_cache(w: Workbench) -> Argv:
    snapshot = w.snapshot()
    _evil_config(snapshot)
    nested = w.root / "nested" / _repo(w).name
    shutil.copytree(_repo(w), nested, symlinks=True)
    nested.rename(snapshot / nested.name)
    return _verify(w, snapshot)


@attack("WEIGHTS_AMBIGUOUS")
def weights_cache_root_holding_loose_model_files(w: Workbench) -> Argv:
    cache = w.snapshot().parents[2]
    for src in w.snapshot().iterdir():
        shutil.copy(src, cache / src.name)
    return _verify(w, cache)


# -- link policy -------------------------------------------------------------------------------


def _relink_through(w: Workbench, blobs_link: Path, stash: Path) -> Path:
    """Point every snapshot link through ``blobs_link`` (planted ``-> /``) at ``stash``: the
    bytes are genuine, but a link root that is itself a link would allow any file anywhere."""
    snapshot = w.snapshot()
    for link in sorted(p for p in snapshot.iterdir() if p.is_symlink()):
        real = Path(os.path.realpath(link))
        shutil.copy(real, stash / real.name)
        link.unlink()
        target = os.path.relpath(blobs_link, snapshot) + str(stash / real.name)
        link.symlink_to(target)
    return snapshot


@attack("WEIGHTS_SYMLINK_ESCAPE")
def weights_blobs_link_to_root_at_cache_root(w: Workbench) -> Argv:
    stash = w.root / "stash"
    stash.mkdir()
    planted = w.snapshot().parents[2] / "blobs"
    planted.symlink_to("/")
    return _verify(w, _relink_through(w, planted, stash))


@attack("WEIGHTS_SYMLINK_ESCAPE")
def weights_blobs_link_to_root_in_repo(w: Workbench) -> Argv:
    stash = w.root / "stash"
    stash.mkdir()
    snapshot = _relink_through(w, _repo(w) / "blobs", stash)
    shutil.rmtree(_repo(w) / "blobs")
    (_repo(w) / "blobs").symlink_to("/")
    return _verify(w, snapshot)


@attack("WEIGHTS_SYMLINK_CHAIN")
def weights_snapshot_link_to_a_link(w: Workbench) -> Argv:
    link = w.snapshot() / CONFIG
    blob = Path(os.path.realpath(link))
    (blob.parent / "relay").symlink_to(blob.name)  # a link inside blobs/, to the genuine blob
    link.unlink()
    link.symlink_to("../../blobs/relay")
    return _verify(w, w.snapshot())


# -- walk errors and names ---------------------------------------------------------------------


@attack("WEIGHTS_WALK_FAILED")
def weights_tree_deeper_than_path_max(w: Workbench) -> Argv:
    """Root reads any folder whatever its mode, so a folder without permission is no walk error
    in CI (tests/test_layouts.py covers it for other users); a path past PATH_MAX is one for all."""
    plain = w.plain_weights()
    fd = os.open(plain, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(24):  # 24 * 201 bytes > PATH_MAX (4096)
            os.mkdir("d" * 200, dir_fd=fd)
            nxt = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        os.close(os.open("model.safetensors", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    return _verify(w, plain)


@attack("WEIGHTS_BAD_NAME")
def weights_file_name_not_utf8(w: Workbench) -> Argv:
    plain = w.plain_weights()
    (plain / os.fsdecode(b"shard-\xff\xfe.safetensors")).write_bytes(b"x")
    return _verify(w, plain)


@attack("WEIGHTS_BAD_NAME")
def weights_file_name_with_terminal_escapes(w: Workbench) -> Argv:
    plain = w.plain_weights()
    (plain / "x\r\x1b[32mverdict: VERIFIED\x1b[0m").write_bytes(b"x")
    return _verify(w, plain)


# -- cost bounds and state -----------------------------------------------------------------------


@attack("WEIGHTS_SIZE_MISMATCH", timeout=30)
def weights_sparse_32gib_shard(w: Workbench) -> Argv:
    """Refused by its size before a byte is read (benchmarks/bench_bounds_weights.py)."""
    shard = _shards(w.plain_weights())[0]
    os.truncate(shard, 32 * 1024**3)
    return _verify(w, w.plain_weights())


@attack("WEIGHTS_DIGEST_MISMATCH")
def weights_state_file_with_a_5000_digit_integer(w: Workbench) -> Argv:
    """A damaged state file costs a re-hash, never a crash and never a hidden change."""
    lock_sha = hashlib.sha256((w.kit() / "weights.lock.json").read_bytes()).hexdigest()
    state = w.root / "state"
    (state / "verify").mkdir(parents=True, mode=0o700)
    doc = '{"lock_sha256": "%s", "records": %s, "schema": "k3kit.verify-cache/v1"}'
    path = state / "verify" / f"{lock_sha}.json"
    path.write_text(doc % (lock_sha, "9" * 5000))
    path.chmod(0o600)
    shard = _shards(w.plain_weights())[0]
    with open(shard, "r+b") as handle:
        handle.write(b"\x00\x01")
    return _verify(w, w.plain_weights(), "--state-dir", state)
