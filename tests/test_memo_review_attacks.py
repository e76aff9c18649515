"""A second review's attacks on the memo pass (4cc6ece~3..HEAD, 3e92863..HEAD): the one-signer
``break`` and memo-first key order in ``verify_envelope``, the "N of M signatures as checked
before" report line, verify's memo note, and cache folders whose check raises ``OSError``.

Each test asks "what makes a verdict or a report line false, and who can make it so?" Tests that
pass show an attack that held; the ``test_mended_*`` ones (marked ``HOLE``) failed on the reviewed
code (49194ca), say what was found, and pass since c989dc9. Real keys, real kits, the real CLI.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from k3kit.signing.memo import FILE_NAME, SCHEMA, entry
from k3kit.signing.sign import pae
from k3kit.signing.trust.edit import revoke
from tests import reports
from tests.conftest import GoldenKit, KeyFiles, run_k3kit
from tests.cotenant import COTENANT_GID, COTENANT_UID
from tests.trustkit import (
    attach,
    build_kit,
    duplicate_signature,
    keypair,
    kid,
    raw_root,
    root_v1,
    write_root,
)

RECEIPT = "receipt.dsse.json"
RECALLED = "as checked before on this node"
NOTE = "note: signature memo"

# --- helpers -----------------------------------------------------------------------------------


def _verify(
    kit: Path, state: Path | str, *extra: str | Path, **kw: Any
) -> tuple[int, dict[str, Any], str]:
    done = run_k3kit("verify", kit, "--state-dir", state, "--json", *extra, **kw)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = {"ok": False, "checks": []}
    return done.returncode, report, done.stderr


def _detail(report: dict[str, Any], check_id: str = "receipt_signature") -> str:
    return str(reports.check(report, check_id).get("detail", ""))


def _env(kit: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((kit / RECEIPT).read_bytes())
    return doc


def _write_env(kit: Path, env: dict[str, Any]) -> None:
    (kit / RECEIPT).write_text(json.dumps(env))


def _message(env: dict[str, Any]) -> bytes:
    return pae(env["payloadType"], base64.b64decode(env["payload"]))


def _memo_entries(state: Path) -> list[str]:
    path = state / "signatures" / FILE_NAME
    return list(json.loads(path.read_text())["entries"]) if path.exists() else []


def _countersign(kit: Path, key: KeyFiles) -> None:
    done = run_k3kit("countersign", kit, "--key", key.private)
    assert done.returncode == 0, done.stderr


def _trusted(golden: GoldenKit, state: Path | str, *more: str | Path) -> tuple[str | Path, ...]:
    """``verify`` of the golden kit under its own key, with ``state`` as the state folder."""
    return ("verify", golden.kit, "--trust", golden.key.public, "--state-dir", state, *more)


def _everyone_may_write_the_memo_folder(state: Path) -> None:
    (state / "signatures").mkdir(parents=True)
    (state / "signatures").chmod(0o777)


def _refused_on_both_starts(kit: Path, state: Path, code: str, *trust: str | Path) -> None:
    """The same refusal on a cold node and again once the memo holds what the first run
    checked: the memo never turns it into a pass."""
    for _ in range(2):
        rc, report, _ = _verify(kit, state, *trust)
        assert rc == 1 and code in reports.codes(report), report


def _verified_signature_line(kit: Path, state: Path, *trust: str | Path) -> str:
    """The receipt signature check's detail of a verify that must pass."""
    rc, report, _ = _verify(kit, state, *trust)
    assert rc == 0, report
    return _detail(report)


def _no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr and "internal error" not in stderr.lower(), stderr


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, KeyFiles]:
    return {n: keypair(tmp_path / "keys", n) for n in ("root_a", "second", "third", "old")}


def _root2(tmp_path: Path, golden: GoldenKit, keys: dict[str, KeyFiles], *release: str) -> Path:
    rel = [golden.key, *(keys[n] for n in release)]
    body = root_v1([keys["root_a"]], rel, release_threshold=2)
    return write_root(tmp_path / "1.root.json", body, [keys["root_a"]])


# === 1. verdicts: a threshold met with fewer distinct valid signatures =========================


