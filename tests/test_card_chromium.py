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

import html as html_lib
import json
import re
import shutil
import subprocess
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.cardkit import signed_statement
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


# Measures the laid-out card in the browser and leaves the result in the DOM for --dump-dom.
# Added to a copy of the card only (its CSP forbids scripts); the layout measured is the card's.
_MEASURE = """<script>
const main = document.querySelector('main').getBoundingClientRect();
const tables = [...document.querySelectorAll('main table')].map(t => {
  const box = t.closest('.wide') || t.parentElement;
  return {group: t.dataset.group || '', rows: t.rows.length,
          cells: t.rows.length > 1 ? t.rows[1].cells.length : 0,
          scroll: box.scrollWidth, client: box.clientWidth,
          right: t.getBoundingClientRect().right};
});
const charts = [...document.querySelectorAll('.charts svg')].map(s => ({
  id: s.id, width: s.getBoundingClientRect().width,
  points: [...s.querySelectorAll('circle.pt')].map(c => ({
    run: c.dataset.run, series: c.dataset.series, value: c.dataset.value, x: c.dataset.x || null,
    cx: c.getBoundingClientRect().left}))}));
document.body.setAttribute('data-measured', JSON.stringify({
  main: {left: main.left, right: main.right, width: main.width},
  page: {scroll: document.documentElement.scrollWidth,
         client: document.documentElement.clientWidth},
  tables, charts, noRuns: document.querySelectorAll('[data-no-runs]').length,
  limitations: [...document.querySelectorAll('[data-limitation]')].map(li => li.textContent)}));
</script>"""


def _measure_at_1200(card: Path, work: Path) -> dict[str, Any]:
    """Lay the card out in a 1200 px wide window, screenshot it, and return what
    :data:`_MEASURE` found. One browser start does both (``--screenshot`` beside
    ``--dump-dom``): the page is the card plus a script that only sets an attribute, so the
    pixels are the card's; a second start for the screenshot alone cost a whole Chromium launch
    (about 1 s of CPU, the slowest step of this module) for nothing more."""
    page, shot = work / "measured.html", work / "card.png"
    html = card.read_text(encoding="utf-8")
    html = html.replace(
        "default-src 'none'; style-src",
        "default-src 'none'; script-src 'unsafe-inline'; style-src",
        1,
    ).replace("</body>", _MEASURE + "</body>", 1)
    page.write_text(html, encoding="utf-8")
    assert CHROMIUM is not None
    proc = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={work / 'profile-measure'}", "--window-size=1200,3000",
         f"--screenshot={shot}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.read_bytes().startswith(b"\x89PNG"), proc.stderr[-2000:]
    found = re.search(r'data-measured="([^"]*)"', proc.stdout)
    assert found, proc.stdout[-2000:]
    measured: dict[str, Any] = json.loads(html_lib.unescape(found.group(1)))
    return measured


@pytest.fixture(scope="module")
def card_1200(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("card-1200")
    card = work / "card.html"
    done = run_k3kit("card", golden.kit, "--trust", golden.key.public, "-o", card)
    assert done.returncode == 0, done.stderr
    return _measure_at_1200(card, work)


def test_card_at_1200px_cuts_no_column_and_shows_no_empty_table(card_1200: dict[str, Any]) -> None:
    """The buyer opens the card in a 1200 px window: every table fits its box (no column cut or
    scrolled out of view), the page itself does not scroll sideways, and no table is only a
    header (the multi-node topologies, measured by no run, say so in a sentence instead)."""
    tables = card_1200["tables"]
    assert len(tables) > 5
    for table in tables:
        assert table["scroll"] <= table["client"], table  # no column cut
        assert table["right"] <= card_1200["main"]["right"] + 0.5, table
        assert table["rows"] >= 2 and table["cells"] >= 1, table  # no empty table
    assert card_1200["page"]["scroll"] <= card_1200["page"]["client"]
    assert card_1200["noRuns"] == 2  # batch and interactive on 8 nodes: measured by no run


def test_card_charts_use_the_page_width_and_limitations_appear_once(
    card_1200: dict[str, Any],
) -> None:
    inner = card_1200["main"]["width"] - 2 * 28  # main's padding
    charts = {c["id"]: c for c in card_1200["charts"]}
    assert charts["chart-tradeoff"]["width"] >= 0.95 * inner
    for chart_id, chart in charts.items():
        if chart_id != "chart-tradeoff":
            assert chart["width"] >= 0.45 * inner, chart_id  # two a row, not three
    shown = card_1200["limitations"]
    assert len(shown) == len(set(shown))


def test_throughput_per_gpu_vs_interactivity_chart_is_the_receipts_figures(
    golden: GoldenKit, card_1200: dict[str, Any]
) -> None:
    """One point per run that states both output tokens/s per GPU and TPOT p50, at
    x = 1000 / TPOT p50 and y = the signed figure, one series per profile, drawn left to right
    in the order of x."""
    pred = signed_statement(golden.kit)["predicate"]
    expected = {}
    for run in pred["runs"]:
        metrics = run.get("metrics", {})
        tpot = metrics.get("tpot_ms", {}).get("p50")
        per_gpu = metrics.get("output_tok_s_per_gpu")
        if tpot is not None and per_gpu is not None and Decimal(str(tpot)) > 0:
            x = (Decimal(1000) / Decimal(str(tpot))).quantize(Decimal("0.01"), ROUND_HALF_EVEN)
            expected[run["id"]] = (run["profile"], x, Decimal(str(per_gpu)))
    assert expected, "the golden receipt should have runs with both figures"
    chart = next(c for c in card_1200["charts"] if c["id"] == "chart-tradeoff")
    drawn = {p["run"]: p for p in chart["points"]}
    assert sorted(drawn) == sorted(expected)
    for run_id, (profile, x, y) in expected.items():
        point = drawn[run_id]
        assert point["series"] == profile
        assert Decimal(point["x"]) == x and Decimal(point["value"]) == y
    by_x = sorted(chart["points"], key=lambda p: Decimal(p["x"]))
    assert [p["cx"] for p in by_x] == sorted(p["cx"] for p in by_x)
