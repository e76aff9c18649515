"""One front door: the API and the CLI give the same verdict or refusal for the same inputs.

Every policy lives in the library function both front doors call (docs/design.md, "one front
door"); this file holds it to that. The named attacks first, then one table over every verb:
each row is an input (a good kit, a tampered one, a wrong key, a token over plain http...), run
once through the real CLI with ``--json`` and once through :mod:`k3kit.api`, and the two verdict
codes and exit codes must be equal to each other and to the row's expectation.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from k3kit import api
from k3kit._canonical import dumps
from k3kit.archive import pack
from k3kit.audit import AuditReport
from k3kit.channel.repository import Expiries, renew_timestamp, utc_now
from k3kit.engines import Runtime
from k3kit.errors import InputError, K3kitError
from k3kit.hub import HfHub
from k3kit.node.verify import Report
from k3kit.preflight import NodeNotReady
from k3kit.publish.kit import build, sign
from k3kit.signing.keys import PublicKey, load_private, load_public
from k3kit.signing.schemes import signer_from_uri
from tests.channelkit import Channel, init_channel, publish, serve_until_exit
from tests.conftest import EXAMPLE, FIXED_TIME, REPO, GoldenKit, KeyFiles, run_k3kit
from tests.hubkit import make_served_kit
from tests.launchkit import FakeEngine, engine_env, make_fake_engine
from tests.testhub.server import TestHub
from tests.trustkit import keypair, root_v1, write_root

# Not loopback, so a token would cross the network in clear; nothing is ever sent there, because
# the refusal comes before any connection (``.invalid`` cannot resolve either, RFC 6761).
PLAIN_HTTP_HUB = "http://hub.example.invalid"
TOKEN = "hf_attacker_would_love_this"


def _cli_code(*args: str | Path) -> tuple[int, str]:
    proc = run_k3kit(*args, "--json", env={"K3KIT_TEST_TOKEN": TOKEN})
    assert "Traceback" not in proc.stderr and TOKEN not in proc.stderr + proc.stdout
    return proc.returncode, json.loads(proc.stdout)["error"]["code"]


def test_api_pin_hub_refuses_a_token_over_plain_http_like_the_cli(tmp_path: Path) -> None:
    cli = _cli_code(
        "pin",
        "org/model",
        "--revision",
        "main",
        "--endpoint",
        PLAIN_HTTP_HUB,
        "--token-env",
        "K3KIT_TEST_TOKEN",
        "-o",
        tmp_path / "lock.json",
    )
    with pytest.raises(InputError) as refused:
        api.pin_hub("org/model", "main", endpoint=PLAIN_HTTP_HUB, token=TOKEN)
    assert cli == (refused.value.exit_code, refused.value.code) == (3, "TOKEN_OVER_HTTP")
    assert TOKEN not in str(refused.value)
    assert not (tmp_path / "lock.json").exists()


def test_api_pull_weights_refuses_a_token_over_plain_http_like_the_cli(
    golden: GoldenKit, tmp_path: Path
) -> None:
    cli = _cli_code(
        "pull",
        golden.lock,
        "--dir",
        tmp_path / "cli",
        "--endpoint",
        PLAIN_HTTP_HUB,
        "--token-env",
        "K3KIT_TEST_TOKEN",
    )
    with pytest.raises(InputError) as refused:
        api.pull_weights(golden.lock, tmp_path / "api", endpoint=PLAIN_HTTP_HUB, token=TOKEN)
    assert cli == (refused.value.exit_code, refused.value.code) == (3, "TOKEN_OVER_HTTP")
    assert not (tmp_path / "cli").exists() and not (tmp_path / "api").exists()


def test_a_hub_client_built_by_hand_refuses_a_token_over_plain_http() -> None:
    """The class, not the instance: whoever builds the client, a token never leaves in clear."""
    with pytest.raises(InputError) as refused:
        HfHub(PLAIN_HTTP_HUB, TOKEN)
    assert refused.value.code == "TOKEN_OVER_HTTP"
    assert repr(HfHub(PLAIN_HTTP_HUB)).endswith("token=none)")  # no token: plain http is allowed
    assert HfHub("http://127.0.0.1:9", TOKEN).endpoint == "http://127.0.0.1:9"  # loopback stand-in


# -- the table: every verb, the same input through both doors ------------------------------------


@dataclass(frozen=True)
class Side:
    """One door's private folder and the genuine artefacts; each door gets its own copies, so
    nothing one writes (an archive, an install, a rollback record) is seen by the other."""

    root: Path
    golden: GoldenKit
    other: KeyFiles
    fake: FakeEngine

    def kit(self) -> Path:
        dest = self.root / "kit"
        if not dest.exists():
            shutil.copytree(self.golden.kit, dest)
        return dest

    def tampered_kit(self) -> Path:
        kit = self.kit()
        (kit / "README.md").write_text("changed after signing\n")
        return kit

    def kit_signed_with_a_plain_http_hub(self) -> Path:
        """A genuine kit whose signed lock says its weights are on a plain-http hub."""
        doc = json.loads(self.golden.lock.read_bytes())
        doc["source"].update(kind="hub", endpoint=PLAIN_HTTP_HUB, sha256_source="hub-lfs")
        lock = self.out("http.lock.json")
        lock.write_bytes(dumps(doc))
        kit = self.out("kit-http")
        build(EXAMPLE / "package.toml", lock, kit)
        key = load_private(self.golden.key.private, None)
        sign(kit, key, EXAMPLE / "claims.toml", issued_at=FIXED_TIME)
        return kit

    def out(self, name: str) -> Path:
        return self.root / name

    def archive(self) -> Path:
        """The genuine kit as the ``.kit.tar.gz`` that ``publish`` and ``push`` take."""
        dest = self.out("kimi-k3-b300x8-1.0.0.kit.tar.gz")
        if not dest.exists():
            pack(self.golden.kit, dest)
        return dest

    def channel(self) -> Channel:
        """A channel made by ``k3kit channel init`` (a fresh key per role), nothing published."""
        return _channel_in(self.out("chan"))

    def signers(self) -> list[Any]:
        """The channel's online signers (targets, snapshot, timestamp), as ``--key`` gives them."""
        keys = self.channel().keys
        return [signer_from_uri(str(keys[r].private)) for r in ("targets", "snapshot", "timestamp")]

    def frozen_channel_url(self) -> str:
        """A channel with the genuine kit published, whose timestamp (genuinely signed) expired
        a day ago, served from 127.0.0.1 as a mirror that stopped following serves it: a freeze."""
        stamp = self.out("frozen")
        if not stamp.exists():
            chan = self.published_channel()
            renew_timestamp(
                chan.repo,
                [signer_from_uri(str(chan.keys["timestamp"].private))],
                now=utc_now() - timedelta(days=2),
                expires=Expiries(timestamp=timedelta(hours=1)),
            )
            stamp.write_text(serve_until_exit(chan.repo))
        return stamp.read_text()

    def published_channel(self) -> Channel:
        """The channel with the genuine kit published by ``k3kit publish --channel``."""
        chan = self.channel()
        if not (chan.repo / "metadata" / "timestamp.json").exists():
            done = publish(chan, self.archive(), self.golden.key.public)
            assert done.returncode == 0, done.stderr
        return chan

    def state(self) -> Path:
        return self.root / "state"

    def keys(self) -> list[PublicKey]:
        return [load_public(self.golden.key.public)]

    def wrong_keys(self) -> list[PublicKey]:
        return [load_public(self.other.public)]

    def commit(self) -> str:
        return self.golden.snapshot.name


