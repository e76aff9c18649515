"""The ``Trust`` a verifier consumes: which keys may sign a receipt, when, and how many must.

Built either from plain ``--trust KEY.pub`` files (threshold 1, no windows, no floors) or from the
release role of a verified root of trust. Keeping the decision here, separate from the signature
arithmetic in :mod:`k3kit.signing.sign`, means a receipt is judged by one rule whatever the trust
came from: count the **distinct** trusted keys (key ids recomputed from key material) whose
signature verified and whose validity window contains the receipt's ``issued_at``; revoked keys
never count, whatever date the receipt claims, because whoever stole a key can also backdate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from k3kit._immutable import EMPTY_MAPPING, NamedTuple
from k3kit._values import parse_timestamp
from k3kit.errors import VerificationError
from k3kit.signing.keys import PublicKey, keyid


# NamedTuples, not dataclasses: immutable records all the same, and verify's start-up imports this
# module (a frozen dataclass costs ~0.8 ms to create, a NamedTuple ~0.1 ms; docs/performance.md).
class TrustedKey(NamedTuple):
    keyid: str
    key: PublicKey
    not_before: str | None = None
    not_after: str | None = None

    def valid_at(self, issued_at: str) -> bool:
        """Inclusive window, compared as instants (every value here passed the models' one
        timestamp parser, so parsing cannot fail)."""
        at = parse_timestamp(issued_at)
        if self.not_before is not None and at < parse_timestamp(self.not_before):
            return False
        return not (self.not_after is not None and at > parse_timestamp(self.not_after))


class Revoked(NamedTuple):
    key: PublicKey
    reason: str
    since: str


class Trust(NamedTuple):
    """Release keys, a threshold of distinct keys, and what a root adds (revocations, floors)."""

    keys: tuple[TrustedKey, ...]
    threshold: int = 1
    # read-only empty defaults: a NamedTuple's default is shared by every instance
    revoked: Mapping[str, Revoked] = EMPTY_MAPPING
    min_sequence: Mapping[str, int] = EMPTY_MAPPING
    root_version: int | None = None
    description: str = ""

    @classmethod
    def from_keys(cls, keys: Iterable[PublicKey]) -> Trust:
        trusted = tuple(TrustedKey(keyid(k), k) for k in keys)
        ids = ", ".join(k.keyid[:16] for k in trusted)
        return cls(trusted, 1, description=f"{len(trusted)} trusted key(s) from --trust: {ids}")

    def verification_keys(self) -> list[PublicKey]:
        """Every key to try a signature with: release keys, and revoked ones so that a receipt
        signed by a revoked key fails with a code that says so rather than "untrusted"."""
        return [k.key for k in self.keys] + [r.key for r in self.revoked.values()]

    def floor(self, package: str, channel: str) -> int | None:
        return self.min_sequence.get(f"{package}/{channel}")

    def accept(self, signer_keyids: Iterable[str], issued_at: str) -> str:
        """Apply the rule to the key ids whose signatures verified; returns a one-line detail.

        Raises ``RECEIPT_KEY_REVOKED``, ``RECEIPT_KEY_OUTSIDE_VALIDITY`` or
        ``RECEIPT_THRESHOLD_NOT_MET``: the most specific reason the threshold was missed.
        """
        by_id = {k.keyid: k for k in self.keys}
        distinct = list(dict.fromkeys(signer_keyids))
        valid = [kid for kid in distinct if kid in by_id and by_id[kid].valid_at(issued_at)]
        if len(valid) >= self.threshold:
            return f"{len(valid)} of {self.threshold} required distinct key(s): " + ", ".join(
                kid[:16] for kid in valid
            )
        revoked = [kid for kid in distinct if kid in self.revoked]
        outside = [kid for kid in distinct if kid in by_id and kid not in valid]
        if revoked:
            r = self.revoked[revoked[0]]
            raise VerificationError(
                f"the receipt is signed by key {revoked[0][:16]}, revoked since {r.since} "
                f"({r.reason}) by root version {self.root_version}",
                code="RECEIPT_KEY_REVOKED",
                hint="ask the publisher for a receipt re-signed with a current key",
            )
        if outside:
            k = by_id[outside[0]]
            raise VerificationError(
                f"the receipt was issued at {issued_at}, outside the validity window of key "
                f"{k.keyid[:16]} ({k.not_before or '-'} .. {k.not_after or '-'})",
                code="RECEIPT_KEY_OUTSIDE_VALIDITY",
            )
        raise VerificationError(
            f"{len(valid)} distinct trusted key(s) signed the receipt; the release role needs "
            f"{self.threshold} (one key signing twice, or under two key ids, counts once)",
            code="RECEIPT_THRESHOLD_NOT_MET",
        )
