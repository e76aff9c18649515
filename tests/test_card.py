"""`k3kit card`: every figure on the page is the signed one, the cost formula holds for every
point, the page fetches nothing, and a kit that does not verify gets no card (or a stamped one)."""

from __future__ import annotations

import hashlib
import json
import shutil
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest

from k3kit.card.cost import usd_per_million
from k3kit.card.markdown import md
from k3kit.card.safe import plain, scrub
from tests.cardkit import Page, build_v110, dec, signed_statement
from tests.conftest import GoldenKit, KeyFiles, run_k3kit

PRICE = "6.50"
LATENCY = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")


@pytest.fixture(scope="module")
def card_page(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Page]:
    out = tmp_path_factory.mktemp("card") / "card.html"
    result = run_k3kit(
        "card",
        golden.kit,
        "--trust",
        golden.key.public,
        "-o",
        out,
        "--markdown",
        out.with_suffix(".md"),
        "--gpu-hour-usd",
        PRICE,
    )
    assert result.returncode == 0, result.stderr
    return out, Page(out.read_text(encoding="utf-8"))


def _signed_metrics(run: dict[str, Any]) -> dict[str, str]:
    """metric path -> signed figure, for every figure a run states."""
    out = {}
    for name, value in run.get("metrics", {}).items():
        if isinstance(value, dict):
            out.update({f"{name}.{k.replace('.', '_')}": v for k, v in value.items()})
        else:
            out[name] = value
    for name in ("concurrency", "requests", "completed"):
        if name in run:
            out[name] = str(run[name])
    return out


def test_every_run_figure_equals_the_receipt(
    golden: GoldenKit, card_page: tuple[Path, Page]
) -> None:
    _, page = card_page
    pred = signed_statement(golden.kit)["predicate"]
    cells = {
        (e["attrs"]["data-run"], e["attrs"]["data-metric"]): e["text"].strip()
        for e in page.with_attr("data-metric")
        if e["tag"] == "td"
    }
    expected = {(r["id"], m): v for r in pred["runs"] for m, v in _signed_metrics(r).items()}
    assert expected, "the example receipt states figures"
    for key, signed in expected.items():
        assert key in cells, f"{key} is signed but not on the card"
        assert dec(cells[key]) == Decimal(signed), key
    for key, shown in cells.items():  # and nothing on the page that the receipt does not state
        assert key in expected or shown == "—", key


def test_comparisons_controls_and_facts_equal_the_receipt(
    golden: GoldenKit, card_page: tuple[Path, Page]
) -> None:
    _, page = card_page
    pred = signed_statement(golden.kit)["predicate"]
    shown = {
        (e["attrs"]["data-comparison"], e["attrs"]["data-concurrency"]): e["text"]
        for e in page.with_attr("data-comparison")
    }
    for comp in pred["comparisons"]:
        for point in comp["points"]:
            text = shown[(comp["id"], str(point["concurrency"]))]
            assert dec(text) == Decimal(point["stated_percent"])
    controls = {e["attrs"]["data-control"]: e["text"] for e in page.with_attr("data-control")}
    for ctl in pred["controls"]:
        assert dec(controls[ctl["id"]]) == Decimal(ctl["agreement_percent"])
    facts = {e["attrs"]["data-fact"]: e["text"].strip() for e in page.with_attr("data-fact")}
    manifest = hashlib.sha256((golden.kit / "MANIFEST.json").read_bytes()).hexdigest()
    lock_bytes = (golden.kit / "weights.lock.json").read_bytes()
    lock = json.loads(lock_bytes)
    assert facts["kit checksum"] == f"sha256:{manifest}" == f"sha256:{pred['kit']['kit_sha256']}"
    assert facts["weight checksum"] == f"sha256:{hashlib.sha256(lock_bytes).hexdigest()}"
    assert facts["pinned commit"] == lock["commit"] == pred["weights"]["commit"]
    assert facts["upstream repo"] == lock["repo"]
    assert facts["weight files"] == str(len(lock["files"]))
    assert facts["weight bytes"].startswith(f"{lock['total_bytes']} bytes")
    assert facts["version"] == pred["kit"]["version"]
    assert facts["sequence"] == str(pred["kit"]["sequence"])


