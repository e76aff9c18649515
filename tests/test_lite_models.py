"""The pydantic-free reader (k3kit.models.lite) against the pydantic models it is generated from.

``verify`` reads the receipt, MANIFEST.json, kit.json and weights.lock.json with the reader, so
that a node's start-up imports no pydantic (docs/performance.md, "Start-up"); the publisher, the
schemas and every other verb keep the models. Two guards keep the two from drifting:

* the reader's table is GENERATED from the models (scripts/gen_lite_models.py): regenerating it
  must give the committed bytes;
* a DIFFERENTIAL test: for every input, both accept (with equal values, types included) or both
  refuse. The inputs are the committed golden documents (tests/vectors/golden), every one-step
  mutation of every node in them (deterministic, exhaustive), and hypothesis-driven chains of
  mutations with a fixed derandomized seed.

The one allowed difference is pydantic's lax coercion (``true`` or ``"5"`` where an integer
belongs, ``1`` or ``"yes"`` where a boolean belongs): the reader refuses it and says so
(``LiteError.lax``); the CLI test below shows what that changes for a signed receipt.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from k3kit._canonical import dumps, sha256_of_model, strict_loads
from k3kit.models import (
    DsseEnvelope,
    KitInfo,
    Manifest,
    Statement,
    WeightsLock,
    _lite,
    _methods,
    lite,
)
from k3kit.signing.keys import load_private
from k3kit.signing.sign import sign_envelope
from tests.conftest import GoldenKit, every, examples, run_k3kit

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "vectors" / "golden"
Path_ = tuple[str | int, ...]

PAIRS: dict[str, tuple[type[BaseModel], type[_lite.Record]]] = {
    "envelope": (DsseEnvelope, lite.DsseEnvelope),
    "statement": (Statement, lite.Statement),
    "manifest": (Manifest, lite.Manifest),
    "kit": (KitInfo, lite.KitInfo),
    "lock": (WeightsLock, lite.WeightsLock),
}


def _load(name: str) -> Any:
    return strict_loads((GOLDEN / name).read_bytes(), source=name, max_bytes=1 << 24)


def _seeds() -> dict[str, Any]:
    envelope = _load("receipt.dsse.json")
    payload = base64.b64decode(envelope["payload"])
    return {
        "envelope": envelope,
        "statement": strict_loads(payload, source="payload", max_bytes=1 << 24),
        "manifest": _load("MANIFEST.json"),
        "kit": _load("kit.json"),
        "lock": _load("weights.lock.json"),
    }


SEEDS = _seeds()


def _enriched() -> list[tuple[str, Any, list[Path_]]]:
    """Golden documents with the optional parts the golden kit does not use (an evidence file
    and its summary, disaggregated pools, a ranged workload, engine loads and image, a CPU
    target, a hub pin), each valid; with the paths whose subtrees the mutations walk."""
    statement = copy.deepcopy(SEEDS["statement"])
    pred = statement["predicate"]
    run = pred["runs"][0]
    run.update(
        evidence=f"evidence/{run['id']}.json",
        evidence_level="raw",
        evidence_sha256="a" * 64,
        evidence_bytes=1234,
        evidence_summary={
            "tool": "sglang bench_serving",
            "record": 0,
            "notes": ["legacy key"],
            "unmapped": ["extra"],
            "request_rate": "inf",
            "burstiness": "1.0",
            "duration_s": "12.50",
            "completed": 4,
            "ttft_ms": {
                "mean": "12.5",
                "std": "0.5",
                "percentiles": {"99": "20.1", "99.9": "2E+1"},
            },
            "records": 4,
        },
    )
    run["metrics"]["ttft_ms"]["p99.9"] = "6001.5"
    pred["environment"]["pools"] = {
        "prefill": {"gpu": "NVIDIA B300", "gpus_per_node": 4, "nodes": 1},
        "decode": {"gpu": "NVIDIA B300", "gpu_memory_gb": 288, "gpus_per_node": 4},
    }
    workload = next(iter(pred["workloads"].values()))
    workload.update(lengths="ranged", range_ratio="0.5", temperature="0.0", ignore_eos=True)
    workload.update(speculative_decoding=True, prefix_cache_policy="warm")
    kit = copy.deepcopy(SEEDS["kit"])
    kit["engine"].update(
        version_match="same-release",
        image="registry.example/vllm@sha256:" + "a" * 64,
        loads={"speculative-config.model": "the draft model ships in the kit"},
    )
    pool = {"gpu": "NVIDIA B300", "gpu_memory_gb": 288, "gpus_per_node": 8, "nodes": 1}
    kit["disaggregation"] = {
        "prefill": {**pool, "serve": {"tensor-parallel-size": 8, "enforce-eager": True}},
        "decode": {
            **pool,
            "serve": {
                "kv-transfer-config": {"kv_role": "kv_consumer", "n": 1},
                "served-model-name": ["a", "b"],
                "dtype": "auto",
            },
        },
    }
    kit["model_config_facts"] = {"sha256": "b" * 64, "context_length": 131072, "kv_heads": 8}
    kit["profiles"][0].update(role="prefill", gpu="NVIDIA B300", gpu_memory_gb=288)
    cpu = copy.deepcopy(SEEDS["kit"])
    cpu["hardware"] = {
        "accelerator": "cpu",
        "cpu_cores": 16,
        "memory_gib": 64,
        "cpu_features": ["avx2", "avx512f"],
        "gpus_per_node": 1,
        "nodes": 1,
    }
    lock = copy.deepcopy(SEEDS["lock"])
    lock["source"] = {
        "kind": "hub",
        "endpoint": "https://huggingface.co",
        "requested_revision": "main",
        "pinned_at": "2026-11-01T00:00:00Z",
        "sha256_source": "hub-lfs",
        "include": ["*.safetensors"],
        "exclude": ["*.bin"],
    }
    lock["files"][0].update(git_blob_sha1="f" * 40, xet_hash="0" * 64, lfs=True)
    return [
        (
            "statement",
            statement,
            [("predicate", "runs", 0), ("predicate", "environment"), ("predicate", "workloads")],
        ),
        ("kit", kit, [("engine",), ("disaggregation",), ("model_config_facts",), ("profiles", 0)]),
        ("kit", cpu, [("hardware",)]),
        ("lock", lock, [("source",), ("files", 0)]),
    ]


ENRICHED = _enriched()
STARTS = [(kind, SEEDS[kind]) for kind in sorted(SEEDS)] + [(k, doc) for k, doc, _ in ENRICHED]
# Every key any record knows (aliases and field names): mutations add them where they are absent,
# so optional fields are exercised with wrong and right values, not only the ones the seeds have.
RECORDS: list[type[_lite.Record]] = [
    c for c in vars(lite).values() if isinstance(c, type) and issubclass(c, _lite.Record)
]
KNOWN_KEYS = sorted({key for c in RECORDS for f in c._fields for key in (f[0], f[1])})


_LEAVES = frozenset({str, int, bool, Decimal, type(None)})


def plain(value: Any) -> Any:
    """A model or a record as nested dicts and lists of (type name, text) leaves: True and 1,
    or Decimal("1.0") and Decimal("1.00"), compare different. Exact types first (a third of the
    mutation tests' time went to this function's isinstance chain); a subclass (a str enum)
    falls through to it."""
    kind = type(value)
    if kind in _LEAVES:
        return (kind.__name__, str(value))
    if kind is list:
        return [plain(v) for v in value]
    if isinstance(value, BaseModel):
        return {name: plain(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, _lite.Record):
        return {f[0]: plain(getattr(value, f[0])) for f in value._fields}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, str | int | bool | Decimal) or value is None:
        return (type(value).__name__, str(value))
    raise AssertionError(f"unexpected value {value!r}")


def assert_agree(kind: str, obj: Any) -> str:
    """Both readers accept ``obj`` with equal values, or both refuse it (or the reader refuses
    a lax coercion pydantic made); returns which of the three happened."""
    model, record = PAIRS[kind]
    try:
        parsed: BaseModel | None = model.model_validate(obj)
    except ValidationError:
        parsed = None
    want = None if parsed is None else plain(parsed)
    try:
        read = _lite.validate(record, obj)
    except _lite.LiteError as exc:
        assert want is None or exc.lax, f"reader refused what pydantic accepts: {exc.loc} {exc}"
        return "refused" if want is None else "lax"
    assert parsed is not None, f"reader accepted what pydantic refuses: {json.dumps(obj)[:300]}"
    assert plain(read) == want
    assert_same_behaviour(parsed, read)
    return "accepted"


# What each shared method (k3kit.models._methods) is asked in the comparison below: an engine
# pin is asked about versions an engine might report (its own, other labels, other releases,
# non-canonical and non-PEP 440 text).
PROBES: dict[str, list[tuple[Any, ...]]] = {
    "accepts": [
        (v,)
        for v in (
            "0.33.0", "0.33.0+cpu", "0.33.0+cu129", "0.33.1", "0.33.0.post1", "0.33", "v0.33.0",
            "0.32.0+cpu", "0.5.2.post1", "", "not a version", "0.33.0+CPU",
        )
    ],
}  # fmt: skip


def assert_same_behaviour(model: BaseModel, record: _lite.Record) -> None:
    """The record behaves as the model: every shared method gives the same answer, at every
    level of the document, and the record dumps to the model's JSON (so it hashes to the
    model's checksum, :func:`k3kit._canonical.sha256_of_model`), or refuses to when it holds a
    ``Decimal`` (a model may serialise one its own way)."""
    want = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    try:
        assert _lite.dump(record) == want
        assert sha256_of_model(record) == sha256_of_model(model)
    except TypeError:
        assert "Decimal" in repr(plain(record))
    for mod, rec in _pairs(model, record):
        mixins = [b for b in type(mod).__mro__ if b.__module__ == _methods.__name__]
        # the generator gives the record the model's bases from _methods, and no others
        assert [b for b in type(rec).__mro__ if b.__module__ == _methods.__name__] == mixins
        for mixin in mixins:
            for name in (n for n in vars(mixin) if not n.startswith("_")):
                if isinstance(vars(mixin)[name], property):
                    assert getattr(rec, name) == getattr(mod, name), name
                    continue
                for args in PROBES[name]:  # a new method needs probes here: KeyError otherwise
                    assert getattr(rec, name)(*args) == getattr(mod, name)(*args), (name, args)


def _pairs(model: Any, record: Any) -> Iterator[tuple[Any, Any]]:
    """Every (model, record) pair at the same place in the two trees."""
    if isinstance(model, BaseModel):
        yield model, record
        for name in type(model).model_fields:
            yield from _pairs(getattr(model, name), getattr(record, name))
    elif isinstance(model, list):
        for m, r in zip(model, record, strict=True):
            yield from _pairs(m, r)
    elif isinstance(model, dict):
        for key in model:
            yield from _pairs(model[key], record[key])


def walk(obj: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from walk(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from walk(v, (*path, i))


def replaced(obj: Any, path: Path_, new: Any) -> Any:
    """``obj`` with the node at ``path`` replaced by ``new``: the containers along the path are
    copied, the rest is shared (neither reader changes its input), so a mutation costs its depth,
    not the document's size."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    out = list(obj) if isinstance(obj, list) else dict(obj)
    out[head] = replaced(obj[head], rest, new)  # type: ignore[index]
    return out


