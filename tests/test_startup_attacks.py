"""Attacks on the launch/preflight reading path, as the attacker would make them.

Issue 23 moved ``launch --dry-run``, ``preflight``, ``render-site`` and the registry verbs onto
the pydantic-free records of :mod:`k3kit.models.lite`. This file holds what an attacker's review
of that change found: each test builds the hostile input with the real tools (a kit hand-signed
with the publisher's key, a site file), runs the real CLI and checks the refusal, its code and
that nothing was written. The review's inputs that found NO hole are listed in the lead's report.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from k3kit.node.launch import plan_launch
from k3kit.preflight import NodeNotReady, launch_node_check
from k3kit.signing.keys import load_public
from tests.conftest import GoldenKit, KeyFiles, run_k3kit
from tests.launchkit import engine_env, hand_signed, launch, make_fake_engine
from tests.test_cpu_target import cpu_hardware, cpu_kit_with

SITE = "MODEL_DIR=/srv/models/kimi\nIMAGE=registry.example/vllm@sha256:" + "a" * 64 + "\n"


def _first(kit: Path, name: str) -> str:
    return sorted(p.relative_to(kit).as_posix() for p in kit.rglob(name))[0]


def _render_site(kit: Path, golden: GoldenKit, site: Path, out: Path) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    proc = run_k3kit(
        "render-site", kit, "--trust", golden.key.public, "--site", site, "-o", out, "--json"
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_render_site_of_a_kit_signing_a_latin1_compose_template_is_refused_not_a_crash(
    golden: GoldenKit, kit: Path, tmp_path: Path
) -> None:
    # a publisher (or an older tool) signs a deploy template that is not UTF-8: the kit
    # verifies, and render-site used to end in an internal error (exit 70, UnicodeDecodeError)
    rel = _first(kit, "compose.yaml")
    hand_signed(kit, golden.key, rel, lambda data: data + b"\n# caf\xe9\n")
    site = tmp_path / "site.env"
    site.write_text(SITE)
    out = tmp_path / "out"
    code, answer, stderr = _render_site(kit, golden, site, out)
    assert code == 1, stderr
    assert answer["error"]["code"] == "DEPLOY_FILE_MALFORMED"
    assert rel in answer["error"]["message"] and "0xe9" in answer["error"]["message"]
    assert not out.exists()  # nothing rendered from a kit that was refused


def test_render_site_reads_a_site_file_as_launch_does_not_with_replacement_characters(
    golden: GoldenKit, tmp_path: Path
) -> None:
    # launch refuses a site file that is not UTF-8 (SITE_INVALID); render-site decoded the same
    # file with "replace" and rendered values nobody wrote: one file, two readings
    site = tmp_path / "site.env"
    site.write_bytes(SITE.encode() + b"NAMESPACE=inf\xe9rence\n")
    out = tmp_path / "out"
    code, answer, stderr = _render_site(golden.kit, golden, site, out)
    assert code == 3, stderr
    assert answer["error"]["code"] == "SITE_INVALID"
    assert "not UTF-8" in answer["error"]["message"]
    assert not out.exists()


def _point(link: Path, target: Path) -> None:
    """Point ``link`` at ``target`` in one rename, as whoever keeps a ``current`` link does."""
    new = link.with_name(link.name + ".new")
    new.symlink_to(target)
    os.replace(new, link)


def test_a_kit_swapped_while_launch_checks_the_node_is_not_what_the_node_check_judges(
    golden: GoldenKit, signing_key: KeyFiles, weights: Path, tmp_path: Path
) -> None:
    # Two kits the same publisher signed: one this node cannot run (65536 cores), one it can.
    # The operator launches `current`, which names the first. Whoever can repoint `current`
    # does so the moment launch says it is checking the node: the node check used to verify and
    # judge the kit at that path again (the second one, which passes), while launch goes on with
    # the kit it verified first, on a node nothing judged it for.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    too_big = cpu_kit_with(tmp_path / "a", golden, signing_key, cpu_hardware(cores=65536))
    fits = cpu_kit_with(tmp_path / "b", golden, signing_key, cpu_hardware())
    current = tmp_path / "current"
    current.symlink_to(too_big.kit)
    fake = make_fake_engine(tmp_path / "engine")
    trusted = [load_public(signing_key.public)]

    def attacker(step: str) -> None:
        if step.startswith("checking the node"):
            _point(current, fits.kit)

    with pytest.raises(NodeNotReady) as refused:
        plan_launch(
            current,
            trusted,
            profile="interactive",
            weights=weights,
            runtime_dir=tmp_path / "state" / "launch",
            base_env=engine_env(fake),
            on_step=attacker,
            check_node=launch_node_check(weights=weights),
        )
    checks = {c.name: c for c in refused.value.report.checks}
    assert checks["cpu.cores"].status == "fail"  # the launched kit's 65536 cores were judged
    assert not fake.log.exists()


@pytest.mark.parametrize(
    "value",
    [b"NaN", b"Infinity", b"-Infinity", b"1e999", b'{"method": "mtp", "method": "eagle3"}'],
)
def test_serve_yaml_values_python_json_reads_but_build_never_writes_are_refused(
    value: bytes,
) -> None:
    # json.loads takes each of these (1e999 as infinity, the last of two keys); preflight did
    # arithmetic on the first four and launch handed them to the engine
    from k3kit.errors import VerificationError
    from k3kit.formats.documents import parse_serve_config

    with pytest.raises(VerificationError) as refused:
        parse_serve_config(b"gpu-memory-utilization: " + value + b"\n", source="serve.yaml")
    assert refused.value.code == "SERVE_CONFIG_MALFORMED"
    assert "serve.yaml:1" in refused.value.message


def test_serve_yaml_still_reads_back_an_integer_build_writes_beyond_json_s_safe_range() -> None:
    # build writes any integer TOML gives it (a seed of 20 digits): refusing NaN and Infinity
    # must not refuse a kit build made
    from k3kit.formats.documents import parse_serve_config
    from k3kit.render import yaml_scalar

    line = f"seed: {yaml_scalar(99999999999999999999)}\n".encode()
    assert parse_serve_config(line, source="serve.yaml") == {"seed": 99999999999999999999}


@pytest.mark.parametrize(
    ("field", "value"),
    [("total_bytes", 1), ("file_count", 1), ("repo", "someone-else/Kimi-K3")],
)
def test_verify_refuses_a_signed_kit_json_whose_weights_summary_is_not_the_locks(
    golden: GoldenKit, kit: Path, field: str, value: object
) -> None:
    # build copies repo, file_count and total_bytes from the lock; preflight sizes the node by
    # total_bytes and the card shows all three. Verify compared only the lock's digest and
    # commit, so a kit.json signed by hand with its own figures verified.
    from k3kit._canonical import dumps

    def edit(data: bytes) -> bytes:
        info = json.loads(data)
        info["weights"][field] = value
        return dumps(info)

    hand_signed(kit, golden.key, "kit.json", edit)
    proc = run_k3kit("verify", kit, "--trust", golden.key.public, "--json")
    assert proc.returncode == 1, proc.stdout
    checks = {c["id"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["weights_lock"]["code"] == "KIT_LOCK_MISMATCH"
    assert str(value) in checks["weights_lock"]["detail"]


def test_launch_refuses_a_signed_serve_yaml_whose_parallel_sizes_are_not_kit_json_s(
    golden: GoldenKit, kit: Path, weights: Path, tmp_path: Path
) -> None:
    # kit.json says the interactive profile runs TP 8 (preflight's budget and a multi-node
    # launch's rank wiring use it); the signed serve.yaml the engine reads says TP 1
    rel = "profiles/interactive/single-node-8gpu/serve.yaml"
    hand_signed(
        kit,
        golden.key,
        rel,
        lambda data: data.replace(b"tensor-parallel-size: 8\n", b"tensor-parallel-size: 1\n"),
    )
    fake = make_fake_engine(tmp_path / "engine")
    code, stderr, out = launch(
        kit,
        fake,
        "--dry-run",
        *("--profile", "interactive", "--topology", "single-node-8gpu"),
        *("--trust", golden.key.public, "--weights", weights),
        *("--state-dir", tmp_path / "state", "--json"),
    )
    assert code == 1, stderr
    error = out["error"]
    assert error["code"] == "ENGINE_SETTING_REFUSED"
    assert "parallel tp = 8, the settings make it 1" in error["message"]
    assert not fake.log.exists()  # not even asked its version
