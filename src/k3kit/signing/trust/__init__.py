"""Trust over years of versions: a root of trust with rotation and revocation, threshold receipts,
rollback and equivocation protection, and SSHSIG for stock-tool verification.

See docs/trust.md. ``verify`` consumes a :class:`Trust` (or a :class:`RootAnchor`, resolved against
the kit's own root chain); ``install`` and ``launch`` call :func:`check_and_record`.
"""

from k3kit.signing.trust.policy import Revoked, Trust, TrustedKey
from k3kit.signing.trust.rollback import Decision, RollbackPolicy, check, check_and_record, record
from k3kit.signing.trust.root import RootAnchor, VerifiedRoot, kit_roots, trust_of, verify_root
from k3kit.signing.trust.source import TrustSource, has_trust, resolve_trust

__all__ = [
    "Decision",
    "Revoked",
    "RollbackPolicy",
    "RootAnchor",
    "Trust",
    "TrustSource",
    "TrustedKey",
    "VerifiedRoot",
    "check",
    "check_and_record",
    "has_trust",
    "kit_roots",
    "record",
    "resolve_trust",
    "trust_of",
    "verify_root",
]
