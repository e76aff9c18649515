"""The usual first-hour mistakes, made as a new user makes them, through the real CLI.

Each gets the message that names the fix and its documented exit code, before any work it would
waste, and nothing is lost (issue 24): a multi-node launch without its runtime values, an archive
given where a kit folder belongs, a missing --trust, a closed stdout pipe, a Ctrl-C that lands
after a completed install. (A pull into a too-small disk: tests/test_pull_disk_space.py; a
second buyer receipt: tests/test_buyer_receipt.py.)
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import click
import pytest

from k3kit.cli import cli
from tests.conftest import GoldenKit, run_k3kit
from tests.launchkit import launch, make_fake_engine

# -- a. runtime values are judged before the weights are hashed --------------------------------


def test_multi_node_launch_without_rank_and_leader_is_refused_before_hashing_the_weights(
    golden: GoldenKit, tmp_path: Path, kit: Path
) -> None:
    """The operator forgets --node-rank/--leader on a 64-GPU topology: told so at once (exit 3),
    not after hashing every weight file (on a real kit, hours)."""
    fake = make_fake_engine(tmp_path / "engine")
    code, stderr, out = launch(
        kit,
        fake,
        "--profile",
        "batch",
        "--topology",
        "multi-node-8x8gpu",
        "--trust",
        golden.key.public,
        "--weights",
        golden.snapshot,
        "--state-dir",
        tmp_path / "s",
        "--json",
    )
    assert code == 3, stderr
    assert out["error"]["code"] == "RUNTIME_VALUES_MISSING"
    assert "runs on 8 nodes: pass --node-rank and --leader" in out["error"]["message"]
    assert "verifying the weights" not in stderr  # the step that hashes them never started
    assert "checking vllm" not in stderr  # nor was the engine asked its version


def test_verify_licence_without_buyer_receipt_is_refused_before_hashing_the_weights(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The same class: `verify KIT --weights W --licence L` (the receipt forgotten) was refused
    only after every weight file was hashed. The proof that nothing was hashed: verify records
    each weight file it hashed in its cache under --state-dir, and there is none."""
    state = tmp_path / "state"
    done = run_k3kit(
        "verify", golden.kit, "--trust", golden.key.public, "--weights", golden.snapshot,
        "--state-dir", state, "--licence", tmp_path / "licence.json",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--licence is checked against a --buyer-receipt; give both" in done.stderr
    assert not (state / "verify").exists()
    hashed = run_k3kit(
        "verify", golden.kit, "--trust", golden.key.public, "--weights", golden.snapshot,
        "--state-dir", state,
    )  # fmt: skip
    assert hashed.returncode == 0, hashed.stderr
    assert list((state / "verify").iterdir())  # the witness works: a real verify leaves one


# -- c. one "is this a kit folder" rule ---------------------------------------------------------

BUYER_VERBS = [
    ("launch", "--profile", "batch", "--no-preflight"),
    ("preflight", "--profile", "batch"),
    ("render-site", "--site", "site.env", "-o", "out"),
]
PUBLISHER_VERBS = [
    ("pack",),
    ("sign", "--key", "x.key", "--claims", "claims.toml"),
    ("countersign", "--key", "x.key"),
    ("sshsig", "--key", "x.key"),
    ("root", "attach", "{kit}", "1.root.json"),
]


@pytest.fixture(scope="module")
def archive(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("archive") / "kimi.kit.tar.gz"
    done = run_k3kit("pack", golden.kit, "-o", out)
    assert done.returncode == 0, done.stderr
    return out


def _with_kit(verb: tuple[str, ...], kit: Path) -> list[str]:
    """``verb`` with KIT in its place: after the verb's name, or where ``{kit}`` stands."""
    if "{kit}" in verb:
        return [str(kit) if word == "{kit}" else word for word in verb]
    return [verb[0], str(kit), *verb[1:]]


@pytest.mark.parametrize("verb", BUYER_VERBS, ids=lambda v: v[0])
def test_archive_given_to_a_buyer_verb_that_needs_the_installed_folder_names_install(
    archive: Path, golden: GoldenKit, tmp_path: Path, verb: tuple[str, ...]
) -> None:
    """The buyer downloads kimi.kit.tar.gz and runs `k3kit launch kimi.kit.tar.gz`: told it is
    an archive and that `k3kit install` turns it into the folder launch takes (exit 3), not
    click's "Directory 'kimi.kit.tar.gz' is a file"."""
    before = archive.read_bytes()
    done = run_k3kit(*_with_kit(verb, archive), "--trust", golden.key.public, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "is a file" not in done.stderr and "Traceback" not in done.stderr
    assert f"{archive} is a kit archive (.kit.tar.gz), not a kit folder" in done.stderr
    assert f"k3kit {verb[0]} works on a kit folder" in done.stderr
    assert "hint: install the archive first (k3kit install ARCHIVE" in done.stderr
    assert archive.read_bytes() == before


@pytest.mark.parametrize("verb", PUBLISHER_VERBS, ids=lambda v: " ".join(v[:2]))
def test_archive_given_to_a_publisher_verb_names_the_kit_folder_build_wrote(
    archive: Path, tmp_path: Path, verb: tuple[str, ...]
) -> None:
    done = run_k3kit(*_with_kit(verb, archive), cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "is a file" not in done.stderr and "Traceback" not in done.stderr
    assert "is a kit archive (.kit.tar.gz), not a kit folder" in done.stderr
    assert "hint: give the kit folder `k3kit build` wrote" in done.stderr


def test_lock_given_to_sign_is_named_for_what_it_is_with_json(
    golden: GoldenKit, tmp_path: Path
) -> None:
    done = run_k3kit("sign", golden.lock, "--key", "k", "--claims", "c", "--json", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "KIT_NOT_A_FOLDER"
    assert "is a weights lock (.json), not a kit folder" in error["message"]


# -- d. one rule for a missing --trust ----------------------------------------------------------

NEEDS_TRUST = {
    "accept": ("--url", "http://127.0.0.1:9", "--weights", "w", "--key", "k", "-o", "r.json"),
    "audit": (),
    "buyer-receipt issue": (
        "E1",
        "--db",
        "l.sqlite",
        "--build-record",
        "b.json",
        "--serve-command",
        "s.sh",
        "--key",
        "k",
        "-o",
        "o.json",
        "--kit",
    ),
    "card": ("-o", "card.html"),
    "install": ("--into", "installed"),
    "launch": ("--profile", "batch", "--weights", "w", "--no-preflight"),
    "preflight": ("--profile", "batch"),
    "release-notes": ("{kit}",),
    "render-site": ("--site", "site.env", "-o", "out"),
    "show": (),
    "verify": (),
}
# Verbs whose --trust adds a check and is optional by design.
OPTIONAL_TRUST = {"pack", "pull", "licence verify", "ledger verify", "ledger checkpoint"}
# The distribution verbs take an archive, a registry or a channel instead of a kit folder:
# (argv before the archive, whether the archive goes first, argv after it).
DISTRIBUTION_TRUST: dict[str, tuple[str, ...]] = {
    "publish": ("{archive}", "--channel", "stable", "--repo", "chan", "--key", "k"),
    "push": ("{archive}", "oci://127.0.0.1:9/k3kit/kit:1.0.0"),
    "update": (
        "--channel",
        "stable",
        "--from",
        "http://127.0.0.1:9/",
        "--into",
        "i",
        "--channel-root",
        "r.json",
    ),
}


def _trust_verbs(group: click.Group, prefix: str = "") -> set[str]:
    """Every command (sub-commands included) that has a --trust option."""
    found: set[str] = set()
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # verbs load on use (cli._app.VerbGroup)
        command = group.get_command(ctx, name)
        assert command is not None, name
        full = f"{prefix}{name}"
        if isinstance(command, click.Group):
            found |= _trust_verbs(command, f"{full} ")
        elif any("--trust" in getattr(p, "opts", ()) for p in command.params):
            found.add(full)
    return found


def test_every_verb_with_trust_is_in_the_one_rule() -> None:
    """A new verb with --trust must be listed here, so the test below covers it."""
    assert _trust_verbs(cli) == set(NEEDS_TRUST) | OPTIONAL_TRUST | set(DISTRIBUTION_TRUST)


@pytest.mark.parametrize("verb", sorted(NEEDS_TRUST))
def test_missing_trust_is_exit_2_trust_empty_in_every_verb(
    golden: GoldenKit, tmp_path: Path, verb: str
) -> None:
    """A new buyer leaves out --trust: every verb says the same thing with the same exit code
    (before: click's "Missing option" exit 2 in six verbs, a usage line in four, and
    TRUST_EMPTY exit 3 in launch)."""
    rest = [str(golden.kit) if a == "{kit}" else a for a in NEEDS_TRUST[verb]]
    done = run_k3kit(
        *verb.split(),
        *([] if verb == "buyer-receipt issue" else [golden.kit]),
        *rest,
        *([golden.kit] if verb == "buyer-receipt issue" else []),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "TRUST_EMPTY", error
    assert error["message"].startswith("error: no trusted key")
    assert "pass --trust with the publisher's public key" in error["hint"]
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing created


# -- g. a closed stdout pipe ---------------------------------------------------------------------


@pytest.mark.parametrize("verb", sorted(DISTRIBUTION_TRUST))
def test_missing_trust_is_the_same_answer_in_the_distribution_verbs(
    archive: Path, tmp_path: Path, verb: str
) -> None:
    """publish, push and update verify a kit before anything leaves or lands: without --trust
    each says what every other verb says, before it touches a channel or a registry (the
    addresses here answer nothing)."""
    argv = [str(archive) if a == "{archive}" else a for a in DISTRIBUTION_TRUST[verb]]
    done = run_k3kit(verb, *argv, "--json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "TRUST_EMPTY", error
    assert error["message"].startswith("error: no trusted key")
    assert "pass --trust with the publisher's public key" in error["hint"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no channel or install folder made


def _closed_pipe_run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The CLI with stdout a pipe whose reader has already gone (`k3kit … | head -0` once head
    has exited): every write to it fails with EPIPE, whatever the machine's load."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "k3kit", *map(str, args)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            env={**os.environ, "SOURCE_DATE_EPOCH": "1793491200"},
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [("show", "--json"), ("show",), ("--help",)], ids=str)
def test_output_into_a_closed_pipe_exits_141_quietly(
    golden: GoldenKit, args: tuple[str, ...]
) -> None:
    """`k3kit show KIT | head -0`: the convention of cat and grep (128 + SIGPIPE), no message,
    no traceback; before, exit 4 "an I/O problem on this machine" with an empty file name."""
    full: tuple[str | Path, ...] = args
    if args != ("--help",):
        full = (args[0], golden.kit, "--trust", golden.key.public, *args[1:])
    done = _closed_pipe_run(*full)
    assert done.returncode == 141, done.stderr
    assert done.stderr == ""


# -- h. the verdict printed and the exit code agree ----------------------------------------------


def _full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is already full: the next write to it blocks until the test reads."""
    read_end, write_end = os.pipe()
    flags = fcntl.fcntl(write_end, fcntl.F_GETFL)
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    try:
        while True:
            os.write(write_end, b"x" * 4096)
    except BlockingIOError:
        pass
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags)
    return read_end, write_end


def test_ctrl_c_after_a_completed_install_keeps_its_success_exit(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The operator presses Ctrl-C just as `install` prints "installed read-only": the install
    is done, so the exit code must say so (0), not 130 beside a success line.

    The moment is made exact, not timed: stdout is a full pipe, so install blocks writing the
    installed path (after the verdict on stderr); SIGINT is sent then, and the pipe drained."""
    read_end, write_end = _full_pipe()
    into = tmp_path / "installed"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "k3kit",
            "install",
            str(golden.kit),
            "--into",
            str(into),
            "--trust",
            str(golden.key.public),
        ],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write_end)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("installed read-only: "):
            break
    assert seen and seen[-1].startswith("installed read-only: "), "".join(seen)
    proc.send_signal(signal.SIGINT)
    out = b""
    while chunk := os.read(read_end, 65536):
        out += chunk
    os.close(read_end)
    rest = proc.stderr.read()
    assert proc.wait() == 0, "".join(seen) + rest
    assert "interrupted" not in rest
    target = Path(seen[-1].split(": ", 1)[1].strip())
    assert target.parent == into and (target / "MANIFEST.json").is_file()
    assert out.lstrip(b"x").decode().strip() == str(target)
