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
from typing import TYPE_CHECKING

import blake3

from k3kit._canonical import model_bytes
from k3kit._fs import (
    MARKED,
    atomic_write,
    refuse_existing,
    remove_tree,
    write_output_marker,
)
from k3kit._policy import path_problem
from k3kit._resources import shipped_dir
from k3kit.archive import pack
from k3kit.audit import AuditReport, audit_path
from k3kit.errors import EnvironmentProblem, InputError
from k3kit.formats.names import LOCK_NAME, RECEIPT_NAME
from k3kit.models import PackageDef
from k3kit.node.install import install
from k3kit.node.launch import LaunchPlan, plan_launch
from k3kit.node.verify import Report, verify_path
from k3kit.publish.kit import build, load_toml, sign
from k3kit.signing.keys import load_public, write_keypair
from k3kit.signing.schemes import signer_from_uri
from k3kit.weights import WeightsOptions
from k3kit.weights.pin import pin_local

if TYPE_CHECKING:
    from k3kit.signing.keys import PublicKey
    from k3kit.signing.signers import Signer

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


# The stand-in tokenizer's words: enough single-token ASCII words for `accept`'s prompt pool (it
# needs 50), including every word the stand-in server (scripts/standin_server.py) streams.
_STAND_IN_TEXT = (
    "the of and to in is was for that with as his on be at by had not are but from have they "
    "you which one were her all she there would their will when who him been has more if no out "
    "what said time can only other new some could these two may first then any like now over "
    "such our man even most made after also did many before must through back years where much "
    "your way well down should because each just those people how too little state good very "
    "make world still own see men work long get here between both life being under never day"
)
_STAND_IN_WORDS = _STAND_IN_TEXT.split()


def stand_in_tokenizer() -> bytes:
    """A word-level ``tokenizer.json`` (Hugging Face fast-tokenizer format): one token per word,
    so `k3kit accept` can build prompts of an exact length on the demo's stand-in weights."""
    vocab = {"[UNK]": 0} | {w: i for i, w in enumerate(_STAND_IN_WORDS, start=1)}
    doc: dict[str, object] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    return json.dumps(doc, indent=1).encode() + b"\n"


def stand_in_files(
    shards: int = STAND_IN_SHARDS,
    shard_bytes: int = STAND_IN_SHARD_BYTES,
    *,
    tokenizer: bool = False,
) -> dict[str, bytes]:
    """The stand-in repo; the demo adds a word-level tokenizer (the tests' golden weights keep
    their five files)."""
    files = {
        f"model-{i:05d}-of-{shards:05d}.safetensors": _safetensors(i, shard_bytes)
        for i in range(1, shards + 1)
    }
    files["config.json"] = (
        json.dumps({"model_type": "kimi_k3", "k3kit_stand_in": True}, indent=2).encode() + b"\n"
    )
    files["STAND_IN_README.txt"] = STAND_IN_NOTE.encode()
    if tokenizer:
        files["tokenizer.json"] = stand_in_tokenizer()
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

    snapshot = write_hf_cache(workdir / "hf-cache", pkg.model.repo, stand_in_files(tokenizer=True))
    result.paths["weights"] = snapshot
    say(
        f"weights  {STAND_IN_SHARDS} STAND-IN shards of {STAND_IN_SHARD_BYTES // 2**20} MiB in "
        f"Hugging Face cache layout -> {snapshot}"
    )
    say("         (they stand in for the 96 shards / 1.56 TB of moonshotai/Kimi-K3)")

    lock = pin_local(snapshot, repo=pkg.model.repo, revision=snapshot.name, pinned_at=now)
    lock_path = workdir / LOCK_NAME
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
    say(f"sign     receipt (DSSE, Ed25519, in-toto Statement v1) -> {kit_dir / RECEIPT_NAME}")

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
    result.paths["card"] = _write_card(archive, trusted, workdir)
    say(f"card     the package card a buyer reads -> {result.paths['card']}")
    _channel_stage(result, example, signer_from_uri(str(paths.private)), trusted, now, say)
    return result


