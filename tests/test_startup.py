"""What a buyer's node loads to start: `verify`, `launch --dry-run` and `install` import only their
own path (docs/performance.md, "Start-up").

Timing is not asserted anywhere here (it depends on the machine's load); what is asserted is
the set of modules a real run leaves in ``sys.modules``, which is the same on every run. The
CLI runs in a fresh interpreter (``python -c``), on a real signed kit, through the same ``main``
that ``k3kit`` runs, and then prints ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from k3kit.cli import _app
from k3kit.weights.vcache import COARSE_SETTLE_NS, SETTLE_NS
from tests.conftest import GoldenKit, KeyFiles
from tests.launchkit import FakeEngine, engine_env, make_fake_engine

# Run the CLI in this interpreter, then write the names of every loaded module to argv[1].
_PROBE = """
import json, sys
from k3kit.cli import main
out, args = sys.argv[1], sys.argv[2:]
try:
    main(args)
    code = 0
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"exit": code, "modules": sorted(sys.modules)}, f)
"""

# Dependencies a GPU node never needs to verify, install or launch a kit: the hub client and the
# template engine (publisher), the ledger's database stack, accept's HTTP client and tokenizer,
# python-tuf (the channel extra: `update`, never `verify` or `install`).
HEAVY = ("huggingface_hub", "jinja2", "sqlalchemy", "psycopg", "httpx", "tokenizers", "tuf")
# k3kit's own modules of other verbs: the publisher, the ledger, accept, and their models.
OTHER_VERBS = (
    "k3kit.publish",
    "k3kit.commerce",
    "k3kit.accept",
    "k3kit.card",
    "k3kit.audit",
    "k3kit.pull",
    "k3kit.cli.publish",
    "k3kit.cli.commerce",
    "k3kit.cli.accept",
    "k3kit.cli.present",
    "k3kit.cli.review",
    "k3kit.channel",
    "k3kit.cli.channel",
    "k3kit.models.acceptance",
    "k3kit.models.commerce",
)

# pydantic and every module of k3kit's pydantic models: neither verify of a folder nor launch
# loads them (both read the hot documents as records of k3kit.models.lite).
PYDANTIC_MODELS = (
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "k3kit.models._base",
    "k3kit.models.receipt",
    "k3kit.models.claims",
    "k3kit.models.kit",
    "k3kit.models.lock",
    "k3kit.models.package",
)

# What `verify` of a kit folder with --trust and without --weights does not use (see the test
# below): the hashing engine, the archive reader, root.json's models (only --root parses one),
# and pydantic with k3kit's models: the receipt, manifest, kit.json and lock are read by the
# pydantic-free reader generated from them (k3kit.models.lite, tests/test_lite_models.py).
NOT_FOR_A_FOLDER = (
    "k3kit.weights",
    "k3kit.archive",
    "concurrent.futures",
    "tarfile",
    "k3kit.signing.trust.model",
    *PYDANTIC_MODELS,
    # packaging: the documents' engine version is checked by a canonical-form pattern proven
    # against packaging (tests/test_engine_version.py); packaging parses where versions compare
    "packaging",
    # seventh pass: the documents are plain JSON trees, whose RFC 8785 bytes the stdlib's C
    # encoder writes (rfc8785 only for what is not plain: tests/test_canonical_fast.py); the
    # options of the verbs that verify live in cli._shared, not with the signing verbs
    "rfc8785",
    "k3kit.cli.signing",
    "k3kit.node._facts",  # the facts' TypedDicts: types, built only for a caller importing them
    # eighth pass: no record on a node's path is a dataclass (a frozen one execs its methods'
    # source at import, ~1 ms a class), so the module itself is not loaded either
    "dataclasses",
)

# What `launch --dry-run` of a kit built against a shipped engine snapshot does not use (fifth
# pass): pydantic and every module of k3kit's pydantic models. The manifest and kit.json are
# read as records of k3kit.models.lite, whose methods (a profile's folder, the engine pin's
# version rule, the lock's blake3 test) are the models' own (k3kit.models._methods); the
# verified lock reaches the hashing engine as a record; a publisher-supplied snapshot's model
# (k3kit.engines._snapfile) is imported only for a kit that carries one; and nothing builds a
# validator, so pydantic's plugin loader never imports importlib.metadata.
NOT_FOR_LAUNCH = (
    *PYDANTIC_MODELS,
    "k3kit.engines._snapfile",
    "importlib.metadata",
)


def _loaded(tmp_path: Path, *args: object, env: dict[str, str] | None = None) -> set[str]:
    """Run ``k3kit ARGS`` in a fresh interpreter; the modules it loaded (it must succeed).

    Without coverage in the child: under ``make test`` coverage's subprocess patch would start
    in it (its ``.pth`` hook) and load its own modules (hashlib, struct, ...) before the verb ran,
    which is not what the verb loads on a node."""
    out = tmp_path / "modules.json"
    child_env = {
        k: v
        for k, v in (os.environ if env is None else env).items()
        if k not in ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG")
    }
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=child_env,
    )
    assert proc.returncode == 0 and out.exists(), proc.stderr
    result = json.loads(out.read_text())
    assert result["exit"] == 0, proc.stdout + proc.stderr
    return set(result["modules"])


def _within(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The modules among ``modules`` that are one of ``names`` or inside one (``pydantic`` takes
    ``pydantic.main``, ``k3kit.models.receipt`` does not take ``k3kit.models.receipt_names``)."""
    return sorted(m for m in modules if m in names or m.startswith(tuple(f"{n}." for n in names)))


