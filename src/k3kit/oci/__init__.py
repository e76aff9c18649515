"""Kits in OCI registries: push a signed kit with its receipt and card as referrers, and fetch
a kit by digest with every byte checked against that digest before anything reads it.

Why the checks live here and not in the registry: a registry (or anyone who can push to it, or
its storage) decides what it answers. So a kit is only ever fetched by digest, the manifest's
own sha256 is computed from the bytes received and compared with the digest asked for (the
``Docker-Content-Digest`` header is never read), and each blob is streamed against the size and
digest that checked manifest gives, with the kit's size cap applied before the first byte. What
comes out is an archive file that the caller then verifies exactly as a local one (receipt,
manifest, every file: :func:`k3kit.node.install.install`). This package proves only that the
bytes are the ones the digest names; who signed them is the verifier's question.

httpx is imported by :mod:`k3kit.oci._http` only, and this package only by the verbs that name
a registry, so verifying a local kit never loads it (tests/test_startup.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from k3kit._fs import create_new
from k3kit.archive import admit_download
from k3kit.errors import EnvironmentProblem, InputError, VerificationError
from k3kit.oci import artifact as art
from k3kit.oci._http import Registry
from k3kit.oci.ref import Reference, is_oci, parse

__all__ = [
    "Attachment",
    "Pushed",
    "Reference",
    "Referrer",
    "fetch_blob_file",
    "fetch_kit",
    "is_oci",
    "list_referrers",
    "parse",
    "push_kit",
]

ARCHIVE_NAME = "registry.kit.tar.gz"
MAX_REFERRERS = 256  # each is read (up to 16 MiB): a bound on what a listing may cost
# What all of a kit's referrers may weigh together: each is held in memory to be judged, and 256
# referrer manifests may all name the same 16 MiB blob (one upload, 4 GiB read).
MAX_REFERRERS_TOTAL_BYTES = 4 * art.MAX_REFERRER_BYTES


@dataclass(frozen=True)
class Attachment:
    """Something to attach to a kit as a referrer: its artifact type, layer type, name, bytes."""

    artifact_type: str
    layer_type: str
    title: str
    data: bytes


@dataclass(frozen=True)
class Pushed:
    """What ``push`` stored: the kit manifest's digest and one digest per referrer."""

    reference: Reference
    digest: str
    referrers: list[tuple[str, str, str]] = field(default_factory=list)  # digest, type, title
    fallback_index: bool = False


@dataclass(frozen=True)
class Referrer:
    """A referrer read back by digest, its one layer's bytes checked against the manifest."""

    digest: str
    artifact_type: str
    title: str
    data: bytes


def push_kit(
    ref: Reference,
    archive: Path,
    *,
    annotations: dict[str, str],
    attachments: list[Attachment],
) -> Pushed:
    """Store ``archive`` (already verified by the caller) under ``ref``'s tag, then each
    attachment as a referrer of it, registered in the fallback index when the registry does
    not index referrers itself."""
    if ref.tag is None:
        raise InputError(
            "push takes oci://HOST/REPO:TAG (the digest is computed, then printed)",
            code="OCI_REF_INVALID",
        )
    size = archive.stat().st_size
    layer = art.Descriptor(art.KIT_LAYER, _file_digest(archive), size, {art.TITLE: archive.name})
    with Registry(ref.base, ref.repo) as reg:
        reg.push_blob(ref.repo, *_empty())
        reg.push_blob(ref.repo, layer.digest, size, archive)
        data = art.manifest_bytes(art.KIT_ARTIFACT, [layer], annotations=annotations)
        reg.put_manifest(ref.repo, ref.tag, data, art.MANIFEST_TYPE)
        subject = art.describe(art.MANIFEST_TYPE, data)
        pushed = [_push_referrer(reg, ref.repo, subject, item) for item in attachments]
        indexed = all(api for _, api in pushed)
        if not indexed:
            _add_to_fallback(reg, ref.repo, subject.digest, [d for d, _ in pushed])
    return Pushed(
        ref,
        subject.digest,
        [
            (d.digest, d.artifact_type or "", (d.annotations or {}).get(art.TITLE, ""))
            for d, _ in pushed
        ],
        fallback_index=not indexed,
    )


