"""``_canonical.dumps``'s fast path (the stdlib's C encoder) against rfc8785, the writer it
stands in for: the same bytes, or the same refusal, for every input (issue 23, seventh pass).

The fast path is only taken for a plain tree (exact dicts with ASCII keys, lists, str, bool,
None, integers inside +-(2**53-1)); these tests feed both writers what falls on either side of
that line, so a difference in escaping, key order or number form fails here, not in a verdict.
"""

from __future__ import annotations

import base64
import collections
import decimal
import enum
import itertools
import json
import re
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from k3kit import _canonical
from k3kit._canonical import MAX_SAFE_INT, dumps
from k3kit.errors import VerificationError
from tests.conftest import GoldenKit


def _reference(obj: Any) -> bytes | str:
    try:
        return bytes(rfc8785.dumps(obj))
    except (rfc8785.CanonicalizationError, RecursionError) as exc:
        return type(exc).__name__


def _ours(obj: Any) -> bytes | str:
    try:
        return dumps(obj)
    except (rfc8785.CanonicalizationError, RecursionError) as exc:
        return type(exc).__name__


def test_every_character_is_written_as_rfc8785_writes_it() -> None:
    """All of Unicode but the surrogates, 4,096 characters a string: the escapes of the C
    encoder and of RFC 8785 agree character for character (controls, quote, backslash, DEL,
    U+2028, the private use area, the astral planes)."""
    points = [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(points), 4096):
        text = "".join(map(chr, points[start : start + 4096]))
        assert _canonical._plain(text)
        assert dumps(text) == rfc8785.dumps(text), hex(points[start])
        assert dumps({"k": [text]}) == rfc8785.dumps({"k": [text]})


@pytest.mark.parametrize("char", [chr(c) for c in range(0x20)] + ['"', "\\", "/", "\x7f"])
def test_control_characters_and_quotes_as_keys_and_values(char: str) -> None:
    obj: Any = {f"a{char}": char, "b": [char, {char: char}]}
    assert dumps(obj) == rfc8785.dumps(obj)


@pytest.mark.parametrize(
    "value",
    [0, 1, -1, MAX_SAFE_INT, -MAX_SAFE_INT, True, False, None, "", [], {}, [[]], {"": {}}],
)
def test_plain_scalars_and_empty_containers(value: Any) -> None:
    assert _canonical._plain(value)
    assert dumps(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        MAX_SAFE_INT + 1,  # rfc8785 refuses it: the fast path must not write it
        -MAX_SAFE_INT - 1,
        1.5,
        {"é": 1},  # a non-ASCII key: sorted by rfc8785 in UTF-16 order
        {"\ue000": 1, "\U0001f600": 2},  # where code-point and UTF-16 orders differ
        ("a", 1),  # a tuple
        {"a": "\ud800"},  # a lone surrogate: refused by rfc8785
        {1: "a"},  # a key that is not a string
    ],
)
def test_what_is_not_plain_goes_to_rfc8785(value: Any) -> None:
    assert not _canonical._plain(value) or value == {"a": "\ud800"}
    assert _ours(value) == _reference(value)


def test_code_point_and_utf16_orders_differ_and_the_result_is_rfc8785s() -> None:
    obj = {"\ue000": 1, "\U0001f600": 2}
    assert list(sorted(obj)) == ["\ue000", "\U0001f600"]  # code-point order
    assert dumps(obj) == rfc8785.dumps(obj)  # UTF-16 order puts the emoji (D83D DE00) first
    assert dumps(obj).index("\U0001f600".encode()) < dumps(obj).index("\ue000".encode())


class _Word(enum.StrEnum):
    A = "a"


class _Count(enum.IntEnum):
    ONE = 1


def test_subclasses_are_written_by_rfc8785() -> None:
    """A StrEnum or IntEnum member is not plain (its str() is not its value in every encoder)."""
    objs: list[Any] = [{"k": _Word.A}, {_Word.A: 1}, [_Count.ONE]]
    for obj in objs:
        assert not _canonical._plain(obj)
        assert dumps(obj) == rfc8785.dumps(obj)


def test_a_shared_or_circular_container_is_not_walked_for_ever() -> None:
    shared: list[Any] = [1]
    assert not _canonical._plain([shared, shared])
    assert dumps([shared, shared]) == rfc8785.dumps([shared, shared])
    loop: list[Any] = []
    loop.append(loop)
    assert not _canonical._plain(loop)
    assert _ours(loop) == "RecursionError"


