"""The signature memo: a node's record of the Ed25519 checks it has already passed.

A GPU node verifies the same receipt at every start (``ExecStartPre``, an init container,
``launch``). The check itself is cheap; loading ``cryptography``'s binding for it is not: about
14 M instructions and a tenth of ``launch``'s CPU (docs/performance.md, "Ninth pass"). So the
node verbs keep, beside the weights' verification cache, one digest per passed check::

    sha256("k3kit.signature-memo/v1\\n" || public key (32 bytes) || signature (64) || message)

in ``<cache folder>/signatures/memo.json``. A later check of the very same key, signature and
message is recalled instead of recomputed; anything else (another key, one flipped bit of the
receipt) misses and is checked by ``cryptography`` as before. Only a check that passed is ever
recorded, so a hit can only repeat a "passed" this user's k3kit computed itself, unless someone
who can write this user's private cache folder forged it; that person can also replace the
weights' records, and k3kit itself (docs/verification-cache.md says what that does and does not
protect against). :func:`k3kit.signing.keys.verify_signature` still refuses a degenerate key or
signature before it asks the memo.

The file is state, not evidence, read as the verification cache reads its files: the folder must
pass :func:`k3kit._fs.private_dir`, the file must be a regular file of this user's that group and
others cannot write, parsed strictly; any doubt and it is not read (each signature is checked
again), never an error. Writes are atomic (0600) and merge what is on disk, newest last, at most
:data:`MAX_ENTRIES`.
"""

from __future__ import annotations

from pathlib import Path

from k3kit._canonical import dumps, strict_loads
from k3kit._fs import UntrustedState, atomic_write, private_dir, read_private_state
from k3kit._sha256 import sha256_hex
from k3kit._values import is_lower_hex
from k3kit.errors import K3kitError

SCHEMA = "k3kit.signature-memo/v1"
FILE_NAME = "memo.json"
# A node checks a handful of receipts; 1,024 digests is 70 KB, and the oldest go first.
MAX_ENTRIES = 1024
MAX_BYTES = 128 * 1024
_DOMAIN = b"k3kit.signature-memo/v1\n"


def entry(raw: bytes, sig: bytes, message: bytes) -> str:
    """The digest recorded for one passed check (fixed-length key and signature first, so no
    two different triples share the hashed bytes)."""
    if len(raw) != 32 or len(sig) != 64:
        raise ValueError("an Ed25519 key is 32 bytes and a signature 64")
    return sha256_hex(_DOMAIN + raw + sig + message)


def _parse(data: bytes) -> list[str]:
    try:
        obj = strict_loads(data, source="signature memo", max_bytes=MAX_BYTES, max_depth=3)
    except K3kitError as exc:
        raise UntrustedState(exc.message) from exc
    if not isinstance(obj, dict) or set(obj) != {"schema", "entries"}:
        raise UntrustedState("unexpected top-level fields")
    if obj["schema"] != SCHEMA:
        raise UntrustedState(f"schema is not {SCHEMA}")
    entries = obj["entries"]
    if not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
        raise UntrustedState("entries is not a bounded list")
    if not all(is_lower_hex(e, 64) for e in entries):
        raise UntrustedState("an entry is not 64 lower-case hex digits")
    return entries


def _read(path: Path) -> list[str]:
    """Entries from ``path``; FileNotFoundError when absent, UntrustedState when not trusted."""
    return read_private_state(path, MAX_BYTES, _parse)


class SignatureMemo:
    """The memo of one cache folder, read on first use; ``recall=False`` (``--full``) recalls
    nothing but still records what passes. ``recalled`` counts the checks it answered from an
    earlier run, so a report can say which signature was recalled rather than computed: a check
    this object saw pass itself (the same signature twice in one receipt, launch's second pass
    over the kit) is answered too, but is not counted, since this run computed it."""

    def __init__(self, cache_dir: Path, *, recall: bool = True) -> None:
        self.folder = cache_dir / "signatures"
        self.status = "not used"
        self.recalled = 0
        self._recall = recall
        self._entries: list[str] | None = None
        self._fresh: set[str] = set()  # checks that passed in this process, by this object
        self._last: tuple[bytes, bytes, bytes, str] | None = None  # see _entry

    def _entry(self, raw: bytes, sig: bytes, message: bytes) -> str:
        """:func:`entry`, hashed once per check: :meth:`knows`, :meth:`recall` and
        :meth:`remember` ask about the same key, signature and message in turn, and the message
        (a receipt's whole payload) is most of what is hashed."""
        last = self._last
        if last is not None and last[0] == raw and last[1] == sig and last[2] == message:
            return last[3]
        digest = entry(raw, sig, message)
        self._last = (raw, sig, message, digest)
        return digest

    def _load(self) -> list[str]:
        if self._entries is not None:
            return self._entries
        self._entries = []
        try:
            folder = private_dir(self.folder, what="signature memo folder")
        except K3kitError as exc:
            self.status = f"refused ({exc.code}: {exc.message})"
            return self._entries
        try:
            self._entries = _read(folder / FILE_NAME)
            self.status = "loaded"
        except FileNotFoundError:
            self.status = "empty"
        except UntrustedState as exc:
            self.status = f"ignored ({exc})"
        return self._entries

    def knows(self, raw: bytes, sig: bytes, message: bytes) -> bool:
        """Whether :meth:`recall` would answer yes, counting nothing: only for choosing which
        trusted key to try first (no verdict rests on it; the check itself still runs)."""
        if not self._recall:
            return False
        digest = self._entry(raw, sig, message)
        return digest in self._fresh or digest in self._load()

    def recall(self, raw: bytes, sig: bytes, message: bytes) -> bool:
        """True when this exact check passed before (never with ``recall=False``)."""
        if not self._recall:
            return False
        digest = self._entry(raw, sig, message)
        if digest in self._fresh:  # computed by this run: true, but no recall to report
            return True
        hit = digest in self._load()
        self.recalled += hit
        return hit

    def remember(self, raw: bytes, sig: bytes, message: bytes) -> None:
        """Record a check that just passed: merged with the file as it is now, written
        atomically. A folder or file that cannot be used costs the next run one check, so a
        failure here is noted in :attr:`status` and never raised."""
        new = self._entry(raw, sig, message)
        self._fresh.add(new)
        self._load()
        if self.status.startswith("refused"):
            return
        try:
            # checked and read again, not taken from _load: another k3kit on this node may have
            # written since, and its entries are merged, not lost (one cold check per receipt)
            folder = private_dir(self.folder, what="signature memo folder")
            try:
                on_disk = _read(folder / FILE_NAME)
            except (FileNotFoundError, UntrustedState):
                on_disk = []
            kept = [e for e in on_disk if e != new]
            kept = kept[max(0, len(kept) - (MAX_ENTRIES - 1)) :]  # the newest, with room for one
            entries = [*kept, new]
            body = dumps({"schema": SCHEMA, "entries": entries})
            atomic_write(folder / FILE_NAME, body, mode=0o600, state=True)
        except (K3kitError, OSError) as exc:
            self.status = f"not saved ({exc})"
            return
        self._entries = entries
        self.status = "saved"