@dataclass(frozen=True)
class Row:
    """One input: the CLI argv (``--json`` is appended) and the API call for it, and the verdict
    (exit code, code) both must give; ``"OK"`` is a pass."""

    cli: Callable[[Side], list[str | Path]]
    api: Callable[[Side], object]
    expect: tuple[int, str]


@functools.cache
def _channel_in(folder: Path) -> Channel:
    """One channel per folder (each door's folder is its own), made on first use."""
    return init_channel(folder)


def _key(s: Side, role: str) -> list[str | Path]:
    return ["--key", s.channel().keys[role].private]


def _init_argv(chan: Channel) -> list[str | Path]:
    argv: list[str | Path] = ["channel", "init", "--repo", chan.repo, "--key"]
    argv.append(chan.keys["root"].private)
    for role, key in chan.keys.items():
        argv += [f"--{role}-key", key.public]
    return argv


def _publish_argv(s: Side, trust: Path) -> list[str | Path]:
    chan = s.channel()
    return ["publish", s.archive(), "--channel", "stable", "--repo", chan.repo, "--trust", trust,
            *chan.online_keys()]  # fmt: skip


def _update_argv(s: Side, url: str, *extra: str | Path) -> list[str | Path]:
    return ["update", "--channel", "stable", "--from", url, "--channel-root", s.channel().root,
            "--into", s.out("i"), "--trust", s.golden.key.public, "--state-dir", s.state(),
            *extra]  # fmt: skip


def _update(s: Side, url: str, **kw: Any) -> object:
    return api.update_from_channel(
        url, "stable", s.channel().root, s.out("i"), s.keys(), state_dir=s.state(), **kw
    )


