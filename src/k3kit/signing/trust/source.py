"""What a verb that checks a signature is given to trust: the one ``TrustSource`` type, and the
rules that load it from files, shared by every front door (CLI options and :mod:`k3kit.api`).

A ``TrustSource`` is plain publisher keys, a :class:`Trust` (keys with windows, threshold and
revocations), or a :class:`RootAnchor` (a pinned root of trust the kit's own ``root/`` chain may
move forward). Why one type: ``verify``, ``install`` and ``launch`` took all three while ``audit``,
``pull`` and ``pack`` took only keys, so a buyer who had moved to a root could not audit or pull
with it. Loading lives here, not in the CLI, so a key given twice or an oversized root file is
refused with the same code whichever door it came through.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeGuard

from k3kit._fs import check_trust_anchor, read_capped
from k3kit.errors import InputError
from k3kit.signing.keys import PublicKey, keyid, load_public
from k3kit.signing.trust.policy import Trust
from k3kit.signing.trust.rollback import RollbackPolicy
from k3kit.signing.trust.root import MAX_ROOT_BYTES, RootAnchor

TrustSource = list[PublicKey] | Trust | RootAnchor


def has_trust(source: TrustSource | None) -> TypeGuard[TrustSource]:
    """False for "no trust given" (None or no keys): the verbs where trust is optional then read
    without checking a signature, and say so."""
    return source is not None and not (isinstance(source, list) and not source)


def resolve_trust(source: TrustSource, kit_dir: Path | None) -> Trust:
    """The :class:`Trust` ``source`` stands for; a root anchor walks ``kit_dir``'s ``root/`` chain
    (None: the pinned root and this node's accepted roots only)."""
    if isinstance(source, RootAnchor):
        return source.resolve(kit_dir)[0]
    return source if isinstance(source, Trust) else Trust.from_keys(source)


def trusted_keys_of(source: TrustSource, kit_dir: Path | None) -> list[PublicKey]:
    """The keys a signature may verify with, for verbs that only ask "signed by a trusted key?"
    (``audit``): the current release keys, never a revoked one."""
    return [k.key for k in resolve_trust(source, kit_dir).keys]


def load_trusted_keys(paths: Sequence[Path]) -> list[PublicKey]:
    """Publisher public keys from files; the same key given twice is a caller mistake
    (``TRUST_DUPLICATE_KEY``, exit 3), since it would look like two signers."""
    keys: list[PublicKey] = [load_public(p) for p in paths]
    ids = [keyid(k) for k in keys]
    if len(set(ids)) != len(ids):
        raise InputError(
            "the same public key was given twice with --trust", code="TRUST_DUPLICATE_KEY"
        )
    return keys


def read_root_file(path: Path) -> bytes:
    """A root file's bytes, capped (``ROOT_INVALID``, exit 3, when missing or oversized)."""
    check_trust_anchor(path, "root")  # a root others could have swapped is no anchor
    return read_capped(path, MAX_ROOT_BYTES, what="root", error=InputError, code="ROOT_INVALID")


def root_trust(
    path: Path, state_dir: Path | None, *, now: str, allow_rollback: bool = False
) -> tuple[RootAnchor, RollbackPolicy | None]:
    """A pinned root of trust and the rollback policy that goes with it (none without a state
    folder: nothing is remembered, so nothing can be compared)."""
    anchor = RootAnchor(read_root_file(path), str(path), state_dir, now)
    policy = RollbackPolicy(state_dir, allow_rollback, now) if state_dir is not None else None
    return anchor, policy
