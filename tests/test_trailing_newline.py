"""Degenerate values: a trailing newline (attack class 4).

Python's ``$`` matches at the end of the text *and* before a final newline, so a pattern
``^[A-Za-z0-9._-]+$`` checked with ``match`` (or ``search``) let ``"name\\n"`` through. pydantic's
patterns (Rust's regex) and the lite reader (``$`` written as ``\\Z``) never did; the hand-written
validators below did, until they used ``fullmatch`` (issue 23's eighth pass, found while timing
their compiles). One test per validator that takes text from outside: each refuses the value
with a newline and accepts it without.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Any, cast

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from k3kit._fs import root_chain_names
from k3kit._policy import path_problem
from k3kit.archive._tar import parse_header
from k3kit.commerce.ledger.purchase import purchase
from k3kit.errors import InputError, VerificationError
from k3kit.evidence import parse_vllm_result
from k3kit.evidence.vllm import _detect as vllm_detect
from k3kit.hub.policy import resolve_endpoint
from k3kit.node.launch import parse_engine_env
from k3kit.publish.kit import load_lock
from k3kit.signing.trust import sshsig
from k3kit.weights import hash_tree
from k3kit.weights.layouts import Layout, is_hf_local_metadata, locate
from k3kit.weights.pin import check_repo_id, pin_hub
from tests.benchgen import simulate
from tests.conftest import GoldenKit

_RAW_KEYS = ("output_lens", "ttfts", "itls", "input_lens", "generated_texts", "errors")


def test_a_kit_path_segment_may_not_end_in_a_newline() -> None:
    """The one rule for a path made from untrusted input (manifests, archive members, evidence):
    a name with a newline is a second file that prints as the first in every listing."""
    assert path_problem("profiles/interactive/serve.yaml") is None
    assert path_problem("profiles/interactive/serve.yaml\n") is not None
    assert path_problem("profiles\n/serve.yaml") is not None


def test_a_root_file_name_may_not_end_in_a_newline() -> None:
    """``root/1.root.json\\n`` was read as version 1: two names for one root in one kit."""
    good = [("root", "dir", 0), ("root/1.root.json", "file", 10)]
    assert root_chain_names(good) == {1: "root/1.root.json"}
    with pytest.raises(VerificationError) as info:
        root_chain_names([("root", "dir", 0), ("root/1.root.json\n", "file", 10)])
    assert info.value.code == "ROOT_CHAIN_MALFORMED"


def test_an_allowed_signers_principal_may_not_end_in_a_newline() -> None:
    """With the newline, the line k3kit writes for ssh-keygen became two: ``alice`` alone, then
    ``namespaces="k3kit" ssh-ed25519 ...``, which ssh-keygen reads as the key for a principal
    named ``namespaces="k3kit"`` with no namespace restriction."""
    pub = Ed25519PrivateKey.generate().public_key()
    assert sshsig.allowed_signers_line(pub, "release@k3kit").count("\n") == 0
    with pytest.raises(ValueError, match="principal"):
        sshsig.allowed_signers_line(pub, "release@k3kit\n")


def test_a_payment_reference_may_not_end_in_a_newline() -> None:
    """``PAY-1`` and ``PAY-1\\n`` are two rows to the ledger and one payment to the seller. The
    reference is refused before the ledger is touched (no database is given here)."""
    values: dict[str, Any] = {
        "licence": b"",
        "terms": b"",
        "terms_name": "terms.md",
        "amount_minor": 100,
        "currency": "EUR",
        "package": "kimi-k3-b300x8",
        "valid_from": "2026-01-01T00:00:00Z",
        "valid_until": "2027-01-01T00:00:00Z",
        "now": "2026-01-01T00:00:00Z",
    }
    for field, bad in (("payment_ref", "PAY-1\n"), ("package", "kimi-k3-b300x8\n")):
        with pytest.raises(InputError) as info:
            purchase(cast(Any, None), **{"payment_ref": "PAY-1", **values, field: bad})
        assert info.value.code == "BAD_INPUT" and "plain identifier" in info.value.message


def test_a_hub_endpoint_may_not_end_in_a_newline() -> None:
    assert resolve_endpoint("https://hub.example") == "https://hub.example"
    with pytest.raises(InputError) as info:
        resolve_endpoint("https://hub.example\n")
    assert info.value.code == "BAD_ENDPOINT"


def test_an_engine_env_key_is_a_whole_identifier() -> None:
    """engine.env is split into lines first, so a key never holds a newline; the key check is a
    full match all the same, like every other."""
    assert parse_engine_env(b"VLLM_USE_V1=1\n", source="engine.env") == {"VLLM_USE_V1": "1"}
    with pytest.raises(VerificationError):
        parse_engine_env(b"VLLM USE=1\n", source="engine.env")


# -- validators the eighth pass missed (found by the attack on it) ------------------------------


def test_a_vllm_statistic_key_may_not_end_in_a_newline() -> None:
    """A vLLM result with ``"mean_ttft_ms\\n"`` beside ``"mean_ttft_ms"``: both were read as the
    mean TTFT, the later one winning, so a report whose visible figure is 52 ms was summarised
    as 1 ms (``stats_by_key`` is sglang's reader too)."""
    result: dict[str, Any] = dict(simulate(3, concurrency=4, num_prompts=12, output_len=16))
    result = {k: v for k, v in result.items() if k not in _RAW_KEYS}
    honest = parse_vllm_result(json.dumps(result).encode(), source="r.json").stats["ttft"]["mean"]
    forged = {**result, "mean_ttft_ms\n": 1.0}
    read = parse_vllm_result(json.dumps(forged).encode(), source="r.json").stats["ttft"]["mean"]
    assert read == honest == result["mean_ttft_ms"]
    # nor does such a key make a file pass for a vLLM result
    assert not vllm_detect({"p99_ttft_ms\n": 1.0}) and vllm_detect({"p99_ttft_ms": 1.0})


def _ustar_header(size_field: bytes) -> bytes:
    info = tarfile.TarInfo("a.txt")
    info.size = 3
    block = bytearray(info.tobuf(format=tarfile.USTAR_FORMAT)[:512])
    block[124:136] = size_field
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def test_a_tar_number_field_may_not_end_in_a_newline() -> None:
    """The member reader's numbers are "strict octal": digits, then spaces or NULs. A size field
    ``00000000003\\n`` was read as 3 (``$`` before the final newline): a second spelling of one
    header, which the writer's rule (tests/test_archive_differential.py) never produces."""
    assert parse_header(_ustar_header(b"00000000003\0"), 1).size == 3
    with pytest.raises(VerificationError) as info:
        parse_header(_ustar_header(b"00000000003\n"), 1)
    assert info.value.code == "ARCHIVE_FORMAT"


def test_a_hub_bookkeeping_name_may_not_end_in_a_newline(tmp_path: Path) -> None:
    """huggingface_hub's own files beside local_dir weights are skipped by name. With a newline
    the name was still excused, so pinning a plain folder skipped (left out of the lock,
    silently) a file that verify then refuses as an unprintable name."""
    meta = ".cache/huggingface/.gitignore"
    assert is_hf_local_metadata(meta, "file", 10)
    assert not is_hf_local_metadata(meta + "\n", "file", 10)
    assert not is_hf_local_metadata(".cache/huggingface/download/w.lock\n", "file", 10)
    folder = tmp_path / "weights"
    (folder / ".cache" / "huggingface").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / ".cache" / "huggingface" / ".gitignore\n").write_text("*\n")
    with pytest.raises(VerificationError) as info:
        hash_tree(Layout(folder, "plain", (), "plain"), workers=1)
    assert info.value.code == "WEIGHTS_BAD_NAME"


