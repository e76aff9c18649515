"""The signature memo (k3kit.signing.memo): a node recalls an Ed25519 check it passed before.

What makes a recalled "passed" false, and who can make it so (the attack classes)? Each attempt
is a test here: a check that failed (never recorded), a key, signature or message that differs
by one bit (a miss, checked by cryptography), a degenerate key or signature (refused before the
memo is asked), a file or folder that is not this user's alone, a co-tenant's planted folder
(a real second uid), damaged or oversized files, and ``--full``. Real keys and signatures
throughout; the spy key only records whether cryptography's verify was reached.
"""

from __future__ import annotations

import binascii
import json
import os
import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from k3kit.archive import pack
from k3kit.node.verify import verify_path
from k3kit.signing import memo as memo_module
from k3kit.signing.keys import _L, load_public, public_from_raw, verify_signature
from k3kit.signing.memo import FILE_NAME, SCHEMA, SignatureMemo, entry
from tests.conftest import GoldenKit, run_k3kit
from tests.cotenant import cotenant_python, needs_root, shared_folder

MESSAGE = b"DSSEv1 28 application/vnd.in-toto+json 2 {}"


class SpyKey:
    """A real Ed25519 public key that counts how often cryptography's verify is reached."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._key = private.public_key()
        self.verified = 0

    def public_bytes_raw(self) -> bytes:
        return self._key.public_bytes_raw()

    def verify(self, signature: bytes, data: bytes) -> None:
        self.verified += 1
        self._key.verify(signature, data)


@pytest.fixture
def private() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def _file(cache: Path) -> Path:
    return cache / "signatures" / FILE_NAME


def test_a_passed_check_is_recalled_without_cryptography(
    private: Ed25519PrivateKey, tmp_path: Path
) -> None:
    sig = private.sign(MESSAGE)
    first = SpyKey(private)
    assert verify_signature(first, sig, MESSAGE, memo=SignatureMemo(tmp_path)) is True
    assert first.verified == 1  # checked, then recorded
    assert _file(tmp_path).stat().st_mode & 0o777 == 0o600
    again, memo = SpyKey(private), SignatureMemo(tmp_path)
    assert verify_signature(again, sig, MESSAGE, memo=memo) is True
    assert (again.verified, memo.recalled, memo.status) == (0, 1, "loaded")


@pytest.mark.parametrize("what", ["message", "signature", "key"])
def test_one_bit_different_is_a_miss_and_is_checked(
    private: Ed25519PrivateKey, tmp_path: Path, what: str
) -> None:
    sig = private.sign(MESSAGE)
    assert verify_signature(SpyKey(private), sig, MESSAGE, memo=SignatureMemo(tmp_path))
    key, message = SpyKey(private), MESSAGE
    if what == "message":
        message = MESSAGE[:-1] + bytes([MESSAGE[-1] ^ 1])
    elif what == "signature":  # another valid-looking signature: this key's over another message
        sig = private.sign(b"another message")
    else:
        key = SpyKey(Ed25519PrivateKey.generate())
    memo = SignatureMemo(tmp_path)
    assert verify_signature(key, sig, message, memo=memo) is False
    assert (key.verified, memo.recalled) == (1, 0)


def test_a_failed_check_is_never_remembered(private: Ed25519PrivateKey, tmp_path: Path) -> None:
    wrong = private.sign(b"not the message")
    for _ in range(2):
        key, memo = SpyKey(private), SignatureMemo(tmp_path)
        assert verify_signature(key, wrong, MESSAGE, memo=memo) is False
        assert key.verified == 1
    assert not _file(tmp_path).exists()


def _plant(cache: Path, entries: list[str]) -> None:
    folder = cache / "signatures"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _file(cache).write_text(json.dumps({"schema": SCHEMA, "entries": entries}))
    _file(cache).chmod(0o600)


def test_a_degenerate_key_or_signature_is_refused_before_the_memo(tmp_path: Path) -> None:
    # The identity point as key and R, S = 0: "verifies" every message in OpenSSL. Planted in
    # this user's own memo (the one writer the memo trusts), it must still not pass.
    identity = bytes([1]) + bytes(31)
    forged = identity + bytes(32)
    _plant(tmp_path, [entry(identity, forged, MESSAGE)])

    class Raw:
        def public_bytes_raw(self) -> bytes:
            return identity

        def verify(self, signature: bytes, data: bytes) -> None:
            raise AssertionError("a degenerate key never reaches cryptography")

    memo = SignatureMemo(tmp_path)
    assert verify_signature(Raw(), forged, MESSAGE, memo=memo) is False
    assert memo.recalled == 0
    # S at or above the group order L (RFC 8032's malleability rule): refused the same way
    good = Ed25519PrivateKey.generate()
    sig = good.sign(MESSAGE)
    high = sig[:32] + (int.from_bytes(sig[32:], "little") + _L).to_bytes(32, "little")
    _plant(tmp_path, [entry(good.public_key().public_bytes_raw(), high, MESSAGE)])
    assert verify_signature(SpyKey(good), high, MESSAGE, memo=SignatureMemo(tmp_path)) is False


def test_full_recalls_nothing_but_still_records(private: Ed25519PrivateKey, tmp_path: Path) -> None:
    sig = private.sign(MESSAGE)
    assert verify_signature(SpyKey(private), sig, MESSAGE, memo=SignatureMemo(tmp_path))
    key, memo = SpyKey(private), SignatureMemo(tmp_path, recall=False)
    assert verify_signature(key, sig, MESSAGE, memo=memo) is True
    assert (key.verified, memo.recalled) == (1, 0)


def _damage_garbage(path: Path) -> None:
    path.write_bytes(b"\x00not json")


def _damage_schema(path: Path) -> None:
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "schema": "k3kit.signature-memo/v0"}))


def _damage_upper_case(path: Path) -> None:
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "entries": [e.upper() for e in doc["entries"]]}))


def _damage_extra_field(path: Path) -> None:
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "note": "hi"}))


def _damage_too_many(path: Path) -> None:
    doc = json.loads(path.read_text())
    entries = doc["entries"] * (memo_module.MAX_ENTRIES + 1)
    path.write_text(json.dumps({**doc, "entries": entries}))


def _damage_group_writable(path: Path) -> None:
    path.chmod(0o620)


def _damage_symlink(path: Path) -> None:
    real = path.with_name("elsewhere.json")
    path.rename(real)
    path.symlink_to(real)


def _damage_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _damage_huge(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(memo_module.MAX_BYTES + 1)


@pytest.mark.parametrize(
    "damage",
    [
        _damage_garbage,
        _damage_schema,
        _damage_upper_case,
        _damage_extra_field,
        _damage_too_many,
        _damage_group_writable,
        _damage_symlink,
        _damage_fifo,
        _damage_huge,
    ],
)
def test_a_file_not_to_be_trusted_is_ignored_and_the_check_made(
    private: Ed25519PrivateKey, tmp_path: Path, damage: object
) -> None:
    sig = private.sign(MESSAGE)
    assert verify_signature(SpyKey(private), sig, MESSAGE, memo=SignatureMemo(tmp_path))
    assert callable(damage)
    damage(_file(tmp_path))
    key, memo = SpyKey(private), SignatureMemo(tmp_path)
    assert memo.recall(private.public_key().public_bytes_raw(), sig, MESSAGE) is False
    assert memo.status.startswith("ignored"), memo.status  # read, and not believed
    assert verify_signature(key, sig, MESSAGE, memo=memo) is True
    assert key.verified == 1 and memo.recalled == 0


def test_a_folder_others_can_write_is_refused(private: Ed25519PrivateKey, tmp_path: Path) -> None:
    sig = private.sign(MESSAGE)
    assert verify_signature(SpyKey(private), sig, MESSAGE, memo=SignatureMemo(tmp_path))
    (tmp_path / "signatures").chmod(0o777)
    key, memo = SpyKey(private), SignatureMemo(tmp_path)
    assert verify_signature(key, sig, MESSAGE, memo=memo) is True
    assert key.verified == 1 and memo.status.startswith("refused"), memo.status


@pytest.mark.parametrize("recall", [True, False], ids=["recall", "full"])
def test_an_unusable_cache_folder_costs_a_check_never_the_verdict(
    private: Ed25519PrivateKey, tmp_path: Path, recall: bool
) -> None:
    """A link loop where the cache folder is (a stale NFS handle raises alike): the folder
    check's OSError escaped the memo, and a genuine kit was refused as unreadable (exit 1), with
    --full too (found by a review of this pass). It is a refused folder: one check more."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    key, memo = SpyKey(private), SignatureMemo(loop, recall=recall)
    assert verify_signature(key, private.sign(MESSAGE), MESSAGE, memo=memo) is True
    assert key.verified == 1 and memo.status.startswith("refused"), memo.status


