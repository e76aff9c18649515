"""Any engine version: `k3kit engine snapshot` reads a wheel's own parser, and
`build --engine-snapshot` signs a kit for that exact version, with the snapshot it was validated
against inside the kit.

Offline: the wheel is a stand-in made in the test with the real vLLM wheel's layout
(tests/enginewheel.py). The snapshot is the publisher's word to the buyer, so the attacks here are
a publisher's: a hand-edited snapshot that says a code-loading flag is ordinary or adds its own
classification, a snapshot for another version, a wheel that is not what it is named, and a
signed kit whose snapshot is not the one ``kit.json`` names.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from k3kit._canonical import sha256_of_model
from k3kit._fs import atomic_write
from k3kit.formats.manifest import RECEIPT_NAME, build_manifest, kit_checksum, manifest_bytes
from k3kit.formats.receipt import build_statement
from k3kit.models import PAYLOAD_TYPE, Claims, KitInfo, WeightsLock, load
from k3kit.publish.kit import load_toml
from k3kit.signing.keys import load_private
from k3kit.signing.sign import sign_envelope
from tests.conftest import EXAMPLE, FIXED_TIME, GoldenKit, run_k3kit
from tests.enginewheel import fake_vllm_wheel
from tests.launchkit import FakeEngine, engine_env
from tests.realcorpus import case, claims_for

VERSION = "0.25.1"
NEW_FLAG: dict[str, object] = {
    "action": "_StoreAction",
    "choices": None,
    "dest": "scheduler_hook_module",
    "flags": ["--scheduler-hook-module"],
    "nargs": None,
    "type": "str",
}


def _code(proc: subprocess.CompletedProcess[str]) -> str:
    out = json.loads(proc.stdout)
    return str(out["error"]["code"])


#: New in the stand-in version too: a plain switch whose name suggests nothing.
NEW_SWITCH: dict[str, object] = {
    "action": "_StoreTrueAction",
    "choices": None,
    "dest": "fast_start",
    "flags": ["--fast-start"],
    "nargs": 0,
    "type": None,
}


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    return fake_vllm_wheel(tmp_path, VERSION, extra=[NEW_FLAG, NEW_SWITCH])


@pytest.fixture
def snap(wheel: Path, tmp_path: Path) -> Path:
    out = tmp_path / "vllm-0.25.1.snapshot.json"
    proc = run_k3kit(
        "engine", "snapshot", "--engine", "vllm", "--wheel", wheel, "--version", VERSION, "-o", out
    )
    assert proc.returncode == 0, proc.stderr
    return out


def _package(tmp: Path, extra_serve: str = "", loads: str = "", version: str = VERSION) -> Path:
    text = (EXAMPLE / "package.toml").read_text()
    text = text.replace('version = "0.33.0"\n', f'version = "{version}"\n', 1)
    text = text.replace(
        "[profiles.interactive.serve]\n", f"[profiles.interactive.serve]\n{extra_serve}", 1
    )
    if loads:
        text = text.replace("[engine]\n", "[engine.loads]\n" + loads + "\n[engine]\n", 1)
    path = tmp / "package.toml"
    path.write_text(text)
    return path


def _claims(tmp: Path, version: str = VERSION) -> Path:
    text = (EXAMPLE / "claims.toml").read_text()
    assert 'engine_version = "0.33.0"' in text
    path = tmp / "claims.toml"
    path.write_text(text.replace('engine_version = "0.33.0"', f'engine_version = "{version}"'))
    return path


def _build(
    golden: GoldenKit, tmp: Path, package: Path, *extra: str | Path
) -> subprocess.CompletedProcess[str]:
    return run_k3kit("build", package, "--lock", golden.lock, "-o", tmp / "kit", "--json", *extra)


# --- the verb ----------------------------------------------------------------------------------


def test_snapshot_verb_reads_the_wheels_own_parser_and_records_where_from(
    wheel: Path, snap: Path
) -> None:
    doc = json.loads(snap.read_bytes())
    assert doc["engine"] == "vllm" and doc["version"] == VERSION
    flags = {f for opt in doc["options"] for f in opt["flags"]}
    assert "--scheduler-hook-module" in flags and "--max-num-seqs" in flags
    assert "VLLM_NEW_IN_THIS_VERSION" in doc["env_vars"]
    prov = doc["provenance"]
    assert prov["wheel"] == wheel.name
    assert prov["wheel_sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert prov["wheel_bytes"] == wheel.stat().st_size
    assert prov["parser_source"] == "vllm/entrypoints/cli/serve.py"
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read("vllm/entrypoints/cli/serve.py")
    assert prov["parser_source_sha256"] == hashlib.sha256(source).hexdigest()
    assert prov["generated_on"] == "2026-11-01"  # SOURCE_DATE_EPOCH of run_k3kit


def test_snapshot_verb_refuses_a_wheel_that_is_another_version(tmp_path: Path) -> None:
    # A 0.24.0 wheel renamed to look like 0.25.1: its own METADATA says what it is.
    wheel = fake_vllm_wheel(tmp_path, VERSION, metadata_version="0.24.0")
    proc = run_k3kit(
        "engine", "snapshot", "--engine", "vllm", "--wheel", wheel, "--version", VERSION,
        "-o", tmp_path / "s.json", "--json",
    )  # fmt: skip
    assert proc.returncode == 3 and _code(proc) == "ENGINE_WHEEL_UNUSABLE", proc.stderr
    assert "is vllm 0.24.0, not 0.25.1" in proc.stderr
    assert not (tmp_path / "s.json").exists()


def test_snapshot_verb_refuses_a_wheel_member_that_climbs_out(tmp_path: Path) -> None:
    wheel = fake_vllm_wheel(tmp_path, VERSION, members={"../../escaped.py": "x = 1\n"})
    proc = run_k3kit(
        "engine", "snapshot", "--engine", "vllm", "--wheel", wheel, "-o", tmp_path / "s.json",
        "--json",
    )  # fmt: skip
    assert proc.returncode == 3 and _code(proc) == "ENGINE_WHEEL_UNUSABLE", proc.stderr
    assert "outside the folder" in proc.stderr


def test_snapshot_verb_refuses_a_file_that_is_not_a_wheel(tmp_path: Path) -> None:
    fake = tmp_path / "vllm-0.25.1-py3-none-any.whl"
    fake.write_bytes(b"not a zip at all")
    proc = run_k3kit(
        "engine", "snapshot", "--engine", "vllm", "--wheel", fake, "-o", tmp_path / "s.json",
        "--json",
    )  # fmt: skip
    assert proc.returncode == 3 and _code(proc) == "ENGINE_WHEEL_UNUSABLE", proc.stderr


def test_snapshot_verb_reads_an_engine_that_logs_to_stdout_while_imported(tmp_path: Path) -> None:
    chatty = 'print("INFO 12-01 00:00:00 [__init__.py:1] Automatically detected platform cpu.")\n'
    wheel = fake_vllm_wheel(tmp_path, VERSION, members={"vllm/__init__.py": chatty})
    out = tmp_path / "s.json"
    proc = run_k3kit("engine", "snapshot", "--engine", "vllm", "--wheel", wheel, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_bytes())["version"] == VERSION


def test_snapshot_verb_says_why_an_engine_that_cannot_import_was_not_read(tmp_path: Path) -> None:
    broken = "import torch_that_is_not_installed\n"
    wheel = fake_vllm_wheel(tmp_path, VERSION, members={"vllm/__init__.py": broken})
    proc = run_k3kit(
        "engine", "snapshot", "--engine", "vllm", "--wheel", wheel, "-o", tmp_path / "s.json",
        "--json",
    )  # fmt: skip
    assert proc.returncode == 3 and _code(proc) == "ENGINE_WHEEL_UNUSABLE", proc.stderr
    assert "torch_that_is_not_installed" in proc.stderr and "--python" in proc.stderr
    assert not (tmp_path / "s.json").exists()


def test_snapshot_verb_does_not_overwrite_without_force(wheel: Path, snap: Path) -> None:
    before = snap.read_bytes()
    proc = run_k3kit("engine", "snapshot", "--engine", "vllm", "--wheel", wheel, "-o", snap)
    assert proc.returncode == 3 and "exists" in proc.stderr
    assert snap.read_bytes() == before


# --- build and sign for the version that ran ----------------------------------------------------


def test_build_without_a_snapshot_for_an_unshipped_version_names_the_verb(
    golden: GoldenKit, tmp_path: Path
) -> None:
    proc = _build(golden, tmp_path, _package(tmp_path))
    assert proc.returncode == 3 and _code(proc) == "ENGINE_UNKNOWN"
    assert "k3kit engine snapshot" in proc.stderr


def test_build_and_sign_a_kit_for_the_version_that_ran_with_its_snapshot_signed_inside(
    golden: GoldenKit, snap: Path, tmp_path: Path
) -> None:
    proc = _build(golden, tmp_path, _package(tmp_path), "--engine-snapshot", snap)
    assert proc.returncode == 0, proc.stderr
    kit = tmp_path / "kit"
    inside = (kit / "engine-snapshot.json").read_bytes()
    assert inside == snap.read_bytes()  # the verb writes canonical bytes; build keeps them
    info = json.loads((kit / "kit.json").read_bytes())
    assert info["engine"]["version"] == VERSION
    ref = info["engine_snapshot"]
    assert ref["sha256"] == hashlib.sha256(inside).hexdigest()
    assert ref["wheel"] == "vllm-0.25.1-py3-none-any.whl"
    listed = json.loads((kit / "MANIFEST.json").read_bytes())["files"]
    assert any(e["path"] == "engine-snapshot.json" for e in listed)
    signed = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", _claims(tmp_path))
    assert signed.returncode == 0, signed.stderr
    ok = run_k3kit("verify", kit, "--trust", golden.key.public, "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # ... and travels in the archive a buyer pulls, which verifies too.
    archive = tmp_path / "kit.tar.gz"
    packed = run_k3kit("pack", kit, "-o", archive, "--trust", golden.key.public)
    assert packed.returncode == 0, packed.stderr
    pulled = run_k3kit("verify", archive, "--trust", golden.key.public, "--json")
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    # The signature covers the snapshot: a flag slipped into it afterwards fails verification.
    (kit / "engine-snapshot.json").write_bytes(inside.replace(b'"--grpc"', b'"--grpc","--x"'))
    bad = run_k3kit("verify", kit, "--trust", golden.key.public, "--json")
    assert bad.returncode == 1, bad.stdout


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value) if isinstance(value, str) else str(value)


def _claims_toml(doc: dict[str, object]) -> str:
    """claims.toml as a publisher writes it, from the claims model's JSON form."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict | list)]
    lines += [f"{k} = {_toml_value(v)}" for k, v in doc.items() if k != "runs" and v == []]
    lines.append(f"limitations = {_toml_value(doc['limitations'])}")
    for key in ("definitions", "environment"):
        lines.append(f"[{key}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in doc[key].items()]  # type: ignore[attr-defined]
    for name, workload in doc["workloads"].items():  # type: ignore[attr-defined]
        lines.append(f"[workloads.{json.dumps(name)}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in workload.items()]
    for run in doc["runs"]:  # type: ignore[attr-defined]
        lines.append("[[runs]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in run.items()]
    return "\n".join(lines) + "\n"


def test_a_real_vllm_0_25_1_result_is_signed_as_0_25_1_and_audits_clean(
    golden: GoldenKit, snap: Path, tmp_path: Path
) -> None:
    # Issue 22 item 5: the receipt had to claim vLLM 0.33.0 for a file vLLM 0.25.1 wrote
    # (tests/data/real/SOURCES.md). Now the kit pins the version that ran.
    workload, row, data = case("vllm0251-opt125m-c2.json")
    doc = claims_for([(workload, row, data)]).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    doc["environment"]["engine_version"] = VERSION
    # The publisher says what the tiny CI run did not cover (R30 asks it of any kit).
    doc["limitations"].append("Only 48-token requests were measured; longer context was not.")
    claims = tmp_path / "publisher" / "claims.toml"
    (claims.parent / "results").mkdir(parents=True)
    claims.write_text(_claims_toml(doc))
    (claims.parent / row["evidence"]).write_bytes(data)
    assert _build(golden, tmp_path, _package(tmp_path), "--engine-snapshot", snap).returncode == 0
    kit = tmp_path / "kit"
    signed = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", claims)
    assert signed.returncode == 0, signed.stderr
    audited = run_k3kit("audit", kit, "--trust", golden.key.public, "--json")
    assert audited.returncode == 0, audited.stdout[-2000:] + audited.stderr
    findings = json.loads(audited.stdout)["findings"]
    assert not [f for f in findings if f["severity"] == "error"]
    assert (kit / "evidence" / f"{row['id']}.json").read_bytes() == data


def test_build_refuses_a_snapshot_of_another_version(golden: GoldenKit, tmp_path: Path) -> None:
    other = fake_vllm_wheel(tmp_path, "0.24.0")
    out = tmp_path / "old.json"
    made = run_k3kit("engine", "snapshot", "--engine", "vllm", "--wheel", other, "-o", out)
    assert made.returncode == 0, made.stderr
    proc = _build(golden, tmp_path, _package(tmp_path), "--engine-snapshot", out)
    assert proc.returncode == 3, proc.stderr
    assert _code(proc) == "ENGINE_SNAPSHOT_INVALID"
    assert "snapshot of vllm 0.24.0, but the package pins vllm 0.25.1" in proc.stderr
    assert not (tmp_path / "kit").exists()


def test_a_publisher_snapshot_cannot_classify_its_own_flags(
    golden: GoldenKit, snap: Path, tmp_path: Path
) -> None:
    # The attacker adds the review k3kit keeps in *-loads.json to the snapshot, calling
    # trust-remote-code inert: unknown keys are refused, the file is not read further.
    doc = json.loads(snap.read_bytes())
    doc["loads"] = {"inert": ["trust-remote-code", "scheduler-hook-module"]}
    snap.write_text(json.dumps(doc))
    proc = _build(golden, tmp_path, _package(tmp_path), "--engine-snapshot", snap)
    assert proc.returncode == 3 and _code(proc) == "ENGINE_SNAPSHOT_INVALID", proc.stderr
    assert "loads" in proc.stderr


def test_a_snapshot_that_makes_trust_remote_code_a_plain_switch_still_needs_a_declaration(
    golden: GoldenKit, snap: Path, tmp_path: Path
) -> None:
    # What a flag loads never comes from the snapshot: trust-remote-code stays code-loading.
    doc = json.loads(snap.read_bytes())
    for opt in doc["options"]:
        if "--trust-remote-code" in opt["flags"]:
            opt["action"], opt["dest"] = "_StoreTrueAction", "harmless_switch"
    snap.write_text(json.dumps(doc))
    package = _package(tmp_path, extra_serve="trust-remote-code = true\n")
    proc = _build(golden, tmp_path, package, "--engine-snapshot", snap)
    assert proc.returncode == 3, proc.stderr
    assert "`trust-remote-code`" in proc.stderr and "[engine.loads]" in proc.stderr


def test_a_new_flag_no_reviewer_classified_is_treated_as_loading_files(
    golden: GoldenKit, snap: Path, tmp_path: Path
) -> None:
    # 0.25.1's new --scheduler-hook-module takes a dotted module name (no "/", so the path net
    # alone would miss it); its name is suspect and no shipped review calls it inert.
    package = _package(tmp_path, extra_serve='scheduler-hook-module = "evil.hook"\n')
    proc = _build(golden, tmp_path, package, "--engine-snapshot", snap)
    assert proc.returncode == 3, proc.stderr
    assert "`scheduler-hook-module` is not a flag of any engine version k3kit's" in proc.stderr
    declared = _package(
        tmp_path,
        extra_serve='scheduler-hook-module = "evil.hook"\n',
        loads='scheduler-hook-module = "our scheduler hook, shipped in the image"\n',
    )
    assert _build(golden, tmp_path, declared, "--engine-snapshot", snap).returncode == 0


def test_a_new_switch_whose_name_suggests_nothing_still_needs_a_declaration(
    golden: GoldenKit, snap: Path, tmp_path: Path
) -> None:
    # Nobody at k3kit reviewed --fast-start (no shipped version has it): a boolean can load code
    # as well as a path can (trust-remote-code is one), so the name alone clears nothing.
    package = _package(tmp_path, extra_serve="fast-start = true\n")
    proc = _build(golden, tmp_path, package, "--engine-snapshot", snap)
    assert proc.returncode == 3, proc.stderr
    assert "`fast-start` is not a flag of any engine version" in proc.stderr
    assert "[engine.loads]" in proc.stderr
    off = _package(tmp_path, extra_serve="fast-start = false\n")  # off loads nothing
    assert _build(golden, tmp_path, off, "--engine-snapshot", snap).returncode == 0


# --- launch judges the kit by the snapshot inside it ---------------------------------------------


def _engine(root: Path, version: str = VERSION) -> FakeEngine:
    bindir = root / "bin"
    bindir.mkdir(parents=True)
    log = root / "engine.log"
    (bindir / "vllm").write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "${{1:-}}" = "--version" ]; then echo {version}; exit 0; fi\n'
        f"echo started > '{log}'\n"
    )
    (bindir / "vllm").chmod(0o755)
    return FakeEngine(bindir, log)


def _signed_kit(golden: GoldenKit, snap: Path, tmp: Path, version: str = VERSION) -> Path:
    built = _build(golden, tmp, _package(tmp, version=version), "--engine-snapshot", snap)
    assert built.returncode == 0, built.stderr
    kit = tmp / "kit"
    done = run_k3kit("sign", kit, "--key", golden.key.private, "--claims", _claims(tmp, version))
    assert done.returncode == 0, done.stderr
    return kit


def _resign(kit: Path, golden: GoldenKit, claims: Path) -> None:
    """The publisher re-signs a hand-edited kit, so it verifies."""
    info = load(KitInfo, json.loads((kit / "kit.json").read_bytes()), source="kit.json")
    manifest = build_manifest(kit)
    atomic_write(kit / "MANIFEST.json", manifest_bytes(manifest), force=True)
    lock = load(WeightsLock, json.loads((kit / "weights.lock.json").read_bytes()), source="lock")
    statement = build_statement(
        load_toml(claims, Claims),
        info,
        kit_sha256=kit_checksum(manifest),
        lock_sha256=sha256_of_model(lock),
        issued_at=FIXED_TIME,
        source=str(claims),
        evidence={},
    )
    envelope = sign_envelope(statement, PAYLOAD_TYPE, load_private(golden.key.private, None))
    atomic_write(kit / RECEIPT_NAME, envelope, force=True)


def _launch(
    kit: Path, golden: GoldenKit, weights: Path, engine: FakeEngine, tmp: Path
) -> subprocess.CompletedProcess[str]:
    return run_k3kit(
        "launch", kit, "--no-preflight", "--profile", "interactive", "--trust",
        golden.key.public, "--weights", weights, "--json", "--state-dir", tmp / "state",
        env=engine_env(engine),
    )  # fmt: skip


def test_launch_runs_a_kit_for_an_unshipped_version_by_its_signed_snapshot(
    golden: GoldenKit, snap: Path, weights: Path, tmp_path: Path
) -> None:
    kit = _signed_kit(golden, snap, tmp_path)
    engine = _engine(tmp_path / "e")
    proc = _launch(kit, golden, weights, engine, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert engine.log.read_text() == "started\n"


def test_launch_refuses_a_signed_snapshot_that_is_not_the_one_kit_json_names(
    golden: GoldenKit, snap: Path, weights: Path, tmp_path: Path
) -> None:
    # The publisher swaps the snapshot after build (to admit a flag build refused) and re-signs:
    # the kit verifies, but kit.json still names the digest build validated against.
    kit = _signed_kit(golden, snap, tmp_path)
    path = kit / "engine-snapshot.json"
    doc = json.loads(path.read_bytes())
    doc["env_vars"].append("VLLM_SMUGGLED")
    path.write_text(json.dumps(doc))
    _resign(kit, golden, _claims(tmp_path))
    assert run_k3kit("verify", kit, "--trust", golden.key.public).returncode == 0
    engine = _engine(tmp_path / "e")
    proc = _launch(kit, golden, weights, engine, tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert _code(proc) == "ENGINE_SNAPSHOT_REFUSED"
    assert not engine.log.exists()


def test_a_kit_for_a_labelled_build_is_built_signed_and_launched_by_its_snapshot(
    golden: GoldenKit, weights: Path, tmp_path: Path
) -> None:
    # vLLM's release wheels on GitHub and source builds carry a local label (the Intel XPU build
    # behind tests/data/real/guidellm-* reports 0.1.dev12986+gfa99ccebd). The snapshot records
    # the wheel's own version; build and launch compared it with the pin's release and refused
    # the publisher's own snapshot as "a snapshot of vllm X, but the package pins vllm X".
    labelled = f"{VERSION}+cu126"
    wheel = fake_vllm_wheel(tmp_path, labelled)
    snap = tmp_path / "labelled.snapshot.json"
    made = run_k3kit("engine", "snapshot", "--engine", "vllm", "--wheel", wheel, "-o", snap)
    assert made.returncode == 0, made.stderr
    assert json.loads(snap.read_bytes())["version"] == labelled
    kit = _signed_kit(golden, snap, tmp_path, labelled)
    assert json.loads((kit / "kit.json").read_bytes())["engine"]["version"] == labelled
    engine = _engine(tmp_path / "e", labelled)
    proc = _launch(kit, golden, weights, engine, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert engine.log.read_text() == "started\n"
