"""The card's content as data: one structure that ``show``, the HTML card and Markdown all render.

Everything here comes from a :class:`~k3kit.card.source.KitView` (the verified receipt, kit.json
and deploy files) plus the GPU-hour price the reader chose. Figures are carried as the receipt's
own decimals and printed with :func:`fig`, which keeps their value exactly (``7.4E+3`` is shown as
``7400``): a test can parse any figure on a page and compare it with the signed one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from k3kit.audit import Finding
from k3kit.card.cost import FORMULA, PointCost, point_costs
from k3kit.card.source import KitView
from k3kit.models.claims import Percentiles, Run
from k3kit.models.kit import KitInfo

LATENCIES = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2el_ms", "E2E"))
STATS = ("mean", "p50", "p90", "p95", "p99", "p99_9", "max")
NOT_PUBLISHED = "—"


def fig(value: Decimal | int | None) -> str:
    """A signed figure as a reader reads it, with exactly the signed value (or a dash)."""
    if value is None:
        return NOT_PUBLISHED
    if isinstance(value, int):
        return str(value)
    text = format(value, "f")
    return text


def stat_label(stat: str) -> str:
    return "p99.9" if stat == "p99_9" else stat


@dataclass
class Column:
    key: str  # metric path, e.g. "output_tok_s" or "ttft_ms.p50"
    label: str


@dataclass
class ProfileData:
    name: str
    description: str
    topology: str
    served_model_name: str
    runs: list[Run]
    columns: list[Column]

    @property
    def column_groups(self) -> list[tuple[str, list[Column]]]:
        """The columns as the card prints them: throughput first, then one group per latency
        metric (TTFT, TPOT, ...), each its own table. One table of all 32 possible columns was
        2,000 px wide and cut at 1,200; a group is at most 8 columns and fits."""
        groups: dict[str, list[Column]] = {}
        for col in self.columns:
            name = col.key.partition(".")[0] if "." in col.key else ""
            groups.setdefault(name, []).append(col)
        labels = dict(LATENCIES)
        return [(labels.get(name, "throughput"), cols) for name, cols in groups.items()]


@dataclass
class CardData:
    view: KitView
    title: str
    facts: list[tuple[str, str]]
    profiles: list[ProfileData]
    costs: list[PointCost]
    price_source: str
    gpu_hour_usd: Decimal | None
    findings: list[Finding]
    counts: dict[str, int]
    commands: list[tuple[str, str]]
    limitations: list[str]
    #: kit.json's limitations the receipt does not state (shown once, after the receipt's).
    kit_only_limitations: list[str]
    workloads: list[tuple[str, str]] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return self.view.verified

    @property
    def formula(self) -> str:
        return FORMULA


def metric(run: Run, key: str) -> Decimal | None:
    """A run's metric by path (``output_tok_s``, ``ttft_ms.p50``); None when not published."""
    name, _, stat = key.partition(".")
    value = getattr(run.metrics, name)
    if stat and isinstance(value, Percentiles):
        found: Decimal | None = getattr(value, stat)
        return found
    return value if isinstance(value, Decimal) else None


def _columns(runs: list[Run]) -> list[Column]:
    cols = [
        Column("output_tok_s_per_gpu", "output tok/s per GPU"),
        Column("output_tok_s", "output tok/s aggregate"),
        Column("total_tok_s", "total tok/s aggregate"),
        Column("request_rate", "requests/s"),
    ]
    for name, label in LATENCIES:
        cols += [Column(f"{name}.{s}", f"{label} {stat_label(s)} ms") for s in STATS]
    return [c for c in cols if any(metric(r, c.key) is not None for r in runs)]


def _size(n: int) -> str:
    return f"{n} bytes ({n / 1e9:.2f} GB)" if n >= 1e6 else f"{n} bytes"


def _facts(view: KitView) -> list[tuple[str, str]]:
    info, pred = view.info, view.statement.predicate
    env = pred.environment
    engine = f"{info.engine.name} {info.engine.version}"
    price = info.price
    facts = [
        ("package", info.package.name),
        ("version", info.package.version),
        ("sequence", str(info.package.sequence)),
        ("channel", info.package.channel),
        ("price", f"{fig(price.amount)} {price.currency}" if price else "not declared"),
        (
            "maintenance",
            f"{fig(price.maintenance_per_month)} {price.currency} per month"
            if price
            else "not declared",
        ),
        (
            "model",
            f"{info.model.family}, {info.model.total_parameters} parameters "
            f"({info.model.active_parameters} active), {info.model.quantization}",
        ),
        ("upstream repo", info.weights.repo),
        ("pinned commit", info.weights.commit),
        ("weight bytes", _size(info.weights.total_bytes)),
        ("weight files", str(info.weights.file_count)),
        ("kit checksum", f"sha256:{view.kit_sha256}"),
        ("weight checksum", f"sha256:{view.weights_sha256}"),
    ]
    if view.archive_sha256:
        facts.append(("archive checksum", f"sha256:{view.archive_sha256}"))
    facts += [
        ("hardware", _hardware(info)),
        (
            "engine",
            engine
            + (
                f" (image {info.engine.image})"
                if info.engine.image
                else " (no container image pinned)"
            ),
        ),
        *_declared_loads(info),
        (
            "measured on",
            f"{env.nodes} node(s), {env.device}, {env.engine} {env.engine_version}, {env.modality}",
        ),
        ("receipt issued", pred.issued_at),
        ("signed by key", view.signer_keyid or "NOT VERIFIED"),
    ]
    return facts


