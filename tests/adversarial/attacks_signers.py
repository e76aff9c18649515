"""Signer URIs written by someone other than the operator (a CI variable, a copied runbook line):
an unknown scheme, a PKCS#11 URI naming a public object, a module path smuggled into the path
part, two PIN sources. Each is refused before any token or library is touched (no SoftHSM2 needed
here; tests/test_signer_schemes.py runs the token-side attacks against a real one), and the
receipt is never rewritten."""

from __future__ import annotations

from tests.adversarial.corpus import Argv, Workbench, attack
from tests.conftest import EXAMPLE

CLAIMS = EXAMPLE / "claims.toml"


def _sign(w: Workbench, key: str) -> Argv:
    return ["sign", w.kit(), "--key", key, "--claims", CLAIMS, "--force"]


@attack("SIGNER_URI_INVALID", exit_code=3)
def signer_uri_with_a_misspelt_scheme(w: Workbench) -> Argv:
    """``pkcs12:`` for ``pkcs11:``: named as an unknown scheme, not read as a relative file name
    (which would report a missing key file and send the operator looking in the wrong place)."""
    return _sign(w, "pkcs12:token=release;object=release-2026?pin-value=1234")


@attack("KEY_IS_PUBLIC", exit_code=4)
def signer_uri_naming_the_public_object(w: Workbench) -> Argv:
    """``type=public``: the token's public key object cannot sign; said so before a PIN is sent."""
    return _sign(w, "pkcs11:token=release;object=release-2026;type=public?pin-value=1234")


@attack("SIGNER_URI_INVALID", exit_code=3)
def signer_uri_smuggling_a_module_path_into_the_path_part(w: Workbench) -> Argv:
    """``module-path`` is a query attribute; in the path part an RFC 7512 parser that ignored
    unknown attributes would drop it silently, one that did not would load a planted library.
    k3kit understands a fixed set and refuses anything else."""
    planted = w.root / "libplanted.so"
    planted.write_bytes(b"\x7fELF not really")
    return _sign(w, f"pkcs11:token=release;object=release-2026;module-path={planted}")


@attack("SIGNER_URI_INVALID", exit_code=3)
def signer_uri_with_two_pin_sources(w: Workbench) -> Argv:
    """``pin-value`` and ``pin-source`` together: which one is sent is not guessed."""
    pin = w.root / "pin"
    pin.write_text("1234\n")
    pin.chmod(0o600)
    return _sign(w, f"pkcs11:token=release;object=k?pin-value=0000&pin-source=file:{pin}")
