"""One root of trust, on TUF: the root the ``root`` verbs write is TUF root metadata, the one file
a buyer pins serves ``verify --root``, ``install --root`` and ``update``, and the channel's own
roots read as roots of trust. Real keys, the real CLI, a real static HTTP server on 127.0.0.1.
The forged-root attacks are corpus cases (tests/adversarial/attacks_tufroot.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from securesystemslib.signer import Signature
from tuf.api.metadata import Metadata, Root

from k3kit._fs import atomic_write
from k3kit.archive import pack
from k3kit.errors import InputError, VerificationError
from k3kit.signing.keys import keyid, load_private, raw_public
from k3kit.signing.sign import sign_envelope
from k3kit.signing.trust.edit import revoke
from k3kit.signing.trust.root import verify_root
from k3kit.signing.trust.tufroot import tuf_key
from tests.channelkit import Releases, make_releases, serve
from tests.conftest import GoldenKit, KeyFiles, run_k3kit
from tests.trustkit import (
    FAR,
    build_kit,
    keypair,
    kid,
    pub,
    raw_root,
    root_v1,
    signer,
    write_root,
)


@pytest.fixture(scope="module")
def releases(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Releases:
    return make_releases(golden, tmp_path_factory.mktemp("releases"))


def _ok(*args: str | Path) -> str:
    done = run_k3kit(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_key_id_rule_is_one_for_the_channel_and_the_root_verbs(tmp_path: Path) -> None:
    key = pub(keypair(tmp_path, "k"))
    assert tuf_key(key).keyid == keyid(key)


def test_root_create_writes_tuf_root_metadata_with_four_roles(
    golden: GoldenKit, tmp_path: Path
) -> None:
    root_key, ts = keypair(tmp_path, "root"), keypair(tmp_path, "ts")
    out = tmp_path / "1.root.json"
    _ok(
        "root", "create", "-o", out, "--root-key", root_key.public, "--release-key",
        golden.key.public, "--timestamp-key", ts.public, "--expires", FAR,
        "--sign-key", root_key.private,
    )  # fmt: skip
    md = Metadata[Root].from_bytes(out.read_bytes())  # python-tuf reads it as it is
    roles = md.signed.roles
    assert roles["targets"].keyids == [kid(golden.key)]  # the release role is TUF's targets
    assert roles["snapshot"].keyids == [kid(golden.key)]  # default: the release keys
    assert roles["timestamp"].keyids == [kid(ts)]
    assert roles["root"].keyids == [kid(root_key)] and md.signed.consistent_snapshot
    md.signed.verify_delegate(Root.type, md.signed_bytes, md.signatures)


def test_root_sign_appends_a_signature_and_leaves_the_signed_part(
    golden: GoldenKit, tmp_path: Path
) -> None:
    a, b = keypair(tmp_path, "a"), keypair(tmp_path, "b")
    path = write_root(
        tmp_path / "1.root.json", root_v1([a, b], [golden.key], root_threshold=2), [a]
    )
    before = json.loads(path.read_bytes())
    _ok("root", "sign", path, "--key", b.private)
    after = json.loads(path.read_bytes())
    assert after["signed"] == before["signed"]
    assert after["signatures"][0] == before["signatures"][0]
    assert [s["keyid"] for s in after["signatures"]] == [kid(a), kid(b)]
    _ok("verify", golden.kit, "--root", path, "--state-dir", tmp_path / "state")


def test_a_k3kit_root_v1_envelope_is_refused_by_type_with_the_fix(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A node upgraded with a pin from before the migration: told what the file is, not 70."""
    root_key = keypair(tmp_path, "root")
    old = {"schema": "k3kit.root/v1", "version": 1, "expires": FAR, "keys": {}, "roles": {}}
    pinned = tmp_path / "1.root.json"
    pinned.write_bytes(
        sign_envelope(
            json.dumps(old).encode(), "application/vnd.k3kit.root+json", [signer(root_key)]
        )
    )
    done = run_k3kit(
        "verify", golden.kit, "--root", pinned, "--state-dir", tmp_path / "s", "--json"
    )
    assert done.returncode == 1 and "ROOT_WRONG_TYPE" in done.stdout, done.stdout + done.stderr
    assert "root create" in done.stdout + done.stderr


