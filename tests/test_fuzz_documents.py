"""Fuzzing the parsers attacker bytes reach first: strict_loads and the DSSE envelope reader.

The property is the verifier's contract: whatever the bytes, the only exception that escapes is
a ``K3kitError`` (a refusal with a code); never ValueError, RecursionError, UnicodeError or a
pydantic dump (which the CLI would report as exit 70). Inputs are both arbitrary bytes and
mutations of a genuine envelope, so the fuzzer gets past the JSON syntax to the fields. Bounded
for CI: a few hundred examples per target, no deadline (the machine is shared).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from k3kit._canonical import dumps, measurement_loads, strict_loads
from k3kit.errors import K3kitError
from k3kit.models import PAYLOAD_TYPE
from k3kit.signing.sign import sign_envelope, verify_envelope
from tests.conftest import examples

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
TRUSTED = [KEY.public_key()]
GENUINE = sign_envelope(dumps({"_type": "https://in-toto.io/Statement/v1"}), PAYLOAD_TYPE, KEY)
FUZZ = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# Values chosen to break parsers: huge/odd numbers, lone surrogates, control characters.
NASTY_TEXT = st.sampled_from(
    [
        "7" * 5000,
        "-" + "9" * 41,
        "1e400",
        "NaN",
        "\ud800",
        "\udcff",
        "\x00\r\n\x1b[2J",
        "\u202e",
        "",
        "=" * 3,
        "A" * 10_000,
    ]
)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | NASTY_TEXT
    | st.floats(allow_nan=True, allow_infinity=True),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8) | NASTY_TEXT, children, max_size=4)
    ),
    max_leaves=20,
)


def _only_k3kit_errors(func: Any, *args: Any, **kwargs: Any) -> None:
    try:
        func(*args, **kwargs)
    except K3kitError as exc:
        assert exc.code, exc  # a refusal always names its code


@FUZZ
@given(st.binary(max_size=2048))
def test_strict_loads_arbitrary_bytes(data: bytes) -> None:
    _only_k3kit_errors(strict_loads, data, source="fuzz", max_bytes=4096)
    _only_k3kit_errors(measurement_loads, data, source="fuzz", max_bytes=4096)


@FUZZ
@given(JSON_VALUES)
def test_strict_loads_json_shaped_values(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    data = text.encode("utf-8", "surrogatepass")
    _only_k3kit_errors(strict_loads, data, source="fuzz", max_bytes=1 << 20)
    # Escaped form too: lone surrogates as \ud800 escapes reach the parser as valid JSON text.
    _only_k3kit_errors(strict_loads, json.dumps(value).encode(), source="fuzz", max_bytes=1 << 20)


def _mutated_envelope(field: str, value: Any) -> bytes:
    env = json.loads(GENUINE)
    if field == "signature":
        env["signatures"] = [{"keyid": "k", "sig": value}]
    elif field == "signatures":
        env["signatures"] = value
    else:
        env[field] = value
    return json.dumps(env).encode()


@FUZZ
@given(
    st.sampled_from(["payload", "payloadType", "signatures", "signature", "extra"]),
    JSON_VALUES,
)
def test_envelope_fields_replaced(field: str, value: Any) -> None:
    data = _mutated_envelope(field, value)
    _only_k3kit_errors(verify_envelope, data, TRUSTED, expected_type=PAYLOAD_TYPE, source="fuzz")


@FUZZ
@given(st.binary(min_size=0, max_size=96), st.text(max_size=40) | NASTY_TEXT)
def test_envelope_with_any_payload_and_type_signed(payload: bytes, payload_type: str) -> None:
    """Even a validly signed envelope with an odd type or payload only ever refuses cleanly."""
    try:
        data = sign_envelope(payload, payload_type, KEY)
    except (UnicodeEncodeError, K3kitError):
        return  # the signer refuses to sign what it cannot encode; nothing to verify
    _only_k3kit_errors(verify_envelope, data, TRUSTED, expected_type=PAYLOAD_TYPE, source="fuzz")


@FUZZ
@given(st.binary(max_size=64), st.integers(min_value=0, max_value=len(GENUINE) - 1))
def test_envelope_bytes_spliced(junk: bytes, at: int) -> None:
    data = GENUINE[:at] + junk + GENUINE[at + len(junk) :]
    _only_k3kit_errors(verify_envelope, data, TRUSTED, expected_type=PAYLOAD_TYPE, source="fuzz")
    b64 = base64.b64encode(junk).decode()
    _only_k3kit_errors(
        verify_envelope,
        _mutated_envelope("payload", b64),
        TRUSTED,
        expected_type=PAYLOAD_TYPE,
        source="fuzz",
    )
