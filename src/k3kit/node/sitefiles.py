"""``k3kit render-site``: the buyer's deploy files, site values filled in and checked.

The kit's compose, systemd and Kubernetes files carry ``${KEY}`` placeholders for site values.
This fills them from a site file that passed :func:`k3kit.node.site.parse_site`: only schema keys,
each matching its pattern (no quotes, spaces or newlines can reach a YAML or unit file), and none
that names a value the kit locks. Runtime values (``NODE_RANK``, ``$(LWS_WORKER_INDEX)``) stay as
they are. Nothing in the kit is modified.

The files rendered here become a systemd unit that runs as root, a compose file, Kubernetes
objects: a line added to a kit file (an ``ExecStartPre=``) would run before the unit's own
``k3kit verify``. So the kit is verified against its signed receipt first
(:func:`k3kit.node.verify.open_verified`: ``--trust`` or ``--root`` like ``verify``), and every file
is rendered from the bytes compared in memory with the verified manifest, never re-read unchecked.
The output folder carries k3kit's marker file, so ``--force`` replaces it, and only it: a folder
k3kit did not write (a git checkout, a home folder) is refused even with ``--force``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from k3kit._fs import (
    MARKED,
    atomic_write,
    check_trust_anchor,
    refuse_existing,
    replace_dir,
    staging_dir,
    write_output_marker,
)
from k3kit.engines import adapter
from k3kit.errors import InputError, UsageProblem
from k3kit.formats.documents import MAX_DOCUMENT_BYTES, listed_text, read_bounded, utf8_text
from k3kit.models import KitInfo, Manifest, lite
from k3kit.node.site import LAUNCH_KEYS, SITE_KEYS, env_name, parse_site
from k3kit.node.verify import TrustSource, open_verified
from k3kit.signing.trust import RollbackPolicy

MAX_DOC_BYTES = MAX_DOCUMENT_BYTES
MAX_SITE_BYTES = 64 * 1024
FILLED = ("compose.yaml", "systemd/", "k8s/")


def locked_values(
    kit_dir: Path, info: KitInfo | lite.KitInfo, manifest: Manifest | lite.Manifest
) -> dict[str, str]:
    """Every name a site file must not set, with where the kit locks it."""
    locked = {
        "PROFILE": "kit.json profiles",
        "TOPOLOGY": "kit.json profiles",
        "SERVED_MODEL_NAME": "kit.json profiles",
    }
    if info.engine.image:
        locked["IMAGE"] = f"kit.json engine.image = {info.engine.image}"
    for entry in manifest.files:
        name = entry.path.rsplit("/", 1)[-1]
        if name not in ("serve.yaml", "engine.env"):
            continue
        sep = ": " if name == "serve.yaml" else "="
        code = "SERVE_CONFIG_MALFORMED" if name == "serve.yaml" else "ENGINE_ENV_MALFORMED"
        text = listed_text(kit_dir, manifest, entry.path, max_bytes=MAX_DOC_BYTES, code=code)
        for line in text.split("\n"):
            key, found, value = line.partition(sep)
            if found and not line.startswith("#"):
                locked.setdefault(env_name(key), f"{entry.path}: {key} = {value}")
    return locked


def fill(text: str, values: dict[str, str]) -> str:
    """Replace ``${KEY}``, ``${KEY:-default}`` and ``${KEY:?message}`` for site keys only;
    ``$${KEY}`` (systemd's escaped form) and unknown keys are left alone."""
    pattern = re.compile(r"(?<!\$)\$\{(" + "|".join(SITE_KEYS) + r")(?::[-?][^}]*)?\}")
    return pattern.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def _check_pull_secret(kit_ref: str | None, name: str) -> None:
    """A pull secret is only for the registry ``--kit-ref`` names, and must be a name Kubernetes
    takes: refused before the kit is read or anything written."""
    from k3kit.oci.k8s import check_secret_name

    if kit_ref is None:
        raise UsageProblem(
            "--kit-pull-secret is the login for the registry --kit-ref names; give --kit-ref",
        )
    check_secret_name(name)


def render_site(
    kit_dir: Path,
    site: Path,
    out: Path,
    *,
    trusted: TrustSource,
    rollback: RollbackPolicy | None = None,
    force: bool = False,
    kit_ref: str | None = None,
    kit_pull_secret: str | None = None,
) -> list[str]:
    """Verify ``kit_dir`` against ``trusted``, then write the filled-in files under ``out``;
    returns their relative paths. A kit that does not verify raises
    :class:`k3kit.node.verify.KitNotVerified` (exit 1) before anything is written. With
    ``kit_ref`` (``oci://…@sha256:…``) the Kubernetes workloads install the kit from that
    registry in an init container instead of mounting ``KIT_DIR`` (:mod:`k3kit.oci.k8s`), logging
    in with the Kubernetes Secret ``kit_pull_secret`` when named (only with ``kit_ref``)."""
    if kit_pull_secret is not None:
        _check_pull_secret(kit_ref, kit_pull_secret)
    verified = open_verified(kit_dir, trusted, rollback=rollback)
    manifest, info = verified.manifest, verified.info
    check_trust_anchor(site, "site file")  # it names the trust key, image and addresses
    data = read_bounded(
        site, MAX_SITE_BYTES, what="site file", error=InputError, code="SITE_INVALID"
    )
    # the one reading launch gives the same file (node.launch.read_site): never a lossy one
    text = utf8_text(data, source=str(site), code="SITE_INVALID", error=InputError)
    defaults = {
        "PORT": str(adapter(info.engine.name).default_port),
        "KIT_DIR": str(kit_dir.resolve()),
        "RDZV_PORT": str(adapter(info.engine.name).rendezvous_port),
    }
    if info.engine.image:
        defaults["IMAGE"] = info.engine.image
    values = parse_site(
        text, source=str(site), locked=locked_values(kit_dir, info, manifest), defaults=defaults
    )
    for key in ("MODEL_DIR", "IMAGE"):
        if key not in values:
            raise InputError(
                f"{site}: {key} is required ({SITE_KEYS[key].about})", code="SITE_INVALID"
            )
    refuse_existing(out, force=force, folder=MARKED)  # never a folder of yours
    files: dict[str, bytes] = {}
    folders = tuple(f"{p.folder}/" for p in info.profiles)
    for entry in manifest.files:
        folder = next((f for f in folders if entry.path.startswith(f)), None)
        if folder is None or not entry.path.removeprefix(folder).startswith(FILLED):
            continue
        template = listed_text(
            kit_dir, manifest, entry.path, max_bytes=MAX_DOC_BYTES, code="DEPLOY_FILE_MALFORMED"
        )
        filled = fill(template, values)
        rel = entry.path.removeprefix("profiles/").replace(".template.service", "@.service")
        if kit_ref is not None and "/k8s/" in rel and not rel.endswith("/service.yaml"):
            from k3kit.oci.k8s import install_from_registry

            folder = f"{info.package.name}-{info.package.version}"
            filled = install_from_registry(
                filled, kit_ref=kit_ref, folder=folder, pull_secret=kit_pull_secret
            )
        files[rel] = filled.encode("utf-8")
    site_lines = [f"{k}={values[k]}" for k in SITE_KEYS if k in values]
    files["site.env"] = ("\n".join(site_lines) + "\n").encode()
    files["launch.env"] = (
        "\n".join(f"{k}={values[k]}" for k in LAUNCH_KEYS if k in values) + "\n"
    ).encode()
    stage = staging_dir(out)
    try:
        for rel, data in sorted(files.items()):
            atomic_write(stage / rel, data)
        write_output_marker(stage, "render-site")
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    replace_dir(stage, out, force=force, folder=MARKED)
    return sorted(files)
