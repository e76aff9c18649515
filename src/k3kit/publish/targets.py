"""Deploy targets for every profile × topology, checked before anything is rendered.

For each profile and each topology it is rendered for, the engine settings are the profile's
merged with the topology's (parallel sizes), plus what the engine adapter derives from the shape
(per-node DP size, node count). Build-time cross-checks catch what the engine would only find on
the node, hours into a start: parallel sizes against GPUs per node × nodes, the context length
against the model's, shard count and bytes against the lock. Every target launches through
``k3kit launch`` or ``k3kit verify``; nothing here executes an engine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2.sandbox import SandboxedEnvironment

from k3kit.engines import (
    EngineAdapter,
    EngineSnapshot,
    Parallel,
    Review,
    adapter,
    review_profile,
    snapshot,
    validate_env,
    validate_settings,
)
from k3kit.errors import InputError
from k3kit.models.kit import ModelConfigFacts
from k3kit.models.lock import WeightsLock
from k3kit.models.package import PackageDef, PoolShape, Shape
from k3kit.node.site import SITE_KEYS
from k3kit.publish.deploy import TARGETS, DeployTarget, Files, choose
from k3kit.render import render

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
#: Share of the published approximate size the lock's weight bytes may differ by.
BYTES_TOLERANCE = 0.05


@dataclass(frozen=True)
class Target:
    """One profile rendered for one topology."""

    profile: str
    topo: Shape
    settings: dict[str, Any]
    parallel: Parallel
    measured: bool

    @property
    def folder(self) -> str:
        return f"profiles/{self.profile}/{self.topo.name}"


def k8s_name(*parts: str) -> str:
    """A DNS-1123 label from kit and profile names (dots and underscores become dashes)."""
    name = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    return name[:63].rstrip("-")


def _weight_files(lock: WeightsLock) -> list[int]:
    return [f.size for f in lock.files if f.path.endswith(WEIGHT_SUFFIXES)]


def check_model(pkg: PackageDef, lock: WeightsLock, facts: ModelConfigFacts | None) -> list[str]:
    """The package's model facts against what the lock (and its config.json) prove."""
    problems = []
    shards = _weight_files(lock)
    if pkg.model.shards is not None and pkg.model.shards != len(shards):
        problems.append(
            f"model.shards: {pkg.model.shards}, but the lock lists {len(shards)} weight "
            f"file(s) ({', '.join(WEIGHT_SUFFIXES)}); set shards = {len(shards)} or remove it"
        )
    approx = pkg.model.approx_weight_bytes
    if approx is not None and abs(approx - sum(shards)) > BYTES_TOLERANCE * max(approx, 1):
        problems.append(
            f"model.approx_weight_bytes: {approx}, but the lock's weight files hold "
            f"{sum(shards)} bytes (more than {BYTES_TOLERANCE:.0%} apart)"
        )
    if facts and facts.context_length and pkg.model.max_context_tokens > facts.context_length:
        problems.append(
            f"model.max_context_tokens: {pkg.model.max_context_tokens}, but config.json says "
            f"the model's context length is {facts.context_length}"
        )
    return problems