def test_a_signature_that_is_not_hex_counts_for_nothing(golden: GoldenKit, tmp_path: Path) -> None:
    root_key = keypair(tmp_path, "root")
    path = write_root(tmp_path / "1.root.json", root_v1([root_key], [golden.key]), [root_key])
    doc = json.loads(path.read_bytes())
    doc["signatures"][0]["sig"] = "zz" * 64
    path.write_text(json.dumps(doc))
    done = run_k3kit("verify", golden.kit, "--root", path, "--state-dir", tmp_path / "s", "--json")
    assert done.returncode == 1 and "ROOT_UNTRUSTED" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize(
    "respell",
    [
        str.upper,
        lambda h: h[:64] + " " + h[64:],
        lambda h: h + "\n",
        lambda h: h[:64] + "\n" + h[64:],
    ],
    ids=["upper-case", "a space", "a final newline", "a newline inside"],
)
def test_a_signature_spelt_another_way_counts_for_nothing(
    golden: GoldenKit, tmp_path: Path, respell: Any
) -> None:
    """The same signature written otherwise (upper case, a space or a newline: bytes.fromhex
    skips whitespace and takes either case) is another root.json of the same meaning: one
    signature, one spelling, as every other k3kit signature (the attack review of issue 23's
    eighth pass). The genuine spelling verifies."""
    root_key = keypair(tmp_path, "root")
    path = write_root(tmp_path / "1.root.json", root_v1([root_key], [golden.key]), [root_key])
    ok = run_k3kit("verify", golden.kit, "--root", path, "--state-dir", tmp_path / "ok", "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    doc = json.loads(path.read_bytes())
    doc["signatures"][0]["sig"] = respell(doc["signatures"][0]["sig"])
    path.write_text(json.dumps(doc))
    done = run_k3kit("verify", golden.kit, "--root", path, "--state-dir", tmp_path / "s", "--json")
    assert done.returncode == 1 and "ROOT_UNTRUSTED" in done.stdout, done.stdout + done.stderr


def test_a_root_nested_past_the_json_depth_guard_is_malformed(
    golden: GoldenKit, tmp_path: Path
) -> None:
    root_key = keypair(tmp_path, "root")
    signed = root_v1([root_key], [golden.key]).to_dict()
    deep: object = 0
    for _ in range(40):
        deep = [deep]
    signed["x-k3kit-min-sequence"] = {"kimi-k3-b300x8/stable": deep}
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    pinned = write_root(tmp_path / "1.root.json", root_v1([root_key], [golden.key]), [root_key])
    atomic_write(
        kit / "root" / "2.root.json", json.dumps({"signed": signed, "signatures": []}).encode()
    )
    done = run_k3kit("verify", kit, "--root", pinned, "--state-dir", tmp_path / "s", "--json")
    assert done.returncode == 1 and "ROOT_MALFORMED" in done.stdout, done.stdout + done.stderr
    assert "nesting deeper than" in done.stdout  # refused before python-tuf's parser saw it


def test_revoking_the_release_key_that_also_stamped_leaves_a_usable_root(
    golden: GoldenKit, tmp_path: Path
) -> None:
    root_key, spare = keypair(tmp_path, "root"), keypair(tmp_path, "spare")
    r1 = root_v1([root_key], [golden.key, spare])  # snapshot and timestamp: both release keys
    r2 = revoke(r1, kid(golden.key), reason="compromise", since=FAR, expires=FAR)
    for role in ("targets", "snapshot", "timestamp"):
        assert r2.roles[role].keyids == [kid(spare)]
    # The last release key cannot go: nothing could sign receipts (or the channel) after it.
    with pytest.raises(InputError) as refused:
        revoke(r2, kid(spare), reason="lost", since=FAR, expires=FAR)
    assert refused.value.code == "ROOT_INVALID"


def _root_for_channel(tmp: Path, golden: GoldenKit) -> tuple[Path, dict[str, KeyFiles]]:
    """``k3kit root create``: root key offline, release key = the publisher's, and an online
    snapshot and timestamp key each."""
    keys = {name: keypair(tmp / "keys", name) for name in ("root", "snapshot", "timestamp")}
    keys["release"] = golden.key
    out = tmp / "1.root.json"
    _ok(
        "root", "create", "-o", out, "--root-key", keys["root"].public,
        "--release-key", golden.key.public, "--snapshot-key", keys["snapshot"].public,
        "--timestamp-key", keys["timestamp"].public, "--expires", FAR,
        "--sign-key", keys["root"].private,
    )  # fmt: skip
    return out, keys


def test_one_pinned_root_serves_channel_init_update_and_verify(
    golden: GoldenKit, releases: Releases, tmp_path: Path
) -> None:
    pinned, keys = _root_for_channel(tmp_path, golden)
    repo = tmp_path / "repo"
    _ok("channel", "init", "--repo", repo, "--root", pinned)
    assert (repo / "metadata" / "1.root.json").read_bytes() == pinned.read_bytes()
    online: list[str | Path] = ["--key", golden.key.private, "--key", keys["snapshot"].private]
    online += ["--key", keys["timestamp"].private]
    for archive in (releases.v100, releases.v110):
        _ok("publish", archive, "--channel", "stable", "--repo", repo, "--trust",
            golden.key.public, *online)  # fmt: skip
    into, state = tmp_path / "kits", tmp_path / "state"
    with serve(repo) as url:
        out = _ok(
            "update", "--channel", "stable", "--from", url, "--root", pinned,
            "--into", into, "--state-dir", state, "--json",
        )  # fmt: skip
    installed = json.loads(out)
    assert installed["version"] == "1.1.0"
    # The same pin verifies the installed kit, with the node's rollback memory.
    _ok("verify", installed["installed"], "--root", pinned, "--state-dir", state)


def test_update_without_any_pinned_root_is_a_usage_error(tmp_path: Path) -> None:
    done = run_k3kit(
        "update", "--channel", "stable", "--from", "http://127.0.0.1:9", "--into",
        tmp_path / "kits", "--state-dir", tmp_path / "state", "--trust", tmp_path / "none.pub",
    )  # fmt: skip
    assert done.returncode == 2 and "--root" in done.stderr, done.stderr


def test_a_channel_made_by_channel_init_pins_kits_and_its_rotation_walks(
    golden: GoldenKit, releases: Releases, tmp_path: Path
) -> None:
    """The root `channel init` writes is a root of trust (targets = the publisher's key); after
    `channel rotate` replaces the targets key, the channel's root 2 attached to a kit moves a
    node pinned to root 1 onto the new key, so the old key's receipt no longer counts."""
    keys = {name: keypair(tmp_path / "keys", name) for name in ("root", "snapshot", "ts", "new")}
    repo = tmp_path / "repo"
    _ok(
        "channel", "init", "--repo", repo, "--key", keys["root"].private,
        "--root-key", keys["root"].public, "--targets-key", golden.key.public,
        "--snapshot-key", keys["snapshot"].public, "--timestamp-key", keys["ts"].public,
    )  # fmt: skip
    meta = repo / "metadata"
    _ok("verify", golden.kit, "--root", meta / "1.root.json", "--state-dir", tmp_path / "s1")
    _ok(
        "channel", "rotate", "--repo", repo, "--role", "targets",
        "--add-key", keys["new"].public, "--remove-key", golden.key.public,
        "--key", keys["root"].private,
    )  # fmt: skip
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    _ok("root", "attach", kit, meta / "1.root.json", meta / "2.root.json")
    done = run_k3kit(
        "verify", kit, "--root", meta / "1.root.json", "--state-dir", tmp_path / "s2", "--json"
    )
    assert done.returncode == 1 and "RECEIPT_UNTRUSTED_KEY" in done.stdout, done.stdout
    assert "accepted root version(s) 2 from the kit" in done.stdout


def test_channel_init_refuses_a_root_chain_that_does_not_start_at_1(
    golden: GoldenKit, tmp_path: Path
) -> None:
    pinned, keys = _root_for_channel(tmp_path, golden)
    two = tmp_path / "2.root.json"
    _ok(
        "root", "floor", pinned, "-o", two, "--min-sequence", "kimi-k3-b300x8/stable=1",
        "--expires", FAR, "--sign-key", keys["root"].private,
    )  # fmt: skip
    done = run_k3kit("channel", "init", "--repo", tmp_path / "r1", "--root", two, "--json")
    assert done.returncode == 3 and "CHANNEL_REPO_INVALID" in done.stdout, done.stdout
    _ok("channel", "init", "--repo", tmp_path / "r2", "--root", pinned, "--root", two)
    assert (tmp_path / "r2" / "metadata" / "root.json").read_bytes() == two.read_bytes()


def test_channel_init_refuses_a_root_its_own_keys_did_not_sign(
    golden: GoldenKit, tmp_path: Path
) -> None:
    root_key, other = keypair(tmp_path, "root"), keypair(tmp_path, "other")
    forged = write_root(tmp_path / "1.root.json", root_v1([root_key], [golden.key]), [other])
    done = run_k3kit("channel", "init", "--repo", tmp_path / "repo", "--root", forged, "--json")
    assert done.returncode == 1 and "ROOT_UNTRUSTED" in done.stdout, done.stdout
    assert not (tmp_path / "repo" / "metadata").exists()


_L = 2**252 + 27742317777372353535851937790883648493  # the Ed25519 group order
_IDENTITY = bytes([1]) + bytes(31)


def _identity_r_signature(key: KeyFiles, message: bytes) -> bytes:
    """A signature whose R is the identity point (small order), made with the real private key:
    [S]B = R + [k]A holds with S = k·a, so OpenSSL accepts it; k3kit's one signature check
    refuses a small-order R wherever a signature is counted."""
    seed = load_private(key.private, None).private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    h = hashlib.sha512(seed).digest()
    a = (int.from_bytes(h[:32], "little") & ((1 << 254) - 8)) | (1 << 254)
    public = raw_public(pub(key))
    k = int.from_bytes(hashlib.sha512(_IDENTITY + public + message).digest(), "little") % _L
    return _IDENTITY + ((k * a) % _L).to_bytes(32, "little")


def test_a_root_signature_with_a_small_order_r_does_not_count(
    golden: GoldenKit, tmp_path: Path
) -> None:
    root_key = keypair(tmp_path, "root")
    path = write_root(tmp_path / "1.root.json", root_v1([root_key], [golden.key]), [root_key])
    md = Metadata[Root].from_bytes(path.read_bytes())
    sig = _identity_r_signature(root_key, md.signed_bytes)
    md.signatures[kid(root_key)] = Signature(kid(root_key), sig.hex())
    md.signed.verify_delegate(Root.type, md.signed_bytes, md.signatures)  # python-tuf: fine
    path.write_bytes(md.to_bytes())
    done = run_k3kit("verify", golden.kit, "--root", path, "--state-dir", tmp_path / "s", "--json")
    assert done.returncode == 1 and "ROOT_UNTRUSTED" in done.stdout, done.stdout + done.stderr


def test_a_release_key_rotated_in_the_channel_verifies_the_next_kit_through_update(
    golden: GoldenKit, releases: Releases, tmp_path: Path
) -> None:
    """One root: the channel's root 2 moves the release (targets) key to a new one, and v1.1.0
    is signed by the new key. A buyer pinned to root 1 runs `update --root 1.root.json`: the
    kit's receipt is checked against the root python-tuf just walked to, not only root 1 (the
    kit itself carries no root/)."""
    pinned, keys = _root_for_channel(tmp_path, golden)
    new = keypair(tmp_path / "keys", "release-2")
    repo = tmp_path / "repo"
    _ok("channel", "init", "--repo", repo, "--root", pinned)
    stamps: list[str | Path] = [
        "--key",
        keys["snapshot"].private,
        "--key",
        keys["timestamp"].private,
    ]
    _ok("channel", "rotate", "--repo", repo, "--role", "targets", "--add-key", new.public,
        "--remove-key", golden.key.public, "--key", keys["root"].private,
        "--key", new.private, *stamps)  # fmt: skip
    kit = build_kit(tmp_path / "v110", golden.lock, new, sequence=2, version="1.1.0")
    archive = tmp_path / "kimi-k3-b300x8-1.1.0.kit.tar.gz"
    pack(kit, archive)
    _ok("publish", archive, "--channel", "stable", "--repo", repo, "--trust", new.public,
        "--key", new.private, *stamps)  # fmt: skip
    into, state = tmp_path / "kits", tmp_path / "state"
    with serve(repo) as url:
        out = _ok(
            "update", "--channel", "stable", "--from", url, "--root", pinned,
            "--into", into, "--state-dir", state, "--json",
        )  # fmt: skip
    installed = json.loads(out)["installed"]
    # The node remembers root 2: the same pin verifies the kit offline now, and a kit signed
    # by the key root 2 removed no longer does.
    _ok("verify", installed, "--root", pinned, "--state-dir", state)
    done = run_k3kit("verify", golden.kit, "--root", pinned, "--state-dir", state, "--json")
    assert done.returncode == 1 and "RECEIPT_UNTRUSTED_KEY" in done.stdout, done.stdout


def test_the_library_starts_a_channel_from_a_root_as_the_cli_does(
    golden: GoldenKit, tmp_path: Path
) -> None:
    import k3kit

    pinned, _keys = _root_for_channel(tmp_path, golden)
    first = k3kit.init_channel_from_root(tmp_path / "repo", [pinned])
    assert first.read_bytes() == pinned.read_bytes()
    with pytest.raises(InputError) as again:  # a channel already: refused, nothing replaced
        k3kit.init_channel_from_root(tmp_path / "repo", [pinned])
    assert again.value.code == "CHANNEL_REPO_INVALID"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("version", True),  # a bool is an int to Python and to python-tuf
        ("version", 0),
        ("spec_version", "2.0.0"),
        ("spec_version", "1.0.\u0663"),  # python-tuf's isdigit() takes Arabic-Indic digits
        ("expires", "2099-01-01T00:00:00.5Z"),  # one instant, one spelling
        ("expires", "2099-01-01T00:00:00+00:00"),
        ("consistent_snapshot", "yes"),
        ("x-k3kit-note", "hello"),  # an unknown field: k3kit's own start x-k3kit- and are known
        ("x-k3kit-min-sequence", {"kimi-k3-b300x8/stable": -1}),
        ("x-k3kit-key-validity", {"a" * 64: {}}),  # a window for a key the root does not carry
    ],
)
def test_a_root_field_python_tuf_reads_loosely_is_malformed(
    golden: GoldenKit, tmp_path: Path, field: str, value: object
) -> None:
    root_key = keypair(tmp_path, "root")
    signed = root_v1([root_key], [golden.key]).to_dict()
    signed[field] = value
    with pytest.raises(VerificationError) as refused:
        verify_root(raw_root(signed, [root_key]), trusted=None, source="forged")
    assert refused.value.code == "ROOT_MALFORMED", refused.value.message


