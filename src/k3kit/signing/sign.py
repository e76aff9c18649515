"""DSSE v1.0.2 envelopes with Ed25519, and reading a signed receipt's in-toto Statement.

The signature covers PAE(payloadType, payload) and the payload is RFC 8785 bytes, so the same
statement always yields the same bytes and (Ed25519 being deterministic) the same signature. The
verifier checks a signature against every trusted key (the ``keyid`` in the envelope is only an
unauthenticated hint) and hands back exactly the bytes it verified, never a re-encoding.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from k3kit._canonical import dumps, require_canonical, strict_loads
from k3kit._fs import read_capped
from k3kit._immutable import NamedTuple
from k3kit.errors import InputError, VerificationError
from k3kit.models import PAYLOAD_TYPE, lite
from k3kit.models._lite import read as read_record
from k3kit.signing.keys import PublicKey, keyid, raw_public, verify_signature

if TYPE_CHECKING:  # pydantic only for the callers that want the models (audit, accept)
    from k3kit.models import Statement
    from k3kit.signing.memo import SignatureMemo
    from k3kit.signing.signers import Signer  # a signer only signs: not on verify's path

MAX_ENVELOPE_BYTES = 1024 * 1024

# base64 through binascii, which is what base64.b64encode / b64decode(validate=True) call: the
# base64 module (with struct) is ~0.7 ms of CPU to import on every node start (3.13).


def _b64encode(data: bytes) -> str:
    """``base64.b64encode(data).decode()``."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


_B64 = re.compile(r"^[A-Za-z0-9+/_-]*={0,2}$")


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def sign_envelope(payload: bytes, payload_type: str, signers: Signer | Sequence[Signer]) -> bytes:
    """A DSSE envelope with one signature per signer, as canonical JSON bytes.

    Several signers make a threshold envelope (two people signing one release); the same key
    twice is refused here, and verifiers count distinct key material anyway.
    """
    from k3kit.signing.signers import Signer

    group = [signers] if isinstance(signers, Signer) else list(signers)
    ids = [keyid(s.public_key()) for s in group]
    if not group or len(set(ids)) != len(ids):
        raise ValueError("sign_envelope needs one or more distinct signers")
    message = pae(payload_type, payload)
    envelope = {
        "payload": _b64encode(payload),
        "payloadType": payload_type,
        "signatures": [
            {"keyid": kid, "sig": _b64encode(s.sign(message))}
            for kid, s in zip(ids, group, strict=True)
        ],
    }
    return dumps(envelope)