def plan_targets(
    pkg: PackageDef, facts: ModelConfigFacts | None, snap: EngineSnapshot | None = None
) -> tuple[list[Target], list[str]]:
    """Every profile × topology to render, and every problem found (file-relative keys).

    ``snap`` is a publisher-supplied snapshot of the pinned version (checked by the caller to be
    that engine and release); without one, k3kit's own snapshot of the version is used."""
    eng = adapter(pkg.engine.name)
    snap = snap or snapshot(pkg.engine.name, pkg.engine.version)
    problems: list[str] = []
    shapes = pkg.shapes
    reviews: dict[str, Review] = {}
    blocks = {f"topologies[{i}]": topo.serve for i, topo in enumerate(pkg.topologies)}
    if pkg.disaggregation is not None:
        blocks.update({f"disaggregation.{r}": p.serve for r, p in pkg.disaggregation.pools()})
    for where, serve in blocks.items():
        problems += validate_settings(eng, snap, serve, f"{where}.serve")
        reviews[where] = review_profile(snap, serve, {}, f"{where}.serve")
    targets = []
    for name in sorted(pkg.profiles):
        prof = pkg.profiles[name]
        problems += validate_settings(eng, snap, prof.serve, f"profiles.{name}.serve")
        problems += validate_env(eng, snap, prof.env, f"profiles.{name}.env")
        # served_model_name is rendered into serve.yaml too: judged as the engine will read it.
        rendered = {"served-model-name": prof.served_model_name, **prof.serve}
        reviews[f"profiles.{name}"] = review_profile(
            snap, rendered, prof.env, f"profiles.{name}.serve"
        )
        for topo in shapes:
            if prof.topologies is not None and topo.name not in prof.topologies:
                continue
            settings: dict[str, Any] = {k.replace("_", "-"): v for k, v in prof.serve.items()}
            settings.update({k.replace("_", "-"): v for k, v in topo.serve.items()})
            par = eng.parallel(settings, topo.nodes, topo.gpus_per_node)
            problems += _check_shape(eng, pkg, name, topo, settings, par, facts)
            settings.update(eng.topology_settings(par))
            problems += pd_problems(eng, name, topo, settings)
            targets.append(Target(name, topo, settings, par, pkg.measured(topo)))
    problems += _same_transport(eng, targets)
    return targets, problems + _review_problems(pkg, snap, reviews)


#: The engine's own PD role names that each pool accepts ("both": an instance that sends and
#: receives KV, as vLLM's NIXL examples configure both sides with kv_role kv_both).
POOL_ACCEPTS = {"prefill": ("prefill", "both"), "decode": ("decode", "both")}


def pd_problems(eng: EngineAdapter, name: str, topo: Shape, settings: dict[str, Any]) -> list[str]:
    """The engine's PD flags against the shape they are rendered for: a pool must say its own
    role in the engine's words; an aggregated shape must not claim a prefill or decode role (it
    would wait for a peer that the kit never starts)."""
    role = eng.pd_role(settings)
    where = f"profiles.{name}.serve (topology {topo.name})"
    if not isinstance(topo, PoolShape):
        if role is None or role == "both":
            return []
        return [
            f"{where}: {eng.pd_flag} makes this a {role} instance, but the package declares no "
            "[disaggregation] pools; declare them, or remove the flag"
        ]
    if not eng.pd_flag:
        return [f"{where}: {eng.display} has no prefill/decode flag k3kit knows; remove the pools"]
    if role in POOL_ACCEPTS[topo.role]:
        return []
    got = "not set" if role is None else f"says {role}"
    return [
        f"{where}: the {topo.role} pool's {eng.pd_flag} {got}; set it in "
        f"[disaggregation.{topo.role}.serve] to {eng.pd_values[topo.role]}"
    ]


def _same_transport(eng: EngineAdapter, targets: list[Target]) -> list[str]:
    """Both pools of a profile must move KV the same way (one connector, one backend)."""
    problems = []
    for name in sorted({t.profile for t in targets if isinstance(t.topo, PoolShape)}):
        used = {
            t.topo.name: how
            for t in targets
            if t.profile == name and isinstance(t.topo, PoolShape)
            for how in [eng.pd_transport(t.settings)]
            if how is not None  # a pool without PD flags is refused on its own
        }
        if len(set(used.values())) > 1:
            shown = ", ".join(f"{shape} {how}" for shape, how in sorted(used.items()))
            problems.append(
                f"profiles.{name}: the pools move KV differently ({shown}); use one "
                "connector / transfer backend in both"
            )
    return problems


def _review_problems(
    pkg: PackageDef, snap: EngineSnapshot, reviews: dict[str, Review]
) -> list[str]:
    """Values the engine would read as options, settings that load code or files nobody declared,
    and declarations nothing uses (a stale one would be shown to buyers as if it applied)."""
    declared = pkg.engine.loads or {}
    problems: list[str] = []
    used: set[str] = set()
    for where, review in reviews.items():
        problems += review.smuggled
        used |= set(review.loads)
        problems += [
            f"{where}: `{name}` {why} ({snap.engine} {snap.version}), which neither the kit's "
            "signature nor the weights lock covers; remove it, or declare it under "
            f'[engine.loads] as {name} = "<why the buyer should accept this>"'
            for name, why in review.undeclared(declared).items()
        ]
    problems += [
        f"engine.loads.{name}: no profile or topology sets it; remove the declaration"
        for name in sorted(set(declared) - used)
    ]
    return problems