def _hardware(info: KitInfo) -> str:
    """The kit's target in words; a disaggregated kit's two pools, each with its own GPU."""
    hw = info.hardware
    if hw.is_cpu:
        return f"{hw.nodes} node(s) × {hw.device}"
    capability = f"compute capability ≥ {hw.min_compute_capability}"
    if info.disaggregation is not None:
        pools = " + ".join(
            f"{role} {p.nodes} node(s) × {p.gpus_per_node} {p.gpu} ({p.gpu_memory_gb} GB)"
            for role, p in info.disaggregation.pools()
        )
        return f"{pools}, {capability}"
    return f"{hw.nodes} node(s) × {hw.gpus_per_node} {hw.gpu} ({hw.gpu_memory_gb} GB), {capability}"


def _declared_loads(info: KitInfo) -> list[tuple[str, str]]:
    """What the publisher declared the engine loads from outside the kit and the weights
    (``engine.loads``): the buyer reads it before launch, here and in ``launch --dry-run``."""
    return [
        ("engine loads (declared)", f"{name}: {reason}")
        for name, reason in sorted((info.engine.loads or {}).items())
    ]


def _commands(view: KitView) -> list[tuple[str, str]]:
    name = f"{view.info.package.name}-{view.info.package.version}"
    kit = f"/opt/k3kit/{name}"
    first = view.info.profiles[0].name if view.info.profiles else "PROFILE"
    if view.info.disaggregation is not None:  # a pool must be named (launch refuses without)
        first += f" --topology {view.info.profiles[0].topology}"
    return [
        ("install", f"k3kit install {name}.kit.tar.gz --trust publisher.pub --into /opt/k3kit"),
        ("pull", f"k3kit pull {kit} --trust publisher.pub --dir /srv/models"),
        ("verify", f"k3kit verify {kit} --trust publisher.pub --weights /srv/models"),
        (
            "launch",
            f"k3kit launch {kit} --profile {first} --trust publisher.pub --weights /srv/models",
        ),
    ]


def _price(view: KitView, gpu_hour_usd: Decimal | None) -> tuple[Decimal | None, str]:
    """The GPU-hour price and where it came from: the reader's wins over the package's own."""
    info = view.info
    declared = info.price.gpu_hour_usd if info.price is not None else None
    if gpu_hour_usd is not None:
        return gpu_hour_usd, "given with --gpu-hour-usd"
    if declared is not None:
        return declared, "declared in the package"
    return None, "none given or declared"


def _profiles(view: KitView) -> list[ProfileData]:
    """One entry per served profile, then the runs of profiles the kit lacks (never dropped)."""
    pred, info = view.statement.predicate, view.info
    profiles = []
    for prof in info.profiles:
        if prof.role == "decode":
            continue  # a disaggregated profile is one server of two pools: listed once
        # A profile is listed once per topology; its runs belong to the measured shape only,
        # so a serving curve never shows one run twice or under a shape nobody measured.
        runs = (
            [r for r in pred.runs if r.profile == prof.name] if prof.measured is not False else []
        )
        shape = prof.topology.rsplit("/", 1)[0] if prof.role else prof.topology
        profiles.append(
            ProfileData(
                prof.name, prof.description, shape, prof.served_model_name, runs, _columns(runs)
            )
        )
    known = {p.name for p in info.profiles}
    orphans = [r for r in pred.runs if r.profile not in known]
    if orphans:  # a run for a profile the kit does not have is still shown, never dropped
        profiles.append(
            ProfileData(
                "(not in this kit)",
                "runs for profiles this kit lacks",
                "",
                "",
                orphans,
                _columns(orphans),
            )
        )
    return profiles


def card_data(view: KitView, gpu_hour_usd: Decimal | None) -> CardData:
    """Gather the card; ``gpu_hour_usd`` given by the reader wins over the package's own."""
    pred, info = view.statement.predicate, view.info
    gpu_hour_usd, source = _price(view, gpu_hour_usd)
    profiles = _profiles(view)
    findings = [f for f in view.audit.findings if f.severity in ("error", "warning")]
    workloads = []
    for wid, w in pred.workloads.items():
        lengths = f"{w.input_tokens or '?'} in / {w.output_tokens or '?'} out tokens ({w.lengths})"
        workloads.append((wid, f"{w.description}; {lengths}; {w.load}"))
    return CardData(
        view=view,
        title=info.package.title,
        facts=_facts(view),
        profiles=profiles,
        costs=point_costs(pred, gpu_hour_usd),
        price_source=source,
        gpu_hour_usd=gpu_hour_usd,
        findings=findings,
        counts=view.audit.counts(),
        commands=_commands(view),
        limitations=list(pred.limitations),
        kit_only_limitations=[x for x in info.limitations if x not in pred.limitations],
        workloads=workloads,
    )
