"""Engine flag validation and weights layouts as tables: one row per refusal reason.

The companion of tests/test_primitives.py (path policy, canonical bytes, rendering), split only
to keep modules short. Flag rows run against the shipped vLLM snapshot, the same data a kit build
checks a profile with; layout rows build each folder shape for real and assert the exact code,
so a folder that could be read two ways can never quietly become "plain".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from k3kit.engines import adapter, snapshot, validate_env, validate_settings
from k3kit.errors import VerificationError
from k3kit.models import WeightsLock
from k3kit.weights.layouts import locate

# -- engine flags --------------------------------------------------------------------------------

VLLM = adapter("vllm")
SNAP = snapshot("vllm", "0.33.0")
LABEL = "vllm 0.33.0"


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        pytest.param(
            "max-num-seq",
            8,
            f"serve.max-num-seq: `--max-num-seq` is not a {LABEL} server flag (exact names only; "
            "prefixes are not accepted); did you mean `--max-num-seqs`?",
            id="abbreviated-flag",
        ),
        pytest.param(
            "frobnicate-the-kv",
            1,
            f"serve.frobnicate-the-kv: `--frobnicate-the-kv` is not a {LABEL} server flag "
            "(exact names only; prefixes are not accepted)",
            id="unknown-flag",
        ),
        pytest.param(
            "max_num_seqs", "8", "serve.max_num_seqs: expects a plain integer (got '8')", id="str"
        ),
        pytest.param(
            "max-model-len",
            "1M",
            "serve.max-model-len: expects a plain integer (got '1M')",
            id="human-readable-int",
        ),
        pytest.param(
            "max-num-seqs",
            True,
            "serve.max-num-seqs: is not a switch (_StoreAction); give a value (got True)",
            id="bool-for-value",
        ),
        pytest.param(
            "enable-prefix-caching",
            "yes",
            "serve.enable-prefix-caching: expects true or false (got 'yes')",
            id="switch-given-string",
        ),
        pytest.param(
            "gpu-memory-utilization",
            "0.9",
            "serve.gpu-memory-utilization: expects a number (got '0.9')",
            id="float-given-string",
        ),
        pytest.param(
            "dtype",
            "bf16",
            "serve.dtype: must be one of auto, bfloat16, float, float16, float32, half; "
            "did you mean 'bfloat16'? (got 'bf16')",
            id="bad-choice",
        ),
        pytest.param(
            "tool-call-parser",
            "hermess",
            "did you mean 'hermes'? (got 'hermess')",
            id="registry-name",
        ),
        pytest.param(
            "port",
            8000,
            "serve.port: is set by k3kit's launcher (paths, binding, node wiring), "
            "not by a profile",
            id="reserved",
        ),
        pytest.param(
            "allow-deprecated-quantization",
            True,
            f"serve.allow-deprecated-quantization: `--allow-deprecated-quantization` is "
            f"deprecated in {LABEL}",
            id="deprecated",
        ),
    ],
)
def test_engine_flags_refuse(key: str, value: object, problem: str) -> None:
    problems = validate_settings(VLLM, SNAP, {key: value}, "serve")
    assert len(problems) == 1
    assert problems[0].endswith(problem), problems[0]


def test_engine_flags_accept_exact_names_and_typed_values() -> None:
    settings: dict[str, object] = {
        "max-num-seqs": 8,
        "max_model_len": 4096,
        "enable-prefix-caching": True,
        "dtype": "bfloat16",
        "tool-call-parser": "hermes",
    }
    assert validate_settings(VLLM, SNAP, settings, "serve") == []


def test_unknown_engine_env_var_is_refused_and_others_are_left_alone() -> None:
    env = {"VLLM_ALLREDUCE_USE_SYMM_MEM": "1", "VLLM_ALLREDUCE_USE_SYM_MEM": "1", "HOME": "/x"}
    assert validate_env(VLLM, SNAP, env, "env") == [
        f"env.VLLM_ALLREDUCE_USE_SYM_MEM: not an environment variable {LABEL} knows "
        "(it would be ignored); did you mean VLLM_ALLREDUCE_USE_SYMM_MEM?"
    ]


# -- layouts -------------------------------------------------------------------------------------

COMMIT = "a" * 40
OTHER = "b" * 40
LOCK = WeightsLock.model_validate(
    {
        "repo": "org/model",
        "commit": COMMIT,
        "source": {
            "kind": "local",
            "requested_revision": COMMIT,
            "pinned_at": "2026-01-01T00:00:00Z",
            "sha256_source": "local-hash",
        },
        "files": [{"path": "config.json", "size": 2, "sha256": "0" * 64}],
        "file_count": 1,
        "total_bytes": 2,
    }
)


def _dirs(root: Path, *rels: str) -> Path:
    for rel in rels:
        (root / rel).mkdir(parents=True, exist_ok=True)
    return root


def _files(root: Path, *rels: str) -> Path:
    for rel in rels:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"{}")
    return root


def _cache(root: Path, repo: str = "models--org--model", commit: str = COMMIT) -> Path:
    """A real cache root holding one snapshot (with its blobs/ and refs/)."""
    _dirs(root, f"{repo}/blobs", f"{repo}/refs")
    _files(root, f"{repo}/snapshots/{commit}/config.json", "version.txt")
    return root


REPO_DIR = "models--org--model"
SNAP_DIR = f"{REPO_DIR}/snapshots/{COMMIT}"
Build = Callable[[Path], Path]


def _plain(root: Path) -> Path:
    return _files(root, "w/config.json") / "w"


@pytest.mark.parametrize(
    ("build", "given_as", "relative_root"),
    [
        pytest.param(_plain, "plain", "w", id="plain"),
        pytest.param(lambda r: _cache(r) / SNAP_DIR, "snapshot", SNAP_DIR, id="snapshot"),
        pytest.param(lambda r: _cache(r) / REPO_DIR, "repo", SNAP_DIR, id="repo"),
        pytest.param(_cache, "cache-root", SNAP_DIR, id="cache-root"),
    ],
)
def test_each_layout_kind(tmp_path: Path, build: Build, given_as: str, relative_root: str) -> None:
    layout = locate(build(tmp_path), LOCK)
    assert (layout.given_as, layout.root) == (given_as, (tmp_path / relative_root).resolve())


def _link_snapshots(root: Path) -> Path:
    _cache(root / "real")
    _dirs(root, f"{REPO_DIR}/blobs")
    os.symlink(root / "real" / REPO_DIR / "snapshots", root / REPO_DIR / "snapshots")
    return root / REPO_DIR


@pytest.mark.parametrize(
    ("build", "code", "detail"),
    [
        pytest.param(lambda r: r / "absent", "WEIGHTS_NOT_FOUND", "not found", id="missing"),
        pytest.param(
            lambda r: _plain(r) / "config.json", "WEIGHTS_NOT_FOUND", "not found", id="a-file"
        ),
        pytest.param(
            lambda r: _cache(r, "models--org--other") / "models--org--other/snapshots" / COMMIT,
            "WEIGHTS_WRONG_REPO",
            "is a snapshot of models--org--other",
            id="snapshot-of-another-repo",
        ),
        pytest.param(
            lambda r: _cache(r, "models--org--other") / "models--org--other",
            "WEIGHTS_WRONG_REPO",
            "is the cache folder of models--org--other",
            id="repo-folder-of-another-repo",
        ),
        pytest.param(
            lambda r: _cache(r, commit=OTHER) / REPO_DIR / "snapshots" / OTHER,
            "WEIGHTS_WRONG_REVISION",
            f"is a snapshot of commit {OTHER}",
            id="snapshot-of-another-commit",
        ),
        pytest.param(
            lambda r: _cache(r, commit=OTHER) / REPO_DIR,
            "WEIGHTS_MISSING_SNAPSHOT",
            f"no snapshot of org/model at commit {COMMIT}",
            id="repo-folder-without-the-commit",
        ),
        pytest.param(
            lambda r: _cache(r, "models--org--other"),
            "WEIGHTS_MISSING_SNAPSHOT",
            f"no snapshot of org/model at commit {COMMIT}",
            id="cache-root-without-the-repo",
        ),
        pytest.param(
            lambda r: _dirs(_cache(r), f"{SNAP_DIR}/models--x--y") / SNAP_DIR,
            "WEIGHTS_AMBIGUOUS",
            "a snapshot folder that also holds a cache (models--x--y/)",
            id="snapshot-holding-a-cache",
        ),
        pytest.param(
            lambda r: _files(_cache(r), f"{REPO_DIR}/model.safetensors") / REPO_DIR,
            "WEIGHTS_AMBIGUOUS",
            "a cache repo folder that also holds 'model.safetensors'",
            id="repo-folder-with-extra-file",
        ),
        pytest.param(
            lambda r: _cache(r) / REPO_DIR / "blobs",
            "WEIGHTS_AMBIGUOUS",
            "a folder inside the cache repo folder",
            id="inside-a-repo-folder",
        ),
        pytest.param(
            lambda r: _dirs(r, "w/snapshots", "w/blobs") / "w",
            "WEIGHTS_AMBIGUOUS",
            "a plain folder laid out like a cache repo folder",
            id="plain-shaped-like-a-repo-folder",
        ),
        pytest.param(
            lambda r: _files(_cache(r), "model.safetensors"),
            "WEIGHTS_AMBIGUOUS",
            "that also holds 'model.safetensors'",
            id="cache-root-with-loose-file",
        ),
        pytest.param(
            lambda r: _files(r, REPO_DIR, "version.txt"),
            "WEIGHTS_AMBIGUOUS",
            f"{REPO_DIR} is not a directory",
            id="cache-root-repo-entry-is-a-file",
        ),
        pytest.param(
            _link_snapshots,
            "WEIGHTS_SYMLINK_ESCAPE",
            "is a symlink; the folders of a cache are real directories",
            id="linked-snapshots-folder",
        ),
    ],
)
def test_layout_refusals(tmp_path: Path, build: Build, code: str, detail: str) -> None:
    given = build(tmp_path)
    with pytest.raises(VerificationError) as info:
        locate(given, LOCK)
    assert info.value.code == code
    assert detail in info.value.message
