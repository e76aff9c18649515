"""Attacks on the signature memo (k3kit.signing.memo) through the real CLI: what makes a recalled
"signature passed" false, and who can make it so?

Every attack here drives ``k3kit verify`` (or the node's own reader) at a kit whose receipt has
been tampered with so that its signature no longer verifies, then tries to get a memo entry for
that exact (key, signature, message) triple recalled. The first test is the oracle: planted in
this user's own private memo (the one writer the design trusts), such an entry *is* recalled,
so each later test that says NOT VERIFIED proves the defence held, not that the forgery was
inert. Real keys, real files, a real second uid (tests/cotenant.py) where the attacker is one.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from k3kit._canonical import dumps
from k3kit.node.verify import verify_dir
from k3kit.signing.keys import _L, load_private, load_public, verify_signature
from k3kit.signing.memo import FILE_NAME, MAX_BYTES, SCHEMA, SignatureMemo, entry
from k3kit.signing.sign import pae
from k3kit.signing.trust.edit import revoke
from k3kit.signing.trust.source import load_trusted_keys
from tests import reports
from tests.conftest import GoldenKit, KeyFiles, run_k3kit
from tests.cotenant import COTENANT_UID, cotenant_python, needs_root, shared_folder
from tests.trustkit import (
    attach,
    build_kit,
    duplicate_signature,
    keypair,
    kid,
    root_v1,
    write_root,
)

RECEIPT = "receipt.dsse.json"
RECALLED = "as checked before on this node"

# --- helpers -----------------------------------------------------------------------------------


def _verify(kit: Path, state: Path, *extra: str | Path) -> tuple[int, dict[str, Any]]:
    done = run_k3kit("verify", kit, "--state-dir", state, "--json", *extra)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = {"ok": False, "checks": [], "stderr": done.stderr}
    return done.returncode, report


def _trust(key: KeyFiles) -> tuple[str, Path]:
    return ("--trust", key.public)


def _recalled(report: dict[str, Any]) -> bool:
    return RECALLED in str(reports.check(report, "receipt_signature").get("detail", ""))


def _assert_forgery_refused(rc: int, report: dict[str, Any]) -> None:
    """The forged receipt failed on its signature (exit 1, RECEIPT_UNTRUSTED_KEY), and the report
    claims no recall: the planted entry was never read."""
    assert rc == 1 and not _recalled(report), report
    assert "RECEIPT_UNTRUSTED_KEY" in reports.codes(report), report


def _raw(key: KeyFiles) -> bytes:
    return load_public(key.public).public_bytes_raw()


def _envelope(kit: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((kit / RECEIPT).read_bytes())
    return doc


def _message(env: dict[str, Any]) -> bytes:
    return pae(env["payloadType"], base64.b64decode(env["payload"]))


def _forge(kit: Path) -> tuple[bytes, bytes]:
    """Change what the receipt says (its environment notes), keep the canonical spelling and the
    publisher's signature: a receipt whose signature no longer verifies, over a statement that
    would otherwise pass every check (the kit checksum it names is unchanged). Returns the
    (signature, message) triple's last two parts, for a planted memo entry."""
    env = _envelope(kit)
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["predicate"]["environment"]["notes"] = "forged by the attacker"
    env["payload"] = base64.b64encode(dumps(statement)).decode()
    (kit / RECEIPT).write_text(json.dumps(env))
    return base64.b64decode(env["signatures"][0]["sig"]), _message(env)


def _memo_doc(*digests: str) -> bytes:
    return json.dumps({"schema": SCHEMA, "entries": list(digests)}).encode()


def _plant_own(cache: Path, body: bytes) -> Path:
    folder = cache / "signatures"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    cache.chmod(0o700)
    path = folder / FILE_NAME
    path.write_bytes(body)
    path.chmod(0o600)
    return path


