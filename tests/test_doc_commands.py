"""Every command block of the user-facing docs runs as written, offline, on the demo's outputs.

The blocks are read from the Markdown itself (never copied here), so a doc that drifts from the
CLI fails this test. The rule, also stated in docs/runbook-buyer.md ("How the docs are tested"):

* Each fenced ```` ```bash ````, ```` ```sh ```` or ```` ```console ```` block of the files in
  :data:`DOCS` is run, in order, by ``bash -euo pipefail`` (a ``console`` block: its ``$ ``
  lines), in one folder per document that holds what a clone holds after ``make demo``:
  ``k3kit-demo/`` (one ``k3kit demo`` run shared by all documents), ``examples/`` and
  ``scripts/``, with the venv's ``k3kit`` and ``python3`` first on ``PATH``. Nothing is
  substituted: a port is read by the block itself (``$(cat hub.port)``).
* An HTML comment on the line before a block changes what is expected of it:
  ``<!-- not-run: WHY -->`` skips it (WHY must be given: a GPU, the public hub, a setup step
  this test performs itself); ``<!-- exit: N -->`` expects exit code N instead of 0;
  ``<!-- background: FILE -->`` starts it in the background (a server) and waits for FILE, which
  it writes once it listens; it is stopped when the document is done.
* Every block that is not marked not-run must run and end with its expected exit code.
* The blocks' ``k3kit`` is :mod:`tests.docfork`'s launcher: the real command, forked from a
  process per document that has k3kit imported (or the venv's script itself where a fork could
  differ); :func:`test_a_forked_k3kit_gives_the_bytes_of_a_real_one` holds it to the bytes of
  the real script.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import docfork

ROOT = Path(__file__).resolve().parents[1]
DOCS = (
    "README.md",
    "docs/runbook-buyer.md",
    "docs/runbook-publisher.md",
    "docs/licence.md",
    "docs/ledger.md",
    "docs/distribution.md",
)
LANGS = ("bash", "sh", "console")
_FENCE = re.compile(r"^```([A-Za-z]*)\s*$")
_MARK = re.compile(r"^<!--\s*(not-run|exit|background):\s*(.*?)\s*-->$")
# The clock is fixed (SOURCE_DATE_EPOCH): the demo's kit is released on 2026-11-01T00:00:00Z (as
# tests.conftest.run_k3kit dates everything) and the documents' commands run a day later, as a
# buyer's would, after the release (docs/licence.md's refused sale depends on that order).
RELEASE_EPOCH = 1793491200
DOCS_EPOCH = RELEASE_EPOCH + 86400
BLOCK_TIMEOUT = 300  # a hang fails the block; no block's duration is asserted
READY_TIMEOUT = 60


@dataclass(frozen=True)
class Block:
    doc: str
    line: int  # 1-based line of the opening fence
    lang: str
    script: str
    mark: str | None  # "not-run", "exit" or "background"
    arg: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def expected_exit(self) -> int:
        return int(self.arg) if self.mark == "exit" else 0


def _console_commands(lines: list[str]) -> list[str]:
    """The commands of a console block: ``$ `` lines and their backslash continuations."""
    out: list[str] = []
    continued = False
    for line in lines:
        if line.startswith("$ ") or continued:
            out.append(line[2:] if line.startswith("$ ") and not continued else line)
            continued = line.endswith("\\")
    return out


def extract_blocks(doc: str, text: str) -> list[Block]:
    """Every shell block of ``text`` with the marker on the last non-blank line before it."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        assert end is not None, f"{doc}:{i + 1}: unclosed code fence"
        if fence.group(1) in LANGS:
            body = lines[i + 1 : end]
            if fence.group(1) == "console":
                body = _console_commands(body)
            prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            mark = _MARK.match(prev.strip())
            blocks.append(
                Block(
                    doc,
                    i + 1,
                    fence.group(1),
                    "\n".join(body) + "\n",
                    mark.group(1) if mark else None,
                    mark.group(2) if mark else "",
                )
            )
        i = end + 1
    return blocks