def _push_referrer(
    reg: Registry, repo: str, subject: art.Descriptor, item: Attachment
) -> tuple[art.Descriptor, bool]:
    """One referrer: its blob, then its manifest by digest. True when the registry says it
    indexed the subject itself (the ``OCI-Subject`` header of the referrers API)."""
    layer = art.describe(item.layer_type, item.data, title=item.title)
    reg.push_blob(repo, layer.digest, layer.size, item.data)
    data = art.manifest_bytes(
        item.artifact_type, [layer], subject=subject, annotations={art.TITLE: item.title}
    )
    digest = art.digest_of(data)
    headers = reg.put_manifest(repo, digest, data, art.MANIFEST_TYPE)
    descriptor = art.Descriptor(
        art.MANIFEST_TYPE, digest, len(data), {art.TITLE: item.title}, item.artifact_type
    )
    return descriptor, "OCI-Subject" in headers


def _add_to_fallback(reg: Registry, repo: str, subject: str, new: list[art.Descriptor]) -> None:
    """Merge ``new`` into the index under ``sha256-<hex>`` (read, add, write: two pushers at the
    same moment can lose an entry, which a second push puts back; the referrers themselves are
    stored by digest either way)."""
    tag = art.fallback_tag(subject)
    label = f"the referrers index {repo}:{tag}"
    old = reg.get_small(
        f"/v2/{repo}/manifests/{tag}", accept=art.ACCEPT_INDEX, cap=art.MAX_MANIFEST_BYTES
    )
    listed = {d.digest: d for d in (art.parse_index(old, label=label) if old else [])}
    listed.update({d.digest: d for d in new})
    reg.put_manifest(repo, tag, art.index_bytes(list(listed.values())), art.INDEX_TYPE)


def fetch_manifest(reg: Registry, repo: str, digest: str) -> bytes:
    """The manifest ``digest`` names: its sha256 is computed from the bytes received and must be
    ``digest`` (``OCI_DIGEST_MISMATCH``), whatever the registry's headers say."""
    data = reg.get_small(
        f"/v2/{repo}/manifests/{digest}", accept=art.ACCEPT_MANIFEST, cap=art.MAX_MANIFEST_BYTES
    )
    if data is None:
        raise EnvironmentProblem(
            f"the registry {reg.base} has no manifest {repo}@{digest}", code="OCI_NOT_FOUND"
        )
    got = art.digest_of(data)
    if got != digest:
        raise VerificationError(
            f"the registry answered {digest[:19]}… with a manifest whose sha256 is {got[:19]}…",
            code="OCI_DIGEST_MISMATCH",
            hint="the registry, a proxy or the registry's storage serves other bytes for this "
            "digest: do not install from it; push the kit again from its signed archive",
        )
    return data


def fetch_kit(ref: Reference, dest: Path, *, verb: str) -> tuple[Path, str]:
    """Download the kit ``ref`` names (by digest only) into ``dest`` (a private folder), as
    ``dest/registry.kit.tar.gz``; returns that path and the digest. The archive still has to be
    verified: only its bytes are known to be the digest's."""
    digest = ref.require_digest(verb)
    with Registry(ref.base, ref.repo) as reg:
        kit = art.parse_manifest(
            fetch_manifest(reg, ref.repo, digest), label=f"{ref.repo}@{digest}"
        )
        layer = _kit_layer(kit, digest)
        path = dest / ARCHIVE_NAME
        _blob_to_file(reg, ref.repo, layer, path, what=f"downloading {ref.repo}@{digest[:19]}…")
    return path, digest


def fetch_blob_file(ref: Reference, digest: str, size: int, path: Path) -> None:
    """Download blob ``digest`` of ``ref``'s repository into the new file ``path`` (in a private
    folder): exactly ``size`` bytes hashing to ``digest``, or an error and no trust in the file.

    For a caller that knows the digest and size from signed metadata of its own (the TUF target
    of ``update --from-registry``): no manifest and no tag is read, so nothing the registry says
    about which bytes these are is used.
    """
    layer = art.Descriptor(art.KIT_LAYER, digest, size, {})
    with Registry(ref.base, ref.repo) as reg:
        _blob_to_file(reg, ref.repo, layer, path, what=f"downloading {ref.repo}@{digest[:19]}…")


def _blob_to_file(
    reg: Registry, repo: str, layer: art.Descriptor, path: Path, *, what: str
) -> None:
    """The one way a registry blob becomes a file: room checked first, a new file, streamed
    against the descriptor's size and digest, synced."""
    admit_download(path.parent, layer.size, what=what, code="OCI_BLOB_OVERSIZED")
    fd = create_new(path)
    with os.fdopen(fd, "wb") as out:
        reg.fetch_blob(repo, layer.digest, layer.size, out)
        out.flush()
        os.fsync(out.fileno())