def test_one_signature_under_both_keyid_hints_warm_and_cold_is_one_signer(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """Threshold 2 of {publisher, second}: the publisher's one signature repeated under the
    second key's id, on a cold node and again once the memo holds it (memo-first order puts the
    publisher's key first for both copies): one distinct signer, never two."""
    root = _root2(tmp_path, golden, keys, "second")
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    duplicate_signature(kit, hint=kid(keys["second"]))
    state = tmp_path / "state"
    assert _verify(kit, state, "--trust", golden.key.public)[0] == 0  # memo warmed
    _refused_on_both_starts(kit, state, "RECEIPT_THRESHOLD_NOT_MET", "--root", root)


def test_one_signature_respelt_in_urlsafe_base64_is_still_one_signer(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """DSSE accepts standard and URL-safe base64: the same 64 bytes spelt both ways are still one
    signature by one key (counted by key id recomputed from key material)."""
    root = _root2(tmp_path, golden, keys, "second")
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    env = _env(kit)
    sig = env["signatures"][0]["sig"]
    urlsafe = sig.replace("+", "-").replace("/", "_")
    env["signatures"].append({"keyid": kid(keys["second"]), "sig": urlsafe})
    _write_env(kit, env)
    state = tmp_path / "state"
    _refused_on_both_starts(kit, state, "RECEIPT_THRESHOLD_NOT_MET", "--root", root)


def test_the_same_key_under_two_keyids_in_a_root_is_one_signer(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """A root (signed by its root key: a careless or hostile root holder) lists the publisher's
    key material twice, under its real key id and a made-up one, release threshold 2: refused
    outright, or one signer; never VERIFIED on one signature."""
    body = root_v1([keys["root_a"]], [golden.key, keys["second"]], release_threshold=2)
    signed = body.to_dict()
    real = kid(golden.key)
    fake = "f" * 64
    signed["keys"][fake] = copy.deepcopy(signed["keys"][real])
    signed["roles"]["targets"]["keyids"] = [real, fake]
    root = tmp_path / "1.root.json"
    root.write_bytes(raw_root(signed, [keys["root_a"]]))
    state = tmp_path / "state"
    for _ in range(2):
        rc, report, stderr = _verify(golden.kit, state, "--root", root)
        assert rc != 0 and report.get("ok") is not True, (report, stderr)
        _no_traceback(stderr)


def test_the_same_public_key_given_twice_by_two_files_is_refused(
    golden: GoldenKit, tmp_path: Path
) -> None:
    copy_pub = tmp_path / "copy.pub"
    shutil.copy(golden.key.public, copy_pub)
    state = tmp_path / "state"
    assert _verify(golden.kit, state, "--trust", golden.key.public)[0] == 0  # warm memo
    rc, report, stderr = _verify(
        golden.kit, state, "--trust", golden.key.public, "--trust", copy_pub
    )
    assert rc != 0 and "TRUST_DUPLICATE_KEY" in (json.dumps(report) + stderr), (report, stderr)


def test_a_revoked_keys_recalled_signature_never_makes_up_the_threshold(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """Release {publisher, second} threshold 2 in root 1; root 2 revokes 'second'. A receipt
    signed by publisher and second, both checks in the memo from a run under root 1 (where it
    VERIFIED): under root 2, with memo-first order and the break, it is refused as revoked."""
    r1 = root_v1([keys["root_a"]], [golden.key, keys["second"]], release_threshold=1)
    root1 = write_root(tmp_path / "1.root.json", r1, [keys["root_a"]])
    r2 = revoke(
        r1,
        kid(keys["second"]),
        reason="compromise",
        since="2026-05-02T00:00:00Z",
        expires=r1.expires,
    )
    r2.roles["targets"].threshold = 1
    root2 = write_root(tmp_path / "2.root.json", r2, [keys["root_a"]])
    state = tmp_path / "state"
    # a kit signed by 'second' only, accepted under root 1: its check is now in the memo
    stale = build_kit(tmp_path / "stale", golden.lock, keys["second"])
    attach(stale, root1)
    for _ in range(2):
        assert _verify(stale, state, "--root", root1)[0] == 0
    assert len(_memo_entries(state)) == 1
    good = build_kit(tmp_path / "good", golden.lock, golden.key, sequence=2, version="1.0.1")
    attach(good, root1, root2)
    assert _verify(good, state, "--root", root1)[0] == 0  # node moves to root 2
    rc, report, _ = _verify(stale, state, "--root", root1)
    assert rc == 1 and "RECEIPT_KEY_REVOKED" in reports.codes(report), report


@pytest.mark.parametrize("order", ["signer-first", "signer-last"])
def test_key_order_and_a_warm_memo_do_not_change_who_signed(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path, order: str
) -> None:
    """--trust given in either order, cold and warm: one signer named, the other key never
    recorded as having passed, the same verdict."""
    pubs = [golden.key.public, keys["second"].public]
    if order == "signer-last":
        pubs.reverse()
    args = [a for p in pubs for a in ("--trust", p)]
    state = tmp_path / "state"
    for _ in range(2):
        rc, report, _ = _verify(golden.kit, state, *args)
        assert rc == 0
        detail = _detail(report)
        assert kid(golden.key)[:16] in detail and kid(keys["second"])[:16] not in detail
    entries = _memo_entries(state)
    env = _env(golden.kit)
    sig = base64.b64decode(env["signatures"][0]["sig"])
    from k3kit.signing.keys import load_public

    other = entry(load_public(keys["second"].public).public_bytes_raw(), sig, _message(env))
    assert other not in entries and len(entries) == 1


def test_a_planted_entry_for_the_other_key_in_a_cotenant_writable_memo_folder_is_not_read(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """The memo's sort key: an entry saying the publisher's signature "passed" under 'second'
    would put 'second' first and, with the break, name the wrong signer, or with threshold 2
    count... only if read. Planted in a memo folder group/others can write: refused, not read."""
    root = _root2(tmp_path, golden, keys, "second")
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    duplicate_signature(kit, hint=kid(keys["second"]))
    env = _env(kit)
    sig = base64.b64decode(env["signatures"][0]["sig"])
    from k3kit.signing.keys import load_public

    planted = entry(load_public(keys["second"].public).public_bytes_raw(), sig, _message(env))
    state = tmp_path / "state"
    folder = state / "signatures"
    folder.mkdir(parents=True)
    state.chmod(0o700)
    (folder / FILE_NAME).write_text(json.dumps({"schema": SCHEMA, "entries": [planted]}))
    (folder / FILE_NAME).chmod(0o600)
    folder.chmod(0o777)  # another user could have put it there
    rc, report, stderr = _verify(kit, state, "--root", root)
    assert rc == 1 and "RECEIPT_THRESHOLD_NOT_MET" in reports.codes(report), report
    assert f"{NOTE} refused" in stderr, stderr


# === 2. report lines: "checked before" / "N of M" said falsely ==================================


def _warm_publisher_then_countersign(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path, *others: str
) -> tuple[Path, Path]:
    """A kit whose publisher signature this node checked before (memo warm for it alone), then
    countersigned by ``others``: their checks were never made here."""
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    state = tmp_path / "state"
    assert _verify(kit, state, "--trust", golden.key.public)[0] == 0
    assert len(_memo_entries(state)) == 1
    for name in others:
        _countersign(kit, keys[name])
    return kit, state


def test_oracle_one_recalled_one_computed_says_1_of_2(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    kit, state = _warm_publisher_then_countersign(golden, keys, tmp_path, "second")
    rc, report, _ = _verify(kit, state, "--root", _root2(tmp_path, golden, keys, "second"))
    assert rc == 0 and "; 1 of 2 signatures as checked before on this node" in _detail(report)


def test_mended_a_repeated_recalled_signature_makes_a_computed_one_look_recalled(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """HOLE (report honesty). Threshold 2 of {publisher, second}; this node checked the
    publisher's signature before, never the second key's. Whoever hands the node the kit (the
    publisher, a mirror, anyone: the envelope's signature list is not signed) repeats the
    publisher's signature in the receipt. Each copy is recalled and counted
    (SignatureMemo.recall counts every hit; only computed checks go to ``_fresh``), so the
    step's count is 2 recalls for 2 signers, and the report says "signatures as checked before
    on this node" although the second key's signature was computed by this run. The verdict is
    right; the line is false."""
    kit, state = _warm_publisher_then_countersign(golden, keys, tmp_path, "second")
    duplicate_signature(kit)  # the publisher's signature, again
    root = _root2(tmp_path, golden, keys, "second")
    detail = _verified_signature_line(kit, state, "--root", root)
    assert "; 1 of 2 signatures as checked before on this node" in detail, detail


def test_mended_repeated_recalled_signature_inflates_n_of_m(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """HOLE (report honesty), the "N of M" form: three signers (publisher, second, third),
    only the publisher's check known; the publisher's signature repeated makes the line say
    "2 of 3 signatures as checked before" when one was recalled and two computed."""
    kit, state = _warm_publisher_then_countersign(golden, keys, tmp_path, "second", "third")
    duplicate_signature(kit)
    root = _root2(tmp_path, golden, keys, "second", "third")
    detail = _verified_signature_line(kit, state, "--root", root)
    assert "; 1 of 3 signatures as checked before on this node" in detail, detail


def test_mended_repeated_signature_with_two_trust_keys(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """HOLE, the same with plain ``--trust`` twice (threshold 1): publisher recalled twice,
    second computed; said as "signatures as checked before"."""
    kit, state = _warm_publisher_then_countersign(golden, keys, tmp_path, "second")
    duplicate_signature(kit)
    args = ("--trust", golden.key.public, "--trust", keys["second"].public)
    detail = _verified_signature_line(kit, state, *args)
    assert "; 1 of 2 signatures as checked before on this node" in detail, detail


def test_a_first_run_with_repeated_signatures_of_two_signers_claims_nothing(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """Cold node: [publisher, second, publisher, second]: each computed once, the repeats
    answered from this run's own checks and not counted; nothing said. Warm: all recalled."""
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    _countersign(kit, keys["second"])
    env = _env(kit)
    env["signatures"] = env["signatures"] * 2
    _write_env(kit, env)
    root = _root2(tmp_path, golden, keys, "second")
    state = tmp_path / "state"
    rc, report, _ = _verify(kit, state, "--root", root)
    assert rc == 0 and RECALLED not in _detail(report), _detail(report)
    rc, report, _ = _verify(kit, state, "--root", root)
    assert rc == 0 and "; signatures as checked before on this node" in _detail(report)


def test_full_never_claims_a_recall_even_with_repeats(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    kit, state = _warm_publisher_then_countersign(golden, keys, tmp_path, "second")
    duplicate_signature(kit)
    root = _root2(tmp_path, golden, keys, "second")
    _verify(kit, state, "--root", root)  # everything in the memo now
    rc, report, stderr = _verify(kit, state, "--root", root, "--full")
    assert rc == 0 and RECALLED not in json.dumps(report), report
    assert NOTE not in stderr


def test_a_refused_memo_folder_with_an_old_good_memo_claims_nothing(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A memo that once was good, its folder later opened to others: nothing recalled, nothing
    claimed, the note names the refusal; the signature line on sshsig too."""
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    assert run_k3kit("sshsig", kit, "--key", golden.key.private).returncode == 0
    state = tmp_path / "state"
    for _ in range(2):
        assert _verify(kit, state, "--trust", golden.key.public)[0] == 0
    (state / "signatures").chmod(0o770)
    rc, report, stderr = _verify(kit, state, "--trust", golden.key.public)
    assert rc == 0 and RECALLED not in json.dumps(report), report
    assert f"{NOTE} refused (STATE_DIR_UNSAFE" in stderr, stderr


def test_a_repeated_sshsig_step_is_not_counted_by_the_receipt_step(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The receipt's step and MANIFEST.json.sig's step each count only their own recalls: a
    cold receipt (re-signed: new signature) with a warm SSH signature says nothing on the
    receipt line and "signature as checked before" on the sshsig line."""
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    assert run_k3kit("sshsig", kit, "--key", golden.key.private).returncode == 0
    state = tmp_path / "state"
    assert _verify(kit, state, "--trust", golden.key.public)[0] == 0
    # a fresh signature over the same payload (Ed25519 is deterministic: add a second signer
    # and drop the first, so the receipt's check is new while the manifest is unchanged)
    other = keypair(tmp_path / "k", "other")
    _countersign(kit, other)
    env = _env(kit)
    env["signatures"] = env["signatures"][1:]
    _write_env(kit, env)
    rc, report, stderr = _verify(kit, state, "--trust", other.public, "--trust", golden.key.public)
    # the SSH signature is by the publisher, whose key is trusted; the receipt by 'other'
    assert rc == 0, (report, stderr)
    assert RECALLED not in _detail(report), _detail(report)
    assert _detail(report, "sshsig").endswith(RECALLED + " (verification cache)")


# === 3. odd cache folders: a traceback, exit 70, or a wrong verdict =============================


def _odd_state(tmp_path: Path, kind: str) -> Path:
    """A --state-dir that cannot be used as one (each raises something different)."""
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return tmp_path / "fifo"
    if kind == "dev-null":
        return Path("/dev/null")
    if kind == "under-a-file":
        (tmp_path / "file").write_text("x")
        return tmp_path / "file" / "state"
    if kind == "long-name":
        return tmp_path / ("n" * 300)
    if kind == "too-deep":
        return tmp_path.joinpath(*(["d" * 200] * 25))  # > PATH_MAX once made
    if kind == "dangling-link":
        (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "at-all")
        return tmp_path / "dangling" / "state"
    if kind == "loop-in-chain":
        (tmp_path / "loop").symlink_to(tmp_path / "loop")
        return tmp_path / "loop" / "a" / "b"
    if kind == "link-to-fifo":
        os.mkfifo(tmp_path / "fifo")
        (tmp_path / "to-fifo").symlink_to(tmp_path / "fifo")
        return tmp_path / "to-fifo" / "state"
    if kind == "signatures-loop":
        state = tmp_path / "state"
        state.mkdir(mode=0o700)
        (state / "signatures").symlink_to(state / "signatures")
        return state
    if kind == "signatures-fifo":
        state = tmp_path / "state"
        state.mkdir(mode=0o700)
        os.mkfifo(state / "signatures")
        return state
    if kind == "memo-is-a-folder":
        state = tmp_path / "state"
        (state / "signatures" / FILE_NAME / "x").mkdir(parents=True)
        state.chmod(0o700)
        (state / "signatures").chmod(0o700)
        return state
    if kind == "proc":
        return Path("/proc/1")
    raise AssertionError(kind)


ODD = [
    "fifo",
    "dev-null",
    "under-a-file",
    "long-name",
    "too-deep",
    "dangling-link",
    "loop-in-chain",
    "link-to-fifo",
    "signatures-loop",
    "signatures-fifo",
    "memo-is-a-folder",
    "proc",
]


@pytest.mark.parametrize("kind", ODD)
def test_an_odd_cache_folder_costs_a_note_never_the_verdict(
    golden: GoldenKit, tmp_path: Path, kind: str
) -> None:
    state = _odd_state(tmp_path, kind)
    for _ in range(2):
        done = run_k3kit(*_trusted(golden, state))
        _no_traceback(done.stderr)
        assert done.returncode == 0, done.stderr
        assert "verdict: VERIFIED" in done.stderr
        assert f"{NOTE} refused" in done.stderr or f"{NOTE} not saved" in done.stderr, done.stderr
        assert RECALLED not in done.stdout + done.stderr


@pytest.mark.parametrize("kind", ODD)
def test_an_odd_cache_folder_with_weights_still_verifies_the_weights(
    golden: GoldenKit, weights: Path, tmp_path: Path, kind: str
) -> None:
    state = _odd_state(tmp_path, kind)
    done = run_k3kit(*_trusted(golden, state, "--weights", weights, "--json"))
    _no_traceback(done.stderr)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True


@pytest.mark.parametrize("kind", ["fifo", "under-a-file", "loop-in-chain", "dangling-link"])
def test_an_odd_state_folder_under_a_root_is_a_clean_refusal(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path, kind: str
) -> None:
    """With --root the same folder holds the rollback state: a refusal with its code (exit 4,
    STATE_DIR_UNSAFE), never a traceback and never VERIFIED."""
    body = root_v1([keys["root_a"]], [golden.key])
    root = write_root(tmp_path / "1.root.json", body, [keys["root_a"]])
    state = _odd_state(tmp_path, kind)
    done = run_k3kit("verify", golden.kit, "--root", root, "--state-dir", state, "--json")
    _no_traceback(done.stderr)
    assert done.returncode == 4, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "STATE_DIR_UNSAFE", done.stdout


def _in_a_deleted_folder(tmp_path: Path, *argv: str | Path) -> subprocess.CompletedProcess[str]:
    """``python -m k3kit ARGV`` started in a folder removed before it runs: ``os.getcwd()``
    raises FileNotFoundError, so ``os.path.abspath`` of a relative path does too."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && shift && exec "$@"'
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.run(
        ["sh", "-c", script, "sh", str(gone), sys.executable, "-m", "k3kit", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_a_relative_cache_folder_in_a_deleted_working_folder_is_a_refused_memo(
    golden: GoldenKit, tmp_path: Path
) -> None:
    done = _in_a_deleted_folder(tmp_path, *_trusted(golden, "rel"))
    _no_traceback(done.stderr)
    assert done.returncode == 0, done.stderr
    assert f"{NOTE} refused" in done.stderr, done.stderr


def test_a_relative_cache_folder_in_a_deleted_working_folder_with_weights(
    golden: GoldenKit, weights: Path, tmp_path: Path
) -> None:
    done = _in_a_deleted_folder(tmp_path, *_trusted(golden, "rel", "--weights", weights))
    _no_traceback(done.stderr)
    assert done.returncode == 0, done.stderr


def test_mended_a_state_folder_that_cannot_be_made_absolute_is_blamed_on_the_kit(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """HOLE (misleading code; the class 3e92863 fixed for the memo, left in ``private_dir``
    itself). ``private_dir`` starts with ``os.path.abspath(path)`` outside any ``try``: with a
    relative --state-dir and a working folder that no longer exists, ``os.getcwd()`` raises
    FileNotFoundError, which ``_run_steps`` maps to the trust step's ``KIT_UNREADABLE``
    ("cannot read the kit: [Errno 2] ...", exit 1, "do not deploy") for a genuine, readable kit.
    Expected: the state folder's refusal (exit 4, STATE_DIR_UNSAFE), as for every other state
    folder that cannot be checked. The memo and the weights' cache survive the same folder (they
    catch OSError: the two tests above)."""
    body = root_v1([keys["root_a"]], [golden.key])
    root = write_root(tmp_path / "1.root.json", body, [keys["root_a"]])
    done = _in_a_deleted_folder(
        tmp_path, "verify", golden.kit, "--root", root, "--state-dir", "rel", "--json"
    )
    _no_traceback(done.stderr)
    assert done.returncode == 4, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "STATE_DIR_UNSAFE", done.stdout


def test_a_key_both_released_and_revoked_in_a_hand_written_root_is_refused(
    golden: GoldenKit, keys: dict[str, KeyFiles], tmp_path: Path
) -> None:
    """verification_keys() lists release keys then revoked ones; a root that lists the
    publisher's key in both (memo warm for it, so memo-first order tries it first) is refused,
    never VERIFIED."""
    body = root_v1([keys["root_a"]], [golden.key, keys["second"]])
    signed = body.to_dict()
    signed["x-k3kit-revoked"] = {
        kid(golden.key): {"reason": "compromise", "since": "2026-05-02T00:00:00Z"}
    }
    root = tmp_path / "1.root.json"
    root.write_bytes(raw_root(signed, [keys["root_a"]]))
    state = tmp_path / "state"
    assert _verify(golden.kit, state, "--trust", golden.key.public)[0] == 0  # memo warm
    rc, report, stderr = _verify(golden.kit, state, "--root", root)
    _no_traceback(stderr)
    assert rc != 0 and report.get("ok") is not True, (report, stderr)


# === 4. verify's memo note: false or missing ====================================================


def test_the_note_goes_to_stderr_and_keeps_json_clean(golden: GoldenKit, tmp_path: Path) -> None:
    state = tmp_path / "state"
    _everyone_may_write_the_memo_folder(state)
    done = run_k3kit(*_trusted(golden, state, "--json"))
    assert done.returncode == 0 and json.loads(done.stdout)["ok"] is True
    assert NOTE not in done.stdout and f"{NOTE} refused (STATE_DIR_UNSAFE" in done.stderr


def test_full_with_a_refused_folder_still_says_so(golden: GoldenKit, tmp_path: Path) -> None:
    state = tmp_path / "state"
    _everyone_may_write_the_memo_folder(state)
    done = run_k3kit(*_trusted(golden, state, "--full"))
    assert done.returncode == 0 and f"{NOTE} refused (STATE_DIR_UNSAFE" in done.stderr


def test_the_note_is_said_on_a_failing_verify_too(golden: GoldenKit, tmp_path: Path) -> None:
    kit = Path(shutil.copytree(golden.kit, tmp_path / "kit"))
    env = _env(kit)
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[40] ^= 1
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    _write_env(kit, env)
    state = tmp_path / "state"
    _everyone_may_write_the_memo_folder(state)
    done = run_k3kit("verify", kit, "--trust", golden.key.public, "--state-dir", state)
    assert done.returncode == 1 and f"{NOTE} refused" in done.stderr, done.stderr


@pytest.mark.parametrize("bad", ["group-writable", "cotenant-owned", "fifo", "dangling-link"])
def test_a_bad_memo_file_is_replaced_and_the_note_is_not_false(
    golden: GoldenKit, tmp_path: Path, bad: str
) -> None:
    """A memo file not to be trusted is ignored, then replaced by this run's own save: no note
    is owed (the next run is warm, and is), and nothing from the bad file is recalled."""
    state = tmp_path / "state"
    folder = state / "signatures"
    folder.mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    path = folder / FILE_NAME
    env = _env(golden.kit)
    from k3kit.signing.keys import load_public

    good = entry(
        load_public(golden.key.public).public_bytes_raw(),
        base64.b64decode(env["signatures"][0]["sig"]),
        _message(env),
    )
    body = json.dumps({"schema": SCHEMA, "entries": [good]})
    if bad == "fifo":
        os.mkfifo(path)
    elif bad == "dangling-link":
        path.symlink_to(tmp_path / "nowhere")
    else:
        path.write_text(body)
        path.chmod(0o620 if bad == "group-writable" else 0o600)
        if bad == "cotenant-owned":
            if os.geteuid() != 0:
                pytest.skip("chown needs root")
            os.chown(path, COTENANT_UID, COTENANT_GID)
    rc, report, stderr = _verify(golden.kit, state, "--trust", golden.key.public)
    assert rc == 0 and RECALLED not in _detail(report), _detail(report)  # never read
    assert NOTE not in stderr, stderr  # ...and replaced by ours: nothing to fix
    rc, report, stderr = _verify(golden.kit, state, "--trust", golden.key.public)
    assert rc == 0 and RECALLED in _detail(report) and NOTE not in stderr


def test_a_terminal_escape_in_the_cache_path_is_not_printed_raw(
    golden: GoldenKit, tmp_path: Path
) -> None:
    state = tmp_path / "st\x1b[2J\nate"
    _everyone_may_write_the_memo_folder(state)
    done = run_k3kit(*_trusted(golden, state))
    assert done.returncode == 0
    note = [line for line in done.stderr.splitlines() if NOTE in line]
    assert len(note) == 1 and "\x1b" not in done.stderr, done.stderr


def test_a_memo_that_cannot_be_saved_says_so_and_a_later_good_save_clears_it(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A folder at the memo file's name: every run computes, cannot save, and says 'not saved';
    once removed, the next run saves silently and the one after recalls."""
    state = tmp_path / "state"
    (state / "signatures" / FILE_NAME / "x").mkdir(parents=True)
    state.chmod(0o700)
    (state / "signatures").chmod(0o700)
    for _ in range(2):
        rc, report, stderr = _verify(golden.kit, state, "--trust", golden.key.public)
        assert rc == 0 and RECALLED not in _detail(report)
        assert f"{NOTE} not saved" in stderr or f"{NOTE} ignored" in stderr, stderr
    shutil.rmtree(state / "signatures" / FILE_NAME)
    rc, report, stderr = _verify(golden.kit, state, "--trust", golden.key.public)
    assert rc == 0 and NOTE not in stderr
    rc, report, stderr = _verify(golden.kit, state, "--trust", golden.key.public)
    assert rc == 0 and RECALLED in _detail(report) and NOTE not in stderr


@pytest.mark.parametrize("kind", ["loop", "group-writable"])
def test_a_terminal_escape_in_a_refused_weights_cache_path_is_not_printed_raw(
    golden: GoldenKit, weights: Path, tmp_path: Path, kind: str
) -> None:
    """vcache's new OSError branch builds its message from ``self.path.parent`` without
    ``shown()`` (the K3kitError branch's message comes from ``_unsafe_state``, which escapes)."""
    state = tmp_path / "lo\x1b[2Jop"
    if kind == "loop":
        state.symlink_to(state)
    else:
        (state / "verify").mkdir(parents=True)
        (state / "verify").chmod(0o777)
    done = run_k3kit(*_trusted(golden, state, "--weights", weights))
    _no_traceback(done.stderr)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr, repr(done.stdout + done.stderr)


def test_a_terminal_escape_in_a_relative_cache_path_in_a_deleted_folder_is_not_printed_raw(
    golden: GoldenKit, weights: Path, tmp_path: Path
) -> None:
    """The one way into vcache's new OSError branch (``os.getcwd()`` failing in ``abspath``):
    its message names ``self.path.parent`` without ``shown()``."""
    done = _in_a_deleted_folder(tmp_path, *_trusted(golden, "r\x1b[2Jel", "--weights", weights))
    _no_traceback(done.stderr)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr, repr(done.stdout + done.stderr)
