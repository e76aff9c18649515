"""Shared fixtures: real keys, real stand-in weights on disk, a real signed kit, the real CLI.

huggingface_hub reads its settings (``HF_HOME``, ``HF_ENDPOINT``, ``HF_HUB_DISABLE_XET``, ...) once,
at import time, so they are set here, before any test module can import it: a throw-away
``HF_HOME`` (no real cache or saved token), Xet off, and an endpoint nobody listens on.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_HF_HOME = Path(tempfile.mkdtemp(prefix="k3kit-test-hf-home-"))
_XDG_CACHE = Path(tempfile.mkdtemp(prefix="k3kit-test-xdg-cache-"))
_XDG_STATE = Path(tempfile.mkdtemp(prefix="k3kit-test-xdg-state-"))

for _name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE"):
    os.environ.pop(_name, None)
os.environ.update(
    {
        "HF_HOME": str(_HF_HOME),
        # A closed local port: a call that forgets ``endpoint=`` fails fast instead of going online.
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_DISABLE_XET": "1",  # the test hub does not implement the Xet protocol
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_HUB_ETAG_TIMEOUT": "5",
        "HF_HUB_DOWNLOAD_TIMEOUT": "10",
        # `k3kit verify` keeps its verification cache under $XDG_CACHE_HOME/k3kit: never the user's.
        "XDG_CACHE_HOME": str(_XDG_CACHE),
        # ... and its rollback memory, accepted roots and runtime folder under $XDG_STATE_HOME.
        "XDG_STATE_HOME": str(_XDG_STATE),
    }
)

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from k3kit._canonical import model_bytes
from k3kit._fs import atomic_write
from k3kit.demo import stand_in_files, write_hf_cache
from k3kit.publish.kit import build, sign
from k3kit.signing.keys import load_private, write_keypair
from k3kit.weights.pin import pin_local
from tests import clirunner, unitsubset

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kimi-k3-b300x8"
REPO = "moonshotai/Kimi-K3"
FIXED_TIME = "2026-11-01T00:00:00Z"

# Property tests give the same verdict on every run and every machine: examples drawn from a
# seed fixed per test (derandomize); no time limit per example and no "too slow" health check
# (both read the wall clock: a loaded CI machine is slow, not wrong); no example database (a
# failure replayed here and not in CI would make two runs of one tree differ). To explore with
# fresh randomness by hand: K3KIT_HYPOTHESIS_PROFILE=explore.
UNTIMED = [HealthCheck.too_slow]
hypothesis_settings.register_profile(
    "ci", derandomize=True, deadline=None, database=None, suppress_health_check=UNTIMED
)
hypothesis_settings.register_profile(
    "explore", deadline=None, database=None, suppress_health_check=UNTIMED
)
# `make unit-fast`: the same fixed seeds, fewer examples where a test does not set its own count
# (the development loop; `make unit` runs the full counts).
hypothesis_settings.register_profile(
    "unit", parent=hypothesis_settings.get_profile("ci"), max_examples=25
)
hypothesis_settings.load_profile(os.environ.get("K3KIT_HYPOTHESIS_PROFILE", "ci"))
UNIT_PROFILE = os.environ.get("K3KIT_HYPOTHESIS_PROFILE") == "unit"


def examples(full: int) -> int:
    """A property test's own example count: ``full`` under `make test`, a quarter of it (at least
    the profile's 25) under `make unit-fast`: the same strategy from the same fixed seed, a
    smaller sample of it, so the development loop checks the same property, less widely."""
    return max(25, full // 4) if UNIT_PROFILE else full


def every(full_stride: int = 1) -> int:
    """The stride through an exhaustive list of cases (one-step mutations): every case under
    `make test`, every fourth under `make unit-fast`."""
    return 4 * full_stride if UNIT_PROFILE else full_stride


# A suite started in the background by a non-interactive shell (`make test &`, nohup) inherits
# SIGINT ignored, and an ignored signal stays ignored across exec: every process a test starts
# (the CLI, a stand-in hub) would then shrug off the Ctrl-C the test sends it, and the tests of
# Ctrl-C would hang or fail for the runner's reason. A handler (not SIG_IGN) here gives every
# child the default disposition again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_k3kit(
    *args: str | Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = clirunner.DEFAULT_TIMEOUT,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI as a user would: in this process where that gives what ``python -m
    k3kit`` gives (tests/clirunner.py; most calls, far cheaper), in a subprocess where only a
    process is faithful (``process=True``, or a call :func:`clirunner.needs_process` names)."""
    argv = [str(a) for a in args]
    full_env = {**os.environ, "SOURCE_DATE_EPOCH": clirunner.SOURCE_DATE_EPOCH, **(env or {})}
    if process or clirunner.needs_process(argv, full_env, timeout):
        return clirunner.run_in_subprocess(argv, cwd, full_env, timeout)
    return clirunner.run_in_process(argv, cwd, full_env)