def test_cost_per_million_tokens_follows_the_formula(
    golden: GoldenKit, card_page: tuple[Path, Page]
) -> None:
    """gpu_hour_usd x GPUs / 3600 / aggregate tokens/s x 10^6, from the receipt's own numbers."""
    _, page = card_page
    pred = signed_statement(golden.kit)["predicate"]
    rows = {e["attrs"]["data-cost-run"]: e for e in page.with_attr("data-cost-run")}
    costs = {e["attrs"]["data-usd-per-million"] for e in page.with_attr("data-usd-per-million")}
    checked = 0
    for run in pred["runs"]:
        agg = run.get("metrics", {}).get("output_tok_s")
        gpus = run.get("gpus", pred["environment"]["gpu_count"])
        row = rows[run["id"]]
        if agg is None:
            assert "not computable" in row["text"]
            continue
        exact = Decimal(PRICE) * gpus / 3600 / Decimal(agg) * 10**6
        cents = exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
        assert f"${cents}" in row["text"], (run["id"], row["text"])
        assert str(cents) in costs
        checked += 1
    assert checked == 4  # the example's four serving-curve points
    # the module's arithmetic is the formula too, checked on one hand-computed point:
    # 6.50 x 8 / 3600 / 89.04 x 10^6 = 162.2242...
    assert usd_per_million(Decimal("6.50"), 8, Decimal("89.04")).quantize(
        Decimal("0.0001")
    ) == Decimal("162.2242")


def test_every_chart_has_one_point_per_measured_run(
    golden: GoldenKit, card_page: tuple[Path, Page]
) -> None:
    _, page = card_page
    pred = signed_statement(golden.kit)["predicate"]
    # The concurrency charts; the throughput-vs-interactivity one: tests/test_card_chromium.py.
    charts = [t for t in page.tags if t[0] == "svg" and "data-x-axis" not in t[1]]
    assert len(charts) == 4
    for _, attrs in charts:
        key = attrs["data-metric"]
        chart_id = attrs["id"]
        measured = {
            r["id"]: _signed_metrics(r)[key]
            for r in pred["runs"]
            if key in _signed_metrics(r) and "concurrency" in r
        }
        prefix = chart_id.removeprefix("chart-").replace("-", "_")
        assert key.startswith(prefix)
        mine = _points_of(page, chart_id)
        assert sorted(p["attrs"]["data-run"] for p in mine) == sorted(measured), chart_id
        for p in mine:
            assert Decimal(p["attrs"]["data-value"]) == Decimal(measured[p["attrs"]["data-run"]])


def _points_of(page: Page, chart_id: str) -> list[dict[str, Any]]:
    """The circles between this chart's <svg> tag and the next one, in document order."""
    out, inside = [], False
    for tag, attrs in page.tags:
        if tag == "svg":
            inside = attrs.get("id") == chart_id
        elif inside and tag == "circle" and "data-run" in attrs:
            out.append({"attrs": attrs})
    return out


def test_card_is_self_contained(card_page: tuple[Path, Page]) -> None:
    path, page = card_page
    html = path.read_text(encoding="utf-8")
    assert "default-src 'none'" in html
    assert not [t for t, _ in page.tags if t in ("script", "link", "img", "iframe", "object")]
    for _, attrs in page.tags:
        for name in ("src", "href", "action"):
            assert name not in attrs, attrs
    assert "url(" not in html and "@import" not in html
    md_text = path.with_suffix(".md").read_text(encoding="utf-8")
    assert "$162.22" in md_text and "not computable" in md_text


