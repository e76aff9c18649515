"""One-call pipelines for the publisher: build a kit directory, and sign its receipt.

``build`` renders into a staging directory beside the destination and renames it into place only
when every file, ``kit.json`` and finally ``MANIFEST.json`` are written, so a failure part-way
leaves the previous kit untouched. ``sign`` refuses to sign a kit whose files no longer match its
manifest: a receipt must only ever vouch for the bytes that were measured. It copies each run's
evidence file (named by the claims, relative to the claims file) to ``evidence/<run id>.json``:
the whole ``evidence/`` folder is staged and renamed into place, then the receipt is written, and
everything that can fail on bad input fails before the first write.
"""

from __future__ import annotations

import shutil
import tomllib
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from k3kit._canonical import model_bytes, require_canonical, sha256_of_model, strict_loads
from k3kit._fs import (
    FolderRule,
    atomic_write,
    read_capped,
    refuse_existing,
    replace_dir,
    staging_dir,
    walk,
)
from k3kit._version import __version__
from k3kit.engines import (
    KIT_SNAPSHOT_NAME,
    MAX_SNAPSHOT_BYTES,
    SnapshotFile,
    parse_snapshot_file,
    snapshot_file_bytes,
    snapshot_sha256,
    to_engine_snapshot,
)
from k3kit.errors import InputError, VerificationError
from k3kit.evidence import MAX_EVIDENCE_BYTES
from k3kit.formats.documents import (
    MAX_DOCUMENT_BYTES,
    parse_document,
    read_bounded,
    read_document,
)
from k3kit.formats.kitpath import MAX_MANIFEST_BYTES, kit_members_problem
from k3kit.formats.manifest import (
    EVIDENCE_DIR,
    MANIFEST_NAME,
    RECEIPT_NAME,
    build_manifest,
    diff_tree,
    kit_checksum,
)
from k3kit.formats.names import KIT_INFO_NAME, LOCK_NAME
from k3kit.formats.receipt import build_statement, evidence_kit_path
from k3kit.models import PAYLOAD_TYPE, Claims, KitInfo, Manifest, PackageDef, WeightsLock, load
from k3kit.publish.deploy import default_names
from k3kit.publish.targets import (
    check_model,
    chosen_targets,
    plan_targets,
    pool_facts,
    render_routers,
    render_target,
    site_example,
)
from k3kit.render import make_environment, render
from k3kit.signing.sign import MAX_ENVELOPE_BYTES, sign_envelope
from k3kit.signing.signers import Signer
from k3kit.weights.modelconfig import read_model_config

M = TypeVar("M", bound=BaseModel)
MAX_INPUT_BYTES = MAX_DOCUMENT_BYTES


def load_toml(path: Path, model: type[M]) -> M:
    """Parse a TOML input strictly; decimals keep their published precision."""
    data = read_capped(
        path, MAX_INPUT_BYTES, what="input file", error=InputError, code="INPUT_MISSING"
    )
    try:
        obj = tomllib.loads(data.decode("utf-8"), parse_float=Decimal)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid TOML: {exc}", code="BAD_INPUT") from exc
    return load(model, obj, source=str(path))


def load_lock(path: Path) -> WeightsLock:
    """A lock from ``k3kit pin``: bounded read, strict parse, validated (field errors first, they
    say what is wrong), then canonical bytes: they are what a receipt's weight checksum covers
    (``INPUT_MISSING`` / ``BAD_INPUT`` / ``JSON_NOT_CANONICAL``, exit 3)."""
    data = read_bounded(
        path, MAX_INPUT_BYTES, what="weights lock", error=InputError, code="INPUT_MISSING"
    )
    obj = strict_loads(
        data, source=str(path), max_bytes=MAX_INPUT_BYTES, error=InputError, code="BAD_INPUT"
    )
    lock = load(WeightsLock, obj, source=str(path))
    try:
        require_canonical(data, obj, source=str(path))
    except VerificationError as exc:
        raise InputError(exc.message, code=exc.code) from exc
    return lock


