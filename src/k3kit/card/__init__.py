"""The package card, ``k3kit show`` and their data: what a buyer reads before buying.

``source`` verifies a kit and reads what is shown from the verified bytes; ``data`` gathers the
card's content; ``cost`` holds the cost-per-token arithmetic; ``charts``, ``html``, ``markdown``
and ``text`` render it. Above ``audit`` and ``node``: imports ``node.verify`` and ``audit``, never
click; used by the CLI and ``publish.releasenotes``.
"""

from k3kit.card.cost import FORMULA, PointCost, point_costs, usd_per_million
from k3kit.card.data import CardData, card_data
from k3kit.card.html import render_html
from k3kit.card.markdown import render_markdown
from k3kit.card.source import KitView, load_view
from k3kit.card.text import show_lines

__all__ = [
    "FORMULA",
    "CardData",
    "KitView",
    "PointCost",
    "card_data",
    "load_view",
    "point_costs",
    "render_html",
    "render_markdown",
    "show_lines",
    "usd_per_million",
]
