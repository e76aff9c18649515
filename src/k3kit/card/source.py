"""What a card, ``show`` and release notes are made from: the verified kit, read once.

Verification is :func:`k3kit.node.verify.verify_dir`, never re-implemented here. What this module
adds is *where the bytes come from*: an archive is extracted once into a private staging folder,
that folder is verified, and every document shown is read from the same folder, hashed against the
digests the verified receipt and manifest sign, before the folder is removed. A kit that does not
verify raises :class:`~k3kit.node.verify.KitNotVerified` (exit 1), unless the caller asked for an
``unverified`` view: then the receipt's payload is decoded without its signature, kit documents
are read without their digests, and the view says so on every page that shows it.
"""

from __future__ import annotations

import base64
import binascii
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k3kit._canonical import strict_loads
from k3kit._text import shown
from k3kit.audit import AuditReport, audit_receipt
from k3kit.errors import InputError, K3kitError, VerificationError
from k3kit.formats.documents import read_bounded, read_document, read_listed
from k3kit.formats.kitpath import Authenticate, extract_kit
from k3kit.formats.manifest import MANIFEST_NAME, RECEIPT_NAME
from k3kit.models import KitInfo, Manifest, Statement, load
from k3kit.node.verify import (
    KIT_INFO_NAME,
    MAX_DOC_BYTES,
    KitNotVerified,
    Report,
    signed_manifest_check,
    verify_dir,
)
from k3kit.signing.keys import PublicKey
from k3kit.signing.sign import MAX_ENVELOPE_BYTES, verify_envelope

PROFILE_SETTINGS = ("serve.yaml", "engine.env")
MAX_SETTINGS_BYTES = 1024 * 1024


@dataclass
class KitView:
    """Everything a reader is shown about one kit, and whether it verified.

    ``statement_json`` is the signed payload exactly as parsed from the verified bytes (for
    ``show --json``); ``settings`` maps profile -> file -> key -> value as written in the kit's
    deploy files (values are shown, never interpreted).
    """

    label: str
    verified: bool
    report: Report
    statement: Statement
    statement_json: dict[str, Any]
    info: KitInfo
    signer_keyid: str | None
    audit: AuditReport
    settings: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    archive_sha256: str | None = None

    @property
    def kit_sha256(self) -> str:
        return self.statement.predicate.kit.kit_sha256

    @property
    def weights_sha256(self) -> str:
        return self.statement.predicate.weights.lock_sha256


def _statement(
    data: bytes, trusted: list[PublicKey], *, signed: bool
) -> tuple[Statement, dict[str, Any], str | None]:
    """The Statement from envelope bytes: verified with ``trusted``, or (unverified view only)
    decoded without looking at the signature. Either way parsed by the same strict rules."""
    if signed:
        verified = verify_envelope(
            data, trusted, expected_type="application/vnd.in-toto+json", source=RECEIPT_NAME
        )
        payload, signer = verified.payload, verified.signer_keyid
    else:
        envelope = strict_loads(
            data, source=RECEIPT_NAME, max_bytes=MAX_ENVELOPE_BYTES, code="RECEIPT_MALFORMED"
        )
        text = envelope.get("payload") if isinstance(envelope, dict) else None
        if not isinstance(text, str):
            raise VerificationError("receipt has no payload", code="RECEIPT_MALFORMED")
        try:
            payload = base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise VerificationError(
                "receipt payload is not base64", code="RECEIPT_MALFORMED"
            ) from exc
        signer = None
    obj = strict_loads(
        payload, source="receipt payload", max_bytes=len(payload) or 1, code="RECEIPT_MALFORMED"
    )
    statement = load(
        Statement, obj, source="receipt payload", error=VerificationError, code="RECEIPT_MALFORMED"
    )
    return statement, obj, signer