def is_kit_folder(folder: Path) -> bool:
    """A kit k3kit wrote is recognised by its own manifest: ``MANIFEST.json`` parses, and every
    entry of the folder is a file it lists (with its size) or one a kit may hold unlisted, the
    rule archives are admitted by (:func:`k3kit.formats.kitpath.kit_members_problem`).

    Why not "``kit.json`` and ``MANIFEST.json`` are there": a git checkout that merely holds those
    two (a kit committed for review, a copy of its manifest) would be wiped, ``.git/`` included,
    by ``build -o . --force``. A kit carries no marker file (the manifest would have to list it).
    """
    try:
        data = read_capped(
            folder / MANIFEST_NAME,
            MAX_MANIFEST_BYTES,
            what=MANIFEST_NAME,
            error=InputError,
            code="OUTPUT_NOT_A_KIT",
        )
        manifest = parse_document(
            data,
            Manifest,
            what=MANIFEST_NAME,
            max_bytes=MAX_MANIFEST_BYTES,
            error=InputError,
            code="OUTPUT_NOT_A_KIT",
        )
    except (InputError, VerificationError):  # whatever is wrong with it, it is not a kit
        return False
    if not any(entry.path == KIT_INFO_NAME for entry in manifest.files):
        return False
    entries = ((e.rel, e.kind, e.size) for e in walk(folder))
    return kit_members_problem(entries, manifest) is None


KIT_FOLDER = FolderRule(
    is_kit_folder,
    "OUTPUT_NOT_A_KIT",
    "a k3kit kit (only the files its MANIFEST.json lists, and a kit's unlisted documents)",
)


def readme_signer_line(public_key: Path, principal: str) -> str:
    """The ``allowed_signers`` line a kit README carries, so a buyer can check ``k3kit sshsig``'s
    ``MANIFEST.json.sig`` with ssh-keygen alone. A principal that line cannot hold is
    ``BAD_INPUT`` (exit 3), whichever front door (``build --ssh-signer``, ``api.build_kit``)."""
    from k3kit.signing.keys import load_public
    from k3kit.signing.trust.sshsig import allowed_signers_line

    try:
        return allowed_signers_line(load_public(public_key), principal)
    except ValueError as exc:
        raise InputError(f"--principal: {exc}", code="BAD_INPUT") from exc


def refuse_replacing(out: Path, *, force: bool) -> None:
    """``--force`` replaces an empty folder or a k3kit kit, never anything else (the one rule of
    :func:`k3kit._fs.refuse_existing`; ``OUTPUT_NOT_A_KIT``, exit 3). Checked before rendering."""
    refuse_existing(out, force=force, folder=KIT_FOLDER)