def test_tampered_kit_gets_no_card(golden: GoldenKit, tmp_path: Path) -> None:
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)
    serve = kit / "profiles/batch/single-node-8gpu/serve.yaml"
    serve.write_bytes(serve.read_bytes().replace(b"max-num-seqs: 256", b"max-num-seqs: 512"))
    out = tmp_path / "card.html"
    result = run_k3kit("card", kit, "--trust", golden.key.public, "-o", out, "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["error"]["code"] == "KIT_FILE_CHANGED"
    assert not out.exists()
    stamped = run_k3kit("card", kit, "--trust", golden.key.public, "-o", out, "--unverified")
    assert stamped.returncode == 1
    page = Page(out.read_text(encoding="utf-8"))
    marks = {e["attrs"]["data-unverified"] for e in page.with_attr("data-unverified")}
    assert marks == {"watermark", "banner", "footer"}
    assert "<title>UNVERIFIED" in out.read_text(encoding="utf-8")


def test_untrusted_key_unverified_card_is_stamped(
    golden: GoldenKit, other_key: KeyFiles, tmp_path: Path
) -> None:
    out, md_out = tmp_path / "card.html", tmp_path / "card.md"
    result = run_k3kit(
        "card",
        golden.kit,
        "--trust",
        other_key.public,
        "-o",
        out,
        "--markdown",
        md_out,
        "--unverified",
    )
    assert result.returncode == 1
    assert "UNVERIFIED" in result.stderr
    assert "signed by key" in out.read_text() and "NOT VERIFIED" in out.read_text()
    md_text = md_out.read_text()
    assert md_text.startswith("> **UNVERIFIED") and md_text.rstrip().endswith("Do not deploy.**")


def test_card_refuses_to_overwrite_and_bad_price(golden: GoldenKit, tmp_path: Path) -> None:
    out = tmp_path / "card.html"
    out.write_text("mine")
    result = run_k3kit("card", golden.kit, "--trust", golden.key.public, "-o", out)
    assert result.returncode == 3 and out.read_text() == "mine"
    for bad in ("abc", "-1", "0", "NaN", "\uff16.\uff15"):  # fullwidth 6.5: other digits
        result = run_k3kit(
            "card",
            golden.kit,
            "--trust",
            golden.key.public,
            "-o",
            tmp_path / "x.html",
            "--gpu-hour-usd",
            bad,
            "--json",
        )
        assert result.returncode == 3, bad
        assert json.loads(result.stdout)["error"]["code"] == "BAD_GPU_HOUR_PRICE"


def test_declared_price_and_escaping(signing_key: KeyFiles, tmp_path: Path) -> None:
    """A package's declared GPU-hour price is used; a title carrying markup is shown, not run."""
    from tests.cardkit import V110

    package = tmp_path / "package.toml"
    evil = "<script>alert(1)</script> [x](http://127.0.0.1:9/) & more"
    package.write_text(
        (V110 / "package.toml").read_text().replace('title = "Kimi K3', f'title = "{evil} Kimi K3')
    )
    kit = build_v110(tmp_path / "v110", signing_key, package=package)
    out = tmp_path / "card.html"
    result = run_k3kit(
        "card", kit, "--trust", signing_key.public, "-o", out, "--markdown", tmp_path / "card.md"
    )
    assert result.returncode == 0, result.stderr
    html = out.read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'data-gpu-hour-usd="6.50"' in html and "declared in the package" in html
    md_text = (tmp_path / "card.md").read_text()
    assert "<script>" not in md_text and " [x](http" not in md_text and "\\[x\\]" in md_text
    assert md("a|b <i>") == "a\\|b &lt;i>"


def test_control_and_bidi_characters_from_signed_fields_are_escaped(
    signing_key: KeyFiles, tmp_path: Path
) -> None:
    """A publisher signs a title and a limitation carrying ESC sequences, CR, a C1 control and a
    bidi override (U+202E), hoping card.md (read with ``cat``) and card.html repaint what the
    buyer reads. Every one is shown as a visible escape; none reaches either file raw."""
    from tests.cardkit import V110

    evil = "\\u001b[2J\\u001b[32mVERIFIED\\r\\u0085\\u202eexe.live\\u2066"
    package = tmp_path / "package.toml"
    package.write_text(
        (V110 / "package.toml").read_text().replace('title = "Kimi K3', f'title = "{evil} Kimi K3')
    )
    kit = build_v110(tmp_path / "v110", signing_key, package=package)
    out, md_out = tmp_path / "card.html", tmp_path / "card.md"
    result = run_k3kit("card", kit, "--trust", signing_key.public, "-o", out, "--markdown", md_out)
    assert result.returncode == 0, result.stderr
    raw = ("\x1b", "\r", "\x85", "\u202e", "\u2066")
    for text in (out.read_bytes().decode(), md_out.read_bytes().decode()):  # CR kept as read
        assert not [c for c in raw if c in text]
        assert "x1b" in text and "u202eexe.live" in text  # shown, as \x1b (Markdown: \\x1b)
    assert plain("a\tb\nc\x00\u200f") == "a b c\\x00\\u200f"
    assert scrub("line\n\ttab\x9b") == "line\n\ttab\\x9b"
