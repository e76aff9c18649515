"""``pkcs11:``: an Ed25519 key that never leaves a PKCS#11 token (an HSM, a smart card, SoftHSM2).

The URI is RFC 7512's: path attributes ``token``, ``serial``, ``object``, ``id`` and ``type``,
separated by ``;``; query attributes ``pin-value``, ``pin-source`` and ``module-path`` after ``?``,
separated by ``&``; values percent-encoded. Without ``module-path`` the module named by
``$K3KIT_PKCS11_MODULE`` is loaded. Without ``pin-value`` or ``pin-source`` the secrets callback is
asked for the PIN (the CLI: ``--passphrase-env VAR`` or a prompt at a terminal).

Why PyKCS11 directly and not securesystemslib's ``HSMSigner``: that signer only speaks ECDSA
(P-256/P-384, ``CKM_ECDSA``), while every k3kit signature is Ed25519 and verifiers must not
change. Here the token signs with ``CKM_EDDSA`` (PKCS#11 3.0) and its public key object gives the
key id. PyKCS11 is the optional extra ``hsm``, imported only when a ``pkcs11:`` URI is opened, so
neither the buyer's verify path nor a file-key publisher ever loads it.

Fail closed: an attribute this module does not understand, a URI that matches two tokens or two
keys, a public-key-only object, a key that is not Ed25519, and a signature the token's own public
key does not verify are each refused with a registered code, never guessed around.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

from k3kit._fs import read_capped
from k3kit._resources import require_extra
from k3kit._text import shown
from k3kit.errors import EnvironmentProblem, InputError
from k3kit.signing.keys import PublicKey, public_from_raw, refuse_shared_secret, verify_signature
from k3kit.signing.schemes._registry import SecretsHandler, scheme
from k3kit.signing.signers import Signer

MODULE_ENV = "K3KIT_PKCS11_MODULE"
MAX_PIN_FILE = 1024
_PATH_ATTRS = frozenset({"token", "serial", "object", "id", "type"})
_QUERY_ATTRS = frozenset({"pin-value", "pin-source", "module-path"})
_PUBLIC_TYPES = frozenset({"public", "cert"})
_PIN_REFUSED = frozenset(
    {
        "CKR_PIN_INCORRECT",
        "CKR_PIN_INVALID",
        "CKR_PIN_LEN_RANGE",
        "CKR_PIN_LOCKED",
        "CKR_PIN_EXPIRED",
    }
)
_URI_HINT = "write it as pkcs11:token=LABEL;object=KEY?pin-source=FILE (docs/trust.md)"


@dataclass(frozen=True)
class Pkcs11Uri:
    """The attributes of a ``pkcs11:`` URI, decoded; absent ones are None."""

    attrs: dict[str, bytes]
    text: str

    def get(self, name: str) -> str | None:
        value = self.attrs.get(name)
        return None if value is None else value.decode("utf-8")


def _redacted(body: str) -> str:
    """The URI as messages show it: a ``pin-value`` is never echoed into a terminal or a log."""
    path, sep, query = body.partition("?")
    items = ["pin-value=***" if i.startswith("pin-value=") else i for i in query.split("&")]
    return shown(path + sep + "&".join(items))


def _invalid(uri_text: str, why: str) -> InputError:
    return InputError(
        f"--key pkcs11:{_redacted(uri_text)}: {why}", code="SIGNER_URI_INVALID", hint=_URI_HINT
    )


def _pairs(part: str, sep: str, allowed: frozenset[str], uri_text: str) -> dict[str, bytes]:
    """``name=value`` pairs of one URI part, percent-decoded; unknown or repeated names refused."""
    pairs: dict[str, bytes] = {}
    for item in filter(None, part.split(sep)):
        name, eq, value = item.partition("=")
        if not eq or name not in allowed:
            raise _invalid(uri_text, f"unsupported attribute {name!r} (known: {sorted(allowed)})")
        if name in pairs:
            raise _invalid(uri_text, f"attribute {name!r} given twice")
        pairs[name] = unquote_to_bytes(value)
    return pairs


def parse_uri(body: str) -> Pkcs11Uri:
    """Parse the text after ``pkcs11:``; refuse what cannot name exactly one private key."""
    path, _, query = body.partition("?")
    attrs = _pairs(path, ";", _PATH_ATTRS, body) | _pairs(query, "&", _QUERY_ATTRS, body)
    uri = Pkcs11Uri(attrs, body)
    try:
        kind = uri.get("type")
        for name in attrs.keys() - {"id"}:
            uri.get(name)
    except UnicodeDecodeError as exc:
        raise _invalid(body, "an attribute is not UTF-8 once percent-decoded") from exc
    if "object" not in attrs and "id" not in attrs:
        raise _invalid(body, "name the key with object=LABEL or id=%XX")
    if "pin-value" in attrs and "pin-source" in attrs:
        raise _invalid(body, "give pin-value or pin-source, not both")
    if kind in _PUBLIC_TYPES:
        raise EnvironmentProblem(
            f"--key pkcs11:{_redacted(body)} names a {kind} object; signing needs the private key",
            code="KEY_IS_PUBLIC",
            hint="drop type= or write type=private; the public key is read from the token",
        )
    if kind not in (None, "private"):
        raise _invalid(body, f"type={kind!r} cannot sign (only type=private)")
    return uri


def _pykcs11() -> Any:
    """PyKCS11, or the one missing-extra error (``EXTRA_NOT_INSTALLED``) naming ``hsm``."""
    require_extra("hsm", "PyKCS11")
    import PyKCS11

    return PyKCS11


def _token_error(p11: Any, exc: Exception, doing: str) -> EnvironmentProblem:
    """A PKCS#11 failure as a registered problem, named by its CKR_ code."""
    name = str(p11.CKR.get(getattr(exc, "value", None), exc))
    code = "HSM_PIN" if name in _PIN_REFUSED else "HSM_UNAVAILABLE"
    hint = "check the PIN (a token locks after too many wrong ones)" if code == "HSM_PIN" else None
    return EnvironmentProblem(f"PKCS#11 token: {doing} failed: {name}", code=code, hint=hint)


