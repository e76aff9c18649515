"""A stand-in engine for launch tests: answers ``--version``, records how it was started.

It is a real executable on a real ``PATH``; ``k3kit launch`` finds it, asks its version and
``execve``s it, so the record is exactly what an engine would have received: its argv, its whole
environment, and the sha256 of the config file it was given (read when it starts, as vLLM would).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from k3kit._canonical import sha256_of_model
from k3kit._fs import atomic_write
from k3kit.formats.manifest import RECEIPT_NAME, build_manifest, kit_checksum, manifest_bytes
from k3kit.formats.receipt import build_statement
from k3kit.models import PAYLOAD_TYPE, Claims, KitInfo, WeightsLock, load
from k3kit.publish.kit import load_toml
from k3kit.signing.keys import load_private
from k3kit.signing.sign import sign_envelope
from tests.conftest import EXAMPLE, FIXED_TIME, KeyFiles, run_k3kit

CLAIMS = EXAMPLE / "claims.toml"

# The launched engine sees only the clean environment, so its settings are baked into the script.
FAKE_ENGINE = """#!/usr/bin/env bash
if [ "${1:-}" = "--version" ]; then printf 'INFO some log line\\n%s\\n' '@VERSION@'; exit 0; fi
log='@LOG@'
{
  echo "argv"; printf '%s\\n' "$0" "$@"
  echo "env"; env | LC_ALL=C sort
  echo "config"; while [ $# -gt 0 ]; do
    if [ "$1" = "--config" ]; then sha256sum "$2" | cut -d' ' -f1; fi; shift; done
} > "$log"
"""


@dataclass(frozen=True)
class FakeEngine:
    bindir: Path
    log: Path

    def record(self) -> dict[str, list[str]]:
        """The log as sections: argv, env, config."""
        sections: dict[str, list[str]] = {}
        current = ""
        for line in self.log.read_text().splitlines():
            if line in ("argv", "env", "config") and line not in sections:
                current = line
                sections[current] = []
            else:
                sections[current].append(line)
        return sections

    def env(self) -> dict[str, str]:
        return dict(line.split("=", 1) for line in self.record()["env"])


def make_fake_engine(root: Path, version: str = "0.33.0", name: str = "vllm") -> FakeEngine:
    bindir = root / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    engine = bindir / name
    log = root / "engine.log"
    engine.write_text(FAKE_ENGINE.replace("@VERSION@", version).replace("@LOG@", str(log)))
    engine.chmod(0o755)
    k3kit = bindir / "k3kit"  # run.sh calls `k3kit`: the real one, from this checkout
    k3kit.write_text(f'#!/usr/bin/env bash\nexec {sys.executable} -m k3kit "$@"\n')
    k3kit.chmod(0o755)
    return FakeEngine(bindir, log)


def engine_env(fake: FakeEngine, **extra: str) -> dict[str, str]:
    """The caller's environment for a launch: the fake engine first on PATH."""
    return {"PATH": f"{fake.bindir}:/usr/bin:/bin", **extra}


def launch(
    kit: Path, fake: FakeEngine, *args: str | Path, **extra_env: str
) -> tuple[int, str, dict]:  # type: ignore[type-arg]
    """Run ``k3kit launch`` as a subprocess; returns (exit code, stderr, JSON or {}).

    This machine has no GPU, so the node check is skipped (``--no-preflight``); that launch runs
    it by default is tested on its own (tests/test_launch.py)."""
    proc = run_k3kit("launch", kit, "--no-preflight", *args, env=engine_env(fake, **extra_env))
    assert "Traceback" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, proc.stderr, out


def hand_signed(kit: Path, key: KeyFiles, rel: str, edit: Callable[[bytes], bytes]) -> Path:
    """A publisher's kit made by hand (or by an older k3kit that never judged values): ``rel``
    edited, MANIFEST.json rewritten over the new bytes and the whole signed with ``key`` again,
    so it verifies; only launch's own checks stand between it and the engine."""
    path = kit / rel
    # The statement is built from kit.json as it was: a kit.json edited past what k3kit's own
    # model accepts (the publisher's hostile pattern) is still signed, as a hand-made kit would be.
    info = load(KitInfo, json.loads((kit / "kit.json").read_bytes()), source="kit.json")
    path.write_bytes(edit(path.read_bytes()))
    manifest = build_manifest(kit)
    atomic_write(kit / "MANIFEST.json", manifest_bytes(manifest), force=True)
    lock = load(WeightsLock, json.loads((kit / "weights.lock.json").read_bytes()), source="lock")
    sign_receipt(
        kit, key, kit_sha256=kit_checksum(manifest), lock_sha256=sha256_of_model(lock), info=info
    )
    return kit


def sign_receipt(
    kit: Path, key: KeyFiles, *, kit_sha256: str, lock_sha256: str, info: KitInfo | None = None
) -> None:
    """The example's claims signed with ``key`` over these checksums, as the kit's receipt (for
    ``info`` None, the statement is built from the kit's kit.json as it is now)."""
    if info is None:
        info = load(KitInfo, json.loads((kit / "kit.json").read_bytes()), source="kit.json")
    statement = build_statement(
        load_toml(CLAIMS, Claims),
        info,
        kit_sha256=kit_sha256,
        lock_sha256=lock_sha256,
        issued_at=FIXED_TIME,
        source=str(CLAIMS),
        evidence={},
    )
    envelope = sign_envelope(statement, PAYLOAD_TYPE, load_private(key.private, None))
    atomic_write(kit / RECEIPT_NAME, envelope, force=True)