def test_verify_with_a_cache_folder_in_a_link_loop_still_verifies(
    golden: GoldenKit, tmp_path: Path
) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    args = ("verify", golden.kit, "--trust", golden.key.public, "--state-dir", loop, "--json")
    done = run_k3kit(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["ok"] is True
    assert "note: signature memo refused (STATE_DIR_UNSAFE" in done.stderr, done.stderr


def test_verify_names_a_memo_folder_it_refused_and_is_silent_on_a_good_one(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A refused memo changes no verdict but makes every start cold: the operator is told why,
    as for the weights' cache; a usable memo adds no line."""
    state = tmp_path / "state"
    (state / "signatures").mkdir(parents=True)
    (state / "signatures").chmod(0o777)
    args = ("verify", golden.kit, "--trust", golden.key.public, "--state-dir", state)
    refused = run_k3kit(*args)
    assert refused.returncode == 0, refused.stderr
    assert "note: signature memo refused (STATE_DIR_UNSAFE" in refused.stderr, refused.stderr
    assert "is writable by group or others" in refused.stderr
    (state / "signatures").chmod(0o700)
    for _ in range(2):  # cold, then warm: neither has anything to say about the memo
        done = run_k3kit(*args)
        assert done.returncode == 0 and "signature memo" not in done.stderr, done.stderr


_COTENANT_PLANT = """
import json, os, sys
cache, digest = sys.argv[1], sys.argv[2]
os.makedirs(cache + "/signatures", mode=0o755)
with open(cache + "/signatures/memo.json", "w") as f:
    json.dump({"schema": "k3kit.signature-memo/v1", "entries": [digest]}, f)
"""


@needs_root
@pytest.mark.parametrize("planted", ["cache", "signatures"])
def test_a_cotenants_planted_memo_is_never_read(private: Ed25519PrivateKey, planted: str) -> None:
    """A second uid makes the cache folder (or the memo folder in ours) first, with an entry for
    a forged signature: not read, and the forgery fails."""
    forged = private.sign(b"what the co-tenant wants signed")
    digest = entry(private.public_key().public_bytes_raw(), forged, MESSAGE)
    with shared_folder() as shared:
        cache = shared / "cache"
        if planted == "signatures":
            cache.mkdir(mode=0o755)  # ours; the co-tenant cannot write into it...
            cache.chmod(0o777)  # ...unless we leave it open, which the check refuses
        cotenant_python(_COTENANT_PLANT, str(cache), digest)
        key, memo = SpyKey(private), SignatureMemo(cache)
        assert verify_signature(key, forged, MESSAGE, memo=memo) is False
        assert key.verified == 1 and memo.recalled == 0
        assert memo.status.startswith("refused"), memo.status


def test_the_memo_keeps_the_newest_entries(
    private: Ed25519PrivateKey, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memo_module, "MAX_ENTRIES", 3)
    messages = [b"m%d" % i for i in range(5)]
    for m in messages:
        assert verify_signature(SpyKey(private), private.sign(m), m, memo=SignatureMemo(tmp_path))
    raw = private.public_key().public_bytes_raw()
    kept = json.loads(_file(tmp_path).read_text())["entries"]
    assert kept == [entry(raw, private.sign(m), m) for m in messages[-3:]]


def test_an_entry_binds_key_signature_and_message_apart() -> None:
    raw, sig = bytes(range(32)), bytes(range(64))
    with pytest.raises(ValueError):
        entry(raw[:31], sig, b"")
    with pytest.raises(ValueError):
        entry(raw, sig + b"\x00", b"")
    # the fixed lengths keep a byte from moving between the signature and the message
    assert entry(raw, sig, b"x") != entry(raw, sig[1:] + b"x", sig[:1])


def test_a_raw_key_checks_the_signature_itself(private: Ed25519PrivateKey) -> None:
    key = public_from_raw(private.public_key().public_bytes_raw(), source="test")
    assert verify_signature(key, private.sign(MESSAGE), MESSAGE) is True
    assert verify_signature(key, private.sign(b"other"), MESSAGE) is False
    assert key == public_from_raw(key.public_bytes_raw(), source="again")
    assert len({key, public_from_raw(key.public_bytes_raw(), source="again")}) == 1


def _signature_detail(report: dict[str, object]) -> str:
    checks = report["checks"]
    assert isinstance(checks, list)
    return str(next(c for c in checks if c["id"] == "receipt_signature")["detail"])


def test_a_warm_verify_says_the_signature_was_recalled_and_full_checks_it(
    golden: GoldenKit, tmp_path: Path
) -> None:
    args = ("verify", golden.kit, "--trust", golden.key.public, "--state-dir", tmp_path, "--json")
    cold = run_k3kit(*args)
    assert cold.returncode == 0, cold.stderr
    assert "checked before" not in _signature_detail(json.loads(cold.stdout))
    warm = run_k3kit(*args)
    assert warm.returncode == 0, warm.stderr
    assert "as checked before on this node" in _signature_detail(json.loads(warm.stdout))
    full = run_k3kit(*args, "--full")
    assert full.returncode == 0, full.stderr
    assert "checked before" not in _signature_detail(json.loads(full.stdout))


def test_a_receipt_changed_after_a_warm_run_fails(golden: GoldenKit, tmp_path: Path) -> None:
    """Class 2 (found in place): a memo filled by the genuine kit vouches for nothing else. The
    receipt's signature re-spelt with another valid-looking one is checked, and fails."""
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    args = ("verify", kit, "--trust", golden.key.public, "--state-dir", tmp_path / "s", "--json")
    assert run_k3kit(*args).returncode == 0
    receipt = kit / "receipt.dsse.json"
    doc = json.loads(receipt.read_text())
    other = Ed25519PrivateKey.generate().sign(b"x")
    doc["signatures"][0]["sig"] = binascii.b2a_base64(other, newline=False).decode()
    receipt.write_text(json.dumps(doc))
    done = run_k3kit(*args)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["ok"] is False


def test_a_warm_verify_of_the_archive_recalls_both_of_its_signature_checks(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """An archive's receipt is checked twice (from the tar index before anything is extracted,
    then in the extracted folder): a warm run recalls both, and the JSON says so."""
    archive = tmp_path / "kit.kit.tar.gz"
    pack(golden.kit, archive)
    args = ("verify", archive, "--trust", golden.key.public, "--state-dir", tmp_path / "s")
    assert run_k3kit(*args).returncode == 0
    warm = run_k3kit(*args, "--json")
    assert warm.returncode == 0, warm.stderr
    assert "as checked before on this node" in _signature_detail(json.loads(warm.stdout))
    memo = SignatureMemo(tmp_path / "s")
    report = verify_path(archive, [load_public(golden.key.public)], memo=memo)
    assert report.ok and memo.recalled == 2  # the index's check and the folder's
    entries = json.loads((tmp_path / "s" / "signatures" / FILE_NAME).read_text())["entries"]
    assert len(entries) == 1  # one key, signature and message: remembered once


def test_knows_only_orders_the_keys_and_counts_nothing(
    private: Ed25519PrivateKey, tmp_path: Path
) -> None:
    sig, raw = private.sign(MESSAGE), private.public_key().public_bytes_raw()
    assert verify_signature(SpyKey(private), sig, MESSAGE, memo=SignatureMemo(tmp_path))
    memo = SignatureMemo(tmp_path)
    assert memo.knows(raw, sig, MESSAGE) and not memo.knows(raw, sig, MESSAGE + b" ")
    assert memo.recalled == 0
    assert not SignatureMemo(tmp_path, recall=False).knows(raw, sig, MESSAGE)  # --full


def test_one_check_is_hashed_once_and_no_other_check_passes_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """knows, recall and remember ask about the same check in turn; its digest (over the whole
    signed message) is computed once. A check that differs in any part is never answered from
    that one: another message, signature or key is hashed afresh and is not recalled."""
    calls: list[bytes] = []

    def counted(raw: bytes, sig: bytes, message: bytes) -> str:
        calls.append(message)
        return entry(raw, sig, message)

    monkeypatch.setattr(memo_module, "entry", counted)
    memo = SignatureMemo(tmp_path / "cache")
    raw, sig, message = b"k" * 32, b"s" * 64, b"m" * 4096
    assert not memo.knows(raw, sig, message)
    assert not memo.recall(raw, sig, message)
    memo.remember(raw, sig, message)
    assert len(calls) == 1
    for other in (
        (raw, sig, message[:-1] + b"n"),
        (raw, b"t" + sig[1:], message),
        (b"l" + raw[1:], sig, message),
    ):
        assert not memo.knows(*other) and not memo.recall(*other)
    assert memo.recall(raw, sig, message)  # still the one that passed
    assert memo.recalled == 0  # computed by this run: answered, never counted as recalled
