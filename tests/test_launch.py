"""`k3kit launch`: the engine runs on exactly what was verified, and never when a check fails.

A stand-in engine on PATH (tests/launchkit.py) records its argv, its environment and the sha256
of the config it was given; k3kit is the real CLI in a subprocess.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from pathlib import Path

import pytest

from k3kit.errors import VerificationError
from k3kit.node.launch import parse_engine_env
from tests.conftest import GoldenKit
from tests.launchkit import FakeEngine, launch, make_fake_engine

PROFILE_DIR = "profiles/interactive/single-node-8gpu"


@pytest.fixture
def fake(tmp_path: Path) -> FakeEngine:
    return make_fake_engine(tmp_path / "engine")


def _serve_sha(kit: Path) -> str:
    return hashlib.sha256((kit / PROFILE_DIR / "serve.yaml").read_bytes()).hexdigest()


def test_launch_execs_the_engine_on_the_snapshot_that_was_hashed(
    kit: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    cache_root = golden.snapshot.parents[2]
    code, stderr, _ = launch(
        kit,
        fake,
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        cache_root,
        "--port",
        "8123",
        "--state-dir",
        tmp_path / "state",
        LD_PRELOAD="/tmp/evil.so",
        PYTHONPATH="/tmp/evil",
        VLLM_ATTENTION_BACKEND="EVIL",
        HF_HUB_OFFLINE="0",
    )
    assert code == 0, stderr
    record = fake.record()
    argv = record["argv"]
    assert argv[0] == os.path.realpath(fake.bindir / "vllm")
    assert argv[1:3] == ["serve", os.path.realpath(golden.snapshot)]
    assert argv[3] == "--config" and argv[5:] == ["--host", "127.0.0.1", "--port", "8123"]
    # the engine read a private copy of the verified serve.yaml, not the kit's file
    assert Path(argv[4]).parent == (tmp_path / "state" / "launch").resolve()
    assert record["config"] == [_serve_sha(kit)]
    assert Path(argv[4]).name == f"serve-{_serve_sha(kit)}.yaml"
    assert os.stat(argv[4]).st_mode & 0o777 == 0o400
    env = fake.env()
    assert env["HF_HUB_OFFLINE"] == "1"  # from the signed engine.env, not the caller's "0"
    for dropped in ("LD_PRELOAD", "PYTHONPATH", "VLLM_ATTENTION_BACKEND", "XDG_CACHE_HOME"):
        assert dropped not in env


def test_launch_resolves_a_linked_weights_path_to_the_folder_it_hashed(
    kit: Path, weights: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    link = tmp_path / "current"
    link.symlink_to(weights)
    code, stderr, _ = launch(
        kit,
        fake,
        "--profile",
        "batch",
        "--trust",
        golden.key.public,
        "--weights",
        link,
        "--state-dir",
        tmp_path / "state",
    )
    assert code == 0, stderr
    assert fake.record()["argv"][2] == os.path.realpath(weights)


def test_dry_run_verifies_and_prints_the_plan_without_starting(
    kit: Path, weights: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    code, stderr, plan = launch(
        kit,
        fake,
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--dry-run",
        "--json",
        "--state-dir",
        tmp_path / "state",
    )
    assert code == 0, stderr
    assert not fake.log.exists()
    assert plan["ok"] is True and plan["dry_run"] is True
    assert plan["argv"][1:3] == ["serve", os.path.realpath(weights)]
    assert plan["config"]["sha256"] == _serve_sha(kit)
    assert plan["env"]["HF_HUB_OFFLINE"] == "1"
    assert plan["engine"] == {"name": "vllm", "version": "0.33.0"}


def test_dry_run_human_output_is_shell_quoted(
    kit: Path, weights: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    from tests.conftest import run_k3kit
    from tests.launchkit import engine_env

    proc = run_k3kit(
        "launch",
        kit,
        "--no-preflight",
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--dry-run",
        "--state-dir",
        tmp_path / "state",
        env=engine_env(fake),
    )
    assert proc.returncode == 0, proc.stderr
    argv_line = next(x for x in proc.stdout.splitlines() if x.startswith("argv: "))
    assert shlex.split(argv_line.removeprefix("argv: "))[1:3] == ["serve", str(weights.resolve())]


@pytest.mark.parametrize(
    ("tamper", "code"),
    [
        ("kit_file", "KIT_FILE_CHANGED"),
        ("shard", "DIGEST_MISMATCH"),
        ("extra_weight_file", "WEIGHTS_FILE_EXTRA"),
    ],
)
def test_the_engine_is_never_started_when_a_check_fails(
    kit: Path,
    weights: Path,
    golden: GoldenKit,
    fake: FakeEngine,
    tmp_path: Path,
    tamper: str,
    code: str,
) -> None:
    if tamper == "kit_file":
        path = kit / PROFILE_DIR / "serve.yaml"
        path.write_bytes(path.read_bytes().replace(b"max-num-seqs: 32", b"max-num-seqs: 64"))
    elif tamper == "shard":
        shard = next(p for p in sorted(weights.iterdir()) if p.suffix == ".safetensors")
        data = bytearray(shard.read_bytes())
        data[-1] ^= 1
        shard.write_bytes(bytes(data))
    else:
        (weights / "sitecustomize.py").write_text("import os\n")
    rc, stderr, report = launch(
        kit,
        fake,
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--json",
        "--state-dir",
        tmp_path / "state",
    )
    assert rc == 1, stderr
    assert report["ok"] is False and report["launched"] is False
    assert code in json.dumps(report)
    assert "the engine was not started" in stderr
    assert not fake.log.exists()


def test_an_ambiguous_weights_folder_is_refused_and_the_engine_not_started(
    kit: Path, weights: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    # A plain folder that also holds a genuine cache: verified as one thing, loaded as another.
    import shutil

    shutil.copytree(
        golden.snapshot.parents[1], weights / golden.snapshot.parents[1].name, symlinks=True
    )
    rc, stderr, report = launch(
        kit,
        fake,
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--json",
        "--state-dir",
        tmp_path / "state",
    )
    assert rc == 1, stderr
    assert "WEIGHTS_AMBIGUOUS" in json.dumps(report)
    assert not fake.log.exists()


def test_a_wrong_engine_version_is_refused_before_hashing(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    fake = make_fake_engine(tmp_path / "engine", version="0.32.1")
    rc, stderr, out = launch(
        kit,
        fake,
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--json",
        "--state-dir",
        tmp_path / "state",
    )
    assert rc == 1
    assert out["error"]["code"] == "ENGINE_VERSION_MISMATCH"
    assert "measured with vllm 0.33.0" in stderr and "reports 0.32.1" in stderr
    assert "verifying the weights" not in stderr
    assert not fake.log.exists()


def test_a_missing_engine_is_an_environment_problem(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    fake = make_fake_engine(tmp_path / "engine", name="not-vllm")
    rc, stderr, out = launch(
        kit,
        fake,
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--json",
        "--state-dir",
        tmp_path / "state",
    )
    assert rc == 4, stderr
    assert out["error"]["code"] == "ENGINE_NOT_FOUND"
    assert "not found on PATH" in stderr


def test_an_unknown_profile_is_bad_input(
    kit: Path, weights: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    rc, stderr, _ = launch(
        kit,
        fake,
        "--profile",
        "turbo",
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--state-dir",
        tmp_path / "state",
    )
    assert rc == 3
    assert "no profile 'turbo'" in stderr and "interactive" in stderr
    assert not fake.log.exists()


def test_site_file_is_data_and_limited_to_four_keys(
    kit: Path, weights: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    site = tmp_path / "site.env"
    site.write_text(f"MODEL_DIR={weights}\r\nK3KIT_TRUST_KEY={golden.key.public}\r\nPORT=9001\r\n")
    rc, stderr, _ = launch(
        kit,
        fake,
        "--profile",
        "interactive",
        "--site",
        site,
        "--state-dir",
        tmp_path / "s",
    )
    assert rc == 0, stderr
    assert fake.record()["argv"][-2:] == ["--port", "9001"]
    fake.log.unlink()
    site.write_text(f"MODEL_DIR={weights}\nK3KIT_TRUST_KEY={golden.key.public}\nLD_PRELOAD=/x\n")
    rc, stderr, _ = launch(
        kit,
        fake,
        "--profile",
        "interactive",
        "--site",
        site,
        "--state-dir",
        tmp_path / "s",
    )
    assert rc == 3 and ":3: 'LD_PRELOAD' is not a site key" in stderr
    assert not fake.log.exists()


@pytest.mark.parametrize(
    ("line", "ok"),
    [
        ("HF_HUB_OFFLINE=1", True),
        ("VLLM_X='a b'", True),
        ("VLLM_X=''", True),
        ("VLLM_X='it'\"'\"'s'", True),
        ("VLLM_X=$HOME", False),  # would expand in a shell, not here: refused
        ('VLLM_X="a b"', False),  # not how k3kit quotes
        ("VLLM_X=a b", False),
        ("VLLM_X", False),
        ("1X=1", False),
        ("VLLM_X='unterminated", False),
    ],
)
def test_engine_env_is_parsed_as_data_in_the_form_k3kit_renders(line: str, ok: bool) -> None:
    if ok:
        env = parse_engine_env(f"# comment\n{line}\n".encode(), source="engine.env")
        assert len(env) == 1
    else:
        with pytest.raises(VerificationError) as exc:
            parse_engine_env(f"{line}\n".encode(), source="engine.env")
        assert exc.value.code == "ENGINE_ENV_MALFORMED"


def test_engine_env_refuses_a_key_set_twice() -> None:
    with pytest.raises(VerificationError):
        parse_engine_env(b"A=1\nA=2\n", source="engine.env")


def test_launch_checks_the_node_first_and_refuses_one_it_cannot_judge(
    kit: Path, weights: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    """Without --no-preflight, launch runs preflight; this machine has no GPU, so no GPU check
    can pass and the engine is not started."""
    from tests.conftest import run_k3kit
    from tests.launchkit import engine_env

    proc = run_k3kit(
        "launch",
        kit,
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--state-dir",
        tmp_path / "state",
        "--json",
        env=engine_env(fake),
    )
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["launched"] is False and out["preflight"]["ok"] is False
    assert any(c["status"] == "not-checked" for c in out["preflight"]["checks"])
    assert "verifying the weights" not in proc.stderr  # refused before any hashing
    assert not fake.log.exists()


def test_no_preflight_is_loud(
    kit: Path, weights: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    code, stderr, _ = launch(
        kit,
        fake,
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--state-dir",
        tmp_path / "state",
    )
    assert code == 0, stderr
    assert "WARNING: --no-preflight" in stderr
