"""A local, offline stand-in for the Hugging Face Hub that serves one lock's weights (a dev tool).

Why: `k3kit pull` talks to a hub; on a laptop without the internet (or with the demo's stand-in
weights, which no public hub holds) there is none to talk to. This serves exactly the files a
``weights.lock.json`` names, at the commit the lock pins, on 127.0.0.1, so that

    HF_ENDPOINT=http://127.0.0.1:$(cat hub.port) k3kit pull KIT --dir DIR

runs the real pull (the real huggingface_hub client, LFS redirect to a second "CDN" port, every
file hashed as it lands) against it. It is the loopback hub k3kit's own tests use
(``tests/testhub``), standard library only, so any Python 3.11+ runs it from a clone:

    python3 scripts/dev_hub.py --lock k3kit-demo/weights.lock.json --weights k3kit-demo/hf-cache \
        --port-file hub.port

``--weights`` is a plain folder of the lock's files or a Hugging Face cache root that holds the
lock's snapshot. The port is chosen by the system (never a fixed one) and written to
``--port-file`` once the hub answers; Ctrl-C (or SIGTERM) stops it. Not a production server: no
auth, no TLS, read-only, for development and the documentation's own test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the clone's tests/ package

from tests.portfile import check_port_file, write_port_file
from tests.testhub.server import TestHub


def _snapshot(weights: Path, repo: str, commit: str) -> Path:
    """The folder that holds the lock's files: a cache root's snapshot, else ``weights`` itself."""
    cached = weights / ("models--" + repo.replace("/", "--")) / "snapshots" / commit
    return cached if cached.is_dir() else weights


def _lock_files(lock: Path, weights: Path) -> tuple[str, str, dict[str, Path]]:
    """Repo, commit and ``{repo path: file}`` of every file the lock names (each must exist)."""
    doc = json.loads(lock.read_text(encoding="utf-8"))
    repo, commit = doc["repo"], doc["commit"]
    folder = _snapshot(weights, repo, commit)
    files = {f["path"]: folder / f["path"] for f in doc["files"]}
    missing = [p for p, f in files.items() if not f.is_file()]
    if missing:
        raise SystemExit(f"dev_hub: {folder} lacks the lock's files: {', '.join(missing[:5])}")
    inside = os.path.realpath(weights)
    for entry in doc["files"]:
        problem = _not_the_locks(entry["path"], files[entry["path"]], entry["size"], inside)
        if problem is not None:
            raise SystemExit(f"dev_hub: refusing to serve {problem}")
    return repo, commit, files


def _not_the_locks(rel: str, file: Path, size: object, inside: str) -> str | None:
    """Why ``file`` cannot be the lock's ``rel``, else None.

    The hub answers anyone on this machine (127.0.0.1, no auth). A weights folder others can
    write (a shared model cache) may hold a link a co-tenant planted, ``config.json`` to the
    operator's private key: served as the operator, it would hand them that file. So a served
    file must resolve inside ``--weights`` (a cache's snapshot links into its ``blobs/``) and
    have the lock's size; ``pull`` still checks every byte of what it receives.
    """
    real = os.path.realpath(file)
    if os.path.commonpath([real, inside]) != inside:
        return f"{rel}: it leads outside {inside} (to {real})"
    actual = os.path.getsize(real)
    if actual != size:
        return f"{rel}: {actual} bytes, the lock says {size}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/dev_hub.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--lock", required=True, type=Path, help="weights.lock.json to serve")
    parser.add_argument(
        "--weights", required=True, type=Path, help="the lock's files: a folder or a cache root"
    )
    parser.add_argument("--port-file", type=Path, help="write the API port here once serving")
    args = parser.parse_args(argv)
    if args.port_file is not None:  # before any work: a refused file leaves nothing running
        check_port_file("dev_hub", args.port_file)
    repo, commit, files = _lock_files(args.lock, args.weights)
    hub = TestHub()
    hub.commit(repo, files, sha=commit)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with hub:
        print(f"dev hub: {repo}@{commit} ({len(files)} files) at {hub.url}", flush=True)
        print(f"  HF_ENDPOINT={hub.url} k3kit pull ...   (Ctrl-C stops it)", flush=True)
        if args.port_file is not None:
            write_port_file("dev_hub", args.port_file, int(hub.url.rsplit(":", 1)[1]))
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