OTHER_VALUES: list[Any] = [None, True, False, 0, 1, -1, 2**53, "", "a", "5", "yes", "1.5", [], {}]


def variants(value: Any) -> list[Any]:
    """Values to put where ``value`` is: wrong types, bounds, near-misses of its own value."""
    out: list[Any] = list(OTHER_VALUES)
    if isinstance(value, str):
        out += [value + "\n", " " + value, value.upper(), value[:-1], value * 40, value + "/../x"]
        out += ["１" + value, value.replace("-", "_")]
    elif isinstance(value, bool):
        out += [int(value), str(value).lower()]
    elif isinstance(value, int):
        out += [value + 1, value - 1, -value, str(value), 2**31, 2**31 + 1, 64, 65]
    elif isinstance(value, dict):
        out += [{k: v for k, v in value.items() if k != drop} for drop in value]
        out += [{**value, "zz": 1}] + [{**value, k: value[k]} for k in value]
        out += [{**value, key + "_": v} for key, v in value.items()]
    elif isinstance(value, list):
        out += [value * 2, value[::-1], value[1:], [*value, value[0]] if value else [1]]
    return [v for v in out if v != value or type(v) is not type(value)]


def one_step_mutations(seed: Any, under: Path_ = ()) -> Iterator[Any]:
    """Every variant of every node of ``seed`` at or below ``under``."""
    for path, value in walk(_at(seed, under), under):
        for new in variants(value):
            yield replaced(seed, path, new)


