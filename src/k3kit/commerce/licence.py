"""The signed enterprise licence: terms hash, parties, four affirmations, time (DSSE).

Why the signer's public key travels inside the payload: the buyer signs with a key the vendor has
never seen, so there is no trust set to check it against at signing time. The signature proves
that whoever holds that key signed exactly these bytes; who the key belongs to is established by
the purchase (and, where the vendor wants, by ``--trust`` on verification). What the licence gate
is and is not is in docs/licence.md: an evidenced agreement, not a technical copy protection.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from k3kit._canonical import dumps, require_canonical, strict_loads
from k3kit.errors import InputError, VerificationError
from k3kit.models import load
from k3kit.models.commerce import AFFIRMATIONS, LICENCE_PAYLOAD_TYPE, LicenceBody
from k3kit.signing.keys import PublicKey, keyid, public_from_hex, raw_public
from k3kit.signing.sign import MAX_ENVELOPE_BYTES, sign_envelope, verify_envelope
from k3kit.signing.signers import Signer

MAX_TERMS_BYTES = 1024 * 1024
BAD = "LICENCE_MALFORMED"


def sha256_tag(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_affirmations(given: Sequence[str]) -> list[str]:
    """The affirmation ids, each given once and explicitly; a missing one is refused.

    There is deliberately no default and no "all": each affirmation is a separate decision by the
    person who binds the entity, and the refusal names the ones still missing.
    """
    unknown = sorted(set(given) - set(AFFIRMATIONS))
    if unknown:
        raise InputError(
            f"unknown affirmation(s): {', '.join(unknown)}",
            code="LICENCE_AFFIRMATION_UNKNOWN",
            hint=f"the affirmations are: {', '.join(AFFIRMATIONS)}",
        )
    if len(set(given)) != len(given):
        raise InputError("an affirmation was given twice", code="LICENCE_AFFIRMATION_DUPLICATE")
    missing = [a for a in AFFIRMATIONS if a not in given]
    if missing:
        raise InputError(
            f"missing affirmation(s): {', '.join(missing)}",
            code="LICENCE_AFFIRMATION_NOT_GIVEN",
            hint="read each text and give --affirm ID for each one; there is no default",
        )
    return list(AFFIRMATIONS)


def licence_body(
    terms: bytes,
    terms_name: str,
    *,
    entity: str,
    package: str,
    price: dict[str, int | str],
    signer_name: str,
    authority: str,
    affirm: Sequence[str],
    public_key: PublicKey,
    signed_at: str,
) -> LicenceBody:
    ids = check_affirmations(affirm)
    obj = {
        "schema": "k3kit.licence/v2",
        "terms": {"name": terms_name, "sha256": sha256_tag(terms)},
        "entity": entity,
        "package": package,
        "price": price,
        "signer": {
            "name": signer_name,
            "authority": authority,
            "key": {"keytype": "ed25519", "public": raw_public(public_key).hex()},
        },
        "affirmations": [{"id": i, "text": AFFIRMATIONS[i]} for i in ids],
        "signed_at": signed_at,
    }
    return load(LicenceBody, obj, source="licence", error=InputError, code="BAD_INPUT")


def sign_licence(body: LicenceBody, signer: Signer) -> bytes:
    """The DSSE envelope (canonical JSON bytes) over the licence's canonical payload."""
    if raw_public(signer.public_key()).hex() != body.signer.key.public:
        raise InputError("the signing key is not the key the licence names", code="BAD_INPUT")
    return sign_envelope(dumps(body.model_dump(by_alias=True)), LICENCE_PAYLOAD_TYPE, signer)