@dataclass(frozen=True)
class Demo:
    root: Path  # the k3kit-demo folder
    stdout: str


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """One ``k3kit demo`` run (what ``make demo`` runs) for every document of the module."""
    root = tmp_path_factory.mktemp("doc-demo")
    (root / "home").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "k3kit", "demo", "--workdir", "k3kit-demo"],
        cwd=root,
        env=_env(root, RELEASE_EPOCH),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return Demo(root / "k3kit-demo", done.stdout)


def _env(home: Path, epoch: int = DOCS_EPOCH) -> dict[str, str]:
    """The venv first on PATH; home, caches and state inside the test's folder; the clock fixed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "K3KIT_"))}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        HOME=str(home / "home"),
        XDG_CACHE_HOME=str(home / "home" / ".cache"),
        XDG_STATE_HOME=str(home / "home" / ".local" / "state"),
        HF_HOME=str(home / "home" / "hf"),
        HF_HUB_DISABLE_TELEMETRY="1",
        SOURCE_DATE_EPOCH=str(epoch),
    )
    return env


def _workspace(tmp_path: Path, demo: Path) -> Path:
    """A clone's root after ``make demo``: the shared demo outputs, examples/ and scripts/."""
    ws = tmp_path / "clone"
    (ws / "home").mkdir(parents=True)
    shutil.copytree(demo, ws / "k3kit-demo", symlinks=True)
    for name in ("examples", "scripts"):
        (ws / name).symlink_to(ROOT / name)
    return ws


