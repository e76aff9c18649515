"""Attacks on where a hub token goes: a mirror named over plain http, by the buyer's own
``--endpoint`` or by the endpoint a signed lock records. Any non-empty variable stands for the
token (``--token-env PATH``); nothing is ever sent, because the refusal comes before a connection
(``.invalid`` cannot resolve either). The same inputs through ``k3kit.pin_hub`` and
``k3kit.pull_weights`` are refused with the same code (tests/test_api_cli_parity.py)."""

from __future__ import annotations

import json

from k3kit._canonical import dumps
from k3kit.publish.kit import build, sign
from k3kit.signing.keys import load_private
from tests.adversarial.corpus import Argv, Workbench, attack
from tests.conftest import EXAMPLE, FIXED_TIME, REPO

MIRROR = "http://hub.example.invalid"


@attack("TOKEN_OVER_HTTP", exit_code=3)
def pull_token_sent_to_a_plain_http_mirror(w: Workbench) -> Argv:
    return [
        "pull",
        w.golden.lock,
        "--dir",
        w.root / "w",
        "--endpoint",
        MIRROR,
        "--token-env",
        "PATH",
    ]


@attack("TOKEN_OVER_HTTP", exit_code=3)
def pin_token_sent_to_a_plain_http_mirror(w: Workbench) -> Argv:
    return [
        "pin",
        REPO,
        "--revision",
        "main",
        "--endpoint",
        MIRROR,
        "--token-env",
        "PATH",
        "-o",
        w.root / "lock.json",
    ]


@attack("TOKEN_OVER_HTTP", exit_code=3)
def pull_token_sent_where_a_signed_lock_says_http(w: Workbench) -> Argv:
    """The kit verifies, and its signed lock names a plain-http hub: trusted to say where the
    weights are, not to make the buyer's token cross the network in clear."""
    doc = json.loads(w.golden.lock.read_bytes())
    doc["source"].update(kind="hub", endpoint=MIRROR, sha256_source="hub-lfs+local-hash")
    lock = w.root / "weights.lock.json"
    lock.write_bytes(dumps(doc))
    kit = w.root / "kit-http"
    build(EXAMPLE / "package.toml", lock, kit)
    sign(
        kit, load_private(w.golden.key.private, None), EXAMPLE / "claims.toml", issued_at=FIXED_TIME
    )
    return ["pull", kit, "--dir", w.root / "w", "--trust", w.trust, "--token-env", "PATH"]
