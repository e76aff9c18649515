"""Where plain http may go: one rule for every client k3kit builds (the hub's, the registry's).

Why one home: the exception "plain http is fine to this machine, nowhere else" was written out
in the hub policy and would have been written again for OCI registries (and their redirects);
two copies drift (one learns ``::1``, the other does not). Anything off loopback needs https.
"""

from __future__ import annotations

from urllib.parse import urlsplit

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str | None) -> bool:
    """``host`` (a URL's hostname: no port, no brackets) names this machine."""
    return host in LOOPBACK


def plain_http_off_loopback(url: str) -> bool:
    """True when ``url`` is plain http to another machine: what a token, a kit or a redirect
    must never be sent over."""
    parts = urlsplit(url)
    return parts.scheme == "http" and not is_loopback(parts.hostname)


def url_refusal(url: str) -> str | None:
    """Why ``url`` may not be handed to one of k3kit's clients, or None: only http(s), no
    ``user:password@`` (urllib3 would send it as Basic auth, and every message naming the URL
    would print it), and plain http only to this machine. The one check of every base URL a
    person types (``update --from``); the registry's references get the same rule in their own
    grammar (:mod:`k3kit.oci.ref`)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "it is not an http(s) URL with a host"
    if parts.username is not None or parts.password is not None:
        return "it carries a user name or password, which would be sent and printed"
    if plain_http_off_loopback(url):
        return "it is plain http to another machine: anyone on the path could read what is fetched"
    return None


def redirect_refusal(url: str, origin: str) -> str | None:
    """Why a redirect from ``origin`` to ``url`` may not be followed, or None: only http(s), no
    plain http off this machine (a downgrade anyone on the path reads), and into this machine
    only from a server on it (a remote server redirecting to 127.0.0.1 would make the node send
    a request to its own local services: a request forgery). Every client that follows
    redirects by hand (the registry's, the channel's) asks this."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or plain_http_off_loopback(url):
        return "only https is followed (plain http only on this machine)"
    if is_loopback(parts.hostname) and not is_loopback(urlsplit(origin).hostname):
        return "a server off this machine may not send the node to this machine"
    return None