_KEYS = st.one_of(
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=4),
    st.text(max_size=3),  # any Unicode, surrogates included
    st.sampled_from(["\ue000", "\U0001f600", "\uffff", "é"]),
)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.sampled_from([MAX_SAFE_INT, -MAX_SAFE_INT, MAX_SAFE_INT + 1, -MAX_SAFE_INT - 1])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
)
_TREES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(_KEYS, inner, max_size=4)
        | st.tuples(inner, inner)
    ),
    max_leaves=30,
)


@given(obj=_TREES)
def test_both_writers_give_the_same_bytes_or_the_same_refusal(obj: Any) -> None:
    assert _ours(obj) == _reference(obj)


@given(obj=_TREES)
def test_require_canonical_accepts_exactly_rfc8785s_bytes(obj: Any) -> None:
    reference = _reference(obj)
    if isinstance(reference, bytes):
        _canonical.require_canonical(reference, obj, source="doc")  # accepted
        with pytest.raises(VerificationError):
            _canonical.require_canonical(reference + b" ", obj, source="doc")


# -- attacks on the fast path (issue 23, seventh pass, red team) ---------------------------------
#
# What an attacker controls is bytes: every signed or hashed document is read by strict_loads and
# then held to require_canonical. The verdict of that pair must be the one the old writer gave
# (rfc8785 alone): these tests spell the same value every way JSON allows and require that the
# new code accepts exactly the spellings the old code accepted (exactly one: the JCS form).


def _verdict(data: bytes, canonical: Callable[[bytes, Any], bool]) -> bool | str:
    """A strict parse, then ``canonical(data, obj)``: the parse's code, or whether it held."""
    try:
        obj = _canonical.strict_loads(data, source="doc", max_bytes=1 << 24)
    except VerificationError as exc:
        return exc.code
    return canonical(data, obj)


def _rfc8785s(data: bytes, obj: Any) -> bool:
    """The check before the fast path: the bytes must be rfc8785's."""
    try:
        return bytes(rfc8785.dumps(obj)) == data
    except rfc8785.CanonicalizationError:
        return False


def _required(data: bytes, obj: Any) -> bool:
    """The check now: require_canonical (the fast path where the tree is plain)."""
    try:
        _canonical.require_canonical(data, obj, source="doc")
    except VerificationError as exc:
        assert exc.code == "JSON_NOT_CANONICAL"
        return False
    return True


def _old_verdict(data: bytes) -> bool | str:
    return _verdict(data, _rfc8785s)


def _new_verdict(data: bytes) -> bool | str:
    return _verdict(data, _required)


def _same_verdicts(spellings: list[bytes]) -> list[bytes]:
    """Each spelling judged by old and new alike; the accepted ones."""
    accepted = []
    for data in spellings:
        old, new = _old_verdict(data), _new_verdict(data)
        assert old == new, (data, old, new)
        if new is True:
            accepted.append(data)
    return accepted


_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n"}
_SHORT |= {"\r": "\\r", "\t": "\\t"}
_ODD_CHARACTERS = [
    "\x7f",  # DEL: written as itself
    "\x80",
    "\xa0",
    "\xad",
    "é",
    "\u2028",  # JavaScript's line separators: RFC 8785 writes them as themselves
    "\u2029",
    "\ud7ff",
    "\ue000",
    "\ufeff",  # a BOM inside a string
    "\ufffd",
    "\ufffe",  # noncharacters
    "\uffff",
    "\U0001f600",  # astral: a surrogate pair when escaped
    "\U0010ffff",
]


def _spellings(char: str) -> list[str]:
    """Every way JSON text can spell ``char`` inside a string (the raw form included, but for the
    quote and the backslash, whose raw forms end the string or start an escape)."""
    out = set() if char in '"\\' else {char}
    if char in _SHORT:
        out.add(_SHORT[char])
    units = char.encode("utf-16-be")
    codes = [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]
    out.add("".join(f"\\u{c:04x}" for c in codes))
    out.add("".join(f"\\u{c:04X}" for c in codes))
    if len(codes) == 2:  # a pair spelt half raw, half escaped is refused as a lone surrogate
        out.add(f"\\u{codes[0]:04X}\\u{codes[1]:04x}")
    return sorted(out)