def _launch_argv(s: Side, kit: Path, *extra: str | Path) -> list[str | Path]:
    return [
        "launch",
        kit,
        "--no-preflight",
        "--trust",
        s.golden.key.public,
        "--weights",
        s.golden.snapshot,
        "--state-dir",
        s.state(),
        "--dry-run",
        *extra,
    ]


def _plan(s: Side, kit: Path, profile: str, **kw: Any) -> object:
    return api.plan_launch(
        kit,
        s.keys(),
        profile=profile,
        weights=s.golden.snapshot,
        runtime_dir=s.state() / "launch",
        base_env=engine_env(s.fake),
        **kw,
    )


MULTI = ("--profile", "batch", "--topology", "multi-node-8x8gpu")

#: Reachable by nobody (RFC 6761): a refusal in these rows comes before any connection, and a
#: verb that did not refuse would fail with a network error, not with the row's code.
OFF_MACHINE_CHANNEL = "http://channel.example.invalid/k3"
OFF_MACHINE_REGISTRY = "oci://registry.example.invalid/kimi/k3"

ROWS: dict[str, Row] = {
    # verify
    "verify_good_kit": Row(
        lambda s: ["verify", s.kit(), "--trust", s.golden.key.public],
        lambda s: api.verify_kit(s.kit(), s.keys()),
        (0, "OK"),
    ),
    "verify_tampered_kit": Row(
        lambda s: ["verify", s.tampered_kit(), "--trust", s.golden.key.public],
        lambda s: api.verify_kit(s.tampered_kit(), s.keys()),
        (1, "KIT_FILE_CHANGED"),
    ),
    "verify_wrong_key": Row(
        lambda s: ["verify", s.kit(), "--trust", s.other.public],
        lambda s: api.verify_kit(s.kit(), s.wrong_keys()),
        (1, "RECEIPT_UNTRUSTED_KEY"),
    ),
    "verify_same_key_twice": Row(
        lambda s: [
            "verify",
            s.kit(),
            "--trust",
            s.golden.key.public,
            "--trust",
            s.golden.key.public,
        ],
        lambda s: api.verify_kit(s.kit(), api.trusted_keys([s.golden.key.public] * 2)),
        (3, "TRUST_DUPLICATE_KEY"),
    ),
    "verify_buyer_receipt_that_is_not_there": Row(
        lambda s: [
            "verify",
            s.kit(),
            "--trust",
            s.golden.key.public,
            "--buyer-receipt",
            s.out("b.json"),
        ],
        lambda s: api.verify_kit(s.kit(), s.keys(), buyer_receipt=s.out("b.json")),
        (1, "BUYER_RECEIPT_MISSING"),
    ),
    "verify_missing_kit": Row(
        lambda s: ["verify", s.out("nope"), "--trust", s.golden.key.public],
        lambda s: api.verify_kit(s.out("nope"), s.keys()),
        (3, "KIT_NOT_FOUND"),
    ),
    # install
    "install_good_kit": Row(
        lambda s: ["install", s.kit(), "--trust", s.golden.key.public, "--into", s.out("i")],
        lambda s: api.install_kit(s.kit(), s.keys(), s.out("i")),
        (0, "OK"),
    ),
    "install_tampered_kit": Row(
        lambda s: [
            "install",
            s.tampered_kit(),
            "--trust",
            s.golden.key.public,
            "--into",
            s.out("i"),
        ],
        lambda s: api.install_kit(s.tampered_kit(), s.keys(), s.out("i")),
        (1, "KIT_FILE_CHANGED"),
    ),
    # pack
    "pack_good_kit": Row(
        lambda s: ["pack", s.kit(), "-o", s.out("k.kit.tar.gz"), "--trust", s.golden.key.public],
        lambda s: api.pack_kit(s.kit(), s.out("k.kit.tar.gz"), trusted=s.keys()),
        (0, "OK"),
    ),
    "pack_wrong_key": Row(
        lambda s: ["pack", s.kit(), "-o", s.out("k.kit.tar.gz"), "--trust", s.other.public],
        lambda s: api.pack_kit(s.kit(), s.out("k.kit.tar.gz"), trusted=s.wrong_keys()),
        (1, "RECEIPT_UNTRUSTED_KEY"),
    ),
    "pack_tampered_kit": Row(
        lambda s: ["pack", s.tampered_kit(), "-o", s.out("k.kit.tar.gz")],
        lambda s: api.pack_kit(s.tampered_kit(), s.out("k.kit.tar.gz")),
        (1, "KIT_FILE_CHANGED"),
    ),
    "pack_unsigned_with_a_key": Row(
        lambda s: ["pack", s.kit(), "--unsigned", "--trust", s.golden.key.public],
        lambda s: api.pack_kit(s.kit(), unsigned=True, trusted=s.keys()),
        (3, "PACK_OPTIONS"),
    ),
    # audit
    "audit_genuine_kit_with_an_unsupported_claim": Row(
        lambda s: ["audit", s.kit(), "--trust", s.golden.key.public],
        lambda s: api.audit_kit(s.kit(), s.keys()),
        (1, "R16"),
    ),
    "audit_wrong_key": Row(
        lambda s: ["audit", s.kit(), "--trust", s.other.public],
        lambda s: api.audit_kit(s.kit(), s.wrong_keys()),
        (1, "R01"),
    ),
    "audit_a_lock": Row(
        lambda s: ["audit", s.golden.lock, "--trust", s.golden.key.public],
        lambda s: api.audit_kit(s.golden.lock, s.keys()),
        (3, "KIT_NOT_RECOGNISED"),
    ),
    # pull (no byte is fetched in these rows; a real pull is test_pull_from_a_stand_in_hub)
    "pull_token_over_plain_http": Row(
        lambda s: [
            "pull",
            s.golden.lock,
            "--dir",
            s.out("w"),
            "--endpoint",
            PLAIN_HTTP_HUB,
            "--token-env",
            "K3KIT_TEST_TOKEN",
        ],
        lambda s: api.pull_weights(s.golden.lock, s.out("w"), endpoint=PLAIN_HTTP_HUB, token=TOKEN),
        (3, "TOKEN_OVER_HTTP"),
    ),
    "pull_endpoint_with_credentials": Row(
        lambda s: [
            "pull",
            s.golden.lock,
            "--dir",
            s.out("w"),
            "--endpoint",
            "https://user:pw@hub.example.invalid",
        ],
        lambda s: api.pull_weights(
            s.golden.lock, s.out("w"), endpoint="https://user:pw@hub.example.invalid"
        ),
        (3, "BAD_ENDPOINT"),
    ),
    "pull_wrong_key": Row(
        lambda s: ["pull", s.kit(), "--dir", s.out("w"), "--trust", s.other.public],
        lambda s: api.pull_weights(s.kit(), s.out("w"), trusted=s.wrong_keys()),
        (1, "KIT_NOT_VERIFIED"),
    ),
    "pull_token_to_the_plain_http_hub_a_signed_lock_names": Row(
        lambda s: [
            "pull",
            s.kit_signed_with_a_plain_http_hub(),
            "--dir",
            s.out("w"),
            "--trust",
            s.golden.key.public,
            "--token-env",
            "K3KIT_TEST_TOKEN",
        ],
        lambda s: api.pull_weights(
            s.kit_signed_with_a_plain_http_hub(), s.out("w"), trusted=s.keys(), token=TOKEN
        ),
        (3, "TOKEN_OVER_HTTP"),
    ),
    "pull_bare_lock_with_a_key": Row(
        lambda s: ["pull", s.golden.lock, "--dir", s.out("w"), "--trust", s.golden.key.public],
        lambda s: api.pull_weights(s.golden.lock, s.out("w"), trusted=s.keys()),
        (3, "TRUST_NEEDS_KIT"),
    ),
    # pin
    "pin_token_over_plain_http": Row(
        lambda s: [
            "pin",
            REPO,
            "--revision",
            "main",
            "--endpoint",
            PLAIN_HTTP_HUB,
            "--token-env",
            "K3KIT_TEST_TOKEN",
            "-o",
            s.out("lock.json"),
        ],
        lambda s: api.pin_hub(REPO, "main", endpoint=PLAIN_HTTP_HUB, token=TOKEN),
        (3, "TOKEN_OVER_HTTP"),
    ),
    "pin_endpoint_with_a_query": Row(
        lambda s: [
            "pin",
            REPO,
            "--revision",
            "main",
            "--endpoint",
            "https://hub.example.invalid/?x=1",
            "-o",
            s.out("lock.json"),
        ],
        lambda s: api.pin_hub(REPO, "main", endpoint="https://hub.example.invalid/?x=1"),
        (3, "BAD_ENDPOINT"),
    ),
    "pin_local_good_copy": Row(
        lambda s: [
            "pin",
            "--local",
            s.golden.snapshot,
            "--repo",
            REPO,
            "--revision",
            s.commit(),
            "-o",
            s.out("lock.json"),
        ],
        lambda s: api.pin_local(
            s.golden.snapshot, repo=REPO, revision=s.commit(), output=s.out("lock.json")
        ),
        (0, "OK"),
    ),
    "pin_repo_id_that_climbs_out": Row(
        lambda s: ["pin", "../../api/x", "--revision", "main", "-o", s.out("lock.json")],
        lambda s: api.pin_hub("../../api/x", "main"),
        (3, "BAD_REPO_ID"),
    ),
    "pin_local_over_an_existing_lock": Row(
        lambda s: [
            "pin",
            "--local",
            s.golden.snapshot,
            "--repo",
            REPO,
            "--revision",
            s.commit(),
            "-o",
            _a_file(s),
        ],
        lambda s: api.pin_local(
            s.golden.snapshot, repo=REPO, revision=s.commit(), output=_a_file(s)
        ),
        (3, "OUTPUT_EXISTS"),
    ),
    "pin_local_branch_not_commit": Row(
        lambda s: [
            "pin",
            "--local",
            s.golden.snapshot,
            "--repo",
            REPO,
            "--revision",
            "main",
            "-o",
            s.out("lock.json"),
        ],
        lambda s: api.pin_local(s.golden.snapshot, repo=REPO, revision="main"),
        (3, "REVISION_NOT_COMMIT"),
    ),
    # build
    "build_good_package": Row(
        lambda s: [
            "build",
            EXAMPLE / "package.toml",
            "--lock",
            s.golden.lock,
            "-o",
            s.out("b"),
            "--ssh-signer",
            s.golden.key.public,
        ],
        lambda s: api.build_kit(
            EXAMPLE / "package.toml", s.golden.lock, s.out("b"), ssh_signer=s.golden.key.public
        ),
        (0, "OK"),
    ),
    "build_over_an_existing_file": Row(
        lambda s: [
            "build",
            EXAMPLE / "package.toml",
            "--lock",
            s.golden.lock,
            "-o",
            _a_file(s),
        ],
        lambda s: api.build_kit(EXAMPLE / "package.toml", s.golden.lock, _a_file(s)),
        (3, "OUTPUT_EXISTS"),
    ),
    "build_principal_with_a_newline": Row(
        lambda s: [
            "build",
            EXAMPLE / "package.toml",
            "--lock",
            s.golden.lock,
            "-o",
            s.out("b"),
            "--ssh-signer",
            s.golden.key.public,
            "--principal",
            "a\nb",
        ],
        lambda s: api.build_kit(
            EXAMPLE / "package.toml",
            s.golden.lock,
            s.out("b"),
            ssh_signer=s.golden.key.public,
            principal="a\nb",
        ),
        (3, "BAD_INPUT"),
    ),
    # sign
    "sign_over_an_existing_receipt": Row(
        lambda s: [
            "sign",
            s.kit(),
            "--key",
            s.golden.key.private,
            "--claims",
            EXAMPLE / "claims.toml",
        ],
        lambda s: api.sign_kit(
            s.kit(), load_private(s.golden.key.private, None), EXAMPLE / "claims.toml"
        ),
        (3, "OUTPUT_EXISTS"),
    ),
    # publish --channel: the channel vouches only for kits that verify against the publisher
    "publish_good_archive": Row(
        lambda s: _publish_argv(s, s.golden.key.public),
        lambda s: api.publish_to_channel(
            s.archive(), "stable", s.channel().repo, s.keys(), s.signers()
        ),
        (0, "OK"),
    ),
    "publish_archive_the_trusted_key_did_not_sign": Row(
        lambda s: _publish_argv(s, s.other.public),
        lambda s: api.publish_to_channel(
            s.archive(), "stable", s.channel().repo, s.wrong_keys(), s.signers()
        ),
        (1, "CHANNEL_KIT_UNVERIFIED"),
    ),
    # update
    "update_from_plain_http_off_this_machine": Row(
        lambda s: _update_argv(s, OFF_MACHINE_CHANNEL),
        lambda s: _update(s, OFF_MACHINE_CHANNEL),
        (3, "CHANNEL_URL_REFUSED"),
    ),
    "update_from_a_frozen_channel": Row(
        lambda s: _update_argv(s, s.frozen_channel_url()),
        lambda s: _update(s, s.frozen_channel_url()),
        (1, "CHANNEL_FROZEN"),
    ),
    "update_with_a_buyer_receipt_but_no_licence": Row(
        lambda s: _update_argv(s, "https://channel.example.invalid", "--buyer-receipt", _a_file(s)),
        lambda s: _update(s, "https://channel.example.invalid", buyer_receipt=_a_file(s)),
        (2, "USAGE"),
    ),
    # channel init | timestamp | rotate
    "channel_init_over_an_existing_channel": Row(
        lambda s: _init_argv(s.channel()),
        lambda s: api.init_channel(
            s.channel().repo,
            {r: [load_public(k.public)] for r, k in s.channel().keys.items()},
            [signer_from_uri(str(s.channel().keys["root"].private))],
        ),
        (3, "CHANNEL_REPO_INVALID"),
    ),
    "channel_timestamp_with_nothing_published": Row(
        lambda s: ["channel", "timestamp", "--repo", s.channel().repo, *_key(s, "timestamp")],
        lambda s: api.renew_channel_timestamp(s.channel().repo, s.signers()[-1:]),
        (3, "CHANNEL_REPO_INVALID"),
    ),
    "channel_timestamp_renewed": Row(
        lambda s: [
            "channel",
            "timestamp",
            "--repo",
            s.published_channel().repo,
            *_key(s, "timestamp"),
        ],
        lambda s: api.renew_channel_timestamp(s.published_channel().repo, s.signers()[-1:]),
        (0, "OK"),
    ),
    "channel_rotate_that_leaves_targets_without_a_key": Row(
        lambda s: [
            "channel",
            "rotate",
            "--repo",
            s.published_channel().repo,
            "--role",
            "targets",
            "--remove-key",
            s.channel().keys["targets"].public,
            *_key(s, "root"),
        ],
        lambda s: api.rotate_channel_keys(
            s.published_channel().repo,
            "targets",
            [signer_from_uri(str(s.channel().keys["root"].private))],
            remove=[load_public(s.channel().keys["targets"].public)],
        ),
        (3, "CHANNEL_ROTATION_INVALID"),
    ),
    # push (verified before a byte is sent: nothing here reaches a registry)
    "push_kit_the_trusted_key_did_not_sign": Row(
        lambda s: ["push", s.archive(), f"{OFF_MACHINE_REGISTRY}:1.0.0", "--trust", s.other.public],
        lambda s: api.push_kit(s.archive(), f"{OFF_MACHINE_REGISTRY}:1.0.0", s.wrong_keys()),
        (1, "RECEIPT_UNTRUSTED_KEY"),
    ),
    "push_to_a_digest_not_a_tag": Row(
        lambda s: [
            "push",
            s.archive(),
            f"{OFF_MACHINE_REGISTRY}@sha256:{'a' * 64}",
            "--trust",
            s.golden.key.public,
        ],
        lambda s: api.push_kit(s.archive(), f"{OFF_MACHINE_REGISTRY}@sha256:{'a' * 64}", s.keys()),
        (3, "OCI_REF_INVALID"),
    ),
    "install_from_an_oci_tag": Row(
        lambda s: [
            "install",
            f"{OFF_MACHINE_REGISTRY}:1.0.0",
            "--trust",
            s.golden.key.public,
            "--into",
            s.out("i"),
        ],
        lambda s: api.install_kit_from_registry(
            f"{OFF_MACHINE_REGISTRY}:1.0.0", s.keys(), s.out("i")
        ),
        (3, "OCI_TAG_NOT_PINNED"),
    ),
    # launch (a stand-in engine; this machine has no GPU, so no node check: see below)
    "launch_good_kit": Row(
        lambda s: _launch_argv(s, s.kit(), "--profile", "interactive"),
        lambda s: _plan(s, s.kit(), "interactive"),
        (0, "OK"),
    ),
    "launch_tampered_kit": Row(
        lambda s: _launch_argv(s, s.tampered_kit(), "--profile", "interactive"),
        lambda s: _plan(s, s.tampered_kit(), "interactive"),
        (1, "KIT_FILE_CHANGED"),
    ),
    "launch_multi_node_without_runtime_values": Row(
        lambda s: _launch_argv(s, s.kit(), *MULTI),
        lambda s: _plan(s, s.kit(), "batch", topology=MULTI[3]),
        (3, "RUNTIME_VALUES_MISSING"),
    ),
    "launch_multi_node_rank_2": Row(
        lambda s: _launch_argv(s, s.kit(), *MULTI, "--node-rank", "2", "--leader", "10.0.0.1"),
        lambda s: _plan(s, s.kit(), "batch", topology=MULTI[3], runtime=Runtime(2, "10.0.0.1")),
        (0, "OK"),
    ),
    "launch_multi_node_rank_out_of_range": Row(
        lambda s: _launch_argv(s, s.kit(), *MULTI, "--node-rank", "8", "--leader", "h"),
        lambda s: _plan(s, s.kit(), "batch", topology=MULTI[3], runtime=Runtime(8, "h")),
        (3, "RUNTIME_VALUES_INVALID"),
    ),
}