def build(
    package_path: Path,
    lock_path: Path,
    out: Path,
    *,
    force: bool = False,
    model_config: Path | None = None,
    allowed_signers: str | None = None,
    engine_snapshot: Path | None = None,
) -> Manifest:
    """Render and write a kit directory; returns its manifest.

    ``allowed_signers`` is the publisher's OpenSSH ``allowed_signers`` line
    (:func:`k3kit.signing.trust.sshsig.allowed_signers_line`): the README then shows a buyer how to
    check the kit's ``MANIFEST.json.sig`` with ``ssh-keygen -Y verify`` alone. It has to be known at
    build time because the README is one of the signed files.

    ``model_config`` is the weights' ``config.json``: accepted only when its sha256 is the one
    the lock lists, then its context length, layers and KV heads are checked and recorded.

    ``engine_snapshot`` is a snapshot file from ``k3kit engine snapshot`` for the pinned engine
    version: settings are checked against it, and it is copied into the kit as
    ``engine-snapshot.json`` and named with its digest in ``kit.json``, so the signature covers
    what the kit was validated against and launch checks the same file.
    """
    pkg = load_toml(package_path, PackageDef)
    supplied = _supplied_snapshot(engine_snapshot, pkg) if engine_snapshot is not None else None
    lock = load_lock(lock_path)
    if lock.repo != pkg.model.repo:
        raise InputError(
            f"{lock_path}: pins {lock.repo}, but {package_path} is for {pkg.model.repo}",
            code="LOCK_REPO_MISMATCH",
        )
    deploy = chosen_targets(pkg)
    facts = read_model_config(model_config, lock) if model_config is not None else None
    targets, problems = plan_targets(
        pkg, facts, to_engine_snapshot(supplied) if supplied is not None else None
    )
    problems += check_model(pkg, lock, facts)
    if problems:
        raise InputError(
            "\n".join(f"{package_path}: {p}" for p in problems), code="ENGINE_SETTING_INVALID"
        )
    refuse_replacing(out, force=force)  # before anything is rendered or written
    env = make_environment()
    weights = {
        "repo": lock.repo,
        "commit": lock.commit,
        "lock_sha256": sha256_of_model(lock),
        "file_count": lock.file_count,
        "total_bytes": lock.total_bytes,
    }
    base = {
        "package": pkg.package,
        "model": pkg.model,
        "hardware": pkg.hardware,
        "engine": pkg.engine,
        "weights": weights,
        "built_with": f"k3kit {__version__}",
    }
    rendered: dict[str, tuple[bytes, int]] = {}
    profiles = []
    for target in targets:
        files = render_target(env, base, pkg, target, deploy)
        rendered.update(files)
        prof = pkg.profiles[target.profile]
        profiles.append(
            {
                "name": target.profile,
                "topology": target.topo.name,
                "description": prof.description,
                "served_model_name": prof.served_model_name,
                "files": sorted(files),
                "nodes": target.topo.nodes,
                "gpus_per_node": target.topo.gpus_per_node,
                "measured": target.measured,
                "parallel": target.parallel.as_dict(),
                **pool_facts(target.topo),
            }
        )
    rendered.update(render_routers(env, base, pkg, targets))
    info = load(
        KitInfo,
        {
            **base,
            "engine_snapshot": _snapshot_ref(supplied),
            "profiles": profiles,
            "disaggregation": pkg.disaggregation,
            "model_config_facts": facts,
            "price": pkg.price,
            "limitations": pkg.limitations,
        },
        source=str(package_path),
    )
    ctx = {
        **base,
        "profiles": info.profiles,
        "limitations": pkg.limitations,
        "site_keys": site_example(pkg),
        "deploy": deploy,
        "deploy_targets": [t.name for t in deploy],
        "default_targets": default_names(),
        "allowed_signers": allowed_signers,
    }
    rendered["README.md"] = (render(env, "kit/README.md.j2", ctx), 0o644)
    rendered["site.example.env"] = (render(env, "kit/site.example.env.j2", ctx), 0o644)
    rendered[KIT_INFO_NAME] = (model_bytes(info), 0o644)
    rendered[LOCK_NAME] = (model_bytes(lock), 0o644)
    if supplied is not None:
        rendered[KIT_SNAPSHOT_NAME] = (snapshot_file_bytes(supplied), 0o644)

    stage = staging_dir(out)
    try:
        for rel, (data, mode) in sorted(rendered.items()):
            atomic_write(stage / rel, data, mode=mode)
        manifest = build_manifest(stage)
        atomic_write(stage / MANIFEST_NAME, model_bytes(manifest))
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    replace_dir(stage, out, force=force, folder=KIT_FOLDER)
    return manifest


def _supplied_snapshot(path: Path, pkg: PackageDef) -> SnapshotFile:
    """A publisher's snapshot file, strictly parsed, for exactly the pinned engine release
    (``ENGINE_SNAPSHOT_INVALID``, exit 3)."""
    data = read_capped(
        path,
        MAX_SNAPSHOT_BYTES,
        what="engine snapshot",
        error=InputError,
        code="ENGINE_SNAPSHOT_INVALID",
    )
    doc = parse_snapshot_file(
        data, source=str(path), error=InputError, code="ENGINE_SNAPSHOT_INVALID"
    )
    if not doc.is_for(pkg.engine.name, pkg.engine.release):
        raise InputError(
            f"{path}: is a snapshot of {doc.engine} {doc.version}, but the package pins "
            f"{pkg.engine.name} {pkg.engine.version}",
            code="ENGINE_SNAPSHOT_INVALID",
            hint="make the snapshot from the wheel of the version the package pins "
            "(k3kit engine snapshot --engine ENGINE --wheel WHEEL -o FILE)",
        )
    return doc