def _check_shape(
    eng: EngineAdapter,
    pkg: PackageDef,
    name: str,
    topo: Shape,
    settings: dict[str, Any],
    par: Parallel,
    facts: ModelConfigFacts | None,
) -> list[str]:
    where = f"profiles.{name}.serve (topology {topo.name})"
    have = topo.nodes * topo.gpus_per_node
    problems = []
    if par.world != have:
        need = f"{eng.tp_key} {par.tp} × {eng.pp_key} {par.pp} × {eng.dp_key} {par.dp}"
        problems.append(
            f"{where}: {need} needs {par.world} GPU(s), but {topo.name} has {topo.nodes} "
            f"node(s) × {topo.gpus_per_node} GPU(s) = {have}; make the product {have}"
            + (f" (e.g. {eng.tp_key} = {have})" if topo.nodes == 1 else "")
        )
    elif topo.nodes > 1 and eng.name == "vllm" and par.dp % topo.nodes and par.tp * par.pp < have:
        problems.append(
            f"{where}: {eng.dp_key} {par.dp} does not divide over {topo.nodes} nodes; make it a "
            f"multiple of {topo.nodes}"
        )
    context = settings.get(eng.context_key)
    limit = pkg.model.max_context_tokens
    if facts and facts.context_length:
        limit = min(limit, facts.context_length)
    if isinstance(context, int) and not isinstance(context, bool) and context > limit:
        problems.append(
            f"{where}.{eng.context_key}: {context} exceeds the model's context length "
            f"{limit}; set {eng.context_key} <= {limit}"
        )
    return problems


def chosen_targets(pkg: PackageDef) -> list[DeployTarget]:
    """The deploy targets the package selects (``[deploy] targets``), checked against the
    registry before anything is rendered: an unknown name is ``DEPLOY_TARGET_UNKNOWN``."""
    chosen = choose(pkg.deploy.targets, where="deploy.targets")
    if pkg.disaggregation is None:
        return chosen
    cannot = [t.name for t in chosen if not t.disaggregated]
    if cannot:
        raise InputError(
            f"deploy.targets: {', '.join(cannot)} cannot express a prefill/decode-disaggregated "
            "package (two engine groups that must find each other); the package declares "
            "[disaggregation]",
            code="DEPLOY_TARGET_NO_PD",
            hint="choose targets that render one unit per pool: "
            + ", ".join(sorted(n for n, t in TARGETS.items() if t.disaggregated)),
        )
    return chosen


def render_target(
    env: SandboxedEnvironment,
    base: dict[str, Any],
    pkg: PackageDef,
    target: Target,
    deploy: list[DeployTarget],
) -> dict[str, tuple[bytes, int]]:
    """The files of one profile × topology, keyed by kit-relative path (with their modes): the
    engine's ``serve.yaml`` and ``engine.env``, which every target launches from, and the files
    of each chosen deploy target."""
    eng = adapter(pkg.engine.name)
    topo = target.topo
    role = [topo.role] if isinstance(topo, PoolShape) else []
    unit = k8s_name("k3kit", *role, pkg.package.name, target.profile)
    multi = topo.nodes > 1
    ctx = {
        **base,
        "profile_name": target.profile,
        "profile": pkg.profiles[target.profile],
        "topology": topo.name,
        "topo": topo,
        "measured": target.measured,
        "serve_items": sorted(_with_name(target, pkg).items()),
        "env_items": sorted(pkg.profiles[target.profile].env.items()),
        "engine_display": eng.display,
        "config_usage": " ".join(
            eng.serve_argv(eng.executable, Path("MODEL_DIR"), Path("serve.yaml"), "", 0)[:-4]
        ),
        "default_port": eng.default_port,
        "rdzv_port": eng.rendezvous_port,
        "image": pkg.engine.image or "${IMAGE}",
        "unit": unit,
        "unit_file": f"{unit}@.service" if multi else f"{unit}.service",
        # Kit paths allow no "@": a template unit ships as NAME.template.service.
        "unit_kit_file": f"{unit}.template.service" if multi else f"{unit}.service",
        "startup_s": startup_seconds(base["weights"]["total_bytes"]),
        "shm_gib": pkg.hardware.min_shm_gib,
    }
    files: Files = {
        "serve.yaml": ("profile/serve.yaml.j2", 0o644),
        "engine.env": ("profile/engine.env.j2", 0o644),
    }
    for chosen in deploy:
        files.update(chosen.files(ctx))
    return {
        f"{target.folder}/{rel}": (render(env, template, ctx), mode)
        for rel, (template, mode) in files.items()
    }