@pytest.fixture
def forged(golden: GoldenKit, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the golden kit with a forged receipt, and the memo digest that would pass it."""
    kit = Path(shutil.copytree(golden.kit, tmp_path / "forged-kit"))
    sig, message = _forge(kit)
    return kit, entry(_raw(golden.key), sig, message)


# --- the oracle: what a planted entry does where the design trusts it ---------------------------


def test_oracle_an_entry_in_our_own_memo_is_recalled_by_design_and_full_ignores_it(
    golden: GoldenKit, forged: tuple[Path, str], tmp_path: Path
) -> None:
    """Without a memo the forged receipt fails; with the forged digest in this user's own private
    memo it is recalled (documented: whoever writes our private cache can also replace k3kit);
    ``--full`` checks it again and fails. This is what every later test tries to reach."""
    kit, digest = forged
    state = tmp_path / "state"
    rc, report = _verify(kit, tmp_path / "clean", *_trust(golden.key))
    assert rc == 1 and "RECEIPT_UNTRUSTED_KEY" in reports.codes(report)
    _plant_own(state, _memo_doc(digest))
    rc, report = _verify(kit, state, *_trust(golden.key))
    assert rc == 0 and _recalled(report), report
    rc, report = _verify(kit, state, *_trust(golden.key), "--full")
    assert rc == 1 and not _recalled(report)


# --- class 1: found in place -------------------------------------------------------------------


@needs_root
def test_a_memo_file_left_by_another_uid_in_our_folder_is_not_read(
    golden: GoldenKit, forged: tuple[Path, str], tmp_path: Path
) -> None:
    """A memo.json with the forged digest, in our private folder but owned by uid 65534 (a
    restored backup, a copied cache): ignored."""
    kit, digest = forged
    path = _plant_own(tmp_path / "state", _memo_doc(digest))
    os.chown(path, COTENANT_UID, COTENANT_UID)
    rc, report = _verify(kit, tmp_path / "state", *_trust(golden.key))
    assert rc == 1 and not _recalled(report)


@pytest.mark.parametrize("changed", ["README.md", "MANIFEST.json"])
def test_a_different_kit_with_the_same_signature_is_recalled_but_fails(
    golden: GoldenKit, tmp_path: Path, changed: str
) -> None:
    """The genuine receipt (its signature recalled, rightly: it is the publisher's) moved onto a
    kit whose files differ: the kit checks that follow the signature still fail."""
    state = tmp_path / "state"
    rc, _ = _verify(golden.kit, state, *_trust(golden.key))
    assert rc == 0
    other = Path(shutil.copytree(golden.kit, tmp_path / "other"))
    with (other / changed).open("ab") as f:
        f.write(b"\n")
    rc, report = _verify(other, state, *_trust(golden.key))
    assert rc == 1 and report["ok"] is False
    assert reports.check(report, "receipt_signature")["status"] == "passed" and _recalled(report)
    failed = "kit_files" if changed == "README.md" else "kit_checksum"
    assert reports.check(report, failed)["status"] == "failed", report


def test_a_genuine_receipt_of_another_kit_swapped_in_after_a_warm_run_fails(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Kit A and kit B both verified (both signatures in the memo); B's receipt put into A."""
    state = tmp_path / "state"
    b = build_kit(tmp_path / "b", golden.lock, golden.key, sequence=2, version="1.1.0")
    for kit in (golden.kit, b, golden.kit, b):
        assert _verify(kit, state, *_trust(golden.key))[0] == 0
    a = Path(shutil.copytree(golden.kit, tmp_path / "a"))
    shutil.copyfile(b / RECEIPT, a / RECEIPT)
    rc, report = _verify(a, state, *_trust(golden.key))
    assert rc == 1 and _recalled(report)
    assert reports.check(report, "kit_checksum")["status"] == "failed", report


def _respell_whitespace(env: dict[str, Any]) -> str:
    return json.dumps(env, indent=4)


def _respell_key_order(env: dict[str, Any]) -> str:
    return json.dumps(dict(reversed(list(env.items()))))


def _respell_extra_fields(env: dict[str, Any]) -> str:
    sigs = [{**s, "note": "extra"} for s in env["signatures"]]
    return json.dumps({**env, "signatures": sigs, "comment": "ignored by DSSE"})


def _respell_keyid_hint(env: dict[str, Any]) -> str:
    return json.dumps({**env, "signatures": [{**env["signatures"][0], "keyid": "0" * 64}]})


def _respell_duplicated(env: dict[str, Any]) -> str:
    return json.dumps({**env, "signatures": env["signatures"] * 3})


def _respell_urlsafe(env: dict[str, Any]) -> str:
    def url(text: str) -> str:
        return text.replace("+", "-").replace("/", "_")

    sigs = [{**s, "sig": url(s["sig"])} for s in env["signatures"]]
    return json.dumps({**env, "payload": url(env["payload"]), "signatures": sigs})


def _respell_trailing_bits(env: dict[str, Any]) -> str:
    # 64 bytes are 86 characters and "==": the last character carries 4 unused bits
    sig = env["signatures"][0]["sig"]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet[(alphabet.index(sig[-3]) & ~0xF) | 0x5]
    return json.dumps(
        {**env, "signatures": [{**env["signatures"][0], "sig": sig[:-3] + last + "=="}]}
    )


def _respell_other_signature_first(env: dict[str, Any]) -> str:
    junk = base64.b64encode(Ed25519PrivateKey.generate().sign(b"x")).decode()
    return json.dumps({**env, "signatures": [{"keyid": "", "sig": junk}, *env["signatures"]]})


def _respell_payload_type(env: dict[str, Any]) -> str:
    return json.dumps({**env, "payloadType": env["payloadType"].upper()})


@pytest.mark.parametrize(
    "respell",
    [
        _respell_whitespace,
        _respell_key_order,
        _respell_extra_fields,
        _respell_keyid_hint,
        _respell_duplicated,
        _respell_urlsafe,
        _respell_trailing_bits,
        _respell_other_signature_first,
        _respell_payload_type,
    ],
)
def test_a_respelt_receipt_gets_the_same_verdict_warm_as_with_full(
    golden: GoldenKit, tmp_path: Path, respell: Any
) -> None:
    """The same signature bytes under another envelope spelling: whatever the verdict, a warm
    memo (filled by the genuine receipt) must give the verdict ``--full`` gives."""
    state = tmp_path / "state"
    assert _verify(golden.kit, state, *_trust(golden.key))[0] == 0
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    (kit / RECEIPT).write_text(respell(_envelope(kit)))
    warm_rc, warm = _verify(kit, state, *_trust(golden.key))
    full_rc, full = _verify(kit, state, *_trust(golden.key), "--full")
    cold_rc, cold = _verify(kit, tmp_path / "cold", *_trust(golden.key))
    assert warm_rc == full_rc == cold_rc, (warm, full)
    assert warm["ok"] == full["ok"] == cold["ok"]
    assert reports.codes(warm) == reports.codes(full) == reports.codes(cold)
    assert not _recalled(full) and not _recalled(cold)


# --- class 2: state others can write (a real second uid) ---------------------------------------

_COTENANT_STATE = """
import json, os, sys
state, digest, mode = sys.argv[1], sys.argv[2], int(sys.argv[3], 8)
os.makedirs(state + "/signatures", mode=0o700, exist_ok=True)
os.chmod(state, mode)
path = state + "/signatures/memo.json"
with open(path, "w") as f:
    json.dump({"schema": "k3kit.signature-memo/v1", "entries": [digest]}, f)
os.chmod(path, 0o600)
"""


@needs_root
@pytest.mark.parametrize("mode", ["700", "755", "1777"])
def test_a_cotenants_state_folder_with_a_planted_memo_never_passes_a_forgery(
    golden: GoldenKit, forged: tuple[Path, str], mode: str
) -> None:
    """The co-tenant makes ``--state-dir`` first (in /tmp), with the forged digest in it."""
    kit, digest = forged
    with shared_folder() as shared:
        state = shared / "state"
        cotenant_python(_COTENANT_STATE, str(state), digest, mode)
        rc, report = _verify(kit, state, *_trust(golden.key))
        _assert_forgery_refused(rc, report)


@needs_root
def test_our_signatures_folder_inside_a_cotenants_folder_is_refused_and_cannot_be_swapped(
    golden: GoldenKit, forged: tuple[Path, str]
) -> None:
    """The co-tenant owns the state folder; ours is the ``signatures/`` k3kit makes inside it.
    After a genuine run they swap it for their own (they may rename entries of their folder)."""
    kit, digest = forged
    with shared_folder() as shared:
        state = shared / "state"
        cotenant_python("import os, sys; os.mkdir(sys.argv[1], 0o777)", str(state))
        rc, report = _verify(golden.kit, state, *_trust(golden.key))
        assert not _recalled(report)
        assert not (state / "signatures" / FILE_NAME).exists()  # nothing saved there
        swap = (
            "import os, sys, shutil\n"
            "s = sys.argv[1] + '/signatures'\n"
            "if os.path.exists(s): os.rename(s, sys.argv[1] + '/ours-moved')\n"
        )
        cotenant_python(swap, str(state))
        cotenant_python(_COTENANT_STATE, str(state), digest, "777")
        rc, report = _verify(kit, state, *_trust(golden.key))
        _assert_forgery_refused(rc, report)


@needs_root
def test_a_cotenants_link_as_the_state_folder_is_refused(
    golden: GoldenKit, forged: tuple[Path, str]
) -> None:
    kit, digest = forged
    with shared_folder() as shared:
        real, link = shared / "theirs", shared / "state"
        cotenant_python(_COTENANT_STATE, str(real), digest, "700")
        cotenant_python(
            "import os, sys; os.symlink(sys.argv[1], sys.argv[2])", str(real), str(link)
        )
        rc, report = _verify(kit, link, *_trust(golden.key))
        _assert_forgery_refused(rc, report)


_COTENANT_TAMPER = """
import json, os, sys
state = sys.argv[1]
sig = state + "/signatures"
mine = "/tmp/" + os.path.basename(state) + "-theirs.json"
results = []
def attempt(name, fn):
    try:
        fn()
        results.append(name + ": done")
    except OSError as exc:
        results.append(name + ": " + type(exc).__name__)
with open(mine, "w") as f:
    f.write("{}")
attempt("rename memo", lambda: os.rename(sig + "/memo.json", sig + "/x"))
attempt("replace memo", lambda: os.replace(mine, sig + "/memo.json"))
attempt("write memo", lambda: open(sig + "/memo.json", "a").close())
attempt("new file", lambda: open(sig + "/memo.json.new", "w").close())
attempt("hard link", lambda: os.link(sig + "/memo.json", "/tmp/" + os.path.basename(state) + "-l"))
attempt("rename state", lambda: os.rename(state, state + "-moved"))
attempt("rename signatures", lambda: os.rename(sig, state + "/s2"))
os.unlink(mine)
print(json.dumps(results))
"""


@needs_root
def test_a_cotenant_cannot_rename_replace_write_or_link_our_memo(golden: GoldenKit) -> None:
    """After a genuine warm run in our private folder under sticky /tmp, everything the co-tenant
    would need to change the memo between our check and our read is refused by the kernel."""
    with shared_folder() as shared:
        state = shared / "state"
        for _ in range(2):
            rc, report = _verify(golden.kit, state, *_trust(golden.key))
            assert rc == 0
        assert _recalled(report)
        before = (state / "signatures" / FILE_NAME).read_bytes()
        done = cotenant_python(_COTENANT_TAMPER, str(state))
        results = json.loads(done.stdout)
        assert all(not r.endswith(": done") for r in results), results
        assert (state / "signatures" / FILE_NAME).read_bytes() == before


@needs_root
def test_a_hard_link_to_our_memo_in_a_cotenants_folder_is_not_used(
    golden: GoldenKit, forged: tuple[Path, str], tmp_path: Path
) -> None:
    """Our own memo file, carrying the forged digest, hard-linked (as if protected_hardlinks were
    off) into a folder the co-tenant owns: the file is ours and 0600, the folder is not ours."""
    kit, digest = forged
    ours = _plant_own(tmp_path / "private", _memo_doc(digest))
    with shared_folder() as shared:
        state = shared / "state"
        cotenant_python(
            "import os, sys; os.makedirs(sys.argv[1], 0o755)", str(state / "signatures")
        )
        os.link(ours, state / "signatures" / FILE_NAME)
        rc, report = _verify(kit, state, *_trust(golden.key))
        _assert_forgery_refused(rc, report)


def _acl_user_rw(path: Path, uid: int) -> None:
    """POSIX ACL ``user:UID:rw-`` (mask rw-) as the raw xattr (no setfacl needed)."""
    none = 0xFFFFFFFF
    perms = 0o7 if path.is_dir() else 0o6
    ents = [(0x01, perms, none), (0x02, perms, uid), (0x04, 0, none), (0x10, perms, none)]
    ents.append((0x20, 0, none))
    data = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in ents)
    try:
        os.setxattr(path, "system.posix_acl_access", data)
    except OSError as exc:
        pytest.skip(f"no POSIX ACLs here: {exc}")


@needs_root
@pytest.mark.parametrize("where", ["file", "folder"])
def test_an_acl_that_lets_the_cotenant_write_the_memo_is_seen(
    golden: GoldenKit, forged: tuple[Path, str], tmp_path: Path, where: str
) -> None:
    """Mode 0600/0700 plus an ACL entry giving uid 65534 write: the ACL mask shows in the group
    bits, so the file is ignored or the folder refused, and the forgery fails."""
    kit, digest = forged
    path = _plant_own(tmp_path / "state", _memo_doc(digest))
    _acl_user_rw(path if where == "file" else path.parent, COTENANT_UID)
    rc, report = _verify(kit, tmp_path / "state", *_trust(golden.key))
    assert rc == 1 and not _recalled(report), report


@needs_root
def test_a_non_sticky_shared_parent_is_refused(golden: GoldenKit, forged: tuple[Path, str]) -> None:
    """Our state folder in a folder everyone may write without the sticky bit: the co-tenant could
    rename it away after our check, so the memo is not used at all."""
    kit, digest = forged
    with shared_folder(mode=0o777) as shared:
        state = shared / "state"
        _plant_own(state, _memo_doc(digest))
        rc, report = _verify(kit, state, *_trust(golden.key))
        _assert_forgery_refused(rc, report)


# --- class 3: degenerate values ----------------------------------------------------------------

_SPKI = bytes.fromhex("302a300506032b6570032100")
_IDENTITY = bytes([1]) + bytes(31)


def _pem(raw: bytes) -> bytes:
    body = base64.encodebytes(_SPKI + raw).decode()
    return f"-----BEGIN PUBLIC KEY-----\n{body}-----END PUBLIC KEY-----\n".encode()


@pytest.mark.parametrize(
    "raw",
    [
        _IDENTITY,
        _IDENTITY[:31] + b"\x80",  # x = 0 with the sign bit: a second spelling of the identity
        (2**255 - 18).to_bytes(32, "little"),  # y = p + 1: the identity again, not canonical
        bytes.fromhex(
            "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"
        ),  # order 2
    ],
    ids=["identity", "identity-sign-bit", "identity-y-plus-p", "order-2"],
)
def test_a_degenerate_trust_key_with_a_planted_entry_is_refused(
    forged: tuple[Path, str], tmp_path: Path, raw: bytes
) -> None:
    """The identity key with R = identity and S = 0 "verifies" anything in OpenSSL; even with
    that triple in our own memo, the key is refused when read."""
    kit, _ = forged
    key = tmp_path / "weak.pub"
    key.write_bytes(_pem(raw))
    message = _message(_envelope(kit))
    sig = _IDENTITY + bytes(32)
    env = _envelope(kit)
    env["signatures"] = [{"keyid": "", "sig": base64.b64encode(sig).decode()}]
    (kit / RECEIPT).write_text(json.dumps(env))
    _plant_own(tmp_path / "state", _memo_doc(entry(raw, sig, message)))
    rc, report = _verify(kit, tmp_path / "state", "--trust", key)
    assert rc == 1 and report["error"]["code"] == "KEY_WEAK", report  # before any memo is asked


def _s_plus_l(sig: bytes) -> bytes:
    return sig[:32] + (int.from_bytes(sig[32:], "little") + _L).to_bytes(32, "little")


def _identity_r(sig: bytes) -> bytes:
    return _IDENTITY + sig[32:]


def _noncanonical_r(sig: bytes) -> bytes:
    return (2**255 - 18).to_bytes(32, "little") + sig[32:]


@pytest.mark.parametrize("malleate", [_s_plus_l, _identity_r, _noncanonical_r])
def test_a_malleated_signature_with_an_entry_in_our_own_memo_is_refused(
    golden: GoldenKit, tmp_path: Path, malleate: Any
) -> None:
    """Even the one writer the memo trusts cannot let S >= L or a small-order / non-canonical R
    through: those checks come before the memo is asked."""
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    env = _envelope(kit)
    sig = malleate(base64.b64decode(env["signatures"][0]["sig"]))
    env["signatures"][0]["sig"] = base64.b64encode(sig).decode()
    (kit / RECEIPT).write_text(json.dumps(env))
    _plant_own(tmp_path / "state", _memo_doc(entry(_raw(golden.key), sig, _message(env))))
    rc, report = _verify(kit, tmp_path / "state", *_trust(golden.key))
    assert rc == 1 and not _recalled(report), report


def _spellings(digest: str) -> dict[str, bytes]:
    arabic = "".join(chr(0x660 + int(c)) if c.isdigit() else c for c in digest)
    fullwidth = "".join(chr(0xFF10 + int(c)) if c.isdigit() else c for c in digest)
    ok = {"schema": SCHEMA, "entries": [digest]}
    return {
        "duplicate-key": (
            f'{{"schema": "{SCHEMA}", "entries": [], "entries": ["{digest}"]}}'.encode()
        ),
        "arabic-digits": _memo_doc(arabic),
        "fullwidth-digits": _memo_doc(fullwidth),
        "upper-hex": _memo_doc(digest.upper()),
        "padded": _memo_doc(f" {digest}\n"),
        "nested": json.dumps({"schema": SCHEMA, "entries": [[digest]]}).encode(),
        "deep": json.dumps({**ok, "entries": [digest, [[[[[[[[[[]]]]]]]]]]]}).encode(),
        "very-deep": b'{"schema": "%s", "entries": ["%s", ' % (SCHEMA.encode(), digest.encode())
        + b"[" * 50_000
        + b"]" * 50_000
        + b"]}",
        "schema-v2": json.dumps({**ok, "schema": "k3kit.signature-memo/v2"}).encode(),
        "schema-nul": json.dumps({**ok, "schema": SCHEMA + "\u0000"}).encode(),
        "entries-object": json.dumps({**ok, "entries": {digest: True}}).encode(),
        "nan": json.dumps({**ok, "x": float("nan")}).encode(),
        "lone-surrogate": b'{"schema": "%s", "entries": ["%s", "\\ud800"]}'
        % (SCHEMA.encode(), digest.encode()),
        "huge-sparse": b"",
        "truncated": json.dumps(ok).encode()[:-3],
    }


@pytest.mark.parametrize("spelling", list(_spellings("0" * 64)))
def test_a_damaged_or_odd_memo_recalls_nothing_and_raises_nothing(
    tmp_path: Path, spelling: str
) -> None:
    """Each odd file holds the forged triple's digest in some form; none may recall it, and none
    may raise (a bad memo costs a check, never the verdict)."""
    private = Ed25519PrivateKey.generate()
    message = b"DSSEv1 4 test 5 hello"
    forged = private.sign(b"something else")
    raw = private.public_key().public_bytes_raw()
    digest = entry(raw, forged, message)
    path = _plant_own(tmp_path, b"")
    body = _spellings(digest)[spelling]
    if spelling == "huge-sparse":
        path.write_bytes(_memo_doc(digest))
        with path.open("r+b") as f:
            f.truncate(1 << 34)  # 16 GiB, sparse: refused by its size before it is read
    else:
        path.write_bytes(body)
    memo = SignatureMemo(tmp_path)

    class Key:
        def public_bytes_raw(self) -> bytes:
            return raw

        def verify(self, signature: bytes, data: bytes) -> None:
            private.public_key().verify(signature, data)

    assert verify_signature(Key(), forged, message, memo=memo) is False
    assert memo.recalled == 0
    assert memo.status.startswith(("ignored", "loaded")), memo.status


def test_a_memo_at_its_size_limit_is_read(tmp_path: Path) -> None:
    """The other side of the size rule: a file of 1,024 entries (the most ever written) fits."""
    digests = [f"{i:064x}" for i in range(1024)]
    assert len(_memo_doc(*digests)) <= MAX_BYTES
    _plant_own(tmp_path, dumps({"schema": SCHEMA, "entries": digests}))
    memo = SignatureMemo(tmp_path)
    assert memo.recall(bytes(32), bytes(64), b"") is False
    assert memo.status == "loaded"


# --- class 4: work done for a check that then fails --------------------------------------------


def _resign(kit: Path, key: KeyFiles, payload: bytes, payload_type: str) -> None:
    private = load_private(key.private, None)
    sig = private.sign(pae(payload_type, payload))
    env = {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": payload_type,
        "signatures": [{"keyid": "", "sig": base64.b64encode(sig).decode()}],
    }
    (kit / RECEIPT).write_text(json.dumps(env))


@pytest.mark.parametrize("bad", ["not-canonical", "not-a-statement", "wrong-type", "other-kit"])
def test_a_publisher_signed_receipt_that_fails_later_fails_the_same_way_warm(
    golden: GoldenKit, tmp_path: Path, bad: str
) -> None:
    """The signature verifies (it is the publisher's key) but the receipt is refused after it.
    The memo does record that Ed25519 check (a true fact about key, signature and message); what
    matters is that the warm run refuses the receipt with the same code as the cold one."""
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    env = _envelope(kit)
    payload, payload_type = base64.b64decode(env["payload"]), env["payloadType"]
    statement = json.loads(payload)
    if bad == "not-canonical":
        payload = json.dumps(statement, indent=1).encode()
    elif bad == "not-a-statement":
        payload = dumps({"_type": "https://in-toto.io/Statement/v1"})
    elif bad == "wrong-type":
        payload_type = "application/vnd.k3kit.root+json"
    else:
        statement["predicate"]["kit"]["kit_sha256"] = "0" * 64
        payload = dumps(statement)
    _resign(kit, golden.key, payload, payload_type)
    state = tmp_path / "state"
    cold_rc, cold = _verify(kit, state, *_trust(golden.key))
    warm_rc, warm = _verify(kit, state, *_trust(golden.key))
    assert cold_rc == warm_rc == 1
    assert cold["ok"] is warm["ok"] is False
    assert reports.codes(cold) == reports.codes(warm) and reports.codes(cold), (cold, warm)


def test_a_signature_that_fails_leaves_no_memo_entry(
    golden: GoldenKit, forged: tuple[Path, str], tmp_path: Path
) -> None:
    kit, digest = forged
    state = tmp_path / "state"
    for _ in range(2):
        rc, report = _verify(kit, state, *_trust(golden.key))
        assert rc == 1 and not _recalled(report)
    memo = state / "signatures" / FILE_NAME
    assert not memo.exists() or digest not in memo.read_text()


# --- class 5: what the memo write replaces -----------------------------------------------------


def test_a_folder_at_the_memos_name_is_left_alone(golden: GoldenKit, tmp_path: Path) -> None:
    state = tmp_path / "state"
    planted = state / "signatures" / FILE_NAME
    planted.mkdir(parents=True)
    (planted / "keep").write_text("not k3kit's")
    for _ in range(2):
        rc, report = _verify(golden.kit, state, *_trust(golden.key))
        assert rc == 0 and not _recalled(report)
    assert (planted / "keep").read_text() == "not k3kit's"
    assert sorted(p.name for p in (state / "signatures").iterdir()) == [FILE_NAME]  # no .tmp left


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_a_link_at_the_memos_name_is_replaced_never_written_through(
    golden: GoldenKit, tmp_path: Path, how: str
) -> None:
    precious = tmp_path / "precious.json"
    precious.write_bytes(_memo_doc())  # a valid, empty memo: would be merged if followed
    precious.chmod(0o600)
    state = tmp_path / "state"
    (state / "signatures").mkdir(parents=True, mode=0o700)
    name = state / "signatures" / FILE_NAME
    if how == "symlink":
        name.symlink_to(precious)
    else:
        os.link(precious, name)
    rc, _ = _verify(golden.kit, state, *_trust(golden.key))
    assert rc == 0
    assert precious.read_bytes() == _memo_doc()
    assert not name.is_symlink() and name.stat().st_ino != precious.stat().st_ino
    rc, report = _verify(golden.kit, state, *_trust(golden.key))
    assert rc == 0 and _recalled(report)


# --- class 6: several keys, a root of trust ------------------------------------------------------


def test_two_trusted_keys_a_warm_run_names_only_the_real_signer(
    golden: GoldenKit, other_key: KeyFiles, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    args = (*_trust(other_key), *_trust(golden.key))
    cold_rc, cold = _verify(golden.kit, state, *args)
    warm_rc, warm = _verify(golden.kit, state, *args)
    assert cold_rc == warm_rc == 0 and _recalled(warm)
    signer = kid(golden.key)[:16]
    for report in (cold, warm):
        detail = reports.check(report, "receipt_signature")["detail"]
        assert signer in detail and kid(other_key)[:16] not in detail
    # only the real signer's triple was recorded: the other key never "passed"
    entries = json.loads((state / "signatures" / FILE_NAME).read_text())["entries"]
    assert len(entries) == 1


def test_threshold_two_is_not_met_by_a_recalled_signature_counted_twice(
    golden: GoldenKit, tmp_path: Path
) -> None:
    keys = {n: keypair(tmp_path / "keys", n) for n in ("root_a", "rel_2027")}
    r1 = root_v1([keys["root_a"]], [golden.key, keys["rel_2027"]], release_threshold=2)
    root1 = write_root(tmp_path / "1.root.json", r1, [keys["root_a"]])
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    duplicate_signature(kit, hint="0" * 64)
    state = tmp_path / "state"
    for _ in range(2):
        rc, report = _verify(kit, state, "--root", root1)
        assert rc == 1 and "RECEIPT_THRESHOLD_NOT_MET" in reports.codes(report), report
    # the one distinct check was recorded (and recalled on the second run); the count still failed
    entries = json.loads((state / "signatures" / FILE_NAME).read_text())["entries"]
    assert len(entries) == 1


def test_a_key_revoked_after_a_warm_run_is_refused_though_its_signature_is_recalled(
    golden: GoldenKit, tmp_path: Path
) -> None:
    keys = {n: keypair(tmp_path / "keys", n) for n in ("root_a", "rel_2026", "rel_2027")}
    r1 = root_v1([keys["root_a"]], [keys["rel_2026"], keys["rel_2027"]])
    root1 = write_root(tmp_path / "1.root.json", r1, [keys["root_a"]])
    r2 = revoke(
        r1,
        kid(keys["rel_2026"]),
        reason="compromise",
        since="2026-05-02T00:00:00Z",
        expires=r1.expires,
    )
    root2 = write_root(tmp_path / "2.root.json", r2, [keys["root_a"]])
    state = tmp_path / "state"
    stale = build_kit(tmp_path / "stale", golden.lock, keys["rel_2026"])
    attach(stale, root1)
    for _ in range(2):  # verified, and its signature in the memo
        assert _verify(stale, state, "--root", root1)[0] == 0
    good = build_kit(tmp_path / "good", golden.lock, keys["rel_2027"])
    attach(good, root1, root2)
    assert _verify(good, state, "--root", root1)[0] == 0  # the node sees root 2
    rc, report = _verify(stale, state, "--root", root1)
    assert rc == 1 and "RECEIPT_KEY_REVOKED" in reports.codes(report), report


def test_the_recall_note_is_absent_when_the_memo_folder_is_refused(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """--json stays honest: a refused memo folder recalls nothing, and the report says nothing
    about a recall; a usable one says it from the second run on."""
    state = tmp_path / "state"
    (state / "signatures").mkdir(parents=True)
    (state / "signatures").chmod(0o777)
    for _ in range(2):
        rc, report = _verify(golden.kit, state, *_trust(golden.key))
        assert rc == 0 and not _recalled(report)
    (state / "signatures").chmod(0o700)
    _verify(golden.kit, state, *_trust(golden.key))
    rc, report = _verify(golden.kit, state, *_trust(golden.key))
    assert rc == 0 and _recalled(report)


# --- --json honesty: "as checked before on this node" only for a check made by an earlier run ---


def test_a_recalled_ssh_signature_is_said_too(golden: GoldenKit, tmp_path: Path) -> None:
    """``MANIFEST.json.sig``'s check goes through the memo as well; its line says so when it was
    recalled (it did not: found by a review of this pass), and not on the first run."""
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    done = run_k3kit("sshsig", kit, "--key", golden.key.private)
    assert done.returncode == 0, done.stderr
    state = tmp_path / "state"
    details = []
    for _ in range(2):
        rc, report = _verify(kit, state, *_trust(golden.key))
        assert rc == 0, report
        details.append(reports.check(report, "sshsig")["detail"])
    assert details[0].startswith("SSH signature over MANIFEST.json") and RECALLED not in details[0]
    assert details[1].endswith("; signature as checked before on this node (verification cache)")


def test_one_recalled_and_one_computed_signature_are_told_apart(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Threshold 2, one signature's check recorded by an earlier run and one never seen: the
    report says 1 of 2 was recalled, not that "the signature" was (found by a review of this
    pass); the next run, both recalled, says so."""
    keys = {n: keypair(tmp_path / "keys", n) for n in ("root_a", "second")}
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    state = tmp_path / "state"
    assert _verify(kit, state, *_trust(golden.key))[0] == 0  # golden.key's check recorded
    done = run_k3kit("countersign", kit, "--key", keys["second"].private)
    assert done.returncode == 0, done.stderr
    r1 = root_v1([keys["root_a"]], [golden.key, keys["second"]], release_threshold=2)
    root = write_root(tmp_path / "1.root.json", r1, [keys["root_a"]])
    details = []
    for _ in range(2):
        rc, report = _verify(kit, state, "--root", root)
        assert rc == 0, report
        details.append(reports.check(report, "receipt_signature")["detail"])
    assert "; 1 of 2 signatures as checked before on this node" in details[0], details[0]
    assert "; signatures as checked before on this node" in details[1], details[1]


def test_a_first_run_with_a_duplicated_signature_does_not_claim_a_recall(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """HOLE (report honesty) on 99e99a2: on a node that never saw the kit, a receipt carrying its
    signature twice is checked once by cryptography, remembered, and the second copy recalled
    from that entry; the report then said "signature as checked before on this node
    (verification cache)" on the very first run, when nothing earlier was recalled."""
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    duplicate_signature(kit)
    rc, report = _verify(kit, tmp_path / "fresh", *_trust(golden.key))
    assert rc == 0
    assert not _recalled(report), reports.check(report, "receipt_signature")
    rc, report = _verify(kit, tmp_path / "fresh", *_trust(golden.key))
    assert rc == 0 and _recalled(report)  # the second run does recall it


def test_launchs_second_pass_on_a_cold_node_does_not_claim_a_recall(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """HOLE (report honesty) on 99e99a2: ``plan_launch`` verifies the kit (``open_verified``)
    and, under rollback or a root, verifies it again with the weights (``verify_dir``), with one
    memo. On a cold node the first pass computes the signature; the second recalled that entry
    and its report said "as checked before on this node", though this run computed it."""
    from k3kit.node.verify import open_verified

    keys = load_trusted_keys([golden.key.public])
    memo = SignatureMemo(tmp_path / "state")
    open_verified(golden.kit, keys, memo=memo)
    report = verify_dir(golden.kit, keys, memo=memo)
    assert report.ok
    check = next(c for c in report.checks if c.id == "receipt_signature")
    assert RECALLED not in check.detail, check.detail
    # a later process on the same node does recall it, and says so
    again = verify_dir(golden.kit, keys, memo=SignatureMemo(tmp_path / "state"))
    assert RECALLED in next(c for c in again.checks if c.id == "receipt_signature").detail


# --- the same attacks through launch and through the default cache folder ----------------------


def _dry_launch(
    kit: Path, key: KeyFiles, weights: Path, state: Path, tmp_path: Path, *extra: str
) -> tuple[int, str]:
    from tests.launchkit import launch, make_fake_engine

    fake = make_fake_engine(tmp_path / "engine")
    args = ("--profile", "interactive", "--trust", key.public, "--weights", weights)
    code, stderr, _ = launch(kit, fake, *args, "--dry-run", "--state-dir", state, *extra)
    assert not fake.log.exists()  # never started, whatever the verdict
    return code, stderr


def test_launch_recalls_only_our_own_entry_and_full_refuses_the_forgery(
    golden: GoldenKit, forged: tuple[Path, str], weights: Path, tmp_path: Path
) -> None:
    """launch's oracle: the forged receipt with its digest in our own memo is recalled (by
    design); ``launch --full`` checks the signature and refuses it; a memo planted by the
    co-tenant is never read."""
    kit, digest = forged
    state = tmp_path / "state"
    _plant_own(state, _memo_doc(digest))
    assert _dry_launch(kit, golden.key, weights, state, tmp_path)[0] == 0
    code, stderr = _dry_launch(kit, golden.key, weights, state, tmp_path, "--full")
    assert code == 1 and "RECEIPT_UNTRUSTED_KEY" in stderr, stderr


def test_launch_names_an_unusable_memo_folder_as_verify_does(
    golden: GoldenKit, weights: Path, tmp_path: Path
) -> None:
    """verify says on stderr when its memo folder was refused (each start then checks the
    signature again); launch uses the same memo and said nothing (found reading the change
    again). A folder others may write: refused, the kit still verified, the note said, and no
    recall claimed."""
    state = tmp_path / "state"
    assert _dry_launch(golden.kit, golden.key, weights, state, tmp_path)[0] == 0
    (state / "signatures").chmod(0o777)
    code, stderr = _dry_launch(golden.kit, golden.key, weights, state, tmp_path)
    assert code == 0, stderr
    assert "note: signature memo refused (STATE_DIR_UNSAFE" in stderr, stderr
    assert RECALLED not in stderr, stderr


@needs_root
def test_launch_with_a_cotenants_cache_folder_refuses_the_forgery(
    golden: GoldenKit, forged: tuple[Path, str], weights: Path, tmp_path: Path
) -> None:
    """No --state-dir: launch's memo is in $XDG_CACHE_HOME/k3kit, which the co-tenant made with
    the forged digest in it; the state folder is our own, so only the memo decides. The forgery
    is refused; the same digest in a cache folder of our own is recalled (the oracle). (With a
    co-tenant's --state-dir, launch refuses the runtime folder first, exit 4, and the memo never
    decides: this test used to take that exit for the memo's refusal.)"""
    from tests.launchkit import launch, make_fake_engine

    kit, digest = forged
    fake = make_fake_engine(tmp_path / "engine")
    args = ("--profile", "interactive", "--trust", golden.key.public, "--weights", weights)
    with shared_folder() as shared:
        cache = shared / "cache"
        cotenant_python(_COTENANT_STATE, str(cache / "k3kit"), digest, "755")
        env = {"XDG_CACHE_HOME": str(cache), "XDG_STATE_HOME": str(tmp_path / "xdg-state")}
        code, stderr, _ = launch(kit, fake, *args, "--dry-run", **env)
        assert code == 1 and "RECEIPT_UNTRUSTED_KEY" in stderr, stderr
        assert "note: signature memo refused" in stderr, stderr  # and says why, as verify does
        own = tmp_path / "own-cache"
        _plant_own(own / "k3kit", _memo_doc(digest))
        code, stderr, _ = launch(
            kit, fake, *args, "--dry-run", **{**env, "XDG_CACHE_HOME": str(own)}
        )
        assert code == 0, stderr
    assert not fake.log.exists()


@needs_root
def test_a_cotenants_xdg_cache_home_is_not_read(
    golden: GoldenKit, forged: tuple[Path, str], tmp_path: Path
) -> None:
    """No --state-dir: the memo sits in $XDG_CACHE_HOME/k3kit; the co-tenant made that folder,
    with the forged digest in it."""
    kit, digest = forged
    with shared_folder() as shared:
        cache = shared / "cache"
        cotenant_python(_COTENANT_STATE, str(cache / "k3kit"), digest, "700")
        env = {"XDG_CACHE_HOME": str(cache), "XDG_STATE_HOME": str(tmp_path / "xdg-state")}
        done = run_k3kit("verify", kit, "--trust", golden.key.public, "--json", env=env)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "RECEIPT_UNTRUSTED_KEY" in done.stdout and RECALLED not in done.stdout
        # the same planted digest in a cache folder of our own is recalled: the test can see it
        own = tmp_path / "own-cache"
        _plant_own(own / "k3kit", _memo_doc(digest))
        env["XDG_CACHE_HOME"] = str(own)
        done = run_k3kit("verify", kit, "--trust", golden.key.public, "--json", env=env)
        assert done.returncode == 0 and RECALLED in done.stdout, done.stderr