@pytest.mark.parametrize(
    "char", [chr(c) for c in range(0x80)] + _ODD_CHARACTERS, ids=lambda c: f"U+{ord(c):04X}"
)
def test_attack_every_spelling_of_a_character_exactly_one_is_accepted(char: str) -> None:
    """\\u00XX in either case, \\/ , short escapes, raw controls, escaped DEL, U+2028/2029,
    noncharacters, surrogate pairs (\\uD83D\\uDE00): as a value, a key, and inside longer text;
    old and new accept the same spelling, and only rfc8785's."""
    for spelt in _spellings(char):
        for template in ('{"k":"%s"}', '{"%s":1}', '["a%sb"]', '{"a":{"x%s":"%s%s"}}'):
            data = (template % ((spelt,) * template.count("%s"))).encode()
            _same_verdicts([data])
    for template in ('{"k":"%s"}', '{"%s":1}', '["a%sb"]'):
        accepted = _same_verdicts([(template % s).encode() for s in _spellings(char)])
        reference = rfc8785.dumps(_canonical.strict_loads(accepted[0], source="d", max_bytes=99))
        assert accepted == [reference], (char, accepted)


_KEY_SETS = [
    ["A", "B", "a", "b"],  # differing only in case
    ["", "0", "00", "1", "10", "9", "-1", "1e2"],  # empty, and keys that look like numbers
    ["a", "a\x00", "a\x7f", "a~", "aa"],  # a prefix, a NUL, DEL
    ["z", "\x7f", "é", "\ue000", "\U0001f600", "\uffff"],  # code-point order != UTF-16 order
    ["\U0001f600", "\U0001f601", "\ufb01", "\ud7ff"],
]


@pytest.mark.parametrize("keys", _KEY_SETS, ids=range(len(_KEY_SETS)))
def test_attack_every_order_of_the_keys_only_rfc8785s_is_accepted(keys: list[str]) -> None:
    """Keys differing in case, empty, numeric-looking, non-ASCII and astral: of all their orders
    (rotations and reversals for the long sets) only the UTF-16 order passes, old and new."""
    utf16 = sorted(keys, key=lambda k: k.encode("utf-16-be"))
    orders = (
        list(itertools.permutations(keys))
        if len(keys) <= 6
        else [keys[i:] + keys[:i] for i in range(len(keys))] + [keys[::-1], utf16, sorted(keys)]
    )

    def spelt(order: Any) -> list[bytes]:
        members = ",".join(f"{json.dumps(k, ensure_ascii=False)}:{keys.index(k)}" for k in order)
        return [("{" + members + "}").encode(), ('{"o":{' + members + "}}").encode()]

    unique = dict.fromkeys(tuple(order) for order in orders)  # each order once
    accepted = _same_verdicts([data for order in unique for data in spelt(order)])
    assert accepted == spelt(utf16)


_NUMBERS = [
    b"0",
    b"-0",
    b"00",
    b"01",
    b"+1",
    b"1e2",
    b"1E2",
    b"1.0",
    b"100",
    b"-1",
    b"- 1",
    b"9007199254740991",
    b"-9007199254740991",
    b"09007199254740991",
    b"9007199254740992",
    b"-9007199254740992",
    b"9" * 40,
    b"0" * 39 + b"1",
    b"-" + b"0" * 38 + b"1",
    b"1" + b"0" * 15,
    b"0x1",
    b"1_000",
    "1\u0663".encode(),  # an Arabic-Indic digit: \d in a str pattern would take it
    "\uff11".encode(),  # a full-width digit
    b"true",
    b"True",
    b"null",
    b"NaN",
]


@pytest.mark.parametrize("number", _NUMBERS, ids=lambda n: n.decode()[:20])
def test_attack_numbers_and_literals_in_every_form(number: bytes) -> None:
    """-0, leading zeros, exponents, 2**53, the digit bound, Unicode digits, Python's
    spellings of literals: the same verdict old and new, as a value, an item and a key's value."""
    _same_verdicts([b'{"n":' + number + b"}", b"[" + number + b"]", b'{"a":[1,' + number + b"]}"])


@pytest.mark.parametrize(
    "data",
    [
        b' {"a":1}',
        b'{"a":1} ',
        b'{"a":1}\n',
        b'\xef\xbb\xbf{"a":1}',  # a UTF-8 BOM
        b'{"a" :1}',
        b'{"a":[ ]}',
        b'{"a":{ }}',
        b'{"a":[1 ,2]}',
        b'{"a":[],"b":{}}',
        b'{"a":true,"b":false,"c":null}',
        b'"text"',
        b"7",
        b"null",
    ],
)
def test_attack_whitespace_and_top_level_values(data: bytes) -> None:
    _same_verdicts([data])