def _channel_stage(
    result: DemoResult,
    example: Path,
    signer: Signer,
    trusted: list[PublicKey],
    now: str,
    say: Callable[[str], None],
) -> None:
    """The maintenance channel: v1.0.0 and then v1.1.0 published to a TUF repository served by a
    static server on 127.0.0.1 (offline: loopback only), and ``update`` moving a second folder
    from v1.0.0 to v1.1.0. Imported here: python-tuf is needed by this stage only."""
    from k3kit.channel.demo import ChannelDemo

    workdir = result.workdir
    v110 = workdir / "kit" / f"{EXAMPLE}-1.1.0"
    build(example / "v1.1.0" / "package.toml", result.paths["lock"], v110)
    sign(v110, signer, example / "v1.1.0" / "claims.toml", issued_at=now)
    archive = workdir / f"{EXAMPLE}-1.1.0.kit.tar.gz"
    pack(v110, archive)
    chan = ChannelDemo.create(workdir / "channel", workdir / "keys" / "channel", trusted)
    say(f"channel  TUF repository (root, targets, snapshot, timestamp) -> {chan.repo}")
    fleet = workdir / "fleet"
    with chan.served() as url:
        for kit in (result.paths["archive"], archive):
            target = chan.publish(kit)
            say(f"publish  {target} to channel stable, served at {url}")
            done = chan.update(url, fleet, workdir / "state")
            say(f"update   {done.installed.name} {done.installed.version} -> {done.installed.path}")
    result.paths["channel"] = chan.repo
    result.paths["fleet"] = fleet
    notes = workdir / "release-notes-1.1.0.md"
    atomic_write(notes, _release_notes(result.paths["archive"], archive, trusted).encode())
    result.paths["release_notes"] = notes
    say(f"notes    what changed from 1.0.0 to 1.1.0 -> {notes}")
    result.paths["update_card"] = _write_card(archive, trusted, workdir)
    say(f"card     the package card of the update -> {result.paths['update_card']}")


def _release_notes(old: Path, new: Path, trusted: list[PublicKey]) -> str:
    from k3kit.card import load_view
    from k3kit.publish.releasenotes import compare, render_markdown

    return render_markdown(compare(load_view(old, trusted), load_view(new, trusted)))


def try_next(result: DemoResult) -> list[str]:
    """The commands of README's "Try it on the demo" for this run's files (from the clone's root,
    with the venv's `k3kit` and `python3` on PATH): what the demo ends by suggesting."""
    p, w = result.paths, result.workdir
    archive, pub, lock = p["archive"], p["public_key"], p["lock"]
    kit = f"opt/{p['installed'].name}"
    repo_dir = p["weights"].parent.parent.name  # models--ORG--NAME of the cache layout
    return [
        f"k3kit card {archive} --trust {pub} --gpu-hour-usd 6.50 -o card.html",
        f"k3kit verify {archive} --trust {pub} --weights {w / 'hf-cache'}",
        f"k3kit install {archive} --trust {pub} --into opt",
        f"python3 scripts/dev_hub.py --lock {lock} --weights {w / 'hf-cache'} --port-file hub.port"
        "   # in a second terminal",
        f"HF_ENDPOINT=http://127.0.0.1:$(cat hub.port) k3kit pull {kit} --trust {pub} --dir models",
        f"k3kit preflight {kit} --profile interactive --trust {pub}   # exit 1 without 8x B300",
        f'PATH="{_shell_dir(w / "bin")}:$PATH" k3kit launch {kit} --profile interactive '
        f"--trust {pub} --weights models --no-preflight --dry-run",
        "python3 scripts/standin_server.py --port-file engine.port --tokenizer "
        f"models/{repo_dir}/snapshots/*/tokenizer.json   # in a second terminal",
        "k3kit keygen --out buyer",
        f"k3kit accept {kit} --trust {pub} --weights models --url "
        "http://127.0.0.1:$(cat engine.port) --key buyer.key --profile interactive "
        "--points 1 --requests 5 -o acceptance   # exit 1: a stand-in reproduces nothing",
    ]


def _shell_dir(path: Path) -> str:
    """A PATH entry that works from any folder: relative folders are written under ``$PWD``."""
    return str(path) if path.is_absolute() else f"$PWD/{path}"


def _write_card(archive: Path, trusted: list[PublicKey], workdir: Path) -> Path:
    """The card a buyer reads before buying, made from the verified archive as `k3kit card`
    makes it, so the demo ends with the page the README's "Try it on the demo" opens."""
    from k3kit.card import card_data, load_view, render_html

    view = load_view(archive, trusted)
    path = workdir / f"{view.info.package.name}-{view.info.package.version}.card.html"
    atomic_write(path, render_html(card_data(view, None)))
    return path
