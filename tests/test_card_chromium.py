"""The example card in real headless Chromium: it renders (a screenshot is taken), its console
stays silent, and it loads nothing from the network.

How this is observed, without a DevTools client: Chromium runs with ``--enable-logging=stderr
--v=0``, which writes every console message of the page to stderr as a ``:CONSOLE`` line, and
with ``--log-net-log``, which records every request of its network stack as JSON. Requests the
page made are the ones whose network isolation key is the page's own site (``file://``); the
browser's own background traffic (update checks) has none and is not the card's doing. A control
page with a console error, a stylesheet, an image and a fetch proves that both detectors fire.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import GoldenKit, run_k3kit

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Debian's chromium is not installed (make test installs it where it has root and "
    "apt-get: scripts/ensure-tools.sh chromium)",
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
]


def _render(page: Path, work: Path) -> tuple[Path, list[str], list[str]]:
    """Screenshot ``page``; return the PNG, the console lines and the URLs the page requested."""
    shot, netlog = work / f"{page.stem}.png", work / f"{page.stem}.netlog.json"
    assert CHROMIUM is not None
    proc = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={work / ('profile-' + page.stem)}",
            f"--log-net-log={netlog}",
            "--window-size=1280,3200",
            f"--screenshot={shot}",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    log = json.loads(netlog.read_text())
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    requested = [
        e["params"]["url"]
        for e in log["events"]
        if names.get(e["type"]) == "URL_REQUEST_START_JOB"
        and "file://" in e.get("params", {}).get("network_isolation_key", "")
    ]
    return shot, console, requested


def test_detectors_fire_on_a_page_that_misbehaves(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><head><link rel="stylesheet" href="http://127.0.0.1:9/x.css">'
        '</head><body><img src="http://127.0.0.1:9/a.png"><script>console.error("boom");'
        'fetch("http://127.0.0.1:9/f");</script>hi</body></html>'
    )
    _, console, requested = _render(bad, tmp_path)
    assert any('"boom"' in line for line in console)
    assert {"http://127.0.0.1:9/x.css", "http://127.0.0.1:9/a.png"} <= set(requested)


def test_example_card_renders_offline_without_console_errors(
    golden: GoldenKit, tmp_path: Path
) -> None:
    card = tmp_path / "card.html"
    result = run_k3kit(
        "card", golden.kit, "--trust", golden.key.public, "-o", card, "--gpu-hour-usd", "6.50"
    )
    assert result.returncode == 0, result.stderr
    shot, console, requested = _render(card, tmp_path)
    assert console == []
    assert requested == []
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 50_000
