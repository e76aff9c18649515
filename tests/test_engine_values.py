"""Signed engine settings judged by what the ENGINE makes of their values (issue 19, class 6).

The attacker is a publisher (or whoever got a kit signed) who wants the engine to run something
the signature and the weights lock do not cover, under a VERIFIED verdict: an option hidden in a
list value, a plugin or library loaded from elsewhere. Build refuses, and launch refuses the same
kit signed by hand (a kit from an older k3kit). Launch also gives the engine a fixed working
folder, PATH and TMPDIR, and checks ``--host`` by the site file's rule.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from k3kit.engines import review_profile, shipped_versions, snapshot
from k3kit.engines._argv import config_words, value_problems
from k3kit.engines._loads import SUSPECT, setting_loads
from k3kit.node.launch import SYSTEM_PATH
from tests.conftest import EXAMPLE, ROOT, GoldenKit, run_k3kit
from tests.cotenant import cotenant_python, needs_root, shared_folder
from tests.launchkit import CLAIMS, FakeEngine, hand_signed, launch, make_fake_engine
from tests.test_engines_parser import ENGINE_PY, _engine_version

PROFILE_DIR = "profiles/interactive/single-node-8gpu"
SMUGGLED = '["*.pt", "--load-format", "dummy"]'


@pytest.fixture
def fake(tmp_path: Path) -> FakeEngine:
    return make_fake_engine(tmp_path / "engine")


def _package(tmp_path: Path, *, serve: str = "", tail: str = "") -> Path:
    """The example package with lines added to the interactive profile's serve block / the end."""
    text = (EXAMPLE / "package.toml").read_text()
    anchor = "[profiles.interactive.serve]\n"
    assert anchor in text
    package = tmp_path / "package.toml"
    package.write_text(text.replace(anchor, anchor + serve, 1) + tail)
    return package


def _build(tmp_path: Path, golden: GoldenKit, package: Path) -> subprocess.CompletedProcess[str]:
    return run_k3kit("build", package, "--lock", golden.lock, "-o", tmp_path / "kit")


def _launch_args(kit: Path, golden: GoldenKit, tmp_path: Path, *extra: str | Path) -> list:  # type: ignore[type-arg]
    return [
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        golden.snapshot.parents[2],
        "--state-dir",
        tmp_path / "state",
        *extra,
    ]


# --- the engine's own config loader ------------------------------------------------------------


def _snapshot_parser(engine: str, version: str) -> argparse.ArgumentParser:
    """argparse built from the snapshot (flags and nargs as the engine's parser declares them),
    for the machine without the engine installed: what argparse makes of the words."""
    snap = snapshot(engine, version)
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("model")
    seen: set[str] = set()
    for key, opt in snap.options.items():
        if opt.flag in seen or key.startswith("no-"):
            continue
        seen.add(opt.flag)
        if opt.nargs == 0:
            parser.add_argument(opt.flag, action="store_true")
        else:
            parser.add_argument(opt.flag, nargs=opt.nargs)
    return parser


def test_vllm_config_loader_makes_a_list_item_an_option() -> None:
    """The attack as vLLM 0.33.0 reads it: each list item is its own argv word."""
    snap = snapshot("vllm", "0.33.0")
    words = config_words(snap, "ignore-patterns", ["*.pt", "--load-format", "dummy"])
    assert words == ["--ignore-patterns", "*.pt", "--load-format", "dummy"]
    parsed = _snapshot_parser("vllm", "0.33.0").parse_args(["/models/x", *words])
    assert parsed.load_format == "dummy" and parsed.ignore_patterns == ["*.pt"]
    assert value_problems(snap, "ignore-patterns", ["*.pt", "--load-format", "dummy"])


def test_sglang_config_loader_makes_a_list_item_an_option() -> None:
    snap = snapshot("sglang", "0.5.23")
    words = config_words(snap, "lora-paths", ["a", "--load-format", "dummy"])
    assert words == ["--lora-paths", "a", "--load-format", "dummy"]
    parsed = _snapshot_parser("sglang", "0.5.23").parse_args(["/models/x", *words])
    assert parsed.load_format == "dummy" and parsed.lora_paths == ["a"]


