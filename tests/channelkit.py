"""Helpers of the channel tests: real keys, a real TUF repository written by the real CLI, and a
real static HTTP server on 127.0.0.1 (port 0) serving a folder the test can change underneath it,
as a mirror operator (or an attacker in between) would."""

from __future__ import annotations

import atexit
import functools
import http.server
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k3kit.archive import pack
from k3kit.commerce.buyer_receipt import build_body, sign_buyer_receipt
from k3kit.commerce.licence import verify_licence
from k3kit.signing.keys import write_keypair
from k3kit.signing.schemes import signer_from_uri
from tests.cardkit import build_v110
from tests.conftest import GoldenKit, KeyFiles, run_k3kit
from tests.ledgerkit import sign_licence
from tests.netkit import serve_in_thread

ROLES = ("root", "targets", "snapshot", "timestamp")
PACKAGE = "kimi-k3-b300x8"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """A plain static file server, as any web host serves a folder: no logging to the test's
    stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve ``folder`` over HTTP on 127.0.0.1 (a port the kernel picks) for the block."""
    url, stop = start_server(folder)
    try:
        yield url
    finally:
        stop()


def start_server(folder: Path) -> tuple[str, Any]:
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = serve_in_thread(server)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    return f"http://127.0.0.1:{server.server_address[1]}", stop


def serve_until_exit(folder: Path) -> str:
    """For the adversarial corpus, whose cases return an argv run after the builder returns:
    the server lives until the test process ends."""
    url, stop = start_server(folder)
    atexit.register(stop)
    return url


@dataclass(frozen=True)
class Channel:
    """A channel repository and the keys of its four roles (one key each)."""

    repo: Path
    keys: dict[str, KeyFiles]

    @property
    def root(self) -> Path:
        return self.repo / "metadata" / "1.root.json"

    def online_keys(self, targets: KeyFiles | None = None) -> list[str | Path]:
        """``--key`` arguments for targets, snapshot and timestamp."""
        args: list[str | Path] = []
        for key in (targets or self.keys["targets"], self.keys["snapshot"], self.keys["timestamp"]):
            args += ["--key", key.private]
        return args


def make_keys(folder: Path, names: tuple[str, ...] = ROLES) -> dict[str, KeyFiles]:
    keys = {}
    for name in names:
        paths, _ = write_keypair(folder / name, None)
        keys[name] = KeyFiles(paths.private, paths.public)
    return keys


def init_channel(folder: Path) -> Channel:
    """``k3kit channel init`` with a fresh key per role."""
    keys = make_keys(folder / "keys")
    repo = folder / "repo"
    args: list[str | Path] = ["channel", "init", "--repo", repo, "--key", keys["root"].private]
    for role in ROLES:
        args += [f"--{role}-key", keys[role].public]
    done = run_k3kit(*args)
    assert done.returncode == 0, done.stderr
    return Channel(repo, keys)


def publish(chan: Channel, archive: Path, trust: Path, *extra: str | Path) -> Any:
    return run_k3kit(
        "publish",
        archive,
        "--channel",
        "stable",
        "--repo",
        chan.repo,
        "--trust",
        trust,
        *chan.online_keys(),
        *extra,
        "--json",
    )


def update(
    url: str,
    chan: Channel,
    into: Path,
    state: Path,
    trust: Path,
    *extra: str | Path,
    root: Path | None = None,
) -> Any:
    """``k3kit update`` of the stable channel from ``url``, pinning ``root`` (the channel's
    ``1.root.json`` by default)."""
    return run_k3kit(
        "update",
        "--channel",
        "stable",
        "--from",
        url,
        "--channel-root",
        root or chan.root,
        "--into",
        into,
        "--trust",
        trust,
        "--state-dir",
        state,
        *extra,
        "--json",
    )


def rotate_targets(chan: Channel, new: KeyFiles, *extra: str | Path) -> Any:
    """``k3kit channel rotate``: the targets role's key ``chan.keys["targets"]`` is revoked and
    replaced by ``new``; signed by the root key, the new targets key and the snapshot and
    timestamp keys (the roles re-signed under the new root)."""
    return run_k3kit(
        "channel", "rotate", "--repo", chan.repo, "--role", "targets",
        "--add-key", new.public, "--remove-key", chan.keys["targets"].public,
        "--key", chan.keys["root"].private,
        *Channel(chan.repo, {**chan.keys, "targets": new}).online_keys(),
        *extra, "--json",
    )  # fmt: skip


@dataclass(frozen=True)
class Releases:
    """The genuine v1.0.0 and v1.1.0 archives of the example, signed by one publisher key."""

    v100: Path
    v110: Path
    key: KeyFiles


def make_releases(golden: GoldenKit, folder: Path) -> Releases:
    v100 = folder / "kimi-k3-b300x8-1.0.0.kit.tar.gz"
    pack(golden.kit, v100)
    v110 = folder / "kimi-k3-b300x8-1.1.0.kit.tar.gz"
    pack(build_v110(folder / "v110", golden.key), v110)
    return Releases(v100, v110, golden.key)


def copy_repo(repo: Path, dest: Path) -> Path:
    """A static copy of the channel, as a mirror operator makes one (or an attacker keeps one)."""
    shutil.copytree(repo, dest)
    return dest


def replace_tree(served: Path, source: Path) -> None:
    """Make ``served`` hold exactly ``source`` (the server keeps serving the same folder)."""
    shutil.rmtree(served)
    shutil.copytree(source, served)


def entitlement(
    tmp_path: Path, seller: KeyFiles, term_days: int, issued_at: str = "2026-11-01T00:00:00Z"
) -> tuple[Path, Path]:
    """A licence of ``term_days`` per payment, and a buyer receipt for v1.0.0 issued under it on
    ``issued_at`` by ``seller``: the term ends ``term_days`` later."""
    buyer = make_keys(tmp_path / "buyer", ("acme",))["acme"]
    lic, _terms = sign_licence(tmp_path, buyer, price=(250000, "EUR", term_days))
    verified = verify_licence(lic.read_bytes(), source="licence")
    body = build_body(
        licensee="Acme GmbH",
        licence_sha256=verified.licence_sha256,
        entitlement="E-1",
        kit={
            "name": PACKAGE,
            "version": "1.0.0",
            "sequence": 1,
            "kit_sha256": "sha256:" + "1" * 64,
            "weights_sha256": "sha256:" + "2" * 64,
            "released_at": "2026-11-01T00:00:00Z",
        },
        build_record={"engine": "vllm 0.33.0"},
        serve_command=["vllm", "serve"],
        issued_at=issued_at,
        ledger={"seq": 1, "head": "sha256:" + "3" * 64},
    )
    receipt = tmp_path / "buyer-receipt.json"
    receipt.write_bytes(sign_buyer_receipt(body, signer_from_uri(str(seller.private))))
    return receipt, lic