def _offenders(modules: set[str]) -> list[str]:
    """The heavy or other-verb modules among ``modules``."""
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith(OTHER_VERBS))


def test_verify_loads_nothing_of_the_publisher_the_ledger_or_accept(
    golden: GoldenKit, tmp_path: Path
) -> None:
    modules = _loaded(
        tmp_path, "verify", golden.kit, "--trust", golden.key.public, "--state-dir", tmp_path / "s"
    )
    assert {"k3kit.node.verify", "k3kit.cli.buyer"} <= modules  # the probe ran the real verb
    assert _offenders(modules) == []
    # a folder with --trust and without --weights needs neither the hashing engine (thread pool,
    # verification cache), the archive reader (tarfile), root.json's models nor pydantic: each is
    # imported by the code that uses it
    assert _within(modules, NOT_FOR_A_FOLDER) == []


def test_verify_of_a_folder_loads_no_hashlib_base64_or_url_parser(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """hashlib (it loads the system libcrypto, ~3.5 ms of CPU on 3.13) hashes only what is
    larger than k3kit._digest.SMALL_BYTES: a kit's files, documents and key ids take CPython's
    built-in sha256 (k3kit._sha256). The DSSE envelope and the PEM key are
    decoded by binascii, as base64 does (base64 with struct: ~0.7 ms), and unicodedata is
    imported only for a path that is not ASCII (every kit path is). urllib.parse (with
    ipaddress, ~3.5 ms) is imported by k3kit._policy only where a URL is really parsed: the
    models load the module for its path policy alone."""
    modules = _loaded(
        tmp_path, "verify", golden.kit, "--trust", golden.key.public, "--state-dir", tmp_path / "s"
    )
    assert {"k3kit.node.verify", "k3kit._digest", "k3kit._policy"} <= modules  # the real verb
    absent = ("hashlib", "_hashlib", "base64", "struct", "unicodedata")
    assert sorted(m for m in modules if m in absent) == []
    # Python 3.11 and 3.12's pathlib imports urllib.parse (and with it ipaddress) itself; from
    # 3.13 on (what `make test` and the performance gate run) nothing on verify's path does
    if sys.version_info >= (3, 13):
        assert sorted(m for m in modules if m in ("urllib.parse", "ipaddress")) == []


def test_a_warm_verify_recalls_the_signature_and_loads_no_cryptography(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """Ninth pass: the first verify on a node checks the receipt's signature with cryptography
    and records it in the signature memo (k3kit.signing.memo); the next one recalls it, and
    loads neither cryptography's binding nor hashlib."""
    args = ("verify", golden.kit, "--trust", golden.key.public, "--state-dir", tmp_path / "s")
    cold = _loaded(tmp_path, *args)
    assert "cryptography.hazmat.bindings._rust" in cold  # the first run really checked it
    warm = _loaded(tmp_path, *args)
    assert "k3kit.signing.memo" in warm  # the real verb, with its memo
    assert _within(warm, ("cryptography", "hashlib", "_hashlib")) == []


@pytest.mark.parametrize("order", ["signer-last", "signer-first"])
def test_a_warm_verify_with_two_trusted_keys_loads_no_cryptography_either(
    golden: GoldenKit, other_key: KeyFiles, tmp_path: Path, order: str
) -> None:
    """With --trust given twice, each key that did not sign was a miss checked by cryptography
    on every start (found by a review of this pass); the key the memo holds is tried first."""
    keys = [other_key.public, golden.key.public]
    if order == "signer-first":
        keys.reverse()
    trust = [a for k in keys for a in ("--trust", k)]
    args = ("verify", golden.kit, *trust, "--state-dir", tmp_path / "s")
    assert "cryptography.hazmat.bindings._rust" in _loaded(tmp_path, *args)
    assert _within(_loaded(tmp_path, *args), ("cryptography",)) == []


def test_verify_with_weights_loads_the_hasher_but_not_the_hub_client(
    golden: GoldenKit, weights: Path, tmp_path: Path
) -> None:
    modules = _loaded(
        tmp_path,
        "verify",
        golden.kit,
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--state-dir",
        tmp_path / "s",
    )
    assert "k3kit.weights.hashpool" in modules
    assert _offenders(modules) == []


@pytest.fixture
def fake(tmp_path: Path) -> FakeEngine:
    return make_fake_engine(tmp_path / "engine")


def test_launch_dry_run_loads_nothing_of_the_publisher_the_ledger_or_accept(
    golden: GoldenKit, weights: Path, fake: FakeEngine, tmp_path: Path
) -> None:
    env = {**engine_env(fake), "PYTHONPATH": ":".join(p for p in sys.path if p)}
    modules = _loaded(
        tmp_path,
        "launch",
        golden.kit,
        "--no-preflight",
        "--dry-run",
        "--profile",
        "interactive",
        "--trust",
        golden.key.public,
        "--weights",
        weights,
        "--state-dir",
        tmp_path / "s",
        env=env,
    )
    assert {"k3kit.node.launch", "k3kit.weights.hashpool"} <= modules  # it ran, and hashed
    assert _offenders(modules) == []
    # --no-preflight: the node check (and the XML parser it reads nvidia-smi with) is not loaded
    assert sorted(m for m in modules if m.startswith(("k3kit.preflight", "xml."))) == []
    assert _within(modules, NOT_FOR_LAUNCH) == []


# What `launch --dry-run` does not load once the verification cache vouches for every weights
# file (the node's every start after the first): the hashing engine and its thread pool
# (concurrent.futures, which imports logging; queue), the "did you mean" matcher (difflib: only a
# refusal suggests a name), importlib.resources with zipfile (the shipped engine snapshot is read
# from the package's folder), pkgutil (the engines' folder is listed by k3kit._registry) and the
# multi-node values' dataclass (k3kit.engines._runtime: a single-node launch builds none).
# Each is imported by the code that uses it.
NOT_FOR_A_WARM_LAUNCH = (
    "k3kit.weights.hashpool",
    "concurrent.futures",
    "logging",
    "queue",
    "difflib",
    "importlib.resources",
    "zipfile",
    "pkgutil",
    "k3kit.engines._runtime",
    # the pin and the engine's --version are canonical text: compared without packaging
    "packaging",
    # the config's digest and the kit's files take CPython's built-in sha256 (k3kit._sha256)
    "hashlib",
    # seventh pass: canonical bytes by the stdlib's C encoder (plain trees); the verbs' shared
    # options without the signing verbs
    "rfc8785",
    "k3kit.cli.signing",
    # eighth pass: no record on the path is a dataclass (a frozen one execs its methods' source
    # at import, ~1 ms a class); the hashing engine's are, and a warm launch does not load it
    "dataclasses",
    # ninth pass: the receipt's signature is recalled from the signature memo (the first launch
    # checked it), so cryptography's Rust/OpenSSL binding is not loaded at all
    "cryptography",
)


def test_launch_dry_run_with_warm_weights_loads_no_hasher(
    golden: GoldenKit, fake: FakeEngine, tmp_path: Path
) -> None:
    # The golden weights, read only. The cache records a file only once its times are settled
    # (vcache's racy-timestamp rule): wait out whatever is left of that, so the first run
    # records every file and the second hashes none (no timing is asserted).
    def settled_at(st: os.stat_result) -> int:  # vcache.settled's rule, file by file
        coarse = st.st_mtime_ns % 10**9 == 0 and st.st_ctime_ns % 10**9 == 0
        return max(st.st_mtime_ns, st.st_ctime_ns) + (COARSE_SETTLE_NS if coarse else SETTLE_NS)

    ready = max(settled_at(p.stat()) for p in golden.snapshot.iterdir())
    time.sleep(max(0, ready + 200_000_000 - time.time_ns()) / 1e9)
    env = {**engine_env(fake), "PYTHONPATH": ":".join(p for p in sys.path if p)}
    args = (
        *("launch", golden.kit, "--no-preflight", "--dry-run", "--profile", "interactive"),
        *("--trust", golden.key.public, "--weights", golden.snapshot),
        *("--state-dir", tmp_path / "s"),
    )
    cold = _loaded(tmp_path, *args, env=env)
    assert "k3kit.weights.hashpool" in cold  # the first launch hashed, and filled the cache
    modules = _loaded(tmp_path, *args, env=env)
    assert {"k3kit.node.launch", "k3kit.weights.vcache"} <= modules  # it ran, from the cache
    assert _within(modules, NOT_FOR_A_WARM_LAUNCH) == []


def test_preflight_which_every_launch_runs_first_loads_no_pydantic(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """`launch` without --no-preflight checks the node first (k3kit.preflight, through
    node.verify.open_verified); that path reads kit.json as a record too."""
    data = Path(__file__).parent / "data" / "preflight"
    modules = _loaded(
        tmp_path,
        "preflight",
        golden.kit,
        "--trust",
        golden.key.public,
        "--profile",
        "interactive",
        "--nvidia-smi-xml",
        data / "b300x8.synthetic.xml",
        "--os-facts",
        data / "node-os.synthetic.json",
        "--state-dir",
        tmp_path / "s",
    )
    assert "k3kit.preflight._budget" in modules  # the probe judged the node
    assert _offenders(modules) == []
    assert _within(modules, NOT_FOR_LAUNCH) == []
    # eighth pass: the node check's eight records were frozen dataclasses, 8 ms of every launch
    assert "dataclasses" not in modules


def test_install_loads_nothing_of_the_publisher_the_ledger_or_accept(
    golden: GoldenKit, tmp_path: Path
) -> None:
    modules = _loaded(
        tmp_path,
        "install",
        golden.kit,
        "--trust",
        golden.key.public,
        "--into",
        tmp_path / "d",
        "--state-dir",
        tmp_path / "s",
    )
    assert "k3kit.node.install" in modules
    assert _offenders(modules) == []
    assert "dataclasses" not in modules  # its records and the archive reader's: k3kit NamedTuples


def test_every_verb_is_in_the_map_that_loads_it_alone() -> None:
    """A verb missing from VERB_MODULES would still run (the group then imports every module),
    but would pay for all of them; this keeps the map complete and right."""
    _app.load_verbs()
    registered = {
        name: cmd.callback.__module__.rsplit(".", 1)[-1]
        for name, cmd in _app.cli.commands.items()
        if cmd.callback is not None
    }
    groups = {n for n, c in _app.cli.commands.items() if c.callback is None}
    assert groups == set()  # every top-level entry has a callback naming its module
    assert registered == _app.VERB_MODULES
    assert set(_app.VERB_MODULES.values()) <= set(_app.VERB_PACKAGES)


# Run the CLI in an interpreter where the named packages are absent (``None`` in sys.modules makes
# ``import`` raise ModuleNotFoundError, as on an install without the extra).
_WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from k3kit.cli import main
main(sys.argv[2:])
"""


def _without(absent: str, *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT, absent, *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_ledger_without_the_ledger_extra_names_the_extra_to_install(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    proc = _without("sqlalchemy", "ledger", "init", "--db", db, "--json")
    assert proc.returncode == 4, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["code"] == "EXTRA_NOT_INSTALLED"
    assert error["hint"] == "pip install 'k3kit[ledger]'"
    assert "'sqlalchemy'" in error["message"] and "Traceback" not in proc.stderr
    assert not db.exists()


def test_a_postgresql_ledger_without_its_driver_names_the_extra_to_install(tmp_path: Path) -> None:
    url = "postgresql://k3kit@127.0.0.1:9/ledger"  # never reached: the driver check comes first
    proc = _without("psycopg,psycopg2", "ledger", "init", "--db", url, "--json")
    assert proc.returncode == 4, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["code"] == "EXTRA_NOT_INSTALLED" and "'psycopg'" in error["message"]


def test_sqlite_ledger_works_without_the_postgresql_driver(tmp_path: Path) -> None:
    proc = _without("psycopg,psycopg2", "ledger", "init", "--db", tmp_path / "l.sqlite")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "l.sqlite").exists()


def test_update_without_the_channel_extra_names_the_extra_to_install(tmp_path: Path) -> None:
    root = tmp_path / "1.root.json"
    root.write_text("{}")
    proc = _without(
        "tuf", "update", "--channel", "stable", "--from", "http://127.0.0.1:9",
        "--channel-root", root, "--into", tmp_path / "kits", "--trust", root, "--json",
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["code"] == "EXTRA_NOT_INSTALLED"
    assert error["hint"] == "pip install 'k3kit[channel]'"
    assert not (tmp_path / "kits").exists()


def test_the_cli_freezes_what_start_up_loaded_only_in_its_own_process() -> None:
    """``gc.freeze()`` at the CLI's entry (docs/performance.md, "Eighth pass"): in k3kit's own
    process the collector stops walking what start-up imported; an in-process caller (this
    test suite, a script) keeps its collector untouched."""
    import gc

    from k3kit.cli import main

    before = gc.get_freeze_count()
    with pytest.raises(SystemExit):
        main(["--version"])
    assert gc.get_freeze_count() == before
    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print(gc.get_freeze_count(), file=sys.stderr))\n"
        "sys.argv = ['k3kit', '--version']\n"
        "from k3kit.cli import main\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0 and "k3kit, version" in proc.stdout, proc.stderr
    assert int(proc.stderr.strip().splitlines()[-1]) > 10_000  # the start-up's objects


def test_what_a_verb_loaded_is_frozen_too_when_it_is_done() -> None:
    """The second ``gc.freeze()``, as the verb returns (docs/performance.md, "Ninth pass"):
    the modules a verb imported lazily are frozen before the interpreter's shutdown, whose full
    collections then do not walk them. Measured as the objects frozen at exit: a verb that
    imports its module (``verify --help`` loads k3kit.cli.buyer) leaves many more frozen than
    ``--version``, which imports nothing after the first freeze."""

    def frozen_at_exit(*args: str) -> int:
        probe = (
            "import atexit, gc, sys\n"
            "atexit.register(lambda: print(gc.get_freeze_count(), file=sys.stderr))\n"
            f"sys.argv = ['k3kit', *{list(args)!r}]\n"
            "from k3kit.cli import main\n"
            "main()\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
        )
        assert proc.returncode == 0, proc.stderr
        return int(proc.stderr.strip().splitlines()[-1])

    version, verb = frozen_at_exit("--version"), frozen_at_exit("verify", "--help")
    assert verb > version + 200, (version, verb)
