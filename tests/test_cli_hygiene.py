"""CLI hygiene through the real CLI: JSON error objects, Ctrl-C, escaping, --force, keygen --out,
and what `pin --local` refuses before it hashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from k3kit.errors import InputError
from k3kit.weights.pin import pin_local
from tests.adversarial.attacks_kit import PAINT_NAME
from tests.conftest import EXAMPLE, FIXED_TIME, REPO, GoldenKit, run_k3kit

COMMIT = "0" * 40


def _error_object(proc: subprocess.CompletedProcess[str], exit_code: int) -> dict:  # type: ignore[type-arg]
    assert proc.returncode == exit_code, proc.stderr
    assert "Traceback" not in proc.stderr
    obj = json.loads(proc.stdout)
    assert obj["ok"] is False and obj["exit_code"] == exit_code
    assert set(obj["error"]) == {"code", "message", "hint"}
    return obj["error"]  # type: ignore[no-any-return]


def test_json_usage_error_is_a_json_object_on_stdout() -> None:
    error = _error_object(run_k3kit("verify", "--json"), 2)
    assert error["code"] == "USAGE" and "KIT" in error["message"]
    error = _error_object(run_k3kit("verify", "x", "--trust", "k", "--no-such-flag", "--json"), 2)
    assert "no-such-flag" in error["message"]


def test_json_bad_input_and_environment_errors(golden: GoldenKit, tmp_path: Path) -> None:
    out = tmp_path / "exists"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    build = run_k3kit("build", EXAMPLE / "package.toml", "--lock", golden.lock, "-o", out, "--json")
    assert _error_object(build, 3)["code"] == "OUTPUT_EXISTS"
    unreadable = tmp_path / "missing.pub"
    verify = run_k3kit("verify", golden.kit, "--trust", unreadable, "--json")
    error = _error_object(verify, 4)
    assert error["code"] == "KEY_UNREADABLE" and "missing.pub" in error["message"]


def test_build_force_replaces_only_a_kit_or_an_empty_folder(
    golden: GoldenKit, tmp_path: Path
) -> None:
    package = EXAMPLE / "package.toml"
    precious = tmp_path / "src"
    precious.mkdir()
    (precious / "main.py").write_text("print('my work')\n")
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", precious, "--force")
    assert proc.returncode == 3 and "neither empty nor a k3kit kit" in proc.stderr
    assert (precious / "main.py").read_text() == "print('my work')\n"
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    proc = run_k3kit("build", package, "--lock", golden.lock, "-o", a_file, "--force")
    assert proc.returncode == 3 and a_file.read_text() == "x"
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = ("build", package, "--lock", golden.lock, "-o", empty, "--force")
    assert run_k3kit(*argv).returncode == 0
    # empty/ is now a kit k3kit wrote: --force replaces it.
    assert run_k3kit(*argv).returncode == 0 and (empty / "MANIFEST.json").is_file()
    # A file its manifest does not list makes it a folder k3kit did not (only) write: refused,
    # and the file is kept (outside pass finding 6: kit.json and MANIFEST.json beside .git/).
    (empty / "notes.txt").write_text("mine")
    proc = run_k3kit(*argv)
    assert proc.returncode == 3 and (empty / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("make_dir", [True, False])
def test_keygen_out_folder_writes_inside_it(tmp_path: Path, make_dir: bool) -> None:
    keys = tmp_path / "keys"
    if make_dir:
        keys.mkdir()
        arg = str(keys)
    else:
        arg = str(keys) + "/"
    proc = run_k3kit("keygen", "--out", arg, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert Path(result["private_key"]) == keys / "publisher.key"
    assert (keys / "publisher.key").stat().st_mode & 0o777 == 0o600
    assert (keys / "publisher.pub").is_file() and not (tmp_path / "keys.key").exists()


def test_paint_over_the_verdict_is_escaped(kit: Path, golden: GoldenKit) -> None:
    (kit / PAINT_NAME).write_text("x")
    proc = run_k3kit("verify", kit, "--trust", golden.key.public)
    assert proc.returncode == 1
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr
    assert "x\\r\\x1b[2K\\x1b[32mverdict: VERIFIED\\x1b[0m" in proc.stderr
    verdicts = [line for line in proc.stderr.splitlines() if line.startswith("verdict:")]
    assert verdicts == ["verdict: NOT VERIFIED - do not deploy"]


def test_non_utf8_name_is_shown_as_bytes_never_exit_70(kit: Path, golden: GoldenKit) -> None:
    with open(os.path.join(os.fsencode(kit), b"evil-\xff.sh"), "wb") as handle:
        handle.write(b"x")
    proc = run_k3kit("verify", kit, "--trust", golden.key.public)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "evil-\\xff.sh" in proc.stderr


def _plain_weights(root: Path) -> Path:
    root.mkdir()
    (root / "config.json").write_text("{}")
    (root / "model.safetensors").write_bytes(b"w" * 1000)
    return root


def test_pin_local_refuses_an_unlockable_name_before_hashing(tmp_path: Path) -> None:
    folder = _plain_weights(tmp_path / "w")
    (folder / "my notes.txt").write_text("a space")
    hashed: list[str] = []
    with pytest.raises(InputError) as info:
        pin_local(
            folder,
            repo=REPO,
            revision=COMMIT,
            pinned_at=FIXED_TIME,
            on_file_done=lambda rel, _size: hashed.append(rel),
        )
    assert info.value.code == "PATH_REFUSED" and "my notes.txt" in info.value.message
    assert hashed == []  # refused during the walk, before any byte was hashed
    proc = run_k3kit(
        "pin",
        "--local",
        folder,
        "--repo",
        REPO,
        "--revision",
        COMMIT,
        "-o",
        tmp_path / "lock.json",
        "--json",
    )
    assert _error_object(proc, 3)["code"] == "PATH_REFUSED"
    assert not (tmp_path / "lock.json").exists()
    proc = run_k3kit(
        "pin",
        "--local",
        folder,
        "--repo",
        REPO,
        "--revision",
        COMMIT,
        "--exclude",
        "*.txt",
        "-o",
        tmp_path / "lock.json",
    )
    assert proc.returncode == 0, proc.stderr


def test_pin_local_non_utf8_name_is_refused_not_a_crash(tmp_path: Path) -> None:
    folder = _plain_weights(tmp_path / "w")
    with open(os.path.join(os.fsencode(folder), b"bad-\xff.bin"), "wb") as handle:
        handle.write(b"x")
    proc = run_k3kit(
        "pin", "--local", folder, "--repo", REPO, "--revision", COMMIT, "-o", tmp_path / "lock.json"
    )
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert "bad-\\xff.bin" in proc.stderr


def test_pin_local_leaves_out_git_and_takes_patterns(tmp_path: Path) -> None:
    folder = _plain_weights(tmp_path / "w")
    (folder / ".git" / "objects").mkdir(parents=True)
    (folder / ".git" / "objects" / "pack with space").write_text("git's own")
    (folder / "README.md").write_text("card")
    proc = run_k3kit(
        "pin",
        "--local",
        folder,
        "--repo",
        REPO,
        "--revision",
        COMMIT,
        "--include",
        "*.json",
        "--include",
        "*.safetensors",
        "-o",
        tmp_path / "lock.json",
    )
    assert proc.returncode == 0, proc.stderr
    lock = json.loads((tmp_path / "lock.json").read_text())
    assert [f["path"] for f in lock["files"]] == ["config.json", "model.safetensors"]


def test_pin_local_snapshot_of_another_repo_is_refused(golden: GoldenKit, tmp_path: Path) -> None:
    proc = run_k3kit(
        "pin",
        "--local",
        golden.snapshot,
        "--repo",
        "other/repo",
        "--revision",
        golden.snapshot.name,
        "-o",
        tmp_path / "lock.json",
        "--json",
    )
    error = _error_object(proc, 3)
    assert error["code"] == "REPO_MISMATCH" and "models--moonshotai--Kimi-K3" in error["message"]


def _opened(pid: int, folder: Path) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(str(folder)):
                return True
        except OSError:
            continue
    return False


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see open files")
def test_ctrl_c_exits_130_promptly_and_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    folder.mkdir()
    for i in range(4):  # 64 GiB of sparse shards: minutes of hashing if Ctrl-C did not act
        with open(folder / f"shard-{i}.safetensors", "wb") as handle:
            handle.truncate(16 * 1024**3)
    lock = tmp_path / "lock.json"
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1793491200"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "k3kit",
            "pin",
            "--local",
            str(folder),
            "--repo",
            REPO,
            "--revision",
            COMMIT,
            "-o",
            str(lock),
            "--workers",
            "2",
            "--json",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not _opened(proc.pid, folder) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "pin ended before hashing began"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert json.loads(stdout)["exit_code"] == 130
    assert not lock.exists() and not list(tmp_path.glob(".lock.json.*"))