def _a_file(s: Side) -> Path:
    path = s.out("taken")
    path.write_text("someone else's file\n")
    return path


def _first_failed(checks: list[dict[str, Any]]) -> str:
    return next(str(c["code"]) for c in checks if c["status"] == "failed")


def cli_verdict(proc: subprocess.CompletedProcess[str]) -> tuple[int, str]:
    """The CLI's verdict from its ``--json`` output: the error object's code, the first failed
    check's, the audit's error rules, or "OK"."""
    assert "Traceback" not in proc.stderr and proc.returncode != 70, proc.stderr
    doc = json.loads(proc.stdout)
    if "error" in doc:
        return proc.returncode, doc["error"]["code"]
    if "findings" in doc:
        rules = sorted({f["rule"] for f in doc["findings"] if f["severity"] == "error"})
        return proc.returncode, ",".join(rules) or "OK"
    if doc.get("ok") is False and "checks" in doc:
        return proc.returncode, _first_failed(doc["checks"])
    # a summary (pack, pin, build) has no "ok": it is printed only for a result
    return proc.returncode, "NOT_OK" if doc.get("ok") is False else "OK"


def api_verdict(call: Callable[[], object]) -> tuple[int, str]:
    """The API's verdict for the same input: the exception's code and exit code, or the result's
    own (an audit's error rules; a report's first failed check), or "OK"."""
    try:
        result = call()
    except K3kitError as exc:
        return int(exc.exit_code), exc.code
    if isinstance(result, AuditReport):
        rules = sorted({f.rule for f in result.at_or_above("error")})
        return (1 if rules else 0), ",".join(rules) or "OK"
    if isinstance(result, Report) and not result.ok:
        return 1, _first_failed([c.as_json() for c in result.checks])
    return 0, "OK"


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> FakeEngine:
    return make_fake_engine(tmp_path_factory.mktemp("engine"))


