"""The signed buyer receipt: building one, and checking one against a verified kit.

Why this module knows nothing of the ledger: ``k3kit verify --buyer-receipt`` runs on the buyer's
GPU node, which has no database and must not import a database driver. Issuing (which needs the
ledger's entitlement) lives in :mod:`k3kit.commerce.ledger.issue`; this module only builds, signs
and checks the document, from bytes and a verification :class:`~k3kit.node.verify.Report`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from k3kit._canonical import dumps, require_canonical, strict_loads
from k3kit._fs import read_capped
from k3kit.commerce.licence import sha256_tag, verify_licence
from k3kit.errors import InputError, VerificationError
from k3kit.models import load
from k3kit.models.commerce import BUYER_RECEIPT_PAYLOAD_TYPE, BuyerReceiptBody
from k3kit.node.verify import FAILED, NOT_CHECKED, PASSED, Check, Report
from k3kit.signing.keys import PublicKey
from k3kit.signing.sign import MAX_ENVELOPE_BYTES, sign_envelope, verify_envelope
from k3kit.signing.signers import Signer
from k3kit.signing.trust.source import TrustSource

MAX_INPUT_BYTES = 256 * 1024
BAD = "BUYER_RECEIPT_MALFORMED"


def read_build_record(path: Path) -> dict[str, Any]:
    """The runtime build record (engine build, image digest, patches): a JSON object, no floats."""
    data = read_capped(
        path, MAX_INPUT_BYTES, what="build record", error=InputError, code="BAD_INPUT"
    )
    obj = strict_loads(
        data, source=path.name, max_bytes=MAX_INPUT_BYTES, error=InputError, code="BAD_INPUT"
    )
    if not isinstance(obj, dict) or not obj:
        raise InputError(f"{path.name}: the build record must be a JSON object", code="BAD_INPUT")
    return obj


def read_serve_command(path: Path) -> list[str]:
    """The measured serve command as argv: a JSON array of strings, or one shell-quoted line.

    Stored as argv, never as a shell string, so that ``launch`` can exec it without a shell.
    """
    data = read_capped(
        path, MAX_INPUT_BYTES, what="serve command", error=InputError, code="BAD_INPUT"
    )
    text = data.decode("utf-8", errors="strict") if data.isascii() else None
    if text is None:
        raise InputError(f"{path.name}: the serve command must be ASCII", code="BAD_INPUT")
    if text.lstrip().startswith("["):
        argv = strict_loads(
            data, source=path.name, max_bytes=MAX_INPUT_BYTES, error=InputError, code="BAD_INPUT"
        )
    else:
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
        try:
            argv = shlex.split(" ".join(ln.rstrip("\\") for ln in lines))
        except ValueError as exc:
            raise InputError(f"{path.name}: {exc}", code="BAD_INPUT") from exc
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise InputError(f"{path.name}: no command", code="BAD_INPUT")
    return argv


def build_body(
    *,
    licensee: str,
    licence_sha256: str,
    entitlement: str,
    kit: dict[str, Any],
    build_record: dict[str, Any],
    serve_command: list[str],
    issued_at: str,
    ledger: dict[str, Any],
) -> BuyerReceiptBody:
    """The receipt's body; ``ledger`` is the head (``seq``, ``head``) its ledger entry extends,
    so that every receipt a buyer holds is also a signed checkpoint of the seller's ledger."""
    obj = {
        "schema": "k3kit.buyer-receipt/v2",
        "licensee": licensee,
        "licence_sha256": licence_sha256,
        "entitlement": entitlement,
        "kit": kit,
        "build_record": build_record,
        "build_record_sha256": sha256_tag(dumps(build_record)),
        "serve_command": serve_command,
        "issued_at": issued_at,
        "ledger": ledger,
    }
    return load(BuyerReceiptBody, obj, source="buyer receipt", error=InputError, code="BAD_INPUT")


def sign_buyer_receipt(body: BuyerReceiptBody, signer: Signer) -> bytes:
    return sign_envelope(dumps(body.model_dump(by_alias=True)), BUYER_RECEIPT_PAYLOAD_TYPE, signer)


