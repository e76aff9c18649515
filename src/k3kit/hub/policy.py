"""Where a hub request may go and whether a token may go with it: the one rule both front doors
(the CLI's ``pin``/``pull`` and :mod:`k3kit.api`'s ``pin_hub``/``pull_weights``) call.

Why here and not in the CLI: a policy that lives in one front door is missing from the other.
The API once sent a hub token over plain http that the CLI refused; with the rule in the library
that builds the client, no caller can get a client without passing through it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from k3kit._policy import plain_http_off_loopback
from k3kit.errors import InputError
from k3kit.models.lock import ENDPOINT_PATTERN

DEFAULT_ENDPOINT = "https://huggingface.co"


def resolve_endpoint(
    value: str | None,
    fallback: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The hub URL: ``value`` (--endpoint), else ``fallback`` (a verified lock's own), else
    ``HF_ENDPOINT`` in ``environ`` (the CLI passes its environment; the library reads none),
    else the public Hub. Anything but an http(s) URL without credentials, query or
    fragment is refused (``BAD_ENDPOINT``, exit 3): the lock pattern is the one definition."""
    env = environ or {}
    chosen = (value or fallback or env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    if not re.fullmatch(ENDPOINT_PATTERN, chosen):
        raise InputError(
            "--endpoint must be an http(s) URL without credentials, query or fragment",
            code="BAD_ENDPOINT",
        )
    return chosen


def refuse_token_over_plain_http(url: str) -> None:
    """A bearer token in clear text is readable by anyone on the path; loopback is the exception
    (a stand-in hub on this machine). Raises ``TOKEN_OVER_HTTP`` (exit 3)."""
    if plain_http_off_loopback(url):
        raise InputError(
            f"refusing to send a hub token over plain http to {url}",
            code="TOKEN_OVER_HTTP",
            hint="use an https endpoint",
        )


def hub_endpoint(
    endpoint: str | None,
    token: str | None,
    *,
    fallback: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The endpoint a client for ``token`` may use: resolved, then checked for a token in clear.

    Every front door that builds a hub client calls this first; ``fallback`` must only be a lock's
    endpoint when that lock verified (an unverified lock never chooses where the token goes).
    """
    url = resolve_endpoint(endpoint, fallback, environ=environ)
    if token is not None:
        refuse_token_over_plain_http(url)
    return url