def test_channel_rotate_keeps_the_k3kit_rules_of_the_root_it_rotates(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A channel started from a root chain with a key window and a floor: `channel rotate`
    writes root 4 that still carries the floor (a node pinned to root 1 refuses the kit below
    it) and drops the window of the key it removed (python-tuf forgot that key)."""
    pinned, keys = _root_for_channel(tmp_path, golden)
    new = keypair(tmp_path / "keys", "release-new")
    sign: list[str | Path] = ["--expires", FAR, "--sign-key", keys["root"].private]
    two, three = tmp_path / "2.root.json", tmp_path / "3.root.json"
    _ok("root", "add-key", pinned, "-o", two, "--key", new.public, "--not-before", FAR, *sign)
    _ok("root", "floor", two, "-o", three, "--min-sequence", "kimi-k3-b300x8/stable=2", *sign)
    repo = tmp_path / "repo"
    _ok("channel", "init", "--repo", repo, "--root", pinned, "--root", two, "--root", three)
    _ok("channel", "rotate", "--repo", repo, "--role", "targets", "--remove-key", new.public,
        "--key", keys["root"].private)  # fmt: skip
    four = json.loads((repo / "metadata" / "4.root.json").read_bytes())["signed"]
    assert four["x-k3kit-min-sequence"] == {"kimi-k3-b300x8/stable": 2}
    assert "x-k3kit-key-validity" not in four
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    meta = repo / "metadata"
    _ok("root", "attach", kit, *(meta / f"{v}.root.json" for v in (1, 2, 3, 4)))
    done = run_k3kit("verify", kit, "--root", pinned, "--state-dir", tmp_path / "s", "--json")
    assert done.returncode == 1 and "ROLLBACK" in done.stdout, done.stdout


def test_root_add_key_names_tuf_roles_by_k3kit_names(golden: GoldenKit, tmp_path: Path) -> None:
    root_key, online = keypair(tmp_path, "root"), keypair(tmp_path, "online")
    one = write_root(tmp_path / "1.root.json", root_v1([root_key], [golden.key]), [root_key])
    two = tmp_path / "2.root.json"
    _ok("root", "add-key", one, "-o", two, "--role", "timestamp", "--key", online.public,
        "--expires", FAR, "--sign-key", root_key.private)  # fmt: skip
    roles = json.loads(two.read_bytes())["signed"]["roles"]
    assert roles["timestamp"]["keyids"] == [kid(golden.key), kid(online)]
    assert roles["targets"]["keyids"] == [kid(golden.key)]  # "release" is targets, untouched
    done = run_k3kit("root", "add-key", two, "-o", tmp_path / "3.root.json", "--role",
                     "mirrors", "--key", online.public, "--expires", FAR)  # fmt: skip
    assert done.returncode == 2 and "mirrors" in done.stderr  # not a role: click refuses it