@pytest.mark.parametrize("name", sorted(ROWS))
def test_api_and_cli_agree(
    name: str, golden: GoldenKit, other_key: KeyFiles, fake: FakeEngine, tmp_path: Path
) -> None:
    row = ROWS[name]
    cli_side = Side(tmp_path / "cli", golden, other_key, fake)
    api_side = Side(tmp_path / "api", golden, other_key, fake)
    cli_side.root.mkdir()
    api_side.root.mkdir()
    env = {**engine_env(fake), "K3KIT_TEST_TOKEN": TOKEN}
    proc = run_k3kit(*row.cli(cli_side), "--json", cwd=cli_side.root, env=env)
    assert TOKEN not in proc.stdout + proc.stderr
    by_cli = cli_verdict(proc)
    by_api = api_verdict(lambda: row.api(api_side))
    assert by_cli == by_api == row.expect, f"{name}: CLI {by_cli}, API {by_api}; {proc.stderr}"


def test_pull_from_a_stand_in_hub_agrees(
    golden: GoldenKit, signing_key: KeyFiles, tmp_path: Path
) -> None:
    """The one row that moves bytes: a real HTTP hub on 127.0.0.1, a kit pinned from it."""
    with TestHub() as hub:
        served = make_served_kit(hub, tmp_path, signing_key)
        proc = run_k3kit(
            "pull",
            served.kit,
            "--dir",
            tmp_path / "cli",
            "--layout",
            "plain",
            "--trust",
            signing_key.public,
            "--endpoint",
            hub.url,
            "--json",
        )
        by_api = api.pull_weights(
            served.kit,
            tmp_path / "api",
            trusted=[load_public(signing_key.public)],
            endpoint=hub.url,
            layout="plain",
            timeout=5.0,
        )
    assert cli_verdict(proc) == (by_api.exit_code, "OK" if by_api.ok else "NOT_OK") == (0, "OK")
    assert sorted(p.name for p in (tmp_path / "cli").iterdir()) == sorted(
        p.name for p in (tmp_path / "api").iterdir()
    )
    assert hub.errors == []


