"""Every root.json signature a real writer makes passes the one-spelling rule.

k3kit reads a root signature only as 128 lower-case hex digits (signing/trust/tufroot.py,
``_strict``). These tests hold the writers to it: python-tuf signing with securesystemslib's own
``CryptoSigner`` (what a publisher using python-tuf's tools writes) and k3kit's own ``sign_root``,
each verified in-process by k3kit's reader. Keys are generated per test; nothing is timed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from securesystemslib.signer import CryptoSigner
from tuf.api.metadata import Metadata
from tuf.api.serialization.json import JSONSerializer

from k3kit.signing.keys import load_private
from k3kit.signing.trust.tufroot import tuf_key, verify
from tests.trustkit import keypair, root_v1, write_root

_ONE_SPELLING = re.compile(r"[0-9a-f]{128}")


def test_a_root_python_tuf_signs_itself_verifies(tmp_path: Path) -> None:
    root_key, release = keypair(tmp_path, "root"), keypair(tmp_path, "release")
    private = load_private(root_key.private, None)
    signer = CryptoSigner(private, tuf_key(private.public_key()))
    meta = Metadata(root_v1([root_key], [release]))
    meta.sign(signer)
    data = meta.to_bytes(JSONSerializer(compact=False))
    sigs = [s["sig"] for s in json.loads(data)["signatures"]]
    assert sigs and all(_ONE_SPELLING.fullmatch(s) for s in sigs), sigs
    assert verify(data, trusted=None, source="python-tuf").version == 1


def test_a_root_k3kit_signs_verifies_in_the_one_spelling(tmp_path: Path) -> None:
    root_keys = [keypair(tmp_path, f"root{i}") for i in range(3)]
    release = keypair(tmp_path, "release")
    path = write_root(
        tmp_path / "1.root.json", root_v1(root_keys, [release], root_threshold=3), root_keys
    )
    data = path.read_bytes()
    sigs = [s["sig"] for s in json.loads(data)["signatures"]]
    assert len(sigs) == 3 and all(_ONE_SPELLING.fullmatch(s) for s in sigs), sigs
    assert verify(data, trusted=None, source=str(path)).version == 1