def _kit_layer(kit: art.Artifact, digest: str) -> art.Descriptor:
    label = f"the manifest {digest[:19]}…"
    if kit.artifact_type != art.KIT_ARTIFACT or len(kit.layers) != 1:
        raise art._invalid(label, f"not a k3kit kit (artifactType {kit.artifact_type!r})")
    layer = kit.layers[0]
    if layer.media_type != art.KIT_LAYER:
        raise art._invalid(label, f"its layer is {layer.media_type!r}, not {art.KIT_LAYER}")
    return layer


def list_referrers(ref: Reference, digest: str) -> tuple[list[Referrer], str]:
    """Every referrer of ``digest``, each read by digest and checked (manifest digest, subject,
    blob digest and size); and where the list came from (``"referrers API"`` or the fallback
    tag). Whether a referrer is *true* (a receipt signed by a trusted key) is the caller's."""
    with Registry(ref.base, ref.repo) as reg:
        listed, source = _referrer_index(reg, ref.repo, digest)
        if len(listed) > MAX_REFERRERS:
            raise VerificationError(
                f"{len(listed)} referrers are listed for {digest[:19]}… ({source}), over the "
                f"{MAX_REFERRERS} k3kit reads; none was read",
                code="OCI_MANIFEST_INVALID",
                hint="someone with push rights filled the referrers list: ask the registry's "
                "operator to clean it",
            )
        budget = _Budget(MAX_REFERRERS_TOTAL_BYTES, digest)
        unique = list({d.digest: d for d in listed}.values())  # a digest listed twice: read once
        return [_read_referrer(reg, ref.repo, digest, d, budget) for d in unique], source


def _referrer_index(reg: Registry, repo: str, digest: str) -> tuple[list[art.Descriptor], str]:
    api = reg.get_small(
        f"/v2/{repo}/referrers/{digest}", accept=art.ACCEPT_INDEX, cap=art.MAX_MANIFEST_BYTES
    )
    if api is not None:
        return art.parse_index(api, label="the referrers API's answer"), "referrers API"
    tag = art.fallback_tag(digest)
    data = reg.get_small(
        f"/v2/{repo}/manifests/{tag}", accept=art.ACCEPT_INDEX, cap=art.MAX_MANIFEST_BYTES
    )
    found = art.parse_index(data, label=f"{repo}:{tag}") if data else []
    return found, f"tag {tag}"


class _Budget:
    """The bytes the referrers of one kit may still bring: charged with each referrer's
    declared layer size BEFORE its blob is read (``fetch_blob`` then refuses a byte beyond
    that size), so a hostile listing is refused having read at most the budget."""

    def __init__(self, total: int, subject: str) -> None:
        self.left, self.total, self.subject = total, total, subject

    def charge(self, size: int) -> None:
        if size > self.left:
            raise VerificationError(
                f"the referrers of {self.subject[:19]}… weigh more than the {self.total} bytes "
                "k3kit reads for one kit; the rest was not read",
                code="OCI_MANIFEST_INVALID",
                hint="someone with push rights attached large or repeated artifacts: ask the "
                "registry's operator to remove them (the kit itself can still be installed)",
            )
        self.left -= size


def _read_referrer(
    reg: Registry, repo: str, subject: str, d: art.Descriptor, budget: _Budget
) -> Referrer:
    found = art.parse_manifest(fetch_manifest(reg, repo, d.digest), label=f"referrer {d.digest}")
    if found.subject != subject:
        raise VerificationError(
            f"the referrer {d.digest[:19]}… listed for {subject[:19]}… names another subject "
            f"({found.subject!r:.30})",
            code="OCI_REFERRER_NOT_VERIFIED",
        )
    if len(found.layers) != 1 or found.layers[0].size > art.MAX_REFERRER_BYTES:
        raise art._invalid(f"referrer {d.digest[:19]}…", "not one layer under the size cap")
    layer = found.layers[0]
    budget.charge(layer.size)
    out = _Sink()
    reg.fetch_blob(repo, layer.digest, layer.size, out)  # type: ignore[arg-type]
    title = found.annotations.get(art.TITLE) or (layer.annotations or {}).get(art.TITLE, "")
    return Referrer(d.digest, found.artifact_type, title, bytes(out.data))


class _Sink:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, chunk: bytes) -> int:
        self.data += chunk
        return len(chunk)


def _empty() -> tuple[str, int, bytes]:
    return art.digest_of(art.EMPTY_BLOB), len(art.EMPTY_BLOB), art.EMPTY_BLOB


def _file_digest(path: Path) -> str:
    import hashlib

    hasher = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1024 * 1024):
            hasher.update(chunk)
    return "sha256:" + hasher.hexdigest()