def test_launch_runs_the_node_check_through_both_doors(
    golden: GoldenKit, other_key: KeyFiles, fake: FakeEngine, tmp_path: Path
) -> None:
    """``preflight=True`` is the CLI's default node check. No node running these tests has the
    kit's eight B300 GPUs (nor, here, any GPU), so both refuse before a weight is hashed."""
    cli_side, api_side = (Side(tmp_path / n, golden, other_key, fake) for n in ("cli", "api"))
    argv = _launch_argv(cli_side, cli_side.kit(), "--profile", "interactive")
    argv.remove("--no-preflight")
    proc = run_k3kit(*argv, "--json", env=engine_env(fake))
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["launched"] is False and not doc["preflight"]["ok"]
    with pytest.raises(NodeNotReady) as refused:
        _plan(api_side, api_side.kit(), "interactive", preflight=True)
    assert refused.value.exit_code == 1 and refused.value.code == "NODE_NOT_READY"
    assert _steady(refused.value.report.as_json()) == _steady({**doc["preflight"], "source": ANY})
    assert not fake.log.exists()  # neither door started the engine


def _steady(report: dict[str, Any]) -> dict[str, Any]:
    """The report without the free disk space it measured: a parallel suite writes and deletes
    files between the two doors' checks, so that one figure moves (73.6 GiB, then 73.5 GiB in a
    CI run); its name, status and requirement must still agree."""
    checks = [
        {**check, "actual": ANY} if check["name"] == "os.disk" else check
        for check in report["checks"]
    ]
    return {**report, "checks": checks}