def test_attack_keys_equal_after_python_coercion_stay_distinct() -> None:
    """JSON keys are strings: "1" and "true" are not Python's 1 and True (which collide in a
    dict); a tree with non-string keys is not plain and is written (or refused) by rfc8785."""
    assert _same_verdicts([b'{"1":1,"true":2}']) == [b'{"1":1,"true":2}']
    collided = dict([(1, "a"), (True, "b")])  # one member: {1: "b"}
    for obj in (collided, {True: 1}, {None: 1}, {1.5: 1}, {("a",): 1}):
        assert not _canonical._plain(obj)
        assert _ours(obj) == _reference(obj)


def _outcome(write: Any, obj: Any) -> bytes | str:
    try:
        return bytes(write(obj))
    except Exception as exc:
        return type(exc).__name__


class _LyingStr(str):
    __slots__ = ()

    def __str__(self) -> str:
        return "lie"

    def __repr__(self) -> str:
        return "'lie'"

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        return b"lie"


class _LyingInt(int):
    def __repr__(self) -> str:
        return "666"

    def __str__(self) -> str:
        return "666"


class _LyingDict(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        return [("lie", 1)]

    def keys(self) -> Any:
        return ["lie"]

    def __iter__(self) -> Any:
        return iter(["lie"])


class _LyingList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        return iter(["lie"])


@pytest.mark.parametrize(
    "obj",
    [
        {"k": _LyingStr("truth")},
        {_LyingStr("truth"): 1},
        [_LyingInt(1)],
        {"k": _LyingInt(2**60)},
        _LyingDict(truth=1),
        {"k": _LyingDict(truth=1)},
        _LyingList(["truth"]),
        {"k": collections.OrderedDict(b=1, a=2)},
        {"k": collections.defaultdict(int, a=1)},
        {"k": types.MappingProxyType({"a": 1})},
        {"k": (1, 2)},
        {"k": b"bytes"},
        {"k": bytearray(b"x")},
        {"k": 1.0},
        {"k": -0.0},
        {"k": decimal.Decimal("1")},
    ],
    ids=lambda o: type(o).__name__ + str(len(repr(o))),
)
def test_attack_subclasses_that_lie_about_their_value_are_not_plain(obj: Any) -> None:
    """A str, int, dict or list subclass whose str/repr/iteration lies (what a model_dump or a
    hook could hand over) never reaches the C encoder, which reads the object's real storage;
    rfc8785 writes or refuses it exactly as before the fast path (whatever it raises)."""
    assert not _canonical._plain(obj)
    assert _outcome(dumps, obj) == _outcome(lambda o: bytes(rfc8785.dumps(o)), obj)


def test_attack_a_container_shared_inside_a_plain_tree_is_not_plain() -> None:
    inner = {"a": [1, 2]}
    assert not _canonical._plain({"x": inner, "y": inner})
    assert not _canonical._plain([inner["a"], {"b": inner["a"]}])
    obj = {"x": inner, "y": inner}
    assert _ours(obj) == _reference(obj)
    text = "shared"  # a str met twice is fine: only containers can loop
    assert _canonical._plain([text, text, {"k": text}])


def test_attack_a_tree_deeper_than_rfc8785_writes_is_refused_by_every_reader_first() -> None:
    """Depth is where the writers can part: on Python 3.13 the C encoder writes a tree of
    1,000-9,000 levels that rfc8785 refuses with RecursionError (3.11's C encoder refuses it
    too). A tree deeper than _PLAIN_MAX_DEPTH (64) is not plain, so rfc8785 judges it, as
    before; and every document reaching require_canonical was parsed by strict_loads, which
    refuses depth 33 (the default every caller keeps), deep or very deep."""
    deep: Any = "leaf"
    for _ in range(1500):
        deep = [deep]
    assert not _canonical._plain(deep)
    assert _reference(deep) == _ours(deep) == "RecursionError"
    edge: Any = "leaf"
    for _ in range(_canonical._PLAIN_MAX_DEPTH):
        edge = [edge]
    assert _canonical._plain(edge) and not _canonical._plain([edge])
    assert dumps(edge) == rfc8785.dumps(edge) and dumps([edge]) == rfc8785.dumps([edge])
    for depth in (33, 1500, 9000, 100_000):
        data = b"[" * depth + b'"leaf"' + b"]" * depth
        assert _old_verdict(data) == _new_verdict(data) == "JSON_MALFORMED"
    assert _new_verdict(b"[" * 31 + b'"leaf"' + b"]" * 31) is True


def test_attack_a_string_of_the_maximum_length_with_every_escape() -> None:
    """A 1 MiB string (MAX_STRING_CHARS) of quotes, controls, DEL, U+2028, noncharacters and
    astral characters: the same bytes from both writers, and only those accepted."""
    unit = 'a\u2028\x01"\\/\x7fé\U0001f600\ufffe'
    text = (unit * (_canonical.MAX_STRING_CHARS // len(unit) + 1))[: _canonical.MAX_STRING_CHARS]
    reference = bytes(rfc8785.dumps({"k": text}))
    assert dumps({"k": text}) == reference
    assert _same_verdicts([reference, reference.replace(b"/", b"\\/", 1)]) == [reference]


def _golden_documents(golden: GoldenKit) -> dict[str, bytes]:
    kit = golden.kit
    docs = {n: (kit / n).read_bytes() for n in ("kit.json", "MANIFEST.json", "weights.lock.json")}
    envelope = json.loads((kit / "receipt.dsse.json").read_bytes())
    docs["receipt payload"] = base64.b64decode(envelope["payload"])
    return docs


def _mutations(data: bytes) -> list[bytes]:
    """The same value spelt otherwise: each one an attacker's (or a hand-made kit's) bytes."""
    obj = json.loads(data)
    out = [
        json.dumps(obj, ensure_ascii=True, separators=(",", ":"), sort_keys=True).encode(),
        json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode(),
        json.dumps(obj, ensure_ascii=False, sort_keys=True).encode(),
        json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode(),
        data + b"\n",
        b"\xef\xbb\xbf" + data,
    ]
    text = data.decode()
    for old, new in (("/", "\\/"), ("a", "\\u0061"), ("e", "\\u0065")):
        for at in (text.find(old), text.rfind(old)):
            if at >= 0:
                out.append((text[:at] + new + text[at + len(old) :]).encode())
    for number in (r"0\1", r"\1.0", r"\1e0", r"-0\1"):  # a member's integer respelt
        out.append(re.sub(r'(?<=":)(\d+)(?=[,}])', number, text, count=1).encode())
    keys = re.findall(r'"([A-Za-z_]+)":', text)
    if len(keys) >= 2:  # two adjacent members swapped
        members = json.loads(data)
        if isinstance(members, dict) and len(members) >= 2:
            names = sorted(members)
            swapped = {names[1]: members[names[1]], names[0]: members[names[0]]}
            swapped |= {k: members[k] for k in names[2:]}
            out.append(json.dumps(swapped, ensure_ascii=False, separators=(",", ":")).encode())
    return out


def _with_text_everywhere(obj: Any, text: str) -> Any:
    """Every string value of ``obj`` with ``text`` appended (keys kept): non-ASCII documents."""
    if isinstance(obj, dict):
        return {k: _with_text_everywhere(v, text) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_with_text_everywhere(v, text) for v in obj]
    return obj + text if isinstance(obj, str) else obj


def test_attack_real_documents_respelt_only_the_canonical_bytes_pass(golden: GoldenKit) -> None:
    """The golden kit's kit.json, MANIFEST.json, weights.lock.json and receipt payload (and each
    with non-ASCII text, U+2028 and an emoji in every string): the fast path took every one of
    them, wrote rfc8785's bytes, and accepts none of their other spellings."""
    for name, data in _golden_documents(golden).items():
        obj = _canonical.strict_loads(data, source=name, max_bytes=1 << 24)
        assert _canonical._plain(obj), name  # the fast path is the one under test
        assert dumps(obj) == bytes(rfc8785.dumps(obj)) == data, name
        variants = [data]
        for extra in ("é\u2028\U0001f600\x7f", '\\"/\x1f'):
            other = _with_text_everywhere(obj, extra)
            assert _canonical._plain(other)
            variants.append(bytes(rfc8785.dumps(other)))
            assert dumps(other) == variants[-1]
        for variant in variants:
            respelt = [m for m in _mutations(variant) if m != variant]
            assert respelt, name
            assert _same_verdicts([variant, *respelt]) == [variant], name


def test_attack_model_bytes_of_the_golden_documents_are_rfc8785s(golden: GoldenKit) -> None:
    """What the signers and the verification cache hash: pydantic's model_dump(mode="json") and
    the lite record's dump of each golden document, written by the fast path, are rfc8785's
    bytes of the same dump (and the bytes on disk)."""
    from k3kit.models import KitInfo, Manifest, Statement, WeightsLock, lite
    from k3kit.models._lite import dump as dump_record
    from k3kit.models._lite import validate

    docs = _golden_documents(golden)
    for name, model, record in (
        ("kit.json", KitInfo, lite.KitInfo),
        ("MANIFEST.json", Manifest, lite.Manifest),
        ("weights.lock.json", WeightsLock, lite.WeightsLock),
        ("receipt payload", Statement, lite.Statement),
    ):
        obj = json.loads(docs[name])
        built = model.model_validate(obj)
        dumped = built.model_dump(mode="json", by_alias=True, exclude_none=True)
        assert _canonical._plain(dumped), name
        assert _canonical.model_bytes(built) == bytes(rfc8785.dumps(dumped)) == docs[name], name
        rec = validate(record, obj)
        try:
            dumped_record = dump_record(rec)
        except TypeError:  # a price (Decimal) has no record form: only the model is hashed
            assert name != "weights.lock.json"  # the lock's record is what launch hashes
            continue
        assert _canonical.model_bytes(rec) == bytes(rfc8785.dumps(dumped_record)), name
        assert _canonical.sha256_of_model(rec) == _canonical.sha256_of_model(built), name


@pytest.mark.parametrize("size", [MAX_SAFE_INT, MAX_SAFE_INT + 1, -MAX_SAFE_INT - 1, 2**64])
def test_attack_a_lock_with_a_size_past_2_53_is_hashed_or_refused_as_before(
    golden: GoldenKit, size: int
) -> None:
    """The writer's side: a hub (or a hand-made lock) reporting a file of 2**53 bytes or more.
    The model refuses it; and a model changed without validation (``model_copy(update=)``)
    still gets rfc8785's checksum input, or its refusal: an integer out of the interoperable
    range never reaches the C encoder."""
    from k3kit.models import WeightsLock

    obj = json.loads((golden.kit / "weights.lock.json").read_bytes())
    lock = WeightsLock.model_validate(obj)
    obj["files"][0]["size"] = size
    with pytest.raises(ValueError):
        WeightsLock.model_validate(obj)
    edited = lock.files[0].model_copy(update={"size": size})
    bad = lock.model_copy(update={"files": [edited, *lock.files[1:]]})
    dumped = bad.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert _canonical._plain(dumped) == (abs(size) <= MAX_SAFE_INT)
    reference = _outcome(lambda o: bytes(rfc8785.dumps(o)), dumped)
    assert _outcome(_canonical.model_bytes, bad) == reference
    assert isinstance(reference, bytes) == (abs(size) <= MAX_SAFE_INT)


def test_attack_key_ids_are_the_ones_pinned_roots_name(golden: GoldenKit) -> None:
    """A key id is the sha256 of the canonical key object (roots and thresholds count distinct
    ids): the fast path writes the object, and the id is rfc8785's, so every root pinned before
    it still names the same keys."""
    import hashlib

    from k3kit.signing.keys import key_object, keyid, load_public

    pub = load_public(golden.key.public)
    obj: Any = key_object(pub)
    assert _canonical._plain(obj)
    expected = hashlib.sha256(bytes(rfc8785.dumps(obj))).hexdigest()
    assert keyid(pub) == expected


def test_real_published_reports_give_both_writers_the_same_bytes_or_refusal() -> None:
    """Inputs nobody here wrote: every JSON benchmark report in tests/data/real (vLLM, SGLang,
    GuideLLM, AIPerf, llmperf; SOURCES.md), and each JSON Lines record. Their floats, NaNs and
    non-ASCII text are what the fast path must hand to rfc8785; both writers give the same bytes
    or the same refusal, and the float-free parts (the report's text fields) take the fast path."""
    from tests.realcorpus import REAL, read

    names = sorted(p.name for p in REAL.iterdir() if p.name != "SOURCES.md")
    plain_seen = 0
    for name in names:
        data = read(name)
        lines = data.splitlines() if name.endswith(".jsonl") else [data]
        for line in lines:
            obj = json.loads(line)
            assert _ours(obj) == _reference(obj), name
            items = obj.items() if isinstance(obj, dict) else []
            texts = {k: v for k, v in items if isinstance(v, str)}
            if texts and _canonical._plain(texts):
                plain_seen += 1
                assert dumps(texts) == rfc8785.dumps(texts), name
    assert len(names) >= 12 and plain_seen >= 10
