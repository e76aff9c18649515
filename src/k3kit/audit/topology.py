"""R30's prefill/decode checks: a disaggregated receipt's pools against its own counts, its runs'
per-GPU divisor and the kit it is bound to.

A disaggregated run is served by both pools: every output token was prefilled on one and decoded
on the other, so per-GPU throughput divides by every GPU of both. Dividing by the decode GPUs
alone (or stating pools the kit does not run) inflates per-GPU figures; these checks name the
figure that disagrees.
"""

from __future__ import annotations

from k3kit.audit.context import Context
from k3kit.audit.findings import Out
from k3kit.models.claims import Environment, PoolEnvironment
from k3kit.models.package import Disaggregation, PoolDef


def environment_gpus(env: Environment) -> int:
    """Every GPU the environment states: both pools', else GPUs per node x nodes."""
    return env.per_gpu_divisor if env.pools else env.gpu_count * env.nodes


def disaggregated(ctx: Context) -> bool:
    """Whether the receipt or its kit declares prefill/decode pools (R30 then compares pools,
    not one node shape)."""
    info = None if ctx.kit is None else ctx.kit.info
    return bool(ctx.predicate.environment.pools) or (
        info is not None and info.disaggregation is not None
    )


def pool_checks(ctx: Context, out: Out) -> None:
    env = ctx.predicate.environment
    if env.pools:
        _counts(env, out)
        total = env.per_gpu_divisor
        for rv in ctx.runs:
            if rv.gpus != total:
                out.error(
                    rv.id,
                    "a disaggregated run is served by both pools: its per-GPU figures divide by "
                    f"every GPU of prefill and decode ({total}), not {rv.gpus}",
                    f"gpus {total}",
                    f"gpus {rv.gpus}",
                )
    info = None if ctx.kit is None else ctx.kit.info
    if info is not None:
        _against_kit(info.disaggregation, env, out)


def _counts(env: Environment, out: Out) -> None:
    pools = env.pools or {}
    gpus = sum(p.gpus for p in pools.values())
    nodes = sum(p.nodes for p in pools.values())
    if env.gpu_count != gpus:
        out.error(
            "environment",
            "environment.gpu_count is not every GPU of the prefill and decode pools",
            f"gpu_count {gpus}",
            f"gpu_count {env.gpu_count}",
        )
    if env.nodes != nodes:
        out.error(
            "environment",
            "environment.nodes is not every node of the prefill and decode pools",
            f"nodes {nodes}",
            f"nodes {env.nodes}",
        )


def _shape(pool: PoolDef | PoolEnvironment) -> str:
    return f"{pool.nodes} x {pool.gpus_per_node}x {pool.gpu}"


def _against_kit(kit: Disaggregation | None, env: Environment, out: Out) -> None:
    if kit is None and env.pools:
        out.error(
            "kit",
            "the receipt states prefill and decode pools, but the kit runs one aggregated server",
            "no pools",
            ", ".join(f"{role} {_shape(p)}" for role, p in sorted(env.pools.items())),
        )
        return
    if kit is None:
        return
    if not env.pools:
        out.error(
            "kit",
            "the kit runs prefill and decode pools, but the receipt's environment states none: "
            "its figures cannot be tied to either pool",
            f"pools prefill {_shape(kit.prefill)}, decode {_shape(kit.decode)}",
            "none",
        )
        return
    for role, pool in kit.pools():
        measured = env.pools.get(role)
        if measured is None or _shape(measured) != _shape(pool):
            out.error(
                "kit",
                f"the kit's {role} pool is not the one the receipt says was measured",
                f"{role} {_shape(pool)}",
                f"{role} {_shape(measured) if measured else 'absent'}",
            )
        else:
            out.passed("kit", f"{role} pool measured on the kit's target: {_shape(pool)}")