def test_every_signature_checking_verb_takes_a_root_of_trust(
    golden: GoldenKit, other_key: KeyFiles, tmp_path: Path
) -> None:
    """One ``TrustSource``: the root whose release role is the publisher's key gives the verdict
    the key gives, in audit, pack and pull too; a root that trusts another key is refused."""
    root_key = keypair(tmp_path, "root")
    good = write_root(tmp_path / "good.root.json", root_v1([root_key], [golden.key]), [root_key])
    bad = write_root(tmp_path / "bad.root.json", root_v1([root_key], [other_key]), [root_key])
    anchor, rollback = api.trust_root(good, state_dir=tmp_path / "state")
    stranger, _ = api.trust_root(bad)
    keys = api.trusted_keys([golden.key.public])
    cli = run_k3kit("verify", golden.kit, "--root", good, "--state-dir", tmp_path / "s", "--json")
    assert (
        cli_verdict(cli)
        == api_verdict(lambda: api.verify_kit(golden.kit, anchor, rollback=rollback))
        == (0, "OK")
    )
    assert api_verdict(lambda: api.audit_kit(golden.kit, anchor)) == api_verdict(
        lambda: api.audit_kit(golden.kit, keys)
    )
    assert api_verdict(lambda: api.audit_kit(golden.kit, stranger))[1].startswith("R01")
    packed_ok = api.pack_kit(
        golden.kit, tmp_path / "k.kit.tar.gz", trusted=anchor, rollback=rollback
    )
    assert packed_ok.signed
    with pytest.raises(K3kitError) as packed:
        api.pack_kit(golden.kit, tmp_path / "x.kit.tar.gz", trusted=stranger)
    assert packed.value.code == "RECEIPT_UNTRUSTED_KEY"
    # pull: verified through the root, then refused by the hub policy (nothing is fetched)
    with pytest.raises(InputError) as pulled:
        api.pull_weights(
            golden.kit,
            tmp_path / "w",
            trusted=anchor,
            rollback=rollback,
            endpoint=PLAIN_HTTP_HUB,
            token=TOKEN,
        )
    assert pulled.value.code == "TOKEN_OVER_HTTP"
    with pytest.raises(K3kitError) as unverified:
        api.pull_weights(golden.kit, tmp_path / "w", trusted=stranger)
    assert unverified.value.code == "KIT_NOT_VERIFIED"
    assert not (tmp_path / "w").exists() and not (tmp_path / "x.kit.tar.gz").exists()


