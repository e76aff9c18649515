"""The scheme registry: a name (``file``, ``pkcs11``) to the function that opens a signer.

Why URIs and a secrets callback (as securesystemslib's ``Signer.from_priv_key_uri``): the command
line names a key the same way whether it is a file or a device, and the one thing that differs,
how a passphrase or PIN is obtained, stays with the caller (the CLI reads a variable or prompts at
a terminal; a library caller passes its own callback). The scheme never reads a terminal.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from k3kit._registry import Registry
from k3kit._text import shown
from k3kit.errors import InputError
from k3kit.signing.signers import Signer

SecretsHandler = Callable[[str, str], bytes | None]
"""Called as ``secrets(name, what)``, e.g. ``("PIN", "token 'release'")``, only when the key needs
a secret the URI does not carry. Returns the secret, or None when there is no way to get one (no
variable given, no terminal): the scheme then raises its own error, naming the fix."""

Opener = Callable[[str, SecretsHandler], Signer]
"""Opens a signer from the URI's text after ``scheme:``."""

#: The same registry as every other extension point (k3kit._registry).
SCHEMES: Registry[Opener] = Registry("signer scheme", code="SIGNER_URI_INVALID")

# RFC 3986 scheme syntax; two letters at least, so a Windows drive letter is never a scheme.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")


def scheme(name: str) -> Callable[[Opener], Opener]:
    """Register the decorated function as the opener of ``name:`` URIs (twice is refused)."""
    return SCHEMES.decorator(name, lambda opener: opener)


def no_secrets(_name: str, _what: str) -> bytes | None:
    """The callback for callers that can supply no secret (a key must then need none)."""
    return None


def signer_from_uri(uri: str, secrets: SecretsHandler = no_secrets) -> Signer:
    """The signer ``uri`` names: ``SCHEME:REST`` for a registered scheme, else a path (``file:``).

    A bare path keeps every ``--key PATH`` written before schemes existed working. A string that
    looks like an unknown scheme is refused rather than read as a relative path, unless a file of
    that name exists, so a typo (``pkcs1:``) is named instead of reported as a missing key file.
    """
    match = _SCHEME.match(uri)
    if match is None:
        return SCHEMES["file"](uri, secrets)
    name = match.group(1).lower()
    if name in SCHEMES:
        return SCHEMES[name](uri[match.end() :], secrets)
    if Path(uri).is_file():
        return SCHEMES["file"](uri, secrets)
    raise InputError(
        f"--key {shown(uri.split(':', 1)[0])}:...: no signer scheme of that name "
        f"(known: {', '.join(sorted(SCHEMES))})",
        code="SIGNER_URI_INVALID",
        hint="give a key file path, file:PATH, or pkcs11:token=...;object=... (docs/trust.md)",
    )
