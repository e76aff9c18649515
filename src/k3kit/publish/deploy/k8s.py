"""Kubernetes: a Deployment for one node, a LeaderWorkerSet for several, and a Service; an init
container runs ``k3kit verify`` before the server starts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k3kit.publish.deploy._base import Files, deploy_target


@deploy_target("k8s", "Kubernetes manifests under `k8s/` (Deployment or LeaderWorkerSet)")
def files(ctx: Mapping[str, Any]) -> Files:
    if ctx["topo"].nodes > 1:
        workload = {"k8s/leaderworkerset.yaml": ("profile/k8s-lws.yaml.j2", 0o644)}
    else:
        workload = {"k8s/deployment.yaml": ("profile/k8s-deployment.yaml.j2", 0o644)}
    return {**workload, "k8s/service.yaml": ("profile/k8s-service.yaml.j2", 0o644)}