def test_a_year_long_channel_timestamp_is_refused_through_both_doors(
    golden: GoldenKit, other_key: KeyFiles, fake: FakeEngine, tmp_path: Path
) -> None:
    """A publisher (or a script with their keys) asks for a timestamp valid for a year, so that a
    mirror which stops following would go unnoticed for a year. ``--timestamp-hours`` refuses it
    as a usage error (exit 2, click's range); the API refuses the same lifetime with the library
    rule both doors share (``BAD_INPUT``); neither writes a new timestamp."""
    cli_side, api_side = (Side(tmp_path / n, golden, other_key, fake) for n in ("cli", "api"))
    for side in (cli_side, api_side):
        side.root.mkdir()
    chan = cli_side.published_channel()
    stamp = chan.repo / "metadata" / "timestamp.json"
    before = stamp.read_bytes()
    argv = ["channel", "timestamp", "--repo", chan.repo, *_key(cli_side, "timestamp")]
    proc = run_k3kit(*argv, "--timestamp-hours", str(24 * 365), "--json")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    repo = api_side.published_channel().repo
    api_before = (repo / "metadata" / "timestamp.json").read_bytes()
    with pytest.raises(InputError) as refused:
        api.renew_channel_timestamp(
            repo, api_side.signers()[-1:], timestamp_lifetime=timedelta(days=365)
        )
    assert refused.value.code == "BAD_INPUT" and refused.value.exit_code == 3
    assert stamp.read_bytes() == before
    assert (repo / "metadata" / "timestamp.json").read_bytes() == api_before
    done = api.renew_channel_timestamp(repo, api_side.signers()[-1:])  # the default is in range
    assert done >= 1 and (repo / "metadata" / "timestamp.json").read_bytes() != api_before
