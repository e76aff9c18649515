"""Property: any single-byte change to any signed or listed kit file makes verification fail."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from k3kit._canonical import dumps, strict_loads
from k3kit.errors import VerificationError
from k3kit.node.verify import verify_path
from k3kit.signing.keys import load_public
from tests.conftest import GoldenKit, examples


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def flippable(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the golden kit for every example below: each flips one byte, verifies, and
    puts the byte back. A fresh copy per example (16 folders made and removed) was most of the
    test's time, and the property is about the flipped byte, not the copy."""
    kit = tmp_path_factory.mktemp("flippable") / "kit"
    shutil.copytree(golden.kit, kit)
    return kit


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_single_byte_change_is_caught(
    golden: GoldenKit, flippable: Path, data: st.DataObject
) -> None:
    files = _files(golden.kit)
    rel = data.draw(st.sampled_from(files), label="file")
    size = (golden.kit / rel).stat().st_size
    offset = data.draw(st.integers(0, size - 1), label="offset")
    flip = data.draw(st.integers(1, 255), label="xor")
    target, original = flippable / rel, target_original(golden, rel)
    raw = bytearray(original)
    raw[offset] ^= flip
    try:
        target.write_bytes(bytes(raw))
        if rel.name == "receipt.dsse.json":
            # The envelope's keyid is an unauthenticated hint and base64 has two alphabets (DSSE
            # requires accepting both): a change that leaves the signed content intact is allowed.
            assume(_signed_content(bytes(raw)) != _signed_content(original))
        report = verify_path(flippable, [load_public(golden.key.public)])
        assert not report.ok, f"{rel}@{offset}^{flip} went unnoticed"
    finally:
        target.write_bytes(original)
    assert _files(flippable) == files  # verifying wrote nothing into the kit


def target_original(golden: GoldenKit, rel: Path) -> bytes:
    return (golden.kit / rel).read_bytes()


def _signed_content(raw: bytes) -> object:
    """What the signature covers in an envelope: type, decoded payload, decoded signatures."""
    try:
        env = json.loads(raw)

        def decode(text: str) -> bytes:
            return base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)

        return (
            env["payloadType"],
            decode(env["payload"]),
            sorted(decode(sig["sig"]) for sig in env["signatures"]),
        )
    except Exception:  # anything unparsable is a different document
        return ("unparsable", raw)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=examples(200), deadline=None)
@given(value=json_values)
def test_canonical_bytes_round_trip_through_the_strict_parser(value: object) -> None:
    try:
        data = dumps(value)
    except Exception:  # lone surrogates: rfc8785 refuses them, as it must
        return
    assert dumps(strict_loads(data, source="prop", max_bytes=10**6, max_depth=64)) == data


def test_strict_parser_refuses_what_json_accepts() -> None:
    for bad in (
        b'{"a":1,"a":2}',
        b'{"a":NaN}',
        b'{"a":1.5}',
        b'{"a":9007199254740993}',
        b"[" * 40 + b"]" * 40,
    ):
        try:
            strict_loads(bad, source="t", max_bytes=1000)
        except VerificationError:
            continue
        raise AssertionError(f"accepted {bad!r}")