@contextmanager
def _c_stdout_to_stderr() -> Iterator[None]:
    """PyKCS11's loader ``printf``s dlopen's error to stdout, which would corrupt ``--json``
    output: while it runs, file descriptor 1 is stderr, and C's buffers are flushed before the
    real stdout comes back."""
    import ctypes  # only here: a file-key signer never pays for it

    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        ctypes.CDLL(None).fflush(None)
        os.dup2(saved, 1)
        os.close(saved)


def _load_module(p11: Any, uri: Pkcs11Uri) -> Any:
    """The PKCS#11 module (a shared library): module-path, else $K3KIT_PKCS11_MODULE."""
    module = uri.get("module-path") or os.environ.get(MODULE_ENV)
    if not module:
        raise EnvironmentProblem(
            "pkcs11: no PKCS#11 module to load",
            code="HSM_UNAVAILABLE",
            hint=f"add ?module-path=/usr/lib/softhsm/libsofthsm2.so or set ${MODULE_ENV}",
        )
    lib = p11.PyKCS11Lib()
    try:
        with _c_stdout_to_stderr():
            lib.load(module)
    except p11.PyKCS11Error as exc:
        raise EnvironmentProblem(
            f"pkcs11: cannot load the PKCS#11 module {shown(module)}",
            code="HSM_UNAVAILABLE",
            hint="install the token's PKCS#11 library or correct module-path",
        ) from exc
    return lib


def _find_slot(lib: Any, uri: Pkcs11Uri) -> Any:
    """The one slot whose token has the URI's label (and serial)."""
    want = {k: uri.get(k) for k in ("token", "serial") if k in uri.attrs}
    found: list[tuple[Any, str]] = []
    for slot in lib.getSlotList(tokenPresent=True):
        info = lib.getTokenInfo(slot)
        have = {"token": info.label.rstrip(" \0"), "serial": info.serialNumber.rstrip(" \0")}
        if all(have[k] == v for k, v in want.items()):
            found.append((slot, have["token"]))
    if not found:
        raise EnvironmentProblem(
            f"pkcs11:{_redacted(uri.text)}: no token present matches "
            f"{', '.join(f'{k}={v}' for k, v in want.items()) or 'the URI'}",
            code="HSM_KEY_NOT_FOUND",
            hint="list the tokens with: pkcs11-tool --module MODULE --list-token-slots",
        )
    if len(found) > 1:
        raise _invalid(uri.text, f"{len(found)} tokens match; add token=LABEL or serial=")
    return found[0][0]


def _pin(uri: Pkcs11Uri, secrets: SecretsHandler, token: str) -> str:
    """pin-value, else the first line of the pin-source file, else the secrets callback."""
    if (value := uri.get("pin-value")) is not None:
        return value
    if (source := uri.get("pin-source")) is not None:
        path = Path(source.removeprefix("file:"))
        data = read_capped(
            path, MAX_PIN_FILE, what="PIN file", error=EnvironmentProblem, code="HSM_PIN"
        )
        refuse_shared_secret(path, path.stat().st_mode, "PIN file")
        return data.decode("utf-8", "replace").splitlines()[0] if data.strip() else ""
    asked = secrets("PIN", f"PKCS#11 token {token!r}")
    if asked is None:
        raise EnvironmentProblem(
            f"pkcs11:{_redacted(uri.text)}: the token needs a PIN and none was given",
            code="HSM_PIN",
            hint="add ?pin-source=FILE to the URI, or pass --passphrase-env VAR",
        )
    return asked.decode("utf-8", "replace")


def _objects(p11: Any, session: Any, uri: Pkcs11Uri, klass: int) -> list[Any]:
    template: list[tuple[int, Any]] = [(p11.CKA_CLASS, klass)]
    if "object" in uri.attrs:
        template.append((p11.CKA_LABEL, uri.get("object")))
    if "id" in uri.attrs:
        template.append((p11.CKA_ID, tuple(uri.attrs["id"])))
    return list(session.findObjects(template))


