"""Helpers every command shares: the passphrase variable, the cache folder, terminal progress.

Progress is written only when stderr is a terminal; here a stand-in terminal records what a user
would see, including that a file name cannot paint over the line.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from k3kit.cli import _shared
from k3kit.errors import InputError


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _terminal(monkeypatch: pytest.MonkeyPatch) -> Terminal:
    """Replace stderr inside the test itself (pytest re-installs its capture at each phase)."""
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    return term


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_a_passphrase_variable_must_hold_something(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("K3KIT_TEST_PASS", raising=False)
    else:
        monkeypatch.setenv("K3KIT_TEST_PASS", value)
    with pytest.raises(InputError, match="K3KIT_TEST_PASS: the variable is not set or empty") as e:
        _shared.read_passphrase("K3KIT_TEST_PASS")
    assert e.value.code == "PASSPHRASE_MISSING"


def test_a_passphrase_is_read_from_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K3KIT_TEST_PASS", "correct horse")
    assert _shared.read_passphrase("K3KIT_TEST_PASS") == b"correct horse"
    assert _shared.read_passphrase(None) is None


@pytest.mark.parametrize(
    ("xdg", "expected"),
    [
        ("/var/cache/x", "/var/cache/x/k3kit"),
        ("relative/cache", "HOME/.cache/k3kit"),
        ("", "HOME/.cache/k3kit"),
    ],
    ids=["absolute XDG_CACHE_HOME", "relative XDG_CACHE_HOME is ignored", "no XDG_CACHE_HOME"],
)
def test_the_cache_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, xdg: str, expected: str
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert str(_shared.default_cache_dir()) == expected.replace("HOME", str(tmp_path))


# Without XDG_STATE_HOME, root keeps node state in /var/lib/k3kit, a user in ~/.local/state.
_NO_XDG_STATE = "/var/lib/k3kit" if os.geteuid() == 0 else "HOME/.local/state/k3kit"


@pytest.mark.parametrize(
    ("xdg", "expected"),
    [
        ("/var/state/x", "/var/state/x/k3kit"),
        ("relative/state", _NO_XDG_STATE),
        ("", _NO_XDG_STATE),
    ],
    ids=["absolute XDG_STATE_HOME", "relative XDG_STATE_HOME is ignored", "no XDG_STATE_HOME"],
)
def test_the_state_folder_is_never_the_cache_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, xdg: str, expected: str
) -> None:
    """Rollback memory in a cache folder is lost to the first `rm -rf ~/.cache` that frees space."""
    monkeypatch.setenv("XDG_STATE_HOME", xdg)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path))
    state, cache = _shared.state_and_cache(None)
    assert str(state) == expected.replace("HOME", str(tmp_path))
    assert cache == tmp_path / "cache" / "k3kit"
    assert _shared.state_and_cache(tmp_path / "s") == (tmp_path / "s", tmp_path / "s")


def test_no_home_means_no_cache_rather_than_a_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", no_home)
    assert _shared.default_cache_dir() is None


def test_file_progress_is_silent_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert _shared.file_progress("hashing") is None


def test_file_progress_counts_files_and_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _terminal(monkeypatch)
    tick = _shared.file_progress("weights\x1b[2J", total=4_000_000_000)
    assert tick is not None
    tick("model-00001.safetensors", 1_500_000_000)
    tick("model-00002.safetensors", 500_000_000)
    shown = terminal.getvalue()
    assert "2 files, 2.00/4.00 GB" in shown
    assert "\x1b[2J" not in shown  # the label's escape sequence is shown, not obeyed


@pytest.mark.parametrize(
    ("done", "total", "words"),
    [
        (0, 0, "0 B of 0 B (100%)"),
        (1_500, 3_000, "1.50 kB of 3.00 kB (50%)"),
        (2_000_000_000_000_000, 2_000_000_000_000_000, "2000.00 TB of 2000.00 TB (100%), "),
    ],
    ids=["nothing to do", "half-way", "beyond TB"],
)
def test_byte_progress_line(
    monkeypatch: pytest.MonkeyPatch, done: int, total: int, words: str
) -> None:
    terminal = _terminal(monkeypatch)
    progress = _shared.ByteProgress("pull")
    progress(done, total)
    assert words in terminal.getvalue() and "ETA" in terminal.getvalue()
    progress.finish()
    assert terminal.getvalue().endswith("\r\x1b[K")


def test_byte_progress_eta_and_no_line_when_never_called(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _terminal(monkeypatch)
    progress = _shared.ByteProgress("pull")
    progress.start -= 10.0  # ten seconds in, 1 MB of 3 MB done: 20 s left
    progress(1_000_000, 3_000_000)
    assert "ETA 0:00:2" in terminal.getvalue()
    quiet = _shared.ByteProgress("idle")
    before = terminal.getvalue()
    quiet.finish()
    assert terminal.getvalue() == before


class _Stdin(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__("")
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture(scope="module")
def encrypted_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from k3kit.signing.keys import write_keypair

    paths, _ = write_keypair(tmp_path_factory.mktemp("keys") / "publisher", b"s3cret pass")
    return paths.private


def test_signer_passphrase_from_its_variable(
    encrypted_key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from k3kit.cli.signing import load_signer

    monkeypatch.setenv("K3KIT_TEST_PASS", "s3cret pass")
    assert load_signer(encrypted_key, "K3KIT_TEST_PASS").keyid
    monkeypatch.setenv("K3KIT_TEST_PASS", "")
    with pytest.raises(InputError, match="K3KIT_TEST_PASS is not set or empty"):
        load_signer(encrypted_key, "K3KIT_TEST_PASS")


def test_signer_prompts_only_on_a_terminal(
    encrypted_key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script (stdin not a terminal) gets the error at once instead of a prompt that hangs;
    a person at a terminal is asked."""
    import click

    from k3kit.cli.signing import load_signer
    from k3kit.errors import K3kitError

    monkeypatch.setattr(sys, "stdin", _Stdin(tty=False))
    with pytest.raises(K3kitError) as info:
        load_signer(encrypted_key, None)
    assert info.value.code == "KEY_PASSPHRASE"
    monkeypatch.setattr(sys, "stdin", _Stdin(tty=True))
    asked: list[str] = []

    def prompt(text: str, **kwargs: object) -> str:
        asked.append(text)
        return "s3cret pass"

    monkeypatch.setattr(click, "prompt", prompt)
    assert load_signer(encrypted_key, None).keyid
    assert asked == [f"passphrase for {encrypted_key}"]