def parse_settings(data: bytes, *, source: str) -> dict[str, str]:
    """``key: value`` (serve.yaml) or ``KEY=value`` (engine.env) lines, as written, for display.

    k3kit renders both files one setting per line; anything else is kept as the raw line so that
    a difference is still shown rather than dropped.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VerificationError(f"{source}: not UTF-8", code="KIT_SETTINGS_MALFORMED") from exc
    out: dict[str, str] = {}
    sep = "=" if source.endswith(".env") else ": "
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, found, value = line.partition(sep)
        key = key.strip() if found else line
        out[key] = value.strip() if found else ""
    return out


def _checked_bytes(kit_dir: Path, manifest: Manifest | None, rel: str) -> bytes:
    """Signed: the bytes the verified manifest lists (``read_listed``). Unverified: as found."""
    if manifest is not None:
        return read_listed(kit_dir, manifest, rel, max_bytes=MAX_SETTINGS_BYTES)
    return read_bounded(
        kit_dir / rel,
        MAX_SETTINGS_BYTES,
        what=rel,
        error=VerificationError,
        code="KIT_FILE_MISSING",
    )


def _read_view(kit_dir: Path, label: str, report: Report, trusted: list[PublicKey]) -> KitView:
    signed = report.ok
    envelope = read_bounded(
        kit_dir / RECEIPT_NAME, MAX_ENVELOPE_BYTES, what="receipt", code="RECEIPT_MISSING"
    )
    statement, obj, signer = _statement(envelope, trusted, signed=signed)
    pred = statement.predicate
    if signed and report.facts.get("kit_sha256") != pred.kit.kit_sha256:
        raise VerificationError(
            "the receipt changed after it was verified", code="KIT_FILE_CHANGED"
        )
    # Signed: every document shown is hashed against the verified manifest as it is read, so a
    # file swapped after verify_dir ran is refused, not shown. Unverified: read as found.
    manifest = None
    if signed:
        manifest = read_document(
            kit_dir / MANIFEST_NAME,
            Manifest,
            max_bytes=MAX_DOC_BYTES,
            expected_sha256=pred.kit.kit_sha256,
            code="MANIFEST_MALFORMED",
            mismatch_code="KIT_FILE_CHANGED",
        ).model
    info_bytes = _checked_bytes(kit_dir, manifest, KIT_INFO_NAME)
    info = load(
        KitInfo,
        strict_loads(
            info_bytes, source=KIT_INFO_NAME, max_bytes=MAX_DOC_BYTES, code="KIT_INFO_MALFORMED"
        ),
        source=KIT_INFO_NAME,
        error=VerificationError,
        code="KIT_INFO_MALFORMED",
    )
    settings: dict[str, dict[str, dict[str, str]]] = {}
    for prof in info.profiles:
        folder = prof.folder
        settings[prof.name] = {
            name: parse_settings(
                _checked_bytes(kit_dir, manifest, f"{folder}/{name}"),
                source=name,
            )
            for name in PROFILE_SETTINGS
        }
    audit = audit_receipt(kit_dir / RECEIPT_NAME, trusted, kit_dir=kit_dir, label=label)
    return KitView(label, signed, report, statement, obj, info, signer, audit, settings)


@contextmanager
def _kit_folder(kit: Path, authenticate: Authenticate | None) -> Iterator[tuple[Path, str | None]]:
    if not kit.exists():
        raise InputError(f"kit not found: {shown(kit)}", code="KIT_NOT_FOUND")
    if kit.is_dir():
        yield kit, None
        return
    if not kit.is_file():
        raise InputError(
            f"{shown(kit)} is neither a kit directory nor an archive file",
            code="KIT_NOT_RECOGNISED",
        )
    staging, digest = extract_kit(kit, authenticate=authenticate)
    try:
        yield staging, digest
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def load_view(kit: Path, trusted: list[PublicKey], *, unverified: bool = False) -> KitView:
    """Verify ``kit`` (directory or archive) and read what a reader is shown, from the same bytes.

    Raises :class:`KitNotVerified` when the kit does not verify and ``unverified`` is false; with
    ``unverified`` a kit that fails is still shown, marked as such (``KitView.verified``).
    An archive whose members break the extraction policy is never shown: there is no folder.
    """
    # Unless an unverified kit is to be shown anyway, an archive's receipt and manifest are
    # checked from its index, before anything is extracted (the rule install and verify use).
    check = None if unverified else signed_manifest_check(trusted, label=str(kit))
    with _kit_folder(kit, check) as (kit_dir, digest):
        report = verify_dir(kit_dir, trusted, label=str(kit))
        if not report.ok and not unverified:
            raise KitNotVerified(report)
        try:
            view = _read_view(kit_dir, str(kit), report, trusted)
        except K3kitError:
            if report.ok:
                raise
            raise KitNotVerified(report) from None
        view.archive_sha256 = digest
        return view
