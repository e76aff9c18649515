"""Signers named by URI, one module per scheme: ``file:PATH`` (a PEM key file; a bare path means
the same) and ``pkcs11:...`` (a key held by a PKCS#11 token, RFC 7512).

Used by every command that takes a private key (``--key URI``), on the publisher's and the
seller's side; the buyer's verify path never imports this package, so a scheme's optional
library (PyKCS11 for ``pkcs11``) is never loaded there. Schemes are discovered, not listed, as the
audit's rules are: every public module here is imported and registers itself with
:func:`~k3kit.signing.schemes._registry.scheme`; adding a scheme (a cloud KMS, say) is one module.
"""

import importlib
import pkgutil

from k3kit.signing.schemes._registry import (
    SCHEMES,
    SecretsHandler,
    no_secrets,
    scheme,
    signer_from_uri,
)

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["SCHEMES", "SecretsHandler", "no_secrets", "scheme", "signer_from_uri"]
