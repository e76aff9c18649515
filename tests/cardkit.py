"""Helpers of the card, show and release-notes tests: an independent reading of a receipt and
of a card page, so that what the page shows is compared with the signed bytes, not with k3kit's
own parse of them."""

from __future__ import annotations

import base64
import json
import shutil
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from k3kit._canonical import model_bytes
from k3kit._fs import atomic_write
from k3kit.publish.kit import build, sign
from k3kit.signing.keys import load_private
from k3kit.weights.pin import pin_local
from tests.conftest import EXAMPLE, REPO, KeyFiles, make_snapshot

V110 = EXAMPLE / "v1.1.0"


def signed_statement(kit: Path) -> dict[str, Any]:
    """The Statement exactly as signed: the envelope's payload, base64-decoded by hand."""
    envelope = json.loads((kit / "receipt.dsse.json").read_bytes())
    statement: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return statement


def build_v110(root: Path, key: KeyFiles, *, package: Path | None = None) -> Path:
    """The example's illustrative v1.1.0, pinned to other stand-in weights (a new upstream
    revision), signed with ``key``."""
    root.mkdir(parents=True, exist_ok=True)
    snapshot = make_snapshot(root / "hf-cache", shards=4)
    lock = pin_local(snapshot, repo=REPO, revision=snapshot.name, pinned_at="2026-12-01T00:00:00Z")
    atomic_write(root / "weights.lock.json", model_bytes(lock), force=True)
    kit = root / "kit"
    shutil.rmtree(kit, ignore_errors=True)
    build(package or V110 / "package.toml", root / "weights.lock.json", kit)
    sign(
        kit, load_private(key.private, None), V110 / "claims.toml", issued_at="2026-12-01T00:00:00Z"
    )
    return kit


def dec(text: str) -> Decimal:
    return Decimal(text.replace("$", "").replace("%", "").strip())


class Page(HTMLParser):
    """Every element with a ``data-*`` attribute, with its attributes and its inner text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[dict[str, Any]] = []
        self.tags: list[tuple[str, dict[str, str]]] = []
        self._open: list[dict[str, Any]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {k: v or "" for k, v in attrs}
        self.tags.append((tag, attr))
        el = {"tag": tag, "attrs": attr, "text": ""}
        if any(k.startswith("data-") for k in attr):
            self.elements.append(el)
        if tag not in ("meta", "line", "rect", "path", "br", "img", "link", "input"):
            self._open.append(el)

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop()["tag"] == tag:
                break

    def handle_data(self, data: str) -> None:
        for el in self._open:
            el["text"] += data

    def with_attr(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.elements if name in e["attrs"]]
