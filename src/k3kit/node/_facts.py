"""The facts a verify learns beside its checks, as ``TypedDict``s (docs/api.md).

Their own module so that verify's start-up builds none of them (about 0.5 ms): ``node.verify``
writes the facts as dict literals that mypy holds to these shapes, and hands these classes to
a caller that imports them from it at run time (its module ``__getattr__``).
"""

from __future__ import annotations

from typing import Any, TypedDict


class ReceiptFacts(TypedDict):
    """What the signed receipt says this kit is (``facts["receipt"]``)."""

    kit: str
    version: str
    sequence: int
    issued_at: str


class RollbackFacts(TypedDict):
    """The rollback decision recorded for a passed verify (``facts["rollback"]``)."""

    key: str
    sequence: int
    previous: int | None
    override: bool


class WeightsFacts(TypedDict):
    """Where the weights were found and what hashing them cost (``facts["weights"]``)."""

    root: str
    layout: str
    algorithm: str
    files_hashed: int
    bytes_hashed: int
    files_from_cache: int
    bytes_from_cache: int
    cache: dict[str, Any]
    workers: int
    blake3_threads_per_file: int


class VerifyFacts(TypedDict, total=False):
    """What a verify learnt beside its checks, merged into its JSON at the top level.

    Typed so that a misspelt fact (``facts["kit_sha"]``) is a mypy error, not a
    ``KeyError`` on a buyer's node or, worse, a ``.get`` that quietly returns None. Each key
    is present only once the step that learns it has run; ``launch``, ``install``, ``pull
    --trust``, ``accept`` and the ledger read them to tie what they use to this verdict.
    """

    kit_sha256: str
    rollback: RollbackFacts
    weights_lock_sha256: str
    receipt: ReceiptFacts
    weights: WeightsFacts
    archive_sha256: str | None  # None: the kit was a folder
    oci_digest: str  # the manifest digest a kit was installed from (``install oci://...``)