def _private_key(p11: Any, session: Any, uri: Pkcs11Uri) -> Any:
    """The one Ed25519 private key object the URI names."""
    keys = _objects(p11, session, uri, p11.CKO_PRIVATE_KEY)
    if len(keys) > 1:
        raise _invalid(uri.text, f"{len(keys)} private keys match; add id=%XX")
    if not keys:
        public = _objects(p11, session, uri, p11.CKO_PUBLIC_KEY)
        public += _objects(p11, session, uri, p11.CKO_CERTIFICATE)
        if public:
            raise EnvironmentProblem(
                f"pkcs11:{_redacted(uri.text)} names only a public key or certificate on the "
                "token; signing needs its private key",
                code="KEY_IS_PUBLIC",
                hint="name the private key object (pkcs11-tool -O lists them after --login)",
            )
        raise EnvironmentProblem(
            f"pkcs11:{_redacted(uri.text)}: the token has no private key with that object/id",
            code="HSM_KEY_NOT_FOUND",
            hint="list the keys with: pkcs11-tool --module MODULE --login -O",
        )
    (key_type,) = session.getAttributeValue(keys[0], [p11.CKA_KEY_TYPE])
    if key_type != p11.CKK_EC_EDWARDS:
        raise EnvironmentProblem(
            f"pkcs11:{_redacted(uri.text)} is not an Ed25519 key", code="KEY_UNSUPPORTED"
        )
    return keys[0]


def _public_key(p11: Any, session: Any, key: Any, uri: Pkcs11Uri) -> PublicKey:
    """The public half from the public key object with the private key's label and id."""
    label, key_id = session.getAttributeValue(key, [p11.CKA_LABEL, p11.CKA_ID])
    template = [(p11.CKA_CLASS, p11.CKO_PUBLIC_KEY), (p11.CKA_LABEL, label)]
    found = list(session.findObjects([*template, (p11.CKA_ID, tuple(key_id))]))
    if len(found) != 1:
        raise EnvironmentProblem(
            f"pkcs11:{_redacted(uri.text)}: no single public key object beside the private key",
            code="HSM_KEY_NOT_FOUND",
            hint="import the public key onto the token with the private key's label and id",
        )
    (point,) = session.getAttributeValue(found[0], [p11.CKA_EC_POINT])
    raw = bytes(point)
    if len(raw) == 34 and raw[:2] == b"\x04\x20":  # DER OCTET STRING, as PKCS#11 3.0 says
        raw = raw[2:]
    if len(raw) != 32:
        raise EnvironmentProblem(
            f"pkcs11:{_redacted(uri.text)} is not an Ed25519 key (Ed448?)", code="KEY_UNSUPPORTED"
        )
    return public_from_raw(raw, source=f"pkcs11:{_redacted(uri.text)}")


@dataclass(frozen=True)
class Pkcs11Signer:
    """An open, logged-in session and the key in it; the library object is kept alive with it."""

    p11: Any
    lib: Any
    session: Any
    key: Any
    public: PublicKey

    def public_key(self) -> PublicKey:
        return self.public

    def sign(self, data: bytes) -> bytes:
        """Pure Ed25519 by the token, checked against the token's public key before use: a
        mismatched pair or a faulty token never yields a signature no verifier accepts."""
        try:
            sig = bytes(self.session.sign(self.key, data, self.p11.Mechanism(self.p11.CKM_EDDSA)))
        except self.p11.PyKCS11Error as exc:
            raise _token_error(self.p11, exc, "signing") from exc
        if not verify_signature(self.public, sig, data):
            raise EnvironmentProblem(
                "PKCS#11 token: its signature does not verify with its own public key object",
                code="HSM_SIGN_FAILED",
                hint="the private and public objects of that label/id are not one pair",
            )
        return sig


@scheme("pkcs11")
def open_pkcs11(body: str, secrets: SecretsHandler) -> Signer:
    """Log in to the token the URI names and return a signer for its Ed25519 key."""
    uri = parse_uri(body)
    p11 = _pykcs11()
    lib = _load_module(p11, uri)
    try:
        slot = _find_slot(lib, uri)
        token = lib.getTokenInfo(slot).label.rstrip(" \0")
        session = lib.openSession(slot)
    except p11.PyKCS11Error as exc:
        raise _token_error(p11, exc, "opening a session") from exc
    pin = _pin(uri, secrets, token)
    try:
        session.login(pin)
    except p11.PyKCS11Error as exc:
        if p11.CKR.get(exc.value) != "CKR_USER_ALREADY_LOGGED_IN":
            raise _token_error(p11, exc, "login") from exc
    try:
        key = _private_key(p11, session, uri)
        public = _public_key(p11, session, key, uri)
    except p11.PyKCS11Error as exc:
        raise _token_error(p11, exc, "finding the key") from exc
    return Pkcs11Signer(p11, lib, session, key, public)