def read_buyer_receipt(data: bytes, trusted: list[PublicKey], *, source: str) -> BuyerReceiptBody:
    """Signature first (by a trusted publisher key), then only the signed, canonical bytes."""
    verified = verify_envelope(
        data,
        trusted,
        expected_type=BUYER_RECEIPT_PAYLOAD_TYPE,
        source=source,
        kind="BUYER_RECEIPT",
    )
    obj = strict_loads(verified.payload, source=source, max_bytes=len(verified.payload), code=BAD)
    require_canonical(verified.payload, obj, source=f"{source} payload")
    body = load(BuyerReceiptBody, obj, source=source, error=VerificationError, code=BAD)
    if sha256_tag(dumps(body.build_record)) != body.build_record_sha256:
        raise VerificationError(f"{source}: build record digest differs", code=BAD)
    return body


def _tag(value: Any) -> str:
    text = str(value)
    return text if text.startswith("sha256:") else f"sha256:{text}"


def _bind(body: BuyerReceiptBody, report: Report, licence: bytes | None, source: str) -> str:
    facts = report.facts
    receipt: Mapping[str, Any] = facts.get("receipt") or {}
    ours = {
        "kit checksum": (body.kit.kit_sha256, _tag(facts.get("kit_sha256"))),
        "weight checksum": (body.kit.weights_sha256, _tag(facts.get("weights_lock_sha256"))),
        "kit name": (body.kit.name, receipt.get("kit")),
        "version": (body.kit.version, receipt.get("version")),
    }
    for what, (theirs, mine) in ours.items():
        if theirs != mine:
            raise VerificationError(
                f"{source} is for another kit: its {what} is {theirs}, this kit's is {mine}",
                code="BUYER_RECEIPT_WRONG_KIT",
            )
    if licence is None:
        return f"belongs to this kit; licensee {body.licensee} (licence not given: not compared)"
    lic = verify_licence(licence, source="licence")
    if lic.licence_sha256 != body.licence_sha256 or lic.body.entity != body.licensee:
        raise VerificationError(
            f"{source} was issued under licence {body.licence_sha256}, not {lic.licence_sha256}",
            code="BUYER_RECEIPT_WRONG_LICENCE",
        )
    return f"belongs to this kit and this licence; licensee {body.licensee}"


def add_buyer_receipt_check(
    report: Report, path: Path, trusted: TrustSource, *, licence: Path | None = None
) -> Report:
    """Append the ``buyer_receipt`` check to a verify report, as ``k3kit verify --buyer-receipt``
    and ``k3kit.check_kit(buyer_receipt=)`` both do: a buyer receipt is checked against plain
    trusted keys only (trust from a root fails it, ``BUYER_RECEIPT_NEEDS_TRUST``). Returns the
    report, whose ``ok`` now includes the check."""
    keys = trusted if isinstance(trusted, list) else None
    report.checks.append(check_buyer_receipt(report, path, keys, licence=licence))
    return report


def check_buyer_receipt(
    report: Report,
    path: Path,
    trusted: list[PublicKey] | None,
    *,
    licence: Path | None = None,
) -> Check:
    """The ``buyer_receipt`` check that ``k3kit verify --buyer-receipt`` adds to its report.

    Not checked (and so not a pass) when the kit itself did not verify or when trust came from a
    root (a buyer receipt is checked against the ``--trust`` keys only, for now).
    """
    check = Check("buyer_receipt", "buyer receipt belongs to this kit and licence")
    failed = [c.id for c in report.checks if c.status == FAILED]
    if failed:
        check.detail = f"not checked: depends on {', '.join(failed)}"
        return check
    if trusted is None:
        check.status, check.code = FAILED, "BUYER_RECEIPT_NEEDS_TRUST"
        check.detail = "not checked: a buyer receipt is verified with --trust keys, not --root"
        return check
    try:
        data = read_capped(
            path,
            MAX_ENVELOPE_BYTES,
            what="buyer receipt",
            error=VerificationError,
            code="BUYER_RECEIPT_MISSING",
        )
        lic = None
        if licence is not None:
            lic = read_capped(
                licence,
                MAX_ENVELOPE_BYTES,
                what="licence",
                error=VerificationError,
                code="LICENCE_MISSING",
            )
        body = read_buyer_receipt(data, trusted, source=path.name)
        check.detail = _bind(body, report, lic, path.name)
        check.status = PASSED
    except VerificationError as exc:
        check.status, check.code, check.detail = FAILED, exc.code, exc.message
    assert check.status != NOT_CHECKED
    return check
