"""The root of trust as TUF root metadata: read strictly, verify a chain step, sign.

One format serves every root k3kit reads (``verify --root``, ``install --root``, a kit's
``root/N.root.json``, the node's accepted roots, the channel's ``metadata/N.root.json``): classic
TUF JSON ``{"signed": {...}, "signatures": [...]}`` read by python-tuf's own deserializer
(``Metadata.from_bytes``) and verified with python-tuf's public trust logic (``verify_delegate``,
the rules of ``TrustedMetadataSet.update_root``). k3kit adds, before and after python-tuf:

* before: its byte cap and JSON guard (:func:`k3kit._canonical.strict_loads`: depth, duplicate
  keys, huge numbers), a receipt or a targets file offered as a root refused by type, and the
  fields python-tuf reads loosely (``expires``, ``spec_version``, ``version``) checked in ASCII;
* after: ed25519 keys only, each through :func:`k3kit.signing.keys.public_from_raw` (a
  small-order key is ``KEY_WEAK``), each key id recomputed (one key cannot sit under two ids to
  inflate a threshold), thresholds every role can meet, and the k3kit custom fields
  (:mod:`k3kit.signing.trust.model`) consistent with the keys and roles.

Imported only where a root is read or written (``--root``, the ``root`` verbs, the channel):
``verify --trust`` never loads python-tuf.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from securesystemslib.exceptions import UnverifiedSignatureError
from securesystemslib.signer import Key, Signature, SSlibKey
from securesystemslib.signer import Signer as TufSigner
from tuf.api.exceptions import UnsignedMetadataError
from tuf.api.metadata import Metadata, Root
from tuf.api.serialization.json import JSONSerializer

from k3kit._canonical import strict_loads
from k3kit._values import canonical_timestamp, is_lower_hex
from k3kit.errors import K3kitError, VerificationError
from k3kit.models import load
from k3kit.signing.keys import (
    PublicKey,
    keyid,
    public_from_hex,
    to_cryptography,
    verify_signature,
)
from k3kit.signing.signers import Signer
from k3kit.signing.trust.model import CUSTOM_FIELDS, MAX_KEYS, RootRules
from k3kit.signing.trust.root import MAX_ROOT_BYTES, VerifiedRoot

SERIALIZER = JSONSerializer(compact=False)
_BASE_FIELDS = {
    "_type",
    "version",
    "spec_version",
    "expires",
    "consistent_snapshot",
    "keys",
    "roles",
}
_SIGNED_FIELDS = _BASE_FIELDS | set(CUSTOM_FIELDS)
_SPEC_VERSION = re.compile(r"1\.0(\.[0-9]{1,4})?", re.ASCII)
_MAX_VERSION = 2**31 - 1


def tuf_key(signer_or_key: Signer | PublicKey) -> SSlibKey:
    """The TUF public key of a k3kit signer or an Ed25519 key. Its key id is securesystemslib's
    (sha256 of the canonical key object), which is :func:`k3kit.signing.keys.keyid`: one rule for
    ``root create``, the channel, and the reader's recomputation."""
    public = signer_or_key.public_key() if isinstance(signer_or_key, Signer) else signer_or_key
    return SSlibKey.from_crypto(to_cryptography(public))


class K3kitTufSigner(TufSigner):
    """One k3kit :class:`~k3kit.signing.signers.Signer` behind securesystemslib's interface, so
    roots and the channel's roles are signed by the same keys (file or ``pkcs11:``) as kits."""

    def __init__(self, signer: Signer) -> None:
        self._signer = signer
        self._key = tuf_key(signer)

    @property
    def public_key(self) -> Key:
        return self._key

    @property
    def keyid(self) -> str:
        return self._key.keyid

    def sign(self, payload: bytes) -> Signature:
        """Sign ``payload`` (TUF's canonical JSON of the signed part) with the k3kit signer."""
        return Signature(self._key.keyid, self._signer.sign(payload).hex())

    @classmethod
    def from_priv_key_uri(
        cls, priv_key_uri: str, public_key: Key, secrets_handler: object = None
    ) -> TufSigner:
        """Not used: k3kit opens signers with :func:`k3kit.signing.schemes.signer_from_uri`."""
        raise NotImplementedError("open the key with k3kit.signing.schemes.signer_from_uri")


Fail = Callable[[str], NoReturn]


def _failer(source: str, error: type[K3kitError], code: str) -> Fail:
    def fail(why: str) -> NoReturn:
        raise error(f"{source}: {why}", code=code)

    return fail


def _wrong_type(source: str, why: str) -> NoReturn:
    raise VerificationError(
        f"{source}: {why}",
        code="ROOT_WRONG_TYPE",
        hint='a root of trust is TUF root metadata ({"signed": {"_type": "root", ...}}), '
        "as `k3kit root create` writes it",
    )


