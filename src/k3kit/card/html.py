"""The HTML package card: ``templates/card/card.html.j2`` rendered with autoescape on.

Nothing on the page is fetched (inline CSS and SVG, no script, a Content-Security-Policy of
``default-src 'none'``), so the card reads the same offline, in a mail client or in a browser
that blocks the network, and cannot call home.
"""

from __future__ import annotations

from k3kit._version import __version__
from k3kit.card.charts import build_charts
from k3kit.card.data import CardData, fig, metric
from k3kit.card.safe import plain, scrub
from k3kit.render import make_html_environment, render

TEMPLATE = "card/card.html.j2"


def _finalize(value: object) -> object:
    """Every ``{{ … }}`` value: a plain string (from the kit) loses its control and bidi
    characters before autoescape; Markup built by k3kit itself is left whole (scrubbed below)."""
    if type(value) is str:  # not a subclass: Markup is one
        return plain(value)
    return value


def render_html(data: CardData) -> bytes:
    env = make_html_environment()
    env.finalize = _finalize  # read when the template is compiled, which happens below
    page = render(
        env,
        TEMPLATE,
        {
            "d": data,
            "pred": data.view.statement.predicate,
            "charts": build_charts(data),
            "fig": fig,
            "metric": metric,
            "generator": f"k3kit {__version__}",
        },
    )
    return scrub(page.decode("utf-8")).encode("utf-8")