@contextlib.contextmanager
def refusing_url() -> Iterator[str]:
    """A loopback URL that refuses every connection while the block lasts: a socket bound and
    never listening (Linux answers a connect with a reset), and held, so no other process can
    take the port. A port bound then closed could be taken, and answer, before the test used it."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


@pytest.fixture(scope="session", autouse=True)
def hf_home() -> Iterator[Path]:
    """The session's private ``HF_HOME``, ``XDG_CACHE_HOME`` and ``XDG_STATE_HOME``; removed when
    the session ends, so a test run leaves no folder behind in the temporary directory."""
    yield _HF_HOME
    shutil.rmtree(_HF_HOME, ignore_errors=True)
    shutil.rmtree(_XDG_CACHE, ignore_errors=True)
    shutil.rmtree(_XDG_STATE, ignore_errors=True)


@dataclass(frozen=True)
class KeyFiles:
    private: Path
    public: Path


@pytest.fixture(scope="session")
def signing_key(tmp_path_factory: pytest.TempPathFactory) -> KeyFiles:
    paths, _ = write_keypair(tmp_path_factory.mktemp("keys") / "publisher", None)
    return KeyFiles(paths.private, paths.public)


@pytest.fixture(scope="session")
def other_key(tmp_path_factory: pytest.TempPathFactory) -> KeyFiles:
    paths, _ = write_keypair(tmp_path_factory.mktemp("keys-other") / "stranger", None)
    return KeyFiles(paths.private, paths.public)


@dataclass(frozen=True)
class GoldenKit:
    kit: Path
    lock: Path
    snapshot: Path
    key: KeyFiles


def make_snapshot(cache: Path, shards: int = 3, shard_bytes: int = 256 * 1024) -> Path:
    return write_hf_cache(cache, REPO, stand_in_files(shards, shard_bytes))


def make_kit(root: Path, key: KeyFiles, snapshot: Path, *, claims: Path | None = None) -> GoldenKit:
    lock = pin_local(snapshot, repo=REPO, revision=snapshot.name, pinned_at=FIXED_TIME)
    lock_path = root / "weights.lock.json"
    atomic_write(lock_path, model_bytes(lock), force=True)
    kit_dir = root / "kit"
    build(EXAMPLE / "package.toml", lock_path, kit_dir)
    sign(
        kit_dir,
        load_private(key.private, None),
        claims or EXAMPLE / "claims.toml",
        issued_at=FIXED_TIME,
    )
    return GoldenKit(kit_dir, lock_path, snapshot, key)


@pytest.fixture(scope="session")
def golden(tmp_path_factory: pytest.TempPathFactory, signing_key: KeyFiles) -> GoldenKit:
    """One signed kit and its stand-in weights, built once; tests work on copies."""
    root = tmp_path_factory.mktemp("golden")
    return make_kit(root, signing_key, make_snapshot(root / "hf-cache"))


@pytest.fixture
def kit(golden: GoldenKit, tmp_path: Path) -> Path:
    """A private copy of the golden kit directory, free to tamper with."""
    dest = tmp_path / "kit"
    shutil.copytree(golden.kit, dest)
    return dest


@dataclass(frozen=True)
class DemoRun:
    folder: Path  # what `k3kit demo --workdir FOLDER` wrote: read it, or copy it to change it
    stdout: str


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """One ``k3kit demo`` run (5-6 s of CPU: the whole pipeline) for the tests that read what it
    printed or wrote; three test files each ran their own. A test that changes the folder works
    on a copy (``shutil.copytree(demo_run.folder, ..., symlinks=True)``)."""
    folder = tmp_path_factory.mktemp("demo-run") / "demo"
    proc = run_k3kit("demo", "--workdir", folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return DemoRun(folder, proc.stdout)


@pytest.fixture
def weights(golden: GoldenKit, tmp_path: Path) -> Path:
    """A private plain-folder copy of the golden weights (symlinks resolved)."""
    dest = tmp_path / "weights"
    shutil.copytree(golden.snapshot, dest, symlinks=False)
    return dest


# -- the unit subset (`make unit-fast`, tests/unitsubset.py) -------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    unitsubset.add_option(parser)


def pytest_configure(config: pytest.Config) -> None:
    unitsubset.configure(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unitsubset.mark(config, items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Session and module fixtures are set up here too: the guard covers them as well."""
    with unitsubset.guard(item.config):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with unitsubset.guard(item.config):
        return (yield)
