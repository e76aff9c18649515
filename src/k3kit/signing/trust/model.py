"""The rules k3kit adds to a TUF root: key validity windows, revocations and sequence floors.

The root of trust is TUF root metadata (python-tuf's ``Root``); TUF defines keys, the four
top-level roles, thresholds, versions and expiry, and nothing about *when* a release key may sign,
*why* a key was removed, or which kit sequences are retired. Those three live in signed custom
fields of the root's ``signed`` part (python-tuf keeps unrecognised fields and the signatures
cover them): ``x-k3kit-key-validity``, ``x-k3kit-revoked`` and ``x-k3kit-min-sequence``. This
module is their strict model; :mod:`k3kit.signing.trust.tufroot` checks them against the root's
keys and roles. Everything here is structure, so a document that parses is not yet trusted.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, model_validator

from k3kit._values import parse_timestamp
from k3kit.models._base import Frozen, NonNegInt, Sha256Hex, Timestamp

MAX_KEYS = 64
# "<package>/<channel>", both k3kit names (see models._base.Name).
SequenceKey = Annotated[
    str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}/[a-z0-9][a-z0-9._-]{0,63}$")
]
VALIDITY = "x-k3kit-key-validity"
REVOKED = "x-k3kit-revoked"
MIN_SEQUENCE = "x-k3kit-min-sequence"
CUSTOM_FIELDS = (VALIDITY, REVOKED, MIN_SEQUENCE)


class Window(Frozen):
    """When a release key may sign: a receipt's ``issued_at`` must fall inside (inclusive)."""

    model_config = ConfigDict(strict=True)

    not_before: Timestamp | None = None
    not_after: Timestamp | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Window:
        """A window that closes before it opens admits nothing: a publisher's typo, refused."""
        if (
            self.not_before
            and self.not_after
            and parse_timestamp(self.not_before) > parse_timestamp(self.not_after)
        ):
            raise ValueError("not_before is after not_after")
        return self


class Revocation(Frozen):
    model_config = ConfigDict(strict=True)

    reason: str = Field(min_length=1, max_length=200, pattern=r"^[ -~]+$")
    since: Timestamp


class RootRules(Frozen):
    """The k3kit custom fields of a TUF root's ``signed`` part (each optional), read strictly:
    ``true`` is not a sequence floor of 1 (one value, one spelling, as in the rest of a root)."""

    model_config = ConfigDict(strict=True)

    key_validity: dict[Sha256Hex, Window] = Field(
        default_factory=dict, max_length=MAX_KEYS, alias="x-k3kit-key-validity"
    )
    revoked: dict[Sha256Hex, Revocation] = Field(
        default_factory=dict, max_length=MAX_KEYS, alias="x-k3kit-revoked"
    )
    min_sequence: dict[SequenceKey, NonNegInt] = Field(
        default_factory=dict, max_length=1024, alias="x-k3kit-min-sequence"
    )

    def fields(self) -> dict[str, object]:
        """The custom fields to write into a root (empty ones left out)."""
        out: dict[str, object] = self.model_dump(mode="json", by_alias=True)
        return {k: v for k, v in out.items() if v}