def _check_raw(obj: object, source: str, fail: Fail) -> None:
    """What python-tuf reads loosely, checked on the JSON first: the shape, the type (a receipt
    or a targets file is not a root), unknown fields, and ASCII-only version, spec and expiry."""
    if not isinstance(obj, dict):
        fail("not a JSON object")
    if "payloadType" in obj or "payload" in obj:
        _wrong_type(
            source,
            "a DSSE envelope (a receipt, a licence, or a k3kit.root/v1 root from before roots "
            "became TUF metadata), not TUF root metadata: make the root with `k3kit root create`",
        )
    if set(obj) != {"signed", "signatures"}:
        fail("TUF metadata has exactly the fields 'signed' and 'signatures'")
    signed = obj["signed"]
    if not isinstance(signed, dict):
        fail("'signed' is not an object")
    if signed.get("_type") != "root":
        _wrong_type(source, f"_type {signed.get('_type')!r} is not 'root'")
    unknown = sorted(set(signed) - _SIGNED_FIELDS)
    if unknown:
        fail(f"unknown field {unknown[0]!r} in 'signed' (k3kit's own fields start x-k3kit-)")
    version = signed.get("version")
    if type(version) is not int or not 1 <= version <= _MAX_VERSION:
        fail(f"version {version!r} is not an integer from 1 to {_MAX_VERSION}")
    spec = signed.get("spec_version")
    if not isinstance(spec, str) or not _SPEC_VERSION.fullmatch(spec):
        fail(f"spec_version {spec!r} is not TUF 1.0.x")
    try:
        canonical_timestamp(signed.get("expires"))
    except ValueError as exc:
        fail(f"expires: {exc}")
    if not isinstance(signed.get("consistent_snapshot", False), bool):
        fail("consistent_snapshot is not true or false")  # python-tuf keeps any value
    _check_shapes(obj, fail)


def _check_shapes(obj: dict[str, Any], fail: Fail) -> None:
    """The shapes python-tuf takes loosely, refused on the JSON: a key id that is a number (an
    attacker's root reached k3kit's own checks with it and ended in an internal error, exit 70),
    ``true`` as a threshold, signatures as an object or with fields TUF does not define. Each
    value then has one spelling, and nothing past this point meets a type it does not expect."""
    sigs = obj["signatures"]
    if not isinstance(sigs, list) or not all(_is_signature(s) for s in sigs):
        fail('\'signatures\' is not a list of {"keyid": ..., "sig": ...} strings')
    roles = obj["signed"].get("roles")
    for name, role in roles.items() if isinstance(roles, dict) else ():
        if not isinstance(role, dict):
            continue  # python-tuf refuses it
        ids = role.get("keyids")
        if not isinstance(ids, list) or not all(isinstance(k, str) for k in ids):
            fail(f"role {name!r}: keyids is not a list of key id strings")
        if type(role.get("threshold")) is not int:
            fail(f"role {name!r}: threshold is not a whole number")


def _is_signature(value: object) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == {"keyid", "sig"}
        and all(isinstance(v, str) for v in value.values())
    )


def _public_keys(root: Root, source: str, fail: Fail) -> dict[str, PublicKey]:
    """Key objects by key id: ed25519 only, each through ``public_from_raw`` (``KEY_WEAK``), each
    id recomputed from the key (so one key listed under two ids is refused, not counted twice)."""
    if len(root.keys) > MAX_KEYS:
        fail(f"more than {MAX_KEYS} keys")
    out = {}
    for kid, key in root.keys.items():
        if (key.keytype, key.scheme) != ("ed25519", "ed25519") or set(key.keyval) != {"public"}:
            fail(f"key {kid[:16]} is not an ed25519 key (keytype and scheme ed25519)")
        if key.unrecognized_fields:
            fail(f"key {kid[:16]} has fields TUF does not define")
        pub = public_from_hex(key.keyval["public"], source=f"{source}: key {kid[:16]}")
        if keyid(pub) != kid:
            fail(f"key id {kid[:16]} is not the sha256 of its key")
        out[kid] = pub
    return out


def _check_roles(root: Root, fail: Fail) -> None:
    """Every role names known keys and has a threshold its keys can meet."""
    for name, role in root.roles.items():
        if role.unrecognized_fields:
            fail(f"role {name!r} has fields TUF does not define")
        if len(role.keyids) > MAX_KEYS:
            fail(f"role {name!r} lists more than {MAX_KEYS} keys")
        unknown = [k for k in role.keyids if k not in root.keys]
        if unknown:
            fail(f"role {name!r} names a key not in 'keys': {unknown[0][:16]}")
        if role.threshold > len(role.keyids):
            fail(f"role {name!r}: threshold {role.threshold} > its key count {len(role.keyids)}")


def _rules(root: Root, source: str, error: type[K3kitError], code: str, fail: Fail) -> RootRules:
    """The k3kit custom fields, strictly, and consistent with the root's keys and roles."""
    custom = {k: v for k, v in root.unrecognized_fields.items() if k in CUSTOM_FIELDS}
    rules = load(RootRules, custom, source=source, error=error, code=code)
    for field, ids in (
        ("x-k3kit-key-validity", rules.key_validity),
        ("x-k3kit-revoked", rules.revoked),
    ):
        for kid in ids:
            if kid not in root.keys:
                fail(f"{field} names a key not in 'keys': {kid[:16]}")
    for name, role in root.roles.items():
        revoked = [k for k in role.keyids if k in rules.revoked]
        if revoked:
            fail(f"role {name!r} still lists revoked key {revoked[0][:16]}")
    return rules