def _b64decode(text: str, what: str) -> bytes:
    """Standard or URL-safe base64 (DSSE requires accepting both); anything else is refused."""
    if not _B64.fullmatch(text):
        raise VerificationError(f"{what} is not base64", code="RECEIPT_MALFORMED")
    try:
        # base64.b64decode(validate=True): the text as ASCII bytes, decoded in strict mode
        standard = text.replace("-", "+").replace("_", "/").encode("ascii")
        return binascii.a2b_base64(standard, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise VerificationError(f"{what} is not valid base64", code="RECEIPT_MALFORMED") from exc


# Verdict records on verify's start-up path are NamedTuples, not frozen dataclasses: a frozen
# dataclass costs ~0.7 ms of CPU to create at import (it execs six methods), a NamedTuple ~0.1 ms
# (docs/performance.md, "Start-up").
class VerifiedPayload(NamedTuple):
    payload: bytes
    payload_type: str
    signer_keyid: str
    # Every distinct trusted key (by key id, recomputed from key material) with a valid signature:
    # a threshold counts these, so one key signing twice or under two hints counts once.
    signer_keyids: tuple[str, ...] = ()
    # The signers whose every check here was recalled from the signature memo, none computed:
    # what a report may call "checked before on this node" (a subset of signer_keyids).
    recalled_keyids: tuple[str, ...] = ()


def verify_envelope(
    data: bytes,
    trusted: list[PublicKey],
    *,
    expected_type: str,
    source: str,
    kind: str = "RECEIPT",
    memo: SignatureMemo | None = None,
) -> VerifiedPayload:
    """Verify a DSSE envelope against the trusted keys; returns the verified payload bytes.

    ``kind`` prefixes the error codes (``RECEIPT_…``, ``ROOT_…``) so a root of trust and a
    receipt fail with codes that say which document was at fault. ``memo``: a node's record of
    checks passed before (:func:`k3kit.signing.keys.verify_signature`).
    """
    bad = f"{kind}_MALFORMED"
    if not trusted:
        raise VerificationError("no trusted keys were given", code=f"{kind}_UNTRUSTED_KEY")
    obj = strict_loads(data, source=source, max_bytes=MAX_ENVELOPE_BYTES, code=bad)
    if not isinstance(obj, dict):
        raise VerificationError(f"{source}: not a JSON object", code=bad)
    # DSSE: unknown envelope fields must be ignored, so keep only the ones the spec defines.
    known = {k: obj[k] for k in ("payload", "payloadType", "signatures") if k in obj}
    if isinstance(known.get("signatures"), list):
        known["signatures"] = [
            {k: s[k] for k in ("keyid", "sig") if k in s} if isinstance(s, dict) else s
            for s in known["signatures"]
        ]
    # the pydantic-free reader of the same model (k3kit.models.lite): no envelope needs pydantic
    env = read_record(lite.DsseEnvelope, known, source=source, error=VerificationError, code=bad)
    payload = _b64decode(env.payload, f"{source}: payload")
    message = pae(env.payload_type, payload)
    sigs = [_b64decode(entry.sig, f"{source}: signature") for entry in env.signatures]
    signers, computed = _signers(sigs, trusted, message, memo)
    if not signers:
        raise VerificationError(
            f"{source}: no signature verifies with a trusted key",
            code=f"{kind}_UNTRUSTED_KEY",
            hint="check --trust: is this the publisher's public key?",
        )
    if env.payload_type != expected_type:
        raise VerificationError(
            f"{source}: signed payloadType {env.payload_type!r}, expected {expected_type!r}",
            code=f"{kind}_WRONG_TYPE",
        )
    ids = tuple(signers)
    recalled = tuple(k for k in ids if k not in computed)
    return VerifiedPayload(payload, env.payload_type, ids[0], ids, recalled)


def _signers(
    sigs: list[bytes], trusted: list[PublicKey], message: bytes, memo: SignatureMemo | None
) -> tuple[dict[str, None], set[str]]:
    """The distinct trusted keys (by key id, in order) with a valid signature over ``message``,
    and those of them with a check this call computed rather than recalled from ``memo``."""
    signers: dict[str, None] = {}  # insertion-ordered set of distinct key ids
    computed: set[str] = set()
    seen: set[bytes] = set()
    for sig in sigs:
        if len(sig) != 64 or sig in seen:
            continue  # the same bytes again (another spelling, a copy) add no signer nor check
        seen.add(sig)
        for key in _memo_first(trusted, sig, message, memo):
            before = memo.recalled if memo is not None else 0
            if verify_signature(key, sig, message, memo=memo):
                signers[keyid(key)] = None
                if memo is None or memo.recalled == before:
                    computed.add(keyid(key))
                break  # one signature, one signer: a threshold counts signatures, not keys
    return signers, computed


def _memo_first(
    trusted: list[PublicKey], sig: bytes, message: bytes, memo: SignatureMemo | None
) -> list[PublicKey]:
    """The trusted keys, the one whose check of this signature the memo holds first: with
    several keys (``--trust`` twice, a root's release keys) each miss before it would be a
    check by ``cryptography``, and loading it is what a warm start is spared."""
    if memo is None or len(trusted) < 2:
        return trusted
    return sorted(trusted, key=lambda k: not memo.knows(raw_public(k), sig, message))


class VerifiedReceipt(NamedTuple):
    statement: Statement
    signer_keyid: str
    signer_keyids: tuple[str, ...] = ()


class SignedStatement(NamedTuple):
    """:class:`VerifiedReceipt` with the Statement as a pydantic-free record
    (:mod:`k3kit.models.lite`): what ``verify`` reads, so a node's start-up builds no model."""

    statement: lite.Statement
    signer_keyid: str
    signer_keyids: tuple[str, ...] = ()
    recalled_keyids: tuple[str, ...] = ()  # see VerifiedPayload


def read_envelope(path: Path) -> bytes:
    """A receipt's bytes from a kit folder: bounded, no link, no FIFO (``RECEIPT_MISSING``,
    ``RECEIPT_TOO_LARGE``); the one read of a receipt file, verify's included."""
    return read_capped(
        path,
        MAX_ENVELOPE_BYTES,
        what="receipt",
        error=VerificationError,
        code="RECEIPT_MISSING",
        too_large_code="RECEIPT_TOO_LARGE",
    )


def read_receipt(path: Path, trusted: list[PublicKey]) -> VerifiedReceipt:
    """Read, verify and parse a receipt: the signature first, then only the bytes it covers.

    Shared by ``audit`` and ``accept`` (pydantic models, with their methods); ``verify`` reads the
    same bytes by the same steps into records (:func:`read_signed_statement`): whatever an auditor
    checks must come from exactly the bytes the publisher signed, parsed by the same strict rules.
    """
    return parse_receipt(read_envelope(path), trusted, source=path.name)


def parse_receipt(data: bytes, trusted: list[PublicKey], *, source: str) -> VerifiedReceipt:
    """:func:`read_receipt` for bytes already in memory."""
    from k3kit.models import Statement, load  # pydantic: only callers that want the models

    verified, obj = _signed_payload(data, trusted, source=source)
    statement = load(
        Statement, obj, source="receipt payload", error=VerificationError, code="RECEIPT_MALFORMED"
    )
    return VerifiedReceipt(statement, verified.signer_keyid, verified.signer_keyids)


def read_signed_statement(path: Path, trusted: list[PublicKey]) -> SignedStatement:
    """:func:`read_receipt` without pydantic: the same checks, the Statement as a record."""
    return parse_signed_statement(read_envelope(path), trusted, source=path.name)


def parse_signed_statement(
    data: bytes, trusted: list[PublicKey], *, source: str, memo: SignatureMemo | None = None
) -> SignedStatement:
    """:func:`read_signed_statement` for bytes already in memory (``install`` checks an archive's
    receipt from its tar index, before anything is extracted)."""
    verified, obj = _signed_payload(data, trusted, source=source, memo=memo)
    statement = read_record(
        lite.Statement,
        obj,
        source="receipt payload",
        error=VerificationError,
        code="RECEIPT_MALFORMED",
    )
    return SignedStatement(
        statement, verified.signer_keyid, verified.signer_keyids, verified.recalled_keyids
    )


def _signed_payload(
    data: bytes, trusted: list[PublicKey], *, source: str, memo: SignatureMemo | None = None
) -> tuple[VerifiedPayload, Any]:
    """The one path of both readers: the signature first, then the payload it covers, parsed
    strictly and required to be canonical; the caller validates the parsed object."""
    verified = verify_envelope(data, trusted, expected_type=PAYLOAD_TYPE, source=source, memo=memo)
    obj = strict_loads(
        verified.payload,
        source="receipt payload",
        max_bytes=len(verified.payload),
        code="RECEIPT_MALFORMED",
    )
    require_canonical(verified.payload, obj, source="receipt payload")
    return verified, obj


def subject_digest(statement: lite.Statement, name: str) -> str:
    """The sha256 a Statement records for subject ``name``; a receipt without it is malformed."""
    for subject in statement.subject:
        if subject.name == name and "sha256" in subject.digest:
            return subject.digest["sha256"]
    raise VerificationError(
        f"the receipt has no sha256 subject named {name!r}", code="RECEIPT_MALFORMED"
    )


def add_signature(envelope: bytes, signer: Signer, *, source: str) -> bytes:
    """The same envelope with one more signature over its unchanged payload (a co-signature).

    The payload is never re-encoded: the new signature covers the exact bytes the first signers
    covered. A key that already signed is refused, since it would add nothing to a threshold.
    """
    from k3kit.models import DsseEnvelope, load  # pydantic: a publisher's verb

    obj = strict_loads(envelope, source=source, max_bytes=MAX_ENVELOPE_BYTES, code="BAD_INPUT")
    env = load(DsseEnvelope, obj, source=source, code="BAD_INPUT")
    payload = _b64decode(env.payload, f"{source}: payload")
    message = pae(env.payload_type, payload)
    pub = signer.public_key()
    for entry in env.signatures:
        if not verify_signature(pub, _b64decode(entry.sig, f"{source}: signature"), message):
            continue
        raise InputError(f"{source}: this key already signed", code="ALREADY_SIGNED")
    signatures = [s.model_dump(exclude_defaults=False) for s in env.signatures]
    sig = _b64encode(signer.sign(message))
    signatures.append({"keyid": keyid(pub), "sig": sig})
    return dumps(
        {"payload": env.payload, "payloadType": env.payload_type, "signatures": signatures}
    )