@pytest.mark.parametrize(("engine", "key"), [("vllm", "ignore-patterns"), ("sglang", "lora-paths")])
def test_the_real_engine_parser_reads_the_smuggled_load_format(
    tmp_path: Path, engine: str, key: str
) -> None:
    """Same, by the engine's own config loader and parser (scripts/engine_parse.py, as
    tests/test_engines_parser.py runs it; needs the engine venv and skips without it)."""
    if _engine_version(engine) is None:
        pytest.skip(f"no {engine} in {ENGINE_PY}: run scripts/engine-env.sh to make one")
    config = tmp_path / "serve.yaml"
    config.write_text(f"{key}: {SMUGGLED}\n")
    script = (
        "import sys, json, pathlib; sys.path.insert(0, sys.argv[1]); import engine_parse as p; "
        "p._stub(p.STUBS[sys.argv[3]]); parse = getattr(p, 'parse_' + sys.argv[3]); "
        "ns, _ = parse('/models/x', pathlib.Path(sys.argv[2])); print(json.dumps(ns.load_format))"
    )
    proc = subprocess.run(
        [str(ENGINE_PY), "-c", script, str(ROOT / "scripts"), str(config), engine],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == "dummy"


@pytest.mark.parametrize(
    ("engine", "version", "key", "value", "refused"),
    [
        ("vllm", "0.33.0", "ignore-patterns", ["*.pt", "--load-format", "dummy"], True),
        ("vllm", "0.33.0", "ignore-patterns", ["*.pt", "original/*"], False),
        ("vllm", "0.33.0", "served-model-name", ["-Odecode"], True),
        ("vllm", "0.33.0", "tool-call-parser", "--trust-remote-code", True),
        ("vllm", "0.33.0", "tool-call-parser", ["kimi_k3", "x"], True),  # one-value flag
        ("vllm", "0.33.0", "max-model-len", -1, False),  # a negative number, read as one
        ("vllm", "0.33.0", "gpu-memory-utilization", "-0.5", True),  # vLLM: a dotted option
        ("sglang", "0.5.23", "lora-paths", ["a", "--load-format", "dummy"], True),
        # SGLang passes a list on a one-value flag as one JSON word: no option there
        ("sglang", "0.5.23", "tool-call-parser", ["x"], True),
    ],
)
def test_values_are_judged_as_the_engine_splits_them(
    engine: str, version: str, key: str, value: object, refused: bool
) -> None:
    assert bool(value_problems(snapshot(engine, version), key, value)) is refused


def test_an_alias_of_a_classified_flag_is_classified_too() -> None:
    """SGLang's --speculative-draft-model is --speculative-draft-model-path by another name."""
    snap = snapshot("sglang", "0.5.23")
    review = review_profile(snap, {"speculative-draft-model": "org/draft"}, {}, "p")
    assert review.loads == {"speculative-draft-model": "loads draft-model weights"}


def test_build_refuses_a_load_format_hidden_in_a_list_value(
    tmp_path: Path, golden: GoldenKit
) -> None:
    package = _package(tmp_path, serve=f"ignore-patterns = {SMUGGLED}\n")
    proc = _build(tmp_path, golden, package)
    assert proc.returncode == 3, proc.stderr
    assert "profiles.interactive.serve.ignore-patterns" in proc.stderr
    assert "'--load-format'" in proc.stderr
    assert not (tmp_path / "kit").exists()


def test_build_refuses_a_served_model_name_the_engine_reads_as_an_option(
    tmp_path: Path, golden: GoldenKit
) -> None:
    text = (EXAMPLE / "package.toml").read_text()
    package = tmp_path / "package.toml"
    package.write_text(
        text.replace('served_model_name = "kimi-k3"', 'served_model_name = "-O3"', 1)
    )
    proc = _build(tmp_path, golden, package)
    assert proc.returncode == 3, proc.stderr
    assert "profiles.interactive.serve.served-model-name: the value '-O3' starts" in proc.stderr


def test_launch_refuses_a_hand_signed_kit_whose_list_value_smuggles_an_option(
    kit: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    hand_signed(
        kit,
        golden.key,
        f"{PROFILE_DIR}/serve.yaml",
        lambda data: data + f"ignore-patterns: {SMUGGLED}\n".encode(),
    )
    assert run_k3kit("verify", kit, "--trust", golden.key.public).returncode == 0
    rc, stderr, out = launch(kit, fake, *_launch_args(kit, golden, tmp_path), "--json")
    assert rc == 1, stderr
    assert out["error"]["code"] == "ENGINE_VALUE_IS_OPTION"
    assert "ignore-patterns" in out["error"]["message"]
    assert not fake.log.exists()


# --- settings that load code or files ----------------------------------------------------------


def test_build_refuses_ld_preload_in_engine_env(tmp_path: Path, golden: GoldenKit) -> None:
    package = _package(tmp_path, tail='\n[profiles.interactive.env]\nLD_PRELOAD = "/tmp/x.so"\n')
    proc = _build(tmp_path, golden, package)
    assert proc.returncode == 3, proc.stderr
    assert "`LD_PRELOAD` loads shared libraries" in proc.stderr
    assert "[engine.loads]" in proc.stderr


@pytest.mark.parametrize(
    ("rel", "line"),
    [
        ("engine.env", b"LD_PRELOAD=/tmp/x.so\n"),
        ("engine.env", b"PYTHONPATH=/tmp\n"),
        ("serve.yaml", b'tool-parser-plugin: "plugin.py"\n'),
        ("serve.yaml", b"trust-remote-code: true\n"),
        ("serve.yaml", b'chat-template: "/tmp/evil.jinja"\n'),
        ("serve.yaml", b'middleware: "evil.Middleware"\n'),
        ("serve.yaml", b'speculative-config: {"method": "eagle3", "model": "/tmp/draft"}\n'),
    ],
)
def test_launch_refuses_a_hand_signed_kit_that_loads_undeclared_code(
    kit: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path, rel: str, line: bytes
) -> None:
    hand_signed(kit, golden.key, f"{PROFILE_DIR}/{rel}", lambda data: data + line)
    rc, stderr, out = launch(kit, fake, *_launch_args(kit, golden, tmp_path), "--json")
    assert rc == 1, stderr
    assert out["error"]["code"] == "ENGINE_LOADS_UNDECLARED", out
    assert not fake.log.exists()


@pytest.mark.parametrize(
    ("line", "names"),
    [
        (b'load-format: "dummy"\n', "load-format"),  # random weights under a VERIFIED verdict
        (b'model: "/tmp/other-model"\n', "model"),  # a launcher-set flag
        (b"max-num-seq: 8\n", "max-num-seq"),  # a prefix argparse would accept
        (b'max-num-seqs: "8"\n', "max-num-seqs"),  # the wrong type
    ],
)
def test_launch_refuses_a_hand_signed_kit_with_a_setting_build_would_refuse(
    kit: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path, line: bytes, names: str
) -> None:
    """Outside attack pass, finding 3: launch judged a hand-signed (or older) kit's values but not
    build's own rules, so ``load-format: dummy`` reached vLLM under a VERIFIED verdict."""
    hand_signed(kit, golden.key, f"{PROFILE_DIR}/serve.yaml", lambda data: data + line)
    rc, stderr, out = launch(kit, fake, *_launch_args(kit, golden, tmp_path), "--json")
    assert rc == 1, stderr
    assert out["error"]["code"] == "ENGINE_SETTING_REFUSED", out
    assert names in out["error"]["message"]
    assert not fake.log.exists()


_KV = {"kv_connector": "X", "kv_role": "kv_both", "kv_connector_module_path": "evilpkg.connector"}
_SPEC = {"method": "eagle3", "model": "gpt2"}


@pytest.mark.parametrize(
    ("key", "inner"),
    [("kv-transfer-config", _KV), ("speculative-config", _SPEC)],
    ids=["kv_connector_module_path", "speculative_model"],
)
def test_a_json_valued_flag_written_as_a_json_string_is_looked_into(
    kit: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path, key: str, inner: dict[str, str]
) -> None:
    """Outside attack pass, finding 4: the engines parse a JSON-valued flag from a JSON *string*
    as readily as from a mapping; the string form hid what it loads from the buyer."""
    line = f"{key}: {json.dumps(json.dumps(inner))}\n".encode()
    hand_signed(kit, golden.key, f"{PROFILE_DIR}/serve.yaml", lambda data: data + line)
    rc, stderr, out = launch(kit, fake, *_launch_args(kit, golden, tmp_path), "--json")
    assert rc == 1, stderr
    assert out["error"]["code"] == "ENGINE_LOADS_UNDECLARED", out
    assert not fake.log.exists()


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("logits-processors", ["evilpkg.lp.LP"], "logits-processors"),
        ("compilation-config", {"backend": "evilpkg.backend"}, "compilation-config.backend"),
        (
            "compilation-config",
            {"inductor_passes": {"p": "evilpkg.passes.p"}},
            "compilation-config.inductor_passes",
        ),
        ("distributed-executor-backend", "evilpkg.Executor", "distributed-executor-backend"),
    ],
    ids=["logits-processors", "compile-backend", "inductor-passes", "executor"],
)
@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_vllm_flags_that_import_by_qualified_name_must_be_declared(
    version: str, key: str, value: object, named: str
) -> None:
    """Second outside pass: vLLM imports these by a dotted name, which has no '/' for the path
    backstop to see; they passed build, sign and launch undeclared."""
    review = review_profile(snapshot("vllm", version), {key: value}, {}, "serve")
    assert named in review.undeclared({}), review.loads


