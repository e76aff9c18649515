"""The built-in example, end to end and offline: the main job of k3kit in under a minute.

The demo creates *stand-in* weights: a few small deterministic safetensors shards in Hugging Face
cache layout, clearly labelled as such. They stand in for Kimi K3's 96 shards / 1.56 TB, which no
demo downloads. Everything else is real: the key, the pin, the kit, the signed receipt, the archive
and the verifier, including the two tamper checks it shows failing, and the audit of the published
figures, whose findings are shown exactly as the rules find them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import blake3

from k3kit._canonical import model_bytes
from k3kit._fs import (
    MARKED,
    atomic_write,
    refuse_existing,
    remove_tree,
    write_output_marker,
)
from k3kit._pathpolicy import path_problem
from k3kit._resources import shipped_dir
from k3kit.archive import pack
from k3kit.audit import AuditReport, audit_path
from k3kit.errors import EnvironmentProblem, InputError
from k3kit.models import PackageDef
from k3kit.node.install import install
from k3kit.node.launch import LaunchPlan, plan_launch
from k3kit.node.verify import Report, verify_path
from k3kit.publish.kit import build, load_toml, sign
from k3kit.signing.keys import load_public, write_keypair
from k3kit.signing.schemes import signer_from_uri
from k3kit.weights import WeightsOptions
from k3kit.weights.pin import pin_local

EXAMPLE = "kimi-k3-b300x8"
STAND_IN_SHARDS = 4
STAND_IN_SHARD_BYTES = 6 * 1024 * 1024
STAND_IN_NOTE = (
    "STAND-IN WEIGHTS made by `k3kit demo`: deterministic filler in safetensors "
    "format, NOT the 1.56 TB upstream shards of moonshotai/Kimi-K3.\n"
)


@dataclass
class DemoResult:
    workdir: Path
    paths: dict[str, Path] = field(default_factory=dict)
    reports: dict[str, Report] = field(default_factory=dict)
    archive_sha256: str = ""
    audit: AuditReport | None = None
    launch_plan: LaunchPlan | None = None


# A stand-in for the engine binary, so the demo can show `launch` end to end on a machine without
# vLLM: it answers --version like vLLM 0.33.0 and is never executed for serving (dry run).
_STAND_IN_ENGINE = """#!/bin/sh
# k3kit demo: a STAND-IN for the vllm executable (answers --version only).
if [ "$1" = "--version" ]; then echo 0.33.0; exit 0; fi
echo "stand-in engine: not a real vLLM" >&2
exit 1
"""


def _safetensors(index: int, size: int) -> bytes:
    """A valid safetensors file of one U8 tensor filled from a seeded BLAKE3 stream."""
    header = {
        "__metadata__": {"k3kit_demo": "stand-in weights, not real"},
        f"stand_in.shard_{index}": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]},
    }
    raw = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    raw += b" " * (-len(raw) % 8)
    body = blake3.blake3(f"k3kit-demo-shard-{index}".encode()).digest(length=size)
    return struct.pack("<Q", len(raw)) + raw + body


def stand_in_files(
    shards: int = STAND_IN_SHARDS, shard_bytes: int = STAND_IN_SHARD_BYTES
) -> dict[str, bytes]:
    files = {
        f"model-{i:05d}-of-{shards:05d}.safetensors": _safetensors(i, shard_bytes)
        for i in range(1, shards + 1)
    }
    files["config.json"] = (
        json.dumps({"model_type": "kimi_k3", "k3kit_stand_in": True}, indent=2).encode() + b"\n"
    )
    files["STAND_IN_README.txt"] = STAND_IN_NOTE.encode()
    return files


def write_hf_cache(cache: Path, repo: str, files: dict[str, bytes]) -> Path:
    """Lay files out as huggingface_hub does: blobs by digest, snapshot symlinks, a refs entry."""
    listing = "".join(
        f"{name}\0{hashlib.sha256(data).hexdigest()}\n" for name, data in sorted(files.items())
    )
    commit = hashlib.sha1(listing.encode(), usedforsecurity=False).hexdigest()
    repo_dir = cache / ("models--" + repo.replace("/", "--"))
    snapshot = repo_dir / "snapshots" / commit
    for name, data in files.items():
        assert path_problem(name) is None
        digest = hashlib.sha256(data).hexdigest()
        atomic_write(repo_dir / "blobs" / digest, data, force=True)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("../..") / "blobs" / digest)
    atomic_write(repo_dir / "refs" / "main", commit.encode(), force=True)
    return snapshot


def _flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0x01]))


def _prepare_workdir(workdir: Path, *, force: bool) -> None:
    """An empty or new workdir is used as is; ``--force`` empties one an earlier demo wrote (its
    marker file says so) and nothing else: not a folder of yours, not the current folder."""
    if workdir.exists() and not workdir.is_symlink() and workdir.is_dir():
        if not any(workdir.iterdir()):
            write_output_marker(workdir, "demo")
            return
        if not force:
            raise InputError(
                f"{workdir} is not empty",
                code="OUTPUT_EXISTS",
                hint="pass --force to replace the demo folder, or --workdir DIR",
            )
    refuse_existing(workdir, force=force, folder=MARKED)
    if workdir.exists():
        remove_tree(workdir)  # the demo's installed kit is read-only
        if workdir.exists():
            raise EnvironmentProblem(f"cannot empty {workdir}", code="IO_ERROR")
    workdir.mkdir(parents=True, exist_ok=True)
    write_output_marker(workdir, "demo")


def run_demo(workdir: Path, *, force: bool, now: str, say: Callable[[str], None]) -> DemoResult:
    """Run every stage; ``say`` receives one line per step (the CLI prints them)."""
    _prepare_workdir(workdir, force=force)
    result = DemoResult(workdir)
    example = shipped_dir("examples") / EXAMPLE
    pkg = load_toml(example / "package.toml", PackageDef)

    paths, _ = write_keypair(workdir / "keys" / "demo", None)
    result.paths.update(private_key=paths.private, public_key=paths.public)
    say(f"keygen   demo signing key -> {paths.public} (private key 0600 beside it)")

    snapshot = write_hf_cache(workdir / "hf-cache", pkg.model.repo, stand_in_files())
    result.paths["weights"] = snapshot
    say(
        f"weights  {STAND_IN_SHARDS} STAND-IN shards of {STAND_IN_SHARD_BYTES // 2**20} MiB in "
        f"Hugging Face cache layout -> {snapshot}"
    )
    say("         (they stand in for the 96 shards / 1.56 TB of moonshotai/Kimi-K3)")

    lock = pin_local(snapshot, repo=pkg.model.repo, revision=snapshot.name, pinned_at=now)
    lock_path = workdir / "weights.lock.json"
    atomic_write(lock_path, model_bytes(lock))
    result.paths["lock"] = lock_path
    say(
        f"pin      {lock.file_count} files, {lock.total_bytes} bytes at commit "
        f"{lock.commit[:12]} -> {lock_path}"
    )

    kit_dir = workdir / "kit" / f"{pkg.package.name}-{pkg.package.version}"
    manifest = build(example / "package.toml", lock_path, kit_dir)
    result.paths["kit"] = kit_dir
    say(
        f"build    {len(manifest.files)} files, profiles {', '.join(sorted(pkg.profiles))} "
        f"-> {kit_dir}"
    )

    sign(kit_dir, signer_from_uri(str(paths.private)), example / "claims.toml", issued_at=now)
    say(
        f"sign     receipt (DSSE, Ed25519, in-toto Statement v1) -> {kit_dir / 'receipt.dsse.json'}"
    )

    archive = workdir / f"{pkg.package.name}-{pkg.package.version}.kit.tar.gz"
    digest, size = pack(kit_dir, archive)
    result.paths["archive"] = archive
    result.archive_sha256 = digest
    say(f"pack     {archive} ({size} bytes, sha256 {digest})")

    trusted = [load_public(paths.public)]
    result.reports["kit+weights"] = verify_path(kit_dir, trusted, weights=snapshot)
    result.reports["archive+weights"] = verify_path(archive, trusted, weights=snapshot)

    tampered_kit = workdir / "tamper" / "kit"
    shutil.copytree(kit_dir, tampered_kit)
    _flip_byte(tampered_kit / "profiles" / "interactive" / "single-node-8gpu" / "serve.yaml", 10)
    result.reports["tampered kit file"] = verify_path(tampered_kit, trusted, weights=snapshot)

    tampered_weights = workdir / "tamper" / "weights"
    shutil.copytree(snapshot, tampered_weights, symlinks=False)
    shard = sorted(tampered_weights.glob("*.safetensors"))[0]
    _flip_byte(shard, shard.stat().st_size // 2)
    result.reports["tampered weight shard"] = verify_path(
        kit_dir, trusted, weights=tampered_weights
    )
    result.paths["tamper"] = workdir / "tamper"

    installed = install(archive, trusted, workdir / "installed")
    result.paths["installed"] = installed.path
    say(f"install  verified archive installed read-only -> {installed.path}")
    engine_bin = workdir / "bin"
    atomic_write(engine_bin / "vllm", _STAND_IN_ENGINE.encode(), mode=0o755)
    result.launch_plan = plan_launch(
        installed.path,
        trusted,
        profile="interactive",
        weights=snapshot,
        runtime_dir=workdir / "state" / "launch",
        base_env={"PATH": f"{engine_bin}:/usr/bin:/bin"},
        weights_options=WeightsOptions(state_dir=workdir / "state"),
    )
    say(
        f"launch   dry run with a STAND-IN engine at {engine_bin / 'vllm'}: would exec "
        + " ".join(result.launch_plan.argv)
    )
    # The published figures are audited as they are; findings are shown, not "fixed".
    result.audit = audit_path(kit_dir, trusted)
    return result