class Runner:
    """Runs one document's blocks in order in ``ws``; stops its background servers at the end.

    With ``fork``, the blocks' ``k3kit`` is :mod:`tests.docfork`'s shim, served by one server
    per document started here (with the blocks' own environment): the same command, without an
    interpreter's and k3kit's start-up per call."""

    def __init__(self, ws: Path, *, fork: bool = False) -> None:
        self.ws, self.env = ws, _env(ws)
        self.background: list[subprocess.Popen[bytes]] = []
        self.failures: list[str] = []
        self.ran: list[Block] = []
        self.fork_log = ws.parent / f"{ws.name}-docfork" / "calls.jsonl"
        self.fork_sock: Path | None = None
        if fork:
            self._start_fork_server()

    def _start_fork_server(self) -> None:
        here = self.fork_log.parent
        # a short folder of its own: a Unix socket's path is limited to 107 bytes
        self.fork_sock = sock = Path(tempfile.mkdtemp(prefix="k3df-")) / "s"
        docfork.write_shim(here / "bin", sock)
        self.env["PATH"] = f"{here / 'bin'}{os.pathsep}{self.env['PATH']}"
        argv = [sys.executable, docfork.__file__, str(sock), docfork.real_k3kit()[0]]
        self._background([*argv, str(self.fork_log)], here / "server.log", sock)
        assert sock.exists(), (
            f"the k3kit fork server did not start: {(here / 'server.log').read_text()}"
        )

    def _background(self, argv: list[str], log: Path, ready: Path) -> subprocess.Popen[bytes]:
        """Start ``argv`` in its own session (stopped by :meth:`stop`), its output in ``log``,
        and wait until it makes ``ready``, exits, or the hang guard runs out."""
        proc = subprocess.Popen(
            argv,
            cwd=self.ws,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.background.append(proc)
        deadline = time.monotonic() + READY_TIMEOUT  # a hang guard, not a timing assertion
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return proc

    def run(self, block: Block) -> None:
        if block.mark == "not-run":
            assert block.arg, f"{block.where}: not-run without a reason"
            return
        script = "set -euo pipefail\n" + block.script
        if block.mark == "background":
            self._start(block, script)
            return
        try:
            done = subprocess.run(
                ["bash", "-c", script],
                cwd=self.ws,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=BLOCK_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            self.failures.append(f"{block.where}: still running after {BLOCK_TIMEOUT} s")
            return
        self.ran.append(block)
        if done.returncode != block.expected_exit:
            self.failures.append(
                f"{block.where}: exit {done.returncode}, the doc says {block.expected_exit}\n"
                f"{block.script}--- stdout\n{done.stdout[-3000:]}--- stderr\n{done.stderr[-3000:]}"
            )

    def _start(self, block: Block, script: str) -> None:
        ready = self.ws / block.arg
        log = self.ws / f"background-{block.line}.log"
        proc = self._background(["bash", "-c", script], log, ready)
        if ready.exists():
            self.ran.append(block)
        else:
            self.failures.append(f"{block.where}: {block.arg} never appeared (exit {proc.poll()})")

    def stop(self) -> None:
        for proc in self.background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self.fork_sock is not None:
            shutil.rmtree(self.fork_sock.parent, ignore_errors=True)


def run_doc(blocks: list[Block], ws: Path, *, fork: bool = False) -> Runner:
    runner = Runner(ws, fork=fork)
    try:
        for block in blocks:
            runner.run(block)
    finally:
        runner.stop()
    return runner


@pytest.fixture
def workspace(tmp_path: Path, demo: Demo) -> Iterator[Path]:
    yield _workspace(tmp_path, demo.root)


def _commands(script: str) -> set[str]:
    """Each command of a block as one line: continuations joined, comments and spacing dropped."""
    joined = re.sub(r"\\\n\s*", " ", script)
    return {" ".join(line.split("#")[0].split()) for line in joined.splitlines()} - {""}


def test_the_demo_suggests_what_the_readme_runs(demo: Demo) -> None:
    """The demo's "Try next" block and README's "Try it on the demo" are the same commands, so
    the lines a new user copies from the demo's output are the ones this module runs."""
    _, sep, tail = demo.stdout.partition("Try next")
    assert sep, demo.stdout[-2000:]
    suggested = _commands("\n".join(tail.splitlines()[1:]))
    blocks = extract_blocks("README.md", (ROOT / "README.md").read_text(encoding="utf-8"))
    readme = set().union(*(_commands(b.script) for b in blocks))
    assert len(suggested) >= 8
    assert suggested - readme == set()


@pytest.mark.parametrize("doc", DOCS)
def test_every_command_block_runs_as_written(doc: str, workspace: Path) -> None:
    blocks = extract_blocks(doc, (ROOT / doc).read_text(encoding="utf-8"))
    runnable = [b for b in blocks if b.mark != "not-run"]
    assert runnable, f"{doc}: no runnable command block (the test would check nothing)"
    by_hand = os.environ.get("K3KIT_TEST_CLI") == "process"  # every k3kit a real process
    runner = run_doc(blocks, workspace, fork=not by_hand)
    assert runner.failures == []
    assert [b.line for b in runner.ran] == [b.line for b in runnable]


# Each line exercises one thing a fork must carry over from the shim: exit codes (a refusal, a usage
# error), a pipe into another process, a redirection, stdin, relative paths from the working
# folder, the umask (the .pub file's mode), the clock (SOURCE_DATE_EPOCH in the signed time).
_SAME_BYTES = """
k3kit --version
k3kit show k3kit-demo/kimi-k3-b300x8-1.0.0.kit.tar.gz --trust k3kit-demo/keys/demo.pub --json \
  | python3 -c 'import json, sys; print(sorted(json.load(sys.stdin)))'
k3kit verify k3kit-demo/tamper/kit --trust k3kit-demo/keys/demo.pub --json > report.json \
  || echo "verify exit $?"
python3 -c 'import json; print(json.load(open("report.json"))["ok"])'
k3kit no-such-verb || echo "usage exit $?"
echo '{' | k3kit verify - --trust k3kit-demo/keys/demo.pub || echo "stdin exit $?"
(umask 077 && k3kit keygen --out sub/k > /dev/null && stat -c '%a %n' sub/k.key sub/k.pub)
k3kit licence sign examples/enterprise/TERMS.md --entity E --signer S --authority A \
  --package kimi-k3-b300x8 --amount 1 --currency EUR --term-days 1 --affirm redistribution \
  --affirm resale --affirm traceability --affirm scope --key k3kit-demo/keys/demo.key -o sub/l.json
sha256sum sub/l.json
HF_ENDPOINT=http://127.0.0.1:9 k3kit --version
"""


def _bash(runner: Runner, script: str) -> tuple[int, str, str]:
    done = subprocess.run(
        ["bash", "-c", "set -uo pipefail\n" + script],
        cwd=runner.ws,
        env=runner.env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def test_a_forked_k3kit_gives_the_bytes_of_a_real_one(tmp_path: Path, demo: Demo) -> None:
    """The same block through the fork server and through the venv's own ``k3kit`` script, each
    in a fresh clone: the same exit status, stdout and stderr, byte for byte; and the calls did
    fork (the server's log), except the one whose environment a fresh process reads differently."""
    outcomes, logs = [], []
    for fork in (True, False):
        ws = _workspace(tmp_path / ("fork" if fork else "real"), demo.root)
        (ws / "sub").mkdir()
        runner = Runner(ws, fork=fork)
        try:
            outcomes.append(_bash(runner, _SAME_BYTES))
        finally:
            runner.stop()
        logs.append(docfork.served(runner.fork_log))
    forked, real = outcomes
    assert forked == real
    assert "verify exit 1" in real[1] and "usage exit 2" in real[1] and "600 sub/k.key" in real[1]
    reasons = [call["real_process"] for call in logs[0]]
    assert len(reasons) == 8 and reasons[:7] == [""] * 7
    assert reasons[7] == "environment differs: HF_ENDPOINT"
    assert logs[1] == []


def test_a_block_that_fails_fails_the_document(tmp_path: Path) -> None:
    """The runner itself: a wrong exit code, a missing ready file and a reasonless not-run are
    each reported (the test above would otherwise pass on a runner that checks nothing)."""
    text = (
        "```sh\ntrue\n```\n\n<!-- exit: 3 -->\n```bash\nexit 4\n```\n\n"
        "<!-- background: never.port -->\n```sh\nexit 0\n```\n\n"
        "```console\n$ false\nnot a command\n```\n\n```python\nraise SystemExit(1)\n```\n"
    )
    blocks = extract_blocks("synthetic.md", text)
    assert [(b.lang, b.mark) for b in blocks] == [
        ("sh", None),
        ("bash", "exit"),
        ("sh", "background"),
        ("console", None),
    ]
    assert blocks[3].script == "false\n"
    runner = run_doc(blocks, tmp_path)
    assert [f.split(":")[1].split()[0] for f in runner.failures] == ["6", "11", "15"]
    with pytest.raises(AssertionError, match="without a reason"):
        run_doc(extract_blocks("x.md", "<!-- not-run: -->\n```sh\ntrue\n```\n"), tmp_path)


def test_the_dev_hub_refuses_a_folder_without_the_locks_files(demo: Demo, tmp_path: Path) -> None:
    """`scripts/dev_hub.py` serves only a lock's own files: given a folder that lacks them it
    names what is missing and serves nothing (it never serves a snapshot that is not the pin)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    lock, port = demo.root / "weights.lock.json", tmp_path / "hub.port"
    script = ROOT / "scripts" / "dev_hub.py"
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            *("--lock", str(lock), "--weights", str(empty), "--port-file", str(port)),
        ],
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )
    assert done.returncode == 1
    assert "lacks the lock's files" in done.stderr and "config.json" in done.stderr
    assert not port.exists()