def test_the_committed_reader_is_what_the_models_generate() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_lite_models.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_the_golden_documents_read_the_same_in_both(kind: str) -> None:
    assert assert_agree(kind, SEEDS[kind]) == "accepted"


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_every_one_step_mutation_is_judged_the_same_by_both(kind: str) -> None:
    _judge_all(kind, one_step_mutations(SEEDS[kind]))


@pytest.mark.parametrize("index", range(len(ENRICHED)))
def test_the_optional_parts_and_their_mutations_are_judged_the_same_by_both(index: int) -> None:
    kind, seed, paths = ENRICHED[index]
    assert assert_agree(kind, seed) == "accepted"  # each enriched document is a valid one
    _judge_all(kind, (obj for under in paths for obj in one_step_mutations(seed, under)))


def _judge_all(kind: str, mutations: Iterator[Any]) -> None:
    outcomes: dict[str, int] = {}
    for obj in itertools.islice(mutations, 0, None, every()):
        result = assert_agree(kind, obj)
        outcomes[result] = outcomes.get(result, 0) + 1
    # the mutations reach both sides of the line: some are accepted, most refused
    assert outcomes.get("accepted", 0) > 0 and outcomes.get("refused", 0) > 0, outcomes


def _keys(obj: Any) -> list[Path_]:
    return [path for path, value in walk(obj) if isinstance(value, dict)]


JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.text(max_size=70),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(KNOWN_KEYS), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    derandomize=True,
    database=None,
    max_examples=examples(400),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_chains_of_mutations_are_judged_the_same_by_both(data: st.DataObject) -> None:
    kind, obj = data.draw(st.sampled_from(STARTS))
    for _ in range(data.draw(st.integers(1, 3))):
        if not _keys(obj) or data.draw(st.booleans()):  # replace a node by any value
            path = data.draw(st.sampled_from([p for p, _ in walk(obj)]))
            obj = replaced(obj, path, data.draw(JSON_VALUES | st.sampled_from(OTHER_VALUES)))
        else:  # add (or overwrite) a key some record knows
            path = data.draw(st.sampled_from(_keys(obj)))
            node = copy.deepcopy(_at(obj, path))
            node[data.draw(st.sampled_from(KNOWN_KEYS))] = data.draw(JSON_VALUES)
            obj = replaced(obj, path, node)
    assert_agree(kind, obj)


def _at(obj: Any, path: Path_) -> Any:
    for part in path:
        obj = obj[part]
    return obj


def _resign(golden: GoldenKit, kit: Path, edit: Any) -> None:
    """The publisher's own key signs an edited Statement (what a hostile or careless signer
    can always do): only the reader stands between it and a verdict."""
    receipt = kit / "receipt.dsse.json"
    statement = json.loads(base64.b64decode(json.loads(receipt.read_bytes())["payload"]))
    edit(statement)
    key = load_private(golden.key.private, None)
    receipt.write_bytes(sign_envelope(dumps(statement), "application/vnd.in-toto+json", key))


def test_a_signed_receipt_whose_sequence_is_true_is_refused_not_read_as_1(
    golden: GoldenKit, kit: Path
) -> None:
    # pydantic's lax mode reads true as 1, and kit.json's sequence is 1: the old verifier
    # passed this receipt, with a sequence that is not an integer in the signed bytes
    _resign(golden, kit, lambda s: s["predicate"]["kit"].update(sequence=True))
    result = run_k3kit("verify", kit, "--trust", golden.key.public, "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    receipt = next(c for c in report["checks"] if c["id"] == "receipt_signature")
    assert receipt["code"] == "RECEIPT_MALFORMED"
    assert "predicate.kit.sequence" in receipt["detail"]


def test_the_reader_refuses_what_pydantic_refuses_in_a_signed_receipt(
    golden: GoldenKit, kit: Path
) -> None:
    # a trailing newline passes Python's "$" but not pydantic's (Rust) pattern: the reader
    # ends its patterns with \Z so that a signed "sha\n" is not a second spelling of "sha"
    def edit(statement: dict[str, Any]) -> None:
        statement["predicate"]["weights"]["commit"] += "\n"

    _resign(golden, kit, edit)
    result = run_k3kit("verify", kit, "--trust", golden.key.public, "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    receipt = next(c for c in json.loads(result.stdout)["checks"] if c["id"] == "receipt_signature")
    assert receipt["code"] == "RECEIPT_MALFORMED"
    assert "predicate.weights.commit" in receipt["detail"]


def test_a_refusal_names_an_attackers_long_key_in_one_short_line() -> None:
    from k3kit.errors import VerificationError

    manifest = {**SEEDS["manifest"], "k" * 100_000: 1}  # an unknown key, as long as it likes
    with pytest.raises(VerificationError) as refused:
        _lite.read(
            lite.Manifest,
            manifest,
            source="MANIFEST.json",
            error=VerificationError,
            code="MANIFEST_MALFORMED",
        )
    assert "k" * 64 + "…" in refused.value.message
    assert len(refused.value.message) < 200


def _patterns(node: object) -> Iterator[_lite.Pattern]:
    """Every pattern inside a node of the generated table (tuples of kinds, constraint dicts)."""
    if isinstance(node, _lite.Pattern):
        yield node
    elif isinstance(node, tuple | list):
        for item in node:
            yield from _patterns(item)
    elif isinstance(node, dict):
        for item in node.values():
            yield from _patterns(item)


def test_every_pattern_of_the_table_compiles_and_ends_at_the_end_of_the_text() -> None:
    # the reader compiles a pattern on its first search (start-up cost): a pattern no golden
    # document reaches would otherwise be broken unnoticed until an attacker's document does
    records = [
        v for v in vars(lite).values() if isinstance(v, type) and issubclass(v, _lite.Record)
    ]
    found = [p for cls in records for f in cls._fields for p in _patterns(f[2])]
    assert len(found) >= 40, len(found)  # the table has ~45; an empty walk must not pass
    for p in found:
        assert p.compiled().pattern == p.pattern
        assert not p.pattern.endswith("$"), p.pattern  # pydantic's "$" is "\Z" here
