#!/usr/bin/env python3
"""A static HTTP server for a channel folder on this machine, for trying ``k3kit update``::

    python3 scripts/channel_server.py --dir channel --port-file channel.port
    k3kit update --channel stable --from http://127.0.0.1:$(cat channel.port) ...

A TUF channel is plain files, so any static web host serves it; this is the smallest one, for
the docs and a laptop (docs/distribution.md). It listens on 127.0.0.1 only, on a port the
system chooses (never a fixed one, so two runs cannot collide), written to ``--port-file`` once
it listens (the same checked, atomic port file as scripts/dev_hub.py). Ctrl-C (or SIGTERM)
stops it. It never serves a file outside the folder (a link planted in it leads nowhere). Not a
production server: no TLS, and it is trusted for nothing (the channel's signatures are what
``update`` checks).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the clone's tests/ package

from tests.portfile import check_port_file, write_port_file


class _ChannelFiles(http.server.SimpleHTTPRequestHandler):
    """Static files of one folder, never a file outside it; no request log.

    Why the check: the server answers anyone on 127.0.0.1, with no login. In a channel folder
    other users can write (a shared project folder), one of them could plant a link to a file of
    the operator's (a private key) and fetch it through this server. A path whose real location
    is outside the served folder (a link out of it, at any depth) is answered 404.
    """

    def send_head(self) -> Any:
        served = os.path.realpath(self.directory)
        real = os.path.realpath(self.translate_path(self.path))
        if real != served and not real.startswith(served + os.sep):
            self.send_error(404, "not in the channel folder")
            return None
        return super().send_head()

    def log_message(self, format: str, *args: Any) -> None:
        return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/channel_server.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dir", type=Path, required=True, help="the channel folder to serve")
    parser.add_argument("--port-file", type=Path, help="write the port here once listening")
    args = parser.parse_args(argv)
    if args.port_file is not None:  # before any work: a refused file leaves nothing running
        check_port_file("channel_server", args.port_file)
    if not (args.dir / "metadata" / "1.root.json").is_file():
        raise SystemExit(f"channel_server: {args.dir} is not a channel (no metadata/1.root.json)")
    handler = functools.partial(_ChannelFiles, directory=str(args.dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        print(f"channel {args.dir} at http://127.0.0.1:{port}  (Ctrl-C stops it)", flush=True)
        if args.port_file is not None:
            write_port_file("channel_server", args.port_file, port)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