def test_the_json_string_form_and_the_table_form_load_the_same() -> None:
    snap = snapshot("vllm", "0.33.0")
    inner = {"kv_connector": "X", "kv_role": "kv_both", "kv_connector_module_path": "evil.mod"}
    as_table = setting_loads(snap.loads, "kv-transfer-config", inner)
    as_string = setting_loads(snap.loads, "kv-transfer-config", json.dumps(inner))
    assert as_table and as_string == as_table
    assert setting_loads(snap.loads, "kv-transfer-config", "{not json") == {}


def test_relative_tool_parser_plugin_is_refused_unless_declared_then_shown_before_launch(
    tmp_path: Path, golden: GoldenKit, fake: FakeEngine
) -> None:
    serve = 'tool-parser-plugin = "parsers/kimi.py"\n'
    proc = _build(tmp_path, golden, _package(tmp_path, serve=serve))
    assert proc.returncode == 3, proc.stderr
    assert "`tool-parser-plugin` imports a Python file" in proc.stderr

    reason = "our tool parser, installed with the engine image"
    tail = f'\n[engine.loads]\ntool-parser-plugin = "{reason}"\n'
    proc = _build(tmp_path, golden, _package(tmp_path, serve=serve, tail=tail))
    assert proc.returncode == 0, proc.stderr
    kit = tmp_path / "kit"
    info = json.loads((kit / "kit.json").read_text())
    assert info["engine"]["loads"] == {"tool-parser-plugin": reason}
    signed = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", CLAIMS)
    assert signed.returncode == 0, signed.stderr
    shown = run_k3kit("show", kit, "--trust", golden.key.public)
    assert shown.returncode == 0, shown.stderr
    assert "engine loads (declared)" in shown.stdout and reason in shown.stdout

    args = _launch_args(kit, golden, tmp_path, "--dry-run")
    rc, stderr, _ = launch(kit, fake, *args)
    assert rc == 0, stderr
    proc = run_k3kit(
        "launch", kit, "--no-preflight", *args, env={"PATH": f"{fake.bindir}:/usr/bin:/bin"}
    )
    assert f"loads: tool-parser-plugin (declared by the publisher: {reason})" in proc.stdout
    rc, stderr, out = launch(kit, fake, *args, "--json")
    assert out["loads"] == {"tool-parser-plugin": reason}