def render_routers(
    env: SandboxedEnvironment, base: dict[str, Any], pkg: PackageDef, targets: list[Target]
) -> dict[str, tuple[bytes, int]]:
    """``profiles/<profile>/<layout>/router.md`` for each profile of a disaggregated package:
    which pool is where, how KV moves, and the router the engine documents (not shipped: the
    kit signs what it can verify, and says plainly what it does not)."""
    if pkg.disaggregation is None:
        return {}
    eng = adapter(pkg.engine.name)
    layout = pkg.disaggregation.name
    out = {}
    for name in sorted({t.profile for t in targets}):
        pools = [t for t in targets if t.profile == name and isinstance(t.topo, PoolShape)]
        ctx = {
            **base,
            "profile_name": name,
            "layout": layout,
            "default_port": eng.default_port,
            "transport": eng.pd_transport(pools[0].settings) if pools else None,
            "pools": [
                {
                    "role": t.topo.role,
                    "nodes": t.topo.nodes,
                    "gpus_per_node": t.topo.gpus_per_node,
                    "gpu": t.topo.pool.gpu,
                    "folder": t.folder,
                    "topology": t.topo.name,
                }
                for t in pools
                if isinstance(t.topo, PoolShape)
            ],
        }
        path = f"profiles/{name}/{layout}/router.md"
        out[path] = (render(env, "profile/pd-router.md.j2", ctx), 0o644)
    return out


def pool_facts(topo: Shape) -> dict[str, Any]:
    """What ``kit.json`` records of a pool beyond its shape: its role and its own GPU, which
    preflight checks on that pool's nodes instead of ``[hardware]``'s."""
    if not isinstance(topo, PoolShape):
        return {}
    return {"role": topo.role, "gpu": topo.pool.gpu, "gpu_memory_gb": topo.pool.gpu_memory_gb}


def _with_name(target: Target, pkg: PackageDef) -> dict[str, Any]:
    name_key = "served-model-name"
    return {name_key: pkg.profiles[target.profile].served_model_name, **target.settings}


def startup_seconds(weight_bytes: int) -> int:
    """Start budget: 10 minutes plus 2 s per GB of weights (a hypothesis until a load time is
    measured; multi-TB checkpoints reach the 2-hour cap)."""
    return int(min(7200, 600 + 2 * weight_bytes // 1_000_000_000))


def site_example(pkg: PackageDef) -> list[tuple[str, str, str]]:
    """``(key, example value, what it is)`` for ``site.example.env``."""
    eng = adapter(pkg.engine.name)
    examples = {
        "MODEL_DIR": f"/srv/models/models--{pkg.model.repo.replace('/', '--')}/snapshots/COMMIT",
        "KIT_DIR": f"/opt/k3kit/kits/{pkg.package.name}-{pkg.package.version}",
        "PORT": str(eng.default_port),
        "IMAGE": "registry.example/k3kit-" + eng.name + "@sha256:" + "0" * 64,
        "LEADER_ADDRESS": "10.0.0.1",
        "RDZV_PORT": str(eng.rendezvous_port),
    }
    out = []
    for key, spec in SITE_KEYS.items():
        if key == "IMAGE" and pkg.engine.image:
            continue  # locked by the kit
        if key in ("LEADER_ADDRESS", "RDZV_PORT") and all(t.nodes == 1 for t in pkg.shapes):
            continue
        value = examples.get(key, spec.default or "")
        out.append((key, value, spec.about))
    return out
