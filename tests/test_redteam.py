"""Red-team attacks that are not one CLI call: races timed by the engine's version check, a lock
held by a co-tenant, runtime folders an attacker can rename, a hostile acceptance server.

The one-call attacks are in ``tests/adversarial/attacks_redteam.py``. Each test is named after the
attack and asserts what must hold: the engine never starts on bytes other than those verified,
k3kit never hangs, never exits 70, and keeps memory bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from k3kit.accept._http import Timeouts, client, stream_completion
from k3kit.signing.trust import _memory
from tests.conftest import GoldenKit, run_k3kit
from tests.launchkit import FakeEngine, hand_signed, launch, make_fake_engine
from tests.trustkit import keypair, root_v1, with_version, write_root

SERVE = "profiles/interactive/single-node-8gpu/serve.yaml"


def _engine_with_hook(root: Path, hook: str) -> FakeEngine:
    """A stand-in engine whose ``--version`` first runs ``hook``: a co-tenant's action timed
    exactly between the kit's verification and the weights' (the engine itself is honest)."""
    fake = make_fake_engine(root)
    script = (fake.bindir / "vllm").read_text()
    script = script.replace(
        'if [ "${1:-}" = "--version" ]; then ', f'if [ "${{1:-}}" = "--version" ]; then {hook}; ', 1
    )
    (fake.bindir / "vllm").write_text(script)
    return fake


def _tampered_copy(weights: Path, dest: Path) -> tuple[Path, Path, bytes]:
    """A copy of the weights with one bit of the first shard flipped: (folder, shard, its bytes)."""
    shutil.copytree(weights, dest)
    shard = sorted(dest.glob("*.safetensors"))[0]
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1
    shard.write_bytes(bytes(data))
    return dest, shard, bytes(data)


def _refused_before_the_weights(
    code: int,
    stderr: str,
    out: dict,  # type: ignore[type-arg]
    fake: FakeEngine,
) -> dict[str, dict]:  # type: ignore[type-arg]
    """What every race below must end in: exit 1, the weights not passed (nothing hashed after
    the refusal), the engine never started. Returns the report's checks by id."""
    assert code == 1, stderr
    checks = {c["id"]: c for c in out["checks"]}
    assert checks["weights"]["status"] != "passed", checks["weights"]
    assert not fake.log.exists()
    return checks


def _failed(checks: dict[str, dict]) -> dict[str, str]:  # type: ignore[type-arg]
    """The failed checks' codes by id."""
    return {i: c["code"] for i, c in checks.items() if c["status"] == "failed"}


def _launch_args(golden: GoldenKit, weights: Path, state: Path) -> list[str | Path]:
    return [
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--state-dir",
        state,
        "--json",
    ]


# --- launch: what changes between the checks -------------------------------------------------