def _snapshot_ref(doc: SnapshotFile | None) -> dict[str, str] | None:
    if doc is None:
        return None
    return {
        "path": KIT_SNAPSHOT_NAME,
        "sha256": snapshot_sha256(doc),
        "wheel": doc.provenance.wheel,
        "wheel_sha256": doc.provenance.wheel_sha256,
        "generated_on": doc.provenance.generated_on,
    }


def _read_kit_doc(kit_dir: Path, name: str, model: type[M]) -> M:
    return read_document(
        kit_dir / name, model, max_bytes=MAX_INPUT_BYTES, error=InputError, code="KIT_INCOMPLETE"
    ).model


def _read_evidence(claims: Claims, claims_path: Path) -> dict[str, bytes]:
    """The bytes of every evidence file the claims name, keyed by run id."""
    out = {}
    for i, run in enumerate(claims.runs):
        if run.evidence is None:
            continue
        out[run.id] = read_capped(
            claims_path.parent / run.evidence,
            MAX_EVIDENCE_BYTES,
            what=f"{claims_path}: runs[{i}].evidence",
            error=InputError,
            code="EVIDENCE_MISSING",
        )
    return out


def _write_evidence(kit_dir: Path, files: dict[str, bytes], *, force: bool) -> None:
    """Replace ``evidence/`` as a whole, so it never mixes files of two signings."""
    folder = kit_dir / EVIDENCE_DIR
    exists = folder.exists() or folder.is_symlink()
    refuse_existing(folder, force=force, folder=_EVIDENCE_FOLDER)
    if not files:
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
        elif exists:
            folder.unlink()
        return
    stage = staging_dir(folder)
    try:
        for rel, data in sorted(files.items()):
            atomic_write(stage / Path(rel).name, data)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    replace_dir(stage, folder, force=force, folder=_EVIDENCE_FOLDER)


def _only_files(folder: Path) -> bool:
    """``evidence/`` as sign writes it: regular files, no folders, links or anything else."""
    return all(entry.kind == "file" and "/" not in entry.rel for entry in walk(folder))


_EVIDENCE_FOLDER = FolderRule(_only_files, mark="evidence/ as sign writes it (regular files)")


def sign(
    kit_dir: Path, key: Signer, claims_path: Path, *, issued_at: str, force: bool = False
) -> bytes:
    """Write ``receipt.dsse.json`` (and ``evidence/``) for a built kit; returns the signed bytes."""
    claims = load_toml(claims_path, Claims)
    if (kit_dir / RECEIPT_NAME).exists() and not force:
        raise InputError(
            f"{kit_dir / RECEIPT_NAME} exists", code="OUTPUT_EXISTS", hint="pass --force to replace"
        )
    evidence = _read_evidence(claims, claims_path)
    manifest = _read_kit_doc(kit_dir, MANIFEST_NAME, Manifest)
    drift = diff_tree(kit_dir, manifest).differences
    if drift:
        listing = "\n".join(f"  {d.code} {d.path}: {d.detail}" for d in drift)
        raise InputError(
            f"{kit_dir} no longer matches its MANIFEST.json; refusing to sign:\n{listing}",
            code="SIGN_KIT_CHANGED",
            hint="rebuild the kit",
        )
    info = _read_kit_doc(kit_dir, KIT_INFO_NAME, KitInfo)
    lock = _read_kit_doc(kit_dir, LOCK_NAME, WeightsLock)
    statement = build_statement(
        claims,
        info,
        kit_sha256=kit_checksum(manifest),
        lock_sha256=sha256_of_model(lock),
        issued_at=issued_at,
        source=str(claims_path),
        evidence=evidence,
    )
    envelope = sign_envelope(statement, PAYLOAD_TYPE, key)
    if len(envelope) > MAX_ENVELOPE_BYTES:  # never write a receipt no verifier will read
        raise InputError(
            f"the receipt would be {len(envelope)} bytes, over the {MAX_ENVELOPE_BYTES}-byte "
            "limit verifiers enforce",
            code="RECEIPT_WOULD_BE_TOO_LARGE",
            hint="attach per-request data as evidence files instead of inline claims",
        )
    _write_evidence(
        kit_dir, {evidence_kit_path(rid): data for rid, data in evidence.items()}, force=force
    )
    atomic_write(kit_dir / RECEIPT_NAME, envelope, force=force)
    return statement