def test_a_declaration_nothing_uses_is_refused(tmp_path: Path, golden: GoldenKit) -> None:
    tail = '\n[engine.loads]\ntrust-remote-code = "not actually set"\n'
    proc = _build(tmp_path, golden, _package(tmp_path, tail=tail))
    assert proc.returncode == 3, proc.stderr
    assert "engine.loads.trust-remote-code: no profile or topology sets it" in proc.stderr


def test_a_path_value_on_an_unclassified_flag_is_caught_by_its_shape() -> None:
    snap = snapshot("vllm", "0.33.0")
    review = review_profile(snap, {"tool-call-parser": "../x"}, {"FOO": "/tmp/lib"}, "p")
    assert set(review.loads) == {"tool-call-parser", "FOO"}
    clean = review_profile(snap, {"trust-remote-code": False, "max-num-seqs": 8}, {}, "p")
    assert clean.loads == {} and clean.smuggled == []


@pytest.mark.parametrize(("engine", "versions"), sorted(shipped_versions().items()))
def test_every_snapshot_classifies_every_flag_that_may_load_something(
    engine: str, versions: list[str]
) -> None:
    """A new engine version's snapshot cannot ship until its suspicious flags are reviewed."""
    for version in versions:
        snap = snapshot(engine, version)
        table = snap.loads
        classified = set(table.code) | set(table.path) | table.inert
        missing = sorted(
            key
            for key, opt in snap.options.items()
            if SUSPECT.search(key) and not classified & set(opt.aliases(snap.options))
        )
        assert not missing, f"{engine} {version}: classify in {engine}-{version}-loads.json"
        assert {name.split(".")[0] for name in classified} <= set(snap.options)
        assert set(table.env) <= snap.env_vars