def require_bound(
    body: LicenceBody,
    *,
    package: str,
    amount_minor: int | None = None,
    currency: str | None = None,
    term_days: float | None = None,
) -> None:
    """Refuse a use of the licence outside what its signer agreed to: another package, or a
    payment or term other than its price. The one check behind ``ledger purchase``,
    ``buyer-receipt issue`` and ``ledger verify`` (a ``None`` is not compared)."""
    if body.package != package:
        raise VerificationError(
            f"the licence is for package {body.package}, not {package}",
            code="LICENCE_OTHER_PACKAGE",
            hint="the buyer signs a licence for each package they buy",
        )
    p = body.price
    given: dict[str, object] = {
        "amount": amount_minor,
        "currency": currency,
        "term (days)": term_days,
    }
    signed: dict[str, object] = {
        "amount": p.amount_minor,
        "currency": p.currency,
        "term (days)": p.term_days,
    }
    for what, value in given.items():
        if value is not None and value != signed[what]:
            raise VerificationError(
                f"the licence signs {what} {signed[what]}, not {value}",
                code="LICENCE_OTHER_PRICE",
                hint=f"the licence's price: {p.amount_minor} {p.currency} per {p.term_days} days",
            )


@dataclass(frozen=True)
class VerifiedLicence:
    body: LicenceBody
    payload: bytes
    licence_sha256: str  # sha256 of the signed payload: the licence's identity everywhere
    signer_keyid: str


def _embedded_key(envelope: bytes, source: str) -> PublicKey:
    """The public key named inside the (not yet verified) payload, parsed strictly and bounded."""
    env = strict_loads(envelope, source=source, max_bytes=MAX_ENVELOPE_BYTES, code=BAD)
    payload_b64 = env.get("payload") if isinstance(env, dict) else None
    if not isinstance(payload_b64, str):
        raise VerificationError(f"{source}: no payload", code=BAD)
    try:
        payload = base64.b64decode(payload_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise VerificationError(f"{source}: payload is not base64", code=BAD) from exc
    obj = strict_loads(payload, source=f"{source} payload", max_bytes=len(payload), code=BAD)
    try:
        hexkey = obj["signer"]["key"]["public"]
    except (KeyError, TypeError) as exc:
        raise VerificationError(f"{source}: no valid signer key in the payload", code=BAD) from exc
    return public_from_hex(hexkey, source=f"{source}: signer key")


def verify_licence(
    envelope: bytes,
    *,
    source: str,
    terms: bytes | None = None,
    trusted: list[PublicKey] | None = None,
) -> VerifiedLicence:
    """Verify a licence: signature by its named key, canonical payload, every affirmation with
    its exact text, the terms text's hash (when given) and the signer among ``trusted`` (when
    given). Raises :class:`VerificationError` with a ``LICENCE_…`` code at the first failure."""
    key = _embedded_key(envelope, source)
    verified = verify_envelope(
        envelope, [key], expected_type=LICENCE_PAYLOAD_TYPE, source=source, kind="LICENCE"
    )
    obj = strict_loads(verified.payload, source=source, max_bytes=len(verified.payload), code=BAD)
    require_canonical(verified.payload, obj, source=f"{source} payload")
    body = load(LicenceBody, obj, source=source, error=VerificationError, code=BAD)
    given = [a.id for a in body.affirmations]
    missing = [a for a in AFFIRMATIONS if a not in given]
    if missing or len(set(given)) != len(given):
        raise VerificationError(
            f"{source}: affirmation(s) not signed: {', '.join(missing) or 'duplicates'}",
            code="LICENCE_AFFIRMATION_MISSING",
        )
    for a in body.affirmations:
        if a.text != AFFIRMATIONS[a.id]:
            raise VerificationError(
                f"{source}: affirmation {a.id!r} signed with another text",
                code="LICENCE_AFFIRMATION_TEXT",
            )
    if terms is not None and sha256_tag(terms) != body.terms.sha256:
        raise VerificationError(
            f"{source}: the licence signs terms {body.terms.sha256}, this text is "
            f"{sha256_tag(terms)}",
            code="LICENCE_TERMS_MISMATCH",
        )
    if trusted is not None and keyid(key) not in {keyid(k) for k in trusted}:
        raise VerificationError(
            f"{source}: signed by a key that is not trusted", code="LICENCE_UNTRUSTED_KEY"
        )
    return VerifiedLicence(body, verified.payload, sha256_tag(verified.payload), keyid(key))