def parse(
    data: bytes,
    source: str,
    *,
    error: type[K3kitError] = VerificationError,
    code: str = "ROOT_MALFORMED",
) -> VerifiedRoot:
    """A root document, read strictly but **not** verified (nothing from it is trusted until
    :func:`verify` has checked its signatures)."""
    fail = _failer(source, error, code)
    obj = strict_loads(data, source=source, max_bytes=MAX_ROOT_BYTES, error=error, code=code)
    _check_raw(obj, source, fail)
    try:
        md: Metadata[Any] = Metadata.from_bytes(data)
    except Exception as exc:  # python-tuf's DeserializationError (any ValueError/KeyError inside)
        fail(f"not TUF root metadata: {exc}")
    root = md.signed
    if not isinstance(root, Root):  # pragma: no cover - _check_raw refused every other _type
        _wrong_type(source, "not root metadata")
    keys = _public_keys(root, source, fail)
    _check_roles(root, fail)
    return VerifiedRoot(md, _rules(root, source, error, code, fail), data, keys)


def _threshold(delegator: VerifiedRoot, new: VerifiedRoot, source: str, whose: str) -> None:
    """python-tuf's rule: ``new`` carries signatures of the root-role threshold of
    ``delegator`` (distinct key ids, each recomputed from its key by :func:`parse`). A signature
    counts only if k3kit's own check (:func:`k3kit.signing.keys.verify_signature`: canonical S,
    R not of small order) accepts it too, as every other signature k3kit counts."""
    md = new.md
    payload = md.signed_bytes
    try:
        delegator.root.verify_delegate(Root.type, payload, md.signatures)  # python-tuf decides
        verified = True
    except UnsignedMetadataError:
        verified = False
    result = delegator.root.get_verification_result(Root.type, payload, md.signatures)
    counted = [
        kid for kid in result.signed if _strict(delegator.keys[kid], md.signatures[kid], payload)
    ]
    if verified and len(counted) >= result.threshold:
        return
    raise VerificationError(
        f"{source}: signed by {len(counted)} distinct key(s) of the root role of {whose} "
        f"(version {delegator.version}); it needs {result.threshold}",
        code="ROOT_UNTRUSTED",
    )


def _strict(key: PublicKey, signature: Signature, payload: bytes) -> bool:
    # One signature, one spelling: 128 lower-case hex digits. bytes.fromhex alone also takes
    # upper case and skips whitespace, so "AB", "ab\n" and "a b" were the same signature
    # written three ways (three root.json files of one meaning).
    text = signature.signature
    if not is_lower_hex(text, 128):
        return False
    return verify_signature(key, bytes.fromhex(text), payload)


def verify(data: bytes, *, trusted: VerifiedRoot | None, source: str) -> VerifiedRoot:
    """Verify a root: alone (the pinned root, signed by its own root role) or as the successor
    of ``trusted`` (exactly version N+1, signed by the root-role thresholds of N and of N+1, as
    ``TrustedMetadataSet.update_root`` requires)."""
    new = parse(data, source)
    if trusted is not None:
        if new.version != trusted.version + 1:
            raise VerificationError(
                f"{source}: version {new.version} does not follow {trusted.version}",
                code="ROOT_VERSION",
            )
        _threshold(trusted, new, source, "the root it replaces")
    _threshold(new, new, source, "itself")
    return new


def sign(root: Root, signers: Sequence[Signer]) -> bytes:
    """``root`` as TUF metadata signed by each signer (one signature per key)."""
    md = Metadata(root)
    for signer in signers:
        md.sign(K3kitTufSigner(signer), append=True)
    return md.to_bytes(SERIALIZER)


def _verifies(key: Key, signature: Signature, payload: bytes) -> bool:
    try:
        key.verify_signature(signature, payload)
    except UnverifiedSignatureError:  # securesystemslib's VerificationError is one too
        return False
    return True


def add_signature(data: bytes, signer: Signer, *, source: str, error: type[K3kitError]) -> bytes:
    """``data`` with one more signature over its unchanged ``signed`` part (root keys live on
    separate machines: each adds its own). Refuses a document that does not read as a root."""
    parse(data, source, error=error, code="ROOT_INVALID")
    md: Metadata[Any] = Metadata.from_bytes(data)
    adapter = K3kitTufSigner(signer)
    old = md.signatures.get(adapter.keyid)
    if old is not None and _verifies(adapter.public_key, old, md.signed_bytes):
        raise error(f"{source}: this key already signed", code="ALREADY_SIGNED")
    md.sign(adapter, append=True)
    return md.to_bytes(SERIALIZER)