def test_a_cache_root_entry_may_not_end_in_a_newline(golden: GoldenKit, tmp_path: Path) -> None:
    """A cache root holds repo folders and huggingface_hub's bookkeeping, nothing else: a loose
    ``CACHEDIR.TAGx`` makes it ambiguous (WEIGHTS_AMBIGUOUS), and so must ``CACHEDIR.TAG\\n``."""
    lock = load_lock(golden.lock)
    cache = Path(shutil.copytree(golden.snapshot.parents[2], tmp_path / "hub", symlinks=True))
    assert locate(cache, lock).given_as == "cache-root"
    for name in ("CACHEDIR.TAG\n", "version.txt\n", ".locks\n"):
        (cache / name).write_text("x")
        with pytest.raises(VerificationError) as info:
            locate(cache, lock)
        assert info.value.code == "WEIGHTS_AMBIGUOUS", name
        (cache / name).unlink()


class _NoHub:
    endpoint = "https://hub.invalid"

    def resolve(self, repo: str, revision: str) -> str:
        raise AssertionError(f"the hub was asked about {repo!r}")

    def list_files(self, repo: str, commit: str) -> list[Any]:
        raise AssertionError("the hub was asked for a listing")

    def read_file(self, repo: str, commit: str, path: str, max_bytes: int) -> bytes:
        raise AssertionError("the hub was asked for a file")


def test_a_repo_id_may_not_end_in_a_newline() -> None:
    """``org/name\\n`` passed the repo-id check that runs "before it is put into a hub URL": pin
    asked the hub about it (work before the refusal) and pydantic refused the lock only after."""
    check_repo_id("org/name")
    with pytest.raises(InputError) as info:
        check_repo_id("org/name\n")
    assert info.value.code == "BAD_REPO_ID"
    with pytest.raises(InputError) as info:
        pin_hub(_NoHub(), repo="org/name\n", revision="main", pinned_at="2026-01-01T00:00:00Z")
    assert info.value.code == "BAD_REPO_ID"
