"""The channel part of ``k3kit demo``: a repository with a key per role, a loopback static
server, publish and update through the same functions as the CLI verbs. Offline: the server
listens on 127.0.0.1 only, on a port the kernel picks, and stops with the block."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k3kit.channel.client import Request, Updated, update
from k3kit.channel.publish import publish_archive
from k3kit.channel.repository import ROLES, Expiries, init_channel, utc_now
from k3kit.signing.keys import PublicKey, load_public, write_keypair
from k3kit.signing.schemes import signer_from_uri
from k3kit.signing.signers import Signer


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


@dataclass(frozen=True)
class ChannelDemo:
    repo: Path
    signers: dict[str, Signer]
    trusted: list[PublicKey]

    @classmethod
    def create(cls, repo: Path, keys: Path, trusted: list[PublicKey]) -> ChannelDemo:
        """A channel whose four roles each have their own (demo) key under ``keys``."""
        signers, publics = {}, {}
        for role in ROLES:
            paths, _ = write_keypair(keys / role, None)
            signers[role] = signer_from_uri(str(paths.private))
            publics[role] = [load_public(paths.public)]
        init_channel(repo, publics, {}, [signers["root"]], now=utc_now())
        return cls(repo, signers, trusted)

    def publish(self, archive: Path) -> str:
        online = [self.signers[r] for r in ("targets", "snapshot", "timestamp")]
        done = publish_archive(
            archive, "stable", self.repo, self.trusted, online, now=utc_now(), expires=Expiries()
        )
        return str(done["target"])

    def update(self, url: str, into: Path, state: Path) -> Updated:
        root = self.repo / "metadata" / "1.root.json"
        return update(Request(url, "stable", root, into, state), self.trusted)

    @contextmanager
    def served(self) -> Iterator[str]:
        handler = functools.partial(_Quiet, directory=str(self.repo))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
