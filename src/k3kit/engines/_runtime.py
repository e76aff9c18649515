"""The values of a multi-node launch that only the starting node knows (k3kit.Runtime).

Its own module, imported on use (``k3kit.engines.Runtime``, PEP 562): a single-node launch never
builds one, and creating this dataclass at import was ~0.5 ms of CPU on every node start
(docs/performance.md). It stays a dataclass: it is part of k3kit's public API.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Runtime:
    """Values only known on the node at start time (LWS injects them; a runbook passes them)."""

    node_rank: int
    leader: str
    port: int | None = None