def test_launch_kit_serve_yaml_swapped_while_engine_version_is_checked(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    evil = tmp_path / "evil.yaml"
    evil.write_text("trust-remote-code: true\n")
    fake = _engine_with_hook(tmp_path / "engine", f"cp '{evil}' '{kit / SERVE}'")
    code, stderr, out = launch(kit, fake, *_launch_args(golden, golden.snapshot, tmp_path / "s"))
    assert code == 1, stderr
    assert "KIT_FILE_CHANGED" in json.dumps(out)
    assert not fake.log.exists()  # the engine never started


def test_launch_lock_swapped_for_one_matching_tampered_weights_while_version_is_checked(
    weights: Path, kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """launch keeps the lock its first verification read and checks the weights against it
    (docs/performance.md, "Sixth pass"): a co-tenant who swaps weights.lock.json for one that
    matches their tampered shard while the engine answers --version is refused (the kit's
    files are hashed again before the weights), and the engine never starts."""
    import blake3

    from k3kit._canonical import dumps

    tampered, shard, data = _tampered_copy(weights, tmp_path / "tampered")
    lock = json.loads((kit / "weights.lock.json").read_bytes())
    for entry in lock["files"]:
        if entry["path"] == shard.name:
            entry["sha256"] = hashlib.sha256(data).hexdigest()
            entry["blake3"] = blake3.blake3(data).hexdigest()
    evil = tmp_path / "evil.lock.json"
    evil.write_bytes(dumps(lock))
    fake = _engine_with_hook(tmp_path / "engine", f"cp '{evil}' '{kit / 'weights.lock.json'}'")
    code, stderr, out = launch(kit, fake, *_launch_args(golden, tampered, tmp_path / "s"))
    assert (kit / "weights.lock.json").read_bytes() == evil.read_bytes()  # the swap happened
    checks = _refused_before_the_weights(code, stderr, out, fake)  # none against the planted lock
    assert checks["kit_files"]["code"] == "KIT_FILE_CHANGED", checks["kit_files"]


@pytest.mark.parametrize(
    ("name", "edit"),
    [
        # a byte more inside the JSON: the kit checksum the receipt signs no longer matches
        ("MANIFEST.json", lambda data: data.replace(b'"files"', b'"files" ', 1)),
        # a receipt that no longer parses (a publisher's other receipt is refused the same way)
        ("receipt.dsse.json", lambda data: data[:-2]),
        # an SSH signature that signs nothing, planted where the kit had none
        ("MANIFEST.json.sig", lambda _data: b"-----BEGIN SSH SIGNATURE-----\n"),
        # root/ may hold only <N>.root.json files (read by --root, walked by --trust)
        ("root/notes.txt", lambda _data: b"not a root\n"),
    ],
    ids=["manifest", "receipt", "sshsig-planted", "root-file-planted"],
)
def test_launch_unlisted_kit_file_rewritten_while_engine_version_is_checked(
    kit: Path, golden: GoldenKit, tmp_path: Path, name: str, edit: Callable[[bytes], bytes]
) -> None:
    """launch verifies the kit once and then hashes its listed files again (docs/performance.md,
    "Sixth pass"); the receipt, MANIFEST.json, MANIFEST.json.sig and root/ are not listed, so a
    co-tenant who rewrites one while the engine answers --version left every listed file
    matching. The full second verification this replaced refused each (run this test against
    7798f5c's src: it passes); launch must still refuse, before the weights are hashed and the
    engine started."""
    target = kit / name
    evil = tmp_path / name.replace("/", "-")
    evil.write_bytes(edit(target.read_bytes() if target.exists() else b""))
    hook = f"mkdir -p '{target.parent}' && cp '{evil}' '{target}'"
    fake = _engine_with_hook(tmp_path / "engine", hook)
    code, stderr, out = launch(kit, fake, *_launch_args(golden, golden.snapshot, tmp_path / "s"))
    assert target.read_bytes() == evil.read_bytes()  # the rewrite happened, during the probe
    checks = _refused_before_the_weights(code, stderr, out, fake)
    failed = {c["code"] for c in checks.values() if c["status"] == "failed"}
    # this launch: KIT_FILE_CHANGED; the full second verification it replaced named the check
    assert failed & {
        "KIT_FILE_CHANGED",
        "RECEIPT_KIT_MISMATCH",
        "RECEIPT_MALFORMED",
        "SSHSIG_INVALID",
        "ROOT_CHAIN_MALFORMED",
    }, failed


def test_launch_root_rewritten_while_engine_version_is_checked_under_root_of_trust(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """A kit carrying root/2.root.json, launched with --root (the pinned v1): its root chain is
    read by the first verification only; a co-tenant who rewrites root/2.root.json while the
    engine answers --version must not see the launch go ahead on a kit that changed."""
    from tests.trustkit import attach, root_v1, with_version

    root_key = keypair(tmp_path / "keys", "root")
    body = root_v1([root_key], [golden.key])
    pinned = write_root(tmp_path / "1.root.json", body, [root_key])
    attach(kit, write_root(tmp_path / "2.root.json", with_version(body, 2), [root_key]))
    evil = tmp_path / "evil.root.json"
    evil.write_bytes(b"{}")
    target = kit / "root" / "2.root.json"
    fake = _engine_with_hook(tmp_path / "engine", f"cp '{evil}' '{target}'")
    args = _launch_args(golden, golden.snapshot, tmp_path / "s")
    args[args.index("--trust") : args.index("--trust") + 2] = ["--root", pinned]
    code, stderr, out = launch(kit, fake, *args)
    assert target.read_bytes() == b"{}"  # the rewrite happened, during the probe
    failed = _failed(_refused_before_the_weights(code, stderr, out, fake))
    # under --root the kit is verified again in full before the weights: the trust resolved
    # again from the rewritten chain fails, or kit_files finds root/ is not what was verified
    assert {("kit_files", "KIT_FILE_CHANGED"), ("trust", "ROOT_MALFORMED")} & set(failed.items())


def _launch_under_root_verifying_meanwhile(
    kit: Path, golden: GoldenKit, pinned: Path, newer: Path, tmp_path: Path
) -> tuple[int, str, dict, str, FakeEngine]:  # type: ignore[type-arg]
    """``launch --root pinned`` of ``kit`` while the engine's ``--version`` runs ``verify`` of
    ``newer`` under the same root and state folder (an update the node accepts meanwhile):
    (exit code, stderr, JSON, that verify's output, the engine)."""
    import sys

    state, log = tmp_path / "s", tmp_path / "hook.log"
    python = f"PYTHONPATH='{os.environ.get('PYTHONPATH', '')}' '{sys.executable}' -m k3kit"
    hook = f"{python} verify '{newer}' --root '{pinned}' --state-dir '{state}' >'{log}' 2>&1"
    fake = _engine_with_hook(tmp_path / "engine", hook)
    args = _launch_args(golden, golden.snapshot, state)
    args[args.index("--trust") : args.index("--trust") + 2] = ["--root", pinned]
    code, stderr, out = launch(kit, fake, *args)
    return code, stderr, out, log.read_text(), fake


def test_launch_of_an_older_kit_after_a_newer_one_was_accepted_during_the_version_check(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """Under a root of trust, the node accepts sequence 2 of the package (an update verified
    with the same state folder) while launch of sequence 1 waits for the engine's --version:
    sequence 1 is now a rollback. The full second verification refused it (ROLLBACK) before the
    weights; launch verifying the kit once must not let it through on the first run's decision."""

    from tests.trustkit import build_kit, root_v1

    root_key = keypair(tmp_path / "keys", "root")
    pinned = write_root(tmp_path / "1.root.json", root_v1([root_key], [golden.key]), [root_key])
    newer = build_kit(tmp_path / "newer", golden.lock, golden.key, sequence=2, version="1.1.0")
    code, stderr, out, log, fake = _launch_under_root_verifying_meanwhile(
        kit, golden, pinned, newer, tmp_path
    )
    assert "sequence 2" in log and "verdict: VERIFIED" in log, log
    failed = _failed(_refused_before_the_weights(code, stderr, out, fake))
    assert failed == {"rollback": "ROLLBACK"}, failed


def test_launch_after_a_root_revoking_its_signer_was_accepted_during_the_version_check(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """Under a root of trust, the node accepts root v2, which replaces the release key that
    signed this kit (the publisher rotated a leaked key), while launch waits for the engine's
    --version. The full second verification resolved the trust again and refused the kit;
    launch verifying the kit once must not start it under the revoked key."""

    from k3kit.publish.kit import build, sign
    from k3kit.signing.keys import load_private
    from tests.conftest import EXAMPLE, FIXED_TIME
    from tests.trustkit import attach

    root_key, new_release = keypair(tmp_path / "keys", "root"), keypair(tmp_path / "keys", "rel")
    pinned = write_root(tmp_path / "1.root.json", root_v1([root_key], [golden.key]), [root_key])
    v2 = with_version(root_v1([root_key], [new_release]), 2)
    # the publisher's kit on another channel, so no sequence of this one is involved
    package = tmp_path / "other" / "package.toml"
    package.parent.mkdir()
    text = (EXAMPLE / "package.toml").read_text()
    package.write_text(text.replace('channel = "stable"', 'channel = "beta"'))
    newer = tmp_path / "other" / "kit"
    build(package, golden.lock, newer)
    claims = EXAMPLE / "claims.toml"
    sign(newer, load_private(new_release.private, None), claims, issued_at=FIXED_TIME)
    attach(newer, write_root(tmp_path / "2.root.json", v2, [root_key]))
    code, stderr, out, log, fake = _launch_under_root_verifying_meanwhile(
        kit, golden, pinned, newer, tmp_path
    )
    assert "accepted root version(s) 2" in log, log
    failed = _failed(_refused_before_the_weights(code, stderr, out, fake))
    assert "receipt_signature" in failed, failed


def test_launch_manifest_replaced_by_a_fifo_while_engine_version_is_checked(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """MANIFEST.json, read again before the weights, turned into a FIFO no one writes while the
    engine answers --version: refused at once (no read waits for a writer), the engine never
    started."""
    target = kit / "MANIFEST.json"
    fake = _engine_with_hook(tmp_path / "engine", f"rm -f '{target}' && mkfifo '{target}'")
    code, stderr, out = launch(kit, fake, *_launch_args(golden, golden.snapshot, tmp_path / "s"))
    assert target.is_fifo()  # the swap happened, during the probe
    checks = _refused_before_the_weights(code, stderr, out, fake)
    assert checks["kit_files"]["status"] == "failed", checks["kit_files"]


def test_launch_kit_folder_replaced_by_another_signed_kit_while_version_is_checked(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The publisher's other kit, genuine and signed (its serve.yaml differs), put in the kit's
    place while the engine answers --version: it verifies on its own, but it is not the kit
    launch verified; the files hashed again against the manifest held in memory refuse it
    (the full second verification refused it by its kit checksum)."""
    other = tmp_path / "other"
    shutil.copytree(kit, other)
    hand_signed(other, golden.key, SERVE, lambda data: data + b"max-num-seqs: 7\n")
    assert run_k3kit("verify", other, "--trust", golden.key.public).returncode == 0
    fake = _engine_with_hook(tmp_path / "engine", f"rm -rf '{kit}' && cp -a '{other}' '{kit}'")
    code, stderr, out = launch(kit, fake, *_launch_args(golden, golden.snapshot, tmp_path / "s"))
    assert (kit / SERVE).read_bytes() == (other / SERVE).read_bytes()  # the swap happened
    checks = _refused_before_the_weights(code, stderr, out, fake)
    assert checks["kit_files"]["code"] == "KIT_FILE_CHANGED", checks["kit_files"]


def test_launch_weights_link_repointed_to_tampered_copy_while_version_is_checked(
    weights: Path, kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    tampered, _, _ = _tampered_copy(weights, tmp_path / "tampered")
    current = tmp_path / "current"
    current.symlink_to(weights)
    fake = _engine_with_hook(tmp_path / "engine", f"ln -sfn '{tampered}' '{current}'")
    code, stderr, out = launch(kit, fake, *_launch_args(golden, current, tmp_path / "s"))
    assert code == 1, stderr
    assert "WEIGHTS_FILE_CHANGED" in json.dumps(out) or "WEIGHTS" in json.dumps(out)
    assert not fake.log.exists()


def test_launch_weights_link_repointed_to_genuine_copy_runs_the_copy_it_hashed(
    weights: Path, kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    shutil.copytree(weights, other)
    current = tmp_path / "current"
    current.symlink_to(weights)
    fake = _engine_with_hook(tmp_path / "engine", f"ln -sfn '{other}' '{current}'")
    code, stderr, _ = launch(kit, fake, *_launch_args(golden, current, tmp_path / "s"))
    assert code == 0, stderr
    assert fake.record()["argv"][2] == os.path.realpath(other)  # the folder that was hashed


def test_launch_runtime_folder_planted_as_a_link(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    (state / "launch").symlink_to(attacker)
    fake = make_fake_engine(tmp_path / "engine")
    code, stderr, out = launch(kit, fake, *_launch_args(golden, golden.snapshot, state))
    assert code == 4 and out["error"]["code"] == "RUNTIME_DIR_UNSAFE", stderr
    assert not any(attacker.iterdir()) and not fake.log.exists()


def test_launch_runtime_folder_group_writable(kit: Path, golden: GoldenKit, tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "launch").mkdir(parents=True)
    (state / "launch").chmod(0o775)
    fake = make_fake_engine(tmp_path / "engine")
    code, stderr, out = launch(kit, fake, *_launch_args(golden, golden.snapshot, state))
    assert code == 4 and out["error"]["code"] == "RUNTIME_DIR_UNSAFE", stderr
    assert not fake.log.exists()


def test_launch_state_folder_writable_by_others_lets_them_swap_the_runtime_folder(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The runtime folder itself was checked, but a world-writable (non-sticky) state folder lets
    anyone rename ``launch/`` away after the check and plant a folder holding their config."""
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    fake = make_fake_engine(tmp_path / "engine")
    code, stderr, out = launch(kit, fake, *_launch_args(golden, golden.snapshot, state))
    assert code == 4 and out["error"]["code"] == "RUNTIME_DIR_UNSAFE", stderr
    assert not fake.log.exists()
    state.chmod(0o1777)  # sticky, like /tmp: nobody else can rename what is ours
    code, stderr, _ = launch(kit, fake, *_launch_args(golden, golden.snapshot, state))
    assert code == 0, stderr


# --- the state folder ---------------------------------------------------------------------------


#: How long the held lock below lasts at most: only a verify that never gives up waits this out,
#: and then it gets the lock and succeeds, which fails the test instead of hanging it.
HANG_GUARD_S = 90.0


def test_rollback_lock_held_forever_by_a_co_tenant_is_an_error_not_a_hang(
    kit: Path, golden: GoldenKit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root_key = keypair(tmp_path, "root")
    pinned = write_root(tmp_path / "1.root.json", root_v1([root_key], [golden.key]), [root_key])
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    lock = state / "rollback.lock"
    lock.touch(mode=0o666)
    # The product's own knob, lowered: the verify gives up after 0.2 s instead of 10 s. The
    # wait itself stays real (flock polled against the monotonic clock), nothing is mocked.
    monkeypatch.setattr(_memory, "LOCK_WAIT_S", 0.2)
    fd = os.open(lock, os.O_RDWR)
    release = threading.Timer(HANG_GUARD_S, fcntl.flock, (fd, fcntl.LOCK_UN))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: the verify blocks
        release.start()
        # The verify runs in this process (tests/clirunner.py); the lock is held until it
        # returns or the guard lets go, so only giving up on its own gives exit 4.
        proc = run_k3kit("verify", kit, "--root", pinned, "--state-dir", state, "--json")
    finally:
        release.cancel()
        release.join()
        os.close(fd)
    assert proc.returncode == 4, proc.stderr
    assert json.loads(proc.stdout)["error"]["code"] == "ROLLBACK_STATE_UNAVAILABLE"


# --- install: what a terminal shows -------------------------------------------------------------


def test_install_kit_folder_name_paints_a_forged_verdict(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    (kit / "x\r\x1b[2K\x1b[32mverdict: VERIFIED\x1b[0m").write_text("x")
    proc = run_k3kit("install", kit, "--trust", golden.key.public, "--into", tmp_path / "kits")
    assert proc.returncode == 1
    assert "\x1b" not in proc.stderr and "\r" not in proc.stderr
    assert not (tmp_path / "kits" / "kimi-k3-b300x8-1.0.0").exists()


# --- audit: a kit.json that is not the signed one -------------------------------------------


def _audit(kit: Path, golden: GoldenKit) -> dict[str, int]:
    proc = run_k3kit("audit", kit, "--trust", golden.key.public, "--json")
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)["counts"]  # type: ignore[no-any-return]


def test_audit_ignores_an_edited_kit_json(kit: Path, golden: GoldenKit) -> None:
    """The edited kit.json is not read: the rules that need it become not-checkable, and no
    error turns into a pass."""
    genuine = _audit(kit, golden)
    info = kit / "kit.json"
    info.write_bytes(info.read_bytes().replace(b'"amount":"2300"', b'"amount":"23"'))
    edited = _audit(kit, golden)
    assert edited["not-checkable"] > genuine["not-checkable"]
    assert edited["error"] >= genuine["error"]


# --- accept against a hostile server ---------------------------------------------------------


@contextlib.contextmanager
def _hostile_server(head: bytes, body: Iterator[bytes]) -> Iterator[str]:
    """A TCP server that answers every request with ``head`` then the chunks of ``body``."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    framed = [b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in body]  # before tracing

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = sock.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(head)
                for chunk in framed:
                    conn.sendall(chunk)
                conn.sendall(b"0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1/completions"
    finally:
        sock.close()
        thread.join(10)


def _one_request(url: str) -> tuple[str, int]:
    """Run one streaming request; returns (error text, peak traced bytes)."""
    timeouts = Timeouts(connect_s=5, stall_s=10, request_s=60)

    async def go() -> str:
        async with client(1, timeouts) as http:
            sample = await stream_completion(http, url, {"prompt": "x"}, 1, timeouts)
            return sample.error

    tracemalloc.start()
    try:
        error = asyncio.run(go())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return error, peak


SSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
CHUNK = 256 * 1024
TOTAL = 64 * 1024 * 1024


def test_accept_never_ending_sse_line_is_bounded() -> None:
    body = iter([b"data: "] + [b"x" * CHUNK] * (TOTAL // CHUNK))
    with _hostile_server(SSE, body) as url:
        error, peak = _one_request(url)
    assert error
    assert peak < 16 * 1024 * 1024, f"{peak / 2**20:.0f} MiB held for one line"


def test_accept_endless_error_body_is_bounded() -> None:
    head = b"HTTP/1.1 500 Oops\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n"
    with _hostile_server(head, iter([b"y" * CHUNK] * (TOTAL // CHUNK))) as url:
        error, peak = _one_request(url)
    assert "HTTP 500" in error
    assert peak < 16 * 1024 * 1024, f"{peak / 2**20:.0f} MiB held for one error body"


def test_accept_deeply_nested_sse_json_is_a_failed_request_not_a_crash() -> None:
    line = b"data: " + b"[" * 200_000 + b"\n\n"
    with _hostile_server(SSE, iter([line, b"data: [DONE]\n\n"])) as url:
        error, _ = _one_request(url)
    assert error


#: The most the client may hold at once for the single-chunk attack below.
SINGLE_CHUNK_BOUND = 8 * 1024 * 1024


def test_accept_huge_single_chunk_is_bounded() -> None:
    """One HTTP chunk of SSE comment lines, 1 MiB over the bound: memory stays bounded.

    A client that held the chunk whole (or split it into lines at once, more still) would pass
    the bound, so the chunk only has to exceed it, not triple it. Every line costs parsing time
    under tracemalloc: 24 MiB of 13-byte lines had been 22 s of the suite and 9 MiB of them
    5-11 s; lines of 128 bytes are a tenth as many for the same chunk."""
    line = b": " + b"k" * 125 + b"\n"
    lines = line * ((SINGLE_CHUNK_BOUND + 1024 * 1024) // len(line))
    assert len(lines) > SINGLE_CHUNK_BOUND
    with _hostile_server(SSE, iter([lines])) as url:
        error, peak = _one_request(url)
    assert error  # no token was streamed, no [DONE]
    assert peak < SINGLE_CHUNK_BOUND, f"{peak / 2**20:.0f} MiB"


# The verifying verbs' --root / --allow-rollback / --trust moved from cli.signing to cli._shared
# (issue 23, seventh pass, so launch and verify no longer build the signing verbs): every verb
# must still refuse a mixed or incomplete trust source, before it reads, writes or runs anything.
def _trust_verbs(w: Path, kit: Path) -> dict[str, list[str | Path]]:
    site = w / "site.env"
    site.write_text("MODEL_DIR=/srv/models/kimi\n")
    return {
        "verify": ["verify", kit],
        "install": ["install", kit, "--into", w / "into"],
        "launch": ["launch", kit, "--profile", "interactive", "--weights", w / "weights",
                   "--no-preflight", "--dry-run"],
        "push": ["push", kit, "oci://127.0.0.1:9/kits/x"],
        "render-site": ["render-site", kit, "--site", site, "-o", w / "out"],
        "update": ["update", "--channel", "stable", "--from", "file:///nonexistent",
                   "--into", w / "into"],
        "preflight": ["preflight", kit, "--profile", "interactive"],
    }  # fmt: skip


_TRUST_ATTACKS = {
    "rollback-without-root": (["--allow-rollback"], "--allow-rollback needs --root"),
    "trust-and-root": (["--root", "ROOT"], "give either --trust or --root, not both"),
}


@pytest.mark.parametrize("attack", sorted(_TRUST_ATTACKS))
@pytest.mark.parametrize(
    "verb", ["verify", "install", "launch", "push", "render-site", "update", "preflight"]
)
def test_every_verifying_verb_refuses_a_mixed_trust_source_before_any_work(
    kit: Path, golden: GoldenKit, tmp_path: Path, verb: str, attack: str
) -> None:
    """--allow-rollback without --root (rollback is tracked per root), or --trust with --root
    (two trust sources, one silently ignored): exit 2 with the usage error, and nothing written
    (no install folder, no rendered site, no state) nor contacted. preflight has no
    --allow-rollback (click refuses the option itself); update needs --root whatever else is
    given. The same messages as before the move (compared by hand with 8f08e35)."""
    work = tmp_path / "w"
    work.mkdir()
    root = work / "1.root.json"
    shutil.copy(golden.kit / "kit.json", root)  # any file: it must not be read
    extra, message = _TRUST_ATTACKS[attack]
    extra = [str(root) if part == "ROOT" else part for part in extra]
    before = sorted(p.name for p in work.iterdir())
    argv = [*_trust_verbs(work, kit)[verb], "--trust", golden.key.public, *extra]
    argv += ["--state-dir", work / "state"] if verb not in ("push", "preflight") else []
    proc = run_k3kit(*argv)
    assert proc.returncode == 2, proc.stderr
    if verb == "preflight" and attack == "rollback-without-root":
        assert "No such option '--allow-rollback'" in proc.stderr
    elif verb == "update" and attack == "rollback-without-root":
        assert "update needs the publisher's pinned root" in proc.stderr  # as before the move
    else:
        assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in work.iterdir()) == [*before, "site.env"]


@pytest.mark.parametrize("verb", ["countersign", "sshsig", "sign"])
def test_the_signing_verbs_are_still_found_after_their_options_moved(
    kit: Path, tmp_path: Path, verb: str
) -> None:
    """cli.signing no longer holds the verifying options, and launch/verify no longer import it:
    in a fresh process the lazy command group must still find the signing verbs and run them to
    their own refusal (a key file that is not there: exit 4), not answer "No such command"."""
    help_proc = run_k3kit(verb, "--help", process=True)
    assert help_proc.returncode == 0 and f"Usage: k3kit {verb}" in help_proc.stdout
    argv: list[str | Path] = [verb, kit, "--key", tmp_path / "absent.key"]
    if verb == "sshsig":
        argv += ["--principal", "release@example.com"]
    if verb == "sign":
        argv += ["--claims", kit / "absent-claims.toml"]
    proc = run_k3kit(*argv, process=True)
    assert "No such command" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.returncode in (3, 4), proc.stderr


# -- gc.freeze() at the CLI's entry (issue 23, eighth pass) ---------------------------------------

_FROZEN_GARBAGE_PROBE = """
import gc, io, json, socket, sys, types, weakref
gc.set_debug(gc.DEBUG_SAVEALL)
import k3kit.cli  # what `python -m k3kit` has imported when main() freezes
gc.collect()
bad = []
for o in gc.garbage:
    kind = type(o)
    if isinstance(o, (io.IOBase, socket.socket, types.GeneratorType, types.CoroutineType)):
        bad.append(repr(kind))
    elif isinstance(o, weakref.ref) and o.__callback__ is not None:
        bad.append("weakref with a callback")
    elif isinstance(kind, type) and any("__del__" in vars(k) for k in kind.__mro__):
        bad.append(repr(kind))
print(json.dumps({"garbage": len(gc.garbage), "bad": bad}))
"""


def test_what_gc_freeze_keeps_for_ever_holds_no_file_finalizer_or_callback() -> None:
    """gc.freeze() also freezes whatever start-up left unreachable in a cycle: it is never
    collected, so a file, socket, generator (its ``finally``), ``__del__`` or weakref callback
    among it would never be closed or run. Start-up's leftovers are functions, classes and
    tuples only (a few hundred objects); this holds it so."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _FROZEN_GARBAGE_PROBE],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    found = json.loads(out)
    assert found["bad"] == [], found


def test_a_refused_install_in_its_own_process_leaves_no_staging_folder(
    kit: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The path gc.freeze() runs on (a real process; in-process test runs never freeze): a kit
    refused after staging leaves nothing behind in INTO, and the same folder takes the genuine
    kit afterwards."""
    (kit / "README.md").write_bytes((kit / "README.md").read_bytes() + b"\nchanged\n")
    into = tmp_path / "into"
    into.mkdir()
    proc = run_k3kit("install", kit, "--trust", golden.key.public, "--into", into, process=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert sorted(p.name for p in into.iterdir()) == []
    good = run_k3kit(
        "install", golden.kit, "--trust", golden.key.public, "--into", into, process=True
    )
    assert good.returncode == 0, good.stdout + good.stderr
    assert [p.name for p in into.iterdir() if p.name.startswith(".k3kit-install-")] == []


# -- diff_tree hashes by a text path (issue 23, eighth pass) ---------------------------------------


def test_diff_tree_judges_the_same_files_however_the_kit_root_is_spelt(
    kit: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kit's files are opened as ``f"{root}/{rel}"``, no longer ``root / rel``: a root
    spelt relative, as ``.``, through a link, or with a trailing ``/.`` must find the same
    changed file, and a file that is no longer regular when it is opened (walked as a file,
    then swapped for a FIFO) is refused with the same name whatever the spelling."""
    import k3kit.formats.manifest as manifest_module
    from k3kit._digest import NotRegularFile
    from k3kit._fs import TreeEntry
    from k3kit._text import shown
    from k3kit.formats.documents import read_document
    from k3kit.formats.manifest import diff_tree
    from k3kit.models import lite

    manifest = read_document(
        kit / "MANIFEST.json", lite.Manifest, max_bytes=1 << 24, code="MANIFEST_MALFORMED"
    ).model
    readme = kit / "README.md"
    data = bytearray(readme.read_bytes())
    data[0] ^= 1
    readme.write_bytes(bytes(data))
    (tmp_path / "via").symlink_to(kit)
    monkeypatch.chdir(tmp_path)
    spellings = [kit, Path("kit"), Path("./kit"), Path("kit/."), Path("via"), kit / "."]
    expected = [("KIT_FILE_CHANGED", "README.md")]
    for root in spellings:
        assert [(d.code, d.path) for d in diff_tree(root, manifest).differences] == expected
    monkeypatch.chdir(kit)
    assert [(d.code, d.path) for d in diff_tree(Path("."), manifest).differences] == expected

    (tmp_path / "fifo").mkdir()  # a root whose README.md, walked as a file, is now a FIFO
    os.mkfifo(tmp_path / "fifo" / "README.md")
    size = len(data)
    monkeypatch.setattr(
        manifest_module, "walk", lambda root: iter([TreeEntry("README.md", "file", size)])
    )
    for root in (tmp_path / "fifo", Path("../fifo"), Path("./../fifo"), Path("../fifo/.")):
        with pytest.raises(NotRegularFile) as info:
            diff_tree(root, manifest)
        # the name the pathlib join gave before
        assert str(info.value) == f"{shown(root / 'README.md')} is not a regular file"
