"""Kits from and to OCI registries, on the node's own verifier: nothing a registry serves is
used before it verifies exactly as a local archive does.

``install oci://…@sha256:…`` downloads the kit into the install's private staging folder and
installs it from there (:func:`k3kit.node.install.install_fetched`); ``verify oci://…`` does the
same into a private temporary folder and then checks each referrer against the verified kit:
an attached receipt must be the kit's own signed receipt byte for byte, an attached card the
card file the kit's signed manifest lists. ``push`` verifies a private copy of the archive
first and pushes that same copy, so what is pushed is what was verified.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k3kit._fs import NotRegularFile, open_regular
from k3kit.archive import MAX_TOTAL_BYTES
from k3kit.errors import InputError, VerificationError
from k3kit.formats.kitpath import open_kit
from k3kit.formats.manifest import RECEIPT_NAME
from k3kit.node.install import Installed, install_fetched
from k3kit.node.verify import (
    Report,
    TrustSource,
    VerifiedKit,
    open_verified,
    signed_manifest_check,
)
from k3kit.oci import Attachment, Pushed, Referrer, fetch_kit, list_referrers, parse, push_kit
from k3kit.oci import artifact as art
from k3kit.signing.trust import RollbackPolicy

# Kit files attached as the package card when the kit carries one (docs/oci.md).
CARD_NAMES = ("card.html", "card.md", "CARD.md")
_CARD_LAYER = {"card.html": "text/html", "card.md": "text/markdown", "CARD.md": "text/markdown"}


def install_from_registry(
    text: str, trusted: TrustSource, into: Path, *, rollback: RollbackPolicy | None = None
) -> tuple[Installed, str]:
    """Install the kit ``text`` (``oci://HOST/REPO@sha256:HEX``) names; returns the installed
    kit and the manifest digest. A tag is refused (``OCI_TAG_NOT_PINNED``)."""
    ref = parse(text)
    ref.require_digest("install")
    digests: list[str] = []

    def fetch(holder: Path) -> Path:
        path, digest = fetch_kit(ref, holder, verb="install")
        digests.append(digest)
        return path

    return install_fetched(fetch, trusted, into, source=text, rollback=rollback), digests[0]


@dataclass
class RegistryVerdict:
    """``verify oci://…``: the kit's report and one line per referrer."""

    report: Report
    digest: str
    source: str
    referrers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.report.ok and all(r["status"] != "failed" for r in self.referrers)

    def as_json(self) -> dict[str, Any]:
        return {
            **self.report.as_json(),
            "ok": self.ok,
            "oci_digest": self.digest,
            "referrers_from": self.source,
            "referrers": self.referrers,
        }


def verify_registry_kit(
    text: str, trusted: TrustSource, *, rollback: RollbackPolicy | None = None
) -> RegistryVerdict:
    """Verify the kit ``text`` names by digest, then each of its referrers against it.

    Raises :class:`k3kit.node.verify.KitNotVerified` when the kit itself does not verify."""
    ref = parse(text)
    ref.require_digest("verify")
    with _private_folder() as tmp:
        archive, digest = fetch_kit(ref, tmp, verb="verify")
        with _verified_archive(archive, trusted, text, rollback) as kit:
            found, source = list_referrers(ref, digest)
            verdict = RegistryVerdict(kit.report, digest, source)
            verdict.report.facts["archive_sha256"] = kit.report.facts.get("archive_sha256")
            verdict.referrers = [_judge(kit, r) for r in found]
    return verdict


def push_archive(
    archive: Path,
    text: str,
    trusted: TrustSource,
    *,
    attach: list[Path],
    rollback: RollbackPolicy | None = None,
) -> tuple[Pushed, Report]:
    """Verify a private copy of ``archive`` against ``trusted``, then push that copy to
    ``text`` (``oci://HOST/REPO:TAG``) with its receipt, card and ``attach`` files as
    referrers. Raises ``KitNotVerified`` (nothing pushed) when the copy does not verify."""
    ref = parse(text)
    if ref.tag is None:
        raise InputError(
            "push takes oci://HOST/REPO:TAG: the digest is computed from what is pushed",
            code="OCI_REF_INVALID",
        )
    extra = [_attachment(path) for path in attach]
    with _private_folder() as tmp:
        copy = tmp / archive.name
        _private_copy(archive, copy)
        with _verified_archive(copy, trusted, str(archive), rollback) as kit:
            items = [_receipt(kit), *_cards(kit), *extra]
            receipt = kit.report.facts["receipt"]
            annotations = {
                "org.opencontainers.image.title": copy.name,
                "org.opencontainers.image.version": str(receipt["version"]),
                "dev.k3kit.kit.name": str(receipt["kit"]),
                "dev.k3kit.kit.sha256": kit.kit_sha256,
            }
            return push_kit(ref, copy, annotations=annotations, attachments=items), kit.report


def _private_copy(archive: Path, dest: Path) -> None:
    """Copy the archive ``push`` was given, at most the kit cap and only a regular file (a
    FIFO or ``/dev/zero`` behind the name would never end), into the private folder."""
    try:
        fd, st = open_regular(archive.resolve())  # the caller's own name: its link is followed
    except FileNotFoundError as exc:
        raise InputError(f"kit not found: {archive}", code="KIT_NOT_FOUND") from exc
    except (NotRegularFile, OSError) as exc:
        raise InputError(
            f"{archive} is not a readable .kit.tar.gz file", code="KIT_NOT_RECOGNISED"
        ) from exc
    with os.fdopen(fd, "rb") as src, dest.open("xb") as out:
        if st.st_size > MAX_TOTAL_BYTES:
            raise VerificationError(
                f"{archive} is {st.st_size} bytes, over the kit cap of {MAX_TOTAL_BYTES}",
                code="ARCHIVE_TOO_LARGE",
            )
        shutil.copyfileobj(src, out)
        if out.tell() != st.st_size:
            raise VerificationError(f"{archive} changed while it was copied", code="KIT_CHANGED")


@contextmanager
def _private_folder() -> Iterator[Path]:
    tmp = Path(tempfile.mkdtemp(prefix="k3kit-oci-"))  # 0700, this user's
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _verified_archive(
    archive: Path, trusted: TrustSource, label: str, rollback: RollbackPolicy | None
) -> Iterator[VerifiedKit]:
    check = signed_manifest_check(trusted, label=label)
    with open_kit(archive, authenticate=check) as opened:
        kit = open_verified(opened.path, trusted, rollback=rollback, label=label)
        kit.report.facts["archive_sha256"] = opened.archive_sha256
        yield kit


def _receipt(kit: VerifiedKit) -> Attachment:
    data = (kit.path / RECEIPT_NAME).read_bytes()
    return Attachment(art.RECEIPT_ARTIFACT, art.RECEIPT_LAYER, RECEIPT_NAME, data)


def _cards(kit: VerifiedKit) -> list[Attachment]:
    listed = {entry.path for entry in kit.manifest.files}
    return [
        Attachment(art.CARD_ARTIFACT, _CARD_LAYER[name], name, kit.read(name))
        for name in CARD_NAMES
        if name in listed
    ]


def _attachment(path: Path) -> Attachment:
    try:
        size = path.stat().st_size
        if size > art.MAX_REFERRER_BYTES:
            raise InputError(
                f"{path} is {size} bytes, over the {art.MAX_REFERRER_BYTES} an attachment may be",
                code="BAD_INPUT",
            )
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(
            f"cannot read --attach {path}: {exc.strerror or exc}", code="INPUT_MISSING"
        ) from exc
    return Attachment(art.ATTACHMENT_ARTIFACT, art.ATTACHMENT_LAYER, path.name, data)


def _judge(kit: VerifiedKit, found: Referrer) -> dict[str, Any]:
    """One referrer against the verified kit: a receipt must be the kit's own signed receipt,
    a card the kit's listed card file; anything else is listed, not vouched for."""
    line: dict[str, Any] = {
        "digest": found.digest,
        "artifactType": found.artifact_type,
        "title": found.title,
    }
    if found.artifact_type == art.RECEIPT_ARTIFACT:
        same = found.data == (kit.path / RECEIPT_NAME).read_bytes()
        return {
            **line,
            **_status(
                same,
                "the kit's own receipt, verified against the trust given",
                "not the kit's signed receipt (another signer, or another kit)",
            ),
        }
    if found.artifact_type == art.CARD_ARTIFACT:
        same = found.title in CARD_NAMES and _listed_bytes(kit, found.title) == found.data
        return {
            **line,
            **_status(
                same,
                "the card the kit's signed manifest lists",
                "not the card the kit's signed manifest lists",
            ),
        }
    return {
        **line,
        "status": "unchecked",
        "detail": "attached by the pusher; not part of the signed kit",
    }


def _listed_bytes(kit: VerifiedKit, name: str) -> bytes | None:
    """The bytes of ``name`` as the verified manifest lists them; None when it lists none."""
    if name not in {entry.path for entry in kit.manifest.files}:
        return None
    try:
        return kit.read(name)
    except VerificationError:
        return None


def _status(ok: bool, good: str, bad: str) -> dict[str, str]:
    if ok:
        return {"status": "verified", "detail": good}
    return {"status": "failed", "detail": bad, "code": "OCI_REFERRER_NOT_VERIFIED"}