# --- what the engine process gets from launch ----------------------------------------------------


def test_engine_runs_in_a_fixed_folder_with_a_fixed_path_and_private_tmpdir(
    kit: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    """The caller stands in a folder others write, with such a folder on PATH and as TMPDIR."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    args = _launch_args(kit, golden, tmp_path)
    env = {"PATH": f"{shared}:{fake.bindir}:/usr/bin:/bin", "TMPDIR": str(shared)}
    dry = run_k3kit(
        "launch", kit, "--no-preflight", *args, "--dry-run", "--json", cwd=shared, env=env
    )
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    runtime = (tmp_path / "state" / "launch").resolve()
    assert plan["cwd"] == str(runtime)
    assert plan["env"]["PATH"] == os.pathsep.join((str(fake.bindir.resolve()), *SYSTEM_PATH))
    assert plan["env"]["TMPDIR"] == str(runtime / "tmp")
    assert stat.S_IMODE(os.stat(runtime / "tmp").st_mode) == 0o700
    human = run_k3kit("launch", kit, "--no-preflight", *args, "--dry-run", cwd=shared, env=env)
    assert f"cwd:  {runtime}" in human.stdout

    ran = run_k3kit("launch", kit, "--no-preflight", *args, cwd=shared, env=env)
    assert ran.returncode == 0, ran.stderr
    seen = fake.env()
    assert seen["PWD"] == str(runtime)
    assert str(shared) not in seen["PATH"] and seen["TMPDIR"] == str(runtime / "tmp")


@pytest.mark.parametrize("host", ["-x", "--load-format=dummy", "127.0.0.1 --trust-remote-code"])
def test_a_host_that_could_pass_for_an_option_is_refused(
    kit: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path, host: str
) -> None:
    rc, stderr, out = launch(
        kit, fake, *_launch_args(kit, golden, tmp_path), f"--host={host}", "--json"
    )
    assert rc == 3, stderr
    assert out["error"]["code"] == "LAUNCH_ADDRESS_INVALID"
    assert not fake.log.exists()


def test_host_given_as_a_separate_word_is_refused(
    kit: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    rc, stderr, _ = launch(kit, fake, *_launch_args(kit, golden, tmp_path), "--host", "-x")
    assert rc == 3 and "listen address '-x'" in stderr, stderr
    assert not fake.log.exists()


@needs_root
def test_an_engine_a_cotenant_planted_on_the_callers_path_is_never_run(
    kit: Path, golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    """The caller has a shared folder first on PATH; a real second user plants `vllm` there."""
    with shared_folder() as shared:
        marker = shared / "ran"
        planted = (
            "import os, sys; p = os.path.join(sys.argv[1], 'vllm'); "
            "open(p, 'w').write('#!/bin/sh\\ntouch ' + sys.argv[2] + '\\necho 0.33.0\\n'); "
            "os.chmod(p, 0o755)"
        )
        cotenant_python(planted, str(shared), str(marker))
        env = {"PATH": f"{shared}:{fake.bindir}:/usr/bin:/bin"}
        proc = run_k3kit(
            "launch",
            kit,
            "--no-preflight",
            *_launch_args(kit, golden, tmp_path),
            "--json",
            env=env,
        )
        assert proc.returncode == 4, proc.stderr
        assert json.loads(proc.stdout)["error"]["code"] == "ENGINE_PATH_UNSAFE"
        assert not marker.exists(), "the planted engine ran"
        assert not fake.log.exists()
