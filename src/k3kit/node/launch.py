"""Plan an engine launch that runs exactly what was verified.

``verify`` answers "do these bytes match what the publisher signed?"; a launcher must make sure the
engine then runs on *those* bytes, not on something a path can also mean. So a launch plan is made
only from:

- the kit documents the plan needs (``kit.json``, the profile's ``serve.yaml`` and
  ``engine.env``), read once into memory and each compared with the sha256 that the verified
  ``MANIFEST.json`` lists (whose own sha256 is the kit checksum the receipt signs);
- the weights folder as the verifier resolved and hashed it (``Layout.root``, a real path with no
  link left in it), never the path the caller typed;
- the engine found on the caller's ``PATH`` once, by absolute path, whose ``--version`` (asked in
  exactly the environment and folder the engine will get) must match the kit's engine pin by the
  pin's rule, and which is the same file the plan executes; one that cannot even answer is
  reported with how it ended and its stderr (``ENGINE_CANNOT_START``);
- an environment built from scratch: a short allow-list of the caller's variables, a fixed
  ``PATH`` (the engine's own folder, then the system folders: never the caller's ``PATH`` as is),
  ``TMPDIR`` set to a private folder under the runtime folder, the profile's ``engine.env`` parsed
  as data (never sourced by a shell), and the site's host and port (checked like a site file's);
- the engine's settings judged by their values as the engine reads them
  (:func:`k3kit.engines.review_profile`): a value its config loader would turn into an option, or a
  setting that loads code or files from outside the kit and the weights which the publisher did not
  declare in ``kit.json`` (``engine.loads``), is refused even in a kit an older k3kit signed;
- a fixed working directory (the private runtime folder), so nothing relative in the signed
  settings resolves in whatever folder the caller stands in.

The serve configuration reaches the engine as a private copy of the verified bytes, written
read-only under the caller's runtime folder and named by its sha256. What can still change between
this check and the engine opening its files is stated in ``docs/threat-model.md``.

This module plans; the CLI executes the plan (``os.execve``), because levels below the CLI never
exit or replace the process.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from k3kit._digest import sha256_hex
from k3kit._fs import atomic_write, check_trust_anchor, private_dir, program_on_path
from k3kit._immutable import Immutable, NamedTuple
from k3kit._text import shown
from k3kit.engines import (
    ADAPTERS,
    MAX_SNAPSHOT_BYTES,
    EngineAdapter,
    EngineSnapshot,
    Parallel,
    probe_version,
    review_profile,
    snapshot,
    validate_env,
    validate_settings,
)
from k3kit.errors import EnvironmentProblem, InputError, UsageProblem, VerificationError
from k3kit.formats.documents import (
    MAX_DOCUMENT_BYTES,
    parse_serve_config,
    read_bounded,
    read_listed,
    utf8_text,
)
from k3kit.models import lite
from k3kit.models._methods import pools_unchosen
from k3kit.node.site import HOST_PATTERN, site_values
from k3kit.node.verify import (
    KitNotVerified,
    Report,
    TrustSource,
    VerifiedKit,
    open_verified,
    verify_dir,
    verify_weights_of,
)
from k3kit.signing.trust import RollbackPolicy, RootAnchor

if TYPE_CHECKING:
    # launch reads kit.json and the manifest as records of k3kit.models.lite (no pydantic on a
    # node's start-up; docs/performance.md, "Fifth pass"); accept's workload and the API's
    # callers may hand the pydantic models: the functions below take either, and call only
    # fields and the methods both share (k3kit.models._methods)
    from k3kit.engines import Runtime  # built by a multi-node launch's caller only
    from k3kit.models import EnginePin, KitInfo, KitProfile, Manifest
    from k3kit.signing.memo import SignatureMemo
    from k3kit.weights import WeightsOptions

MAX_KIT_DOC_BYTES = MAX_DOCUMENT_BYTES
MAX_SITE_BYTES = 64 * 1024

#: The caller's variables a launched engine may see; everything else (LD_PRELOAD, PYTHONPATH,
#: VLLM_*, HF_*, CUDA_*) is dropped, so the engine's behaviour comes from signed files. PATH and
#: TMPDIR are set by the launcher (:func:`fixed_env`), not passed through.
PASSTHROUGH = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TERM")
#: The system folders after the engine's own on the engine's PATH (programs it runs by name).
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


#: How each engine is asked its version, told to serve and wired across nodes (issue 11).
ENGINES: dict[str, EngineAdapter] = ADAPTERS


class Site(Immutable):
    """The buyer's own values (not signed): weights folder, trust key, listen address."""

    __slots__ = ("host", "model_dir", "port", "trust_key")
    model_dir: Path | None
    trust_key: Path | None
    host: str
    port: int

    def __init__(
        self,
        model_dir: Path | None = None,
        trust_key: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 8000,
    ) -> None:
        super().__init__(model_dir=model_dir, trust_key=trust_key, host=host, port=port)


class LaunchPlan(Immutable):
    """Everything the CLI needs to ``execve`` the engine, plus what it was derived from.

    ``cwd`` is the working directory the engine must start in (the private runtime folder);
    ``loads`` what the kit makes the engine load from outside it, each with the publisher's
    reason. Site and LaunchPlan are :class:`k3kit._immutable.Immutable` records, not dataclasses,
    for launch's start-up (docs/performance.md, "Seventh pass"); LaunchPlan takes its fields by
    keyword (the ``__init__`` Immutable gives a record that writes none of its own).
    """

    __slots__ = (
        "argv",
        "config_path",
        "config_sha256",
        "cwd",
        "engine",
        "engine_version",
        "env",
        "executable",
        "kit_sha256",
        "loads",
        "profile",
        "report",
        "topology",
        "weights_root",
    )
    executable: str
    argv: list[str]
    env: dict[str, str]
    config_path: Path
    config_sha256: str
    kit_sha256: str
    weights_root: Path
    profile: str
    topology: str
    engine: str
    engine_version: str
    report: Report
    cwd: Path
    loads: dict[str, str]

    def as_json(self) -> dict[str, Any]:
        return {
            "executable": self.executable,
            "argv": self.argv,
            "env": self.env,
            "config": {"path": str(self.config_path), "sha256": self.config_sha256},
            "kit_sha256": self.kit_sha256,
            "weights_root": str(self.weights_root),
            "profile": self.profile,
            "topology": self.topology,
            "engine": {"name": self.engine, "version": self.engine_version},
            "cwd": str(self.cwd),
            "loads": self.loads,
        }


def read_site(path: Path) -> Site:
    """The launcher's values from a site file: the same file, schema and refusals as
    ``render-site`` (:func:`k3kit.node.site.site_values`); only :data:`k3kit.node.site.LAUNCH_KEYS`
    are used, the deploy-only keys are accepted and left to the other targets.

    Raises ``InputError`` ``SITE_INVALID`` / ``SITE_LOCKED_VALUE`` (exit 3) naming the line: a
    site file is the operator's own input, and no value may pass for an option.
    """
    check_trust_anchor(path, "site file")  # it names the trust key and the listen address
    data = read_bounded(
        path, MAX_SITE_BYTES, what="site file", error=InputError, code="SITE_INVALID"
    )
    text = utf8_text(data, source=str(path), code="SITE_INVALID", error=InputError)
    values = site_values(text, source=str(path), locked={})
    return Site(
        model_dir=Path(values["MODEL_DIR"]) if "MODEL_DIR" in values else None,
        trust_key=Path(values["K3KIT_TRUST_KEY"]) if "K3KIT_TRUST_KEY" in values else None,
        host=values.get("HOST", "127.0.0.1"),
        port=int(values.get("PORT", "8000")),
    )


class LaunchInputs(NamedTuple):
    """What a launch runs with once the site file has filled the gaps the caller left.

    A NamedTuple, not a frozen dataclass: immutable all the same, read by attribute, and ~0.5 ms
    less CPU to create on every launch's import (docs/performance.md)."""

    site: Site
    weights: Path
    trust_keys: tuple[Path, ...]


def launch_inputs(
    site_file: Path | None,
    *,
    weights: Path | None = None,
    trust_keys: Sequence[Path] = (),
    root_given: bool = False,
    host: str | None = None,
    port: int | None = None,
) -> LaunchInputs:
    """The site-file fallbacks, one rule for every front door: values given win, then the
    site's (``MODEL_DIR``, ``K3KIT_TRUST_KEY`` unless a root of trust is given, ``HOST``,
    ``PORT``). Raises ``WEIGHTS_NOT_GIVEN`` (exit 3) or ``TRUST_EMPTY`` (exit 2) when neither
    names the weights or anything to trust."""
    site = read_site(site_file) if site_file is not None else Site()
    chosen = weights or site.model_dir
    if chosen is None:
        raise InputError(
            "no weights folder: pass --weights or set MODEL_DIR in --site", code="WEIGHTS_NOT_GIVEN"
        )
    site_key = (site.trust_key,) if site.trust_key and not root_given else ()
    keys = tuple(trust_keys) or site_key
    if not keys and not root_given:
        raise UsageProblem(  # exit 2 in every verb (cli._shared.no_trust_given)
            "no trusted key: pass --trust or --root, or set K3KIT_TRUST_KEY in --site",
            code="TRUST_EMPTY",
            hint="pass --trust with the publisher's public key (KEY.pub), or --root ROOT.json",
        )
    site = Site(site.model_dir, site.trust_key, host or site.host, port or site.port)
    return LaunchInputs(site, chosen, keys)


def parse_engine_env(data: bytes, *, source: str) -> dict[str, str]:
    """Parse a signed ``engine.env`` as data.

    Each value must be written exactly as ``shlex.quote`` writes it (what ``build`` renders), so
    the one file means the same to this parser, to systemd, to Docker and to a shell; anything
    else is refused (``ENGINE_ENV_MALFORMED``, exit 1) rather than interpreted.
    """
    text = utf8_text(data, source=source, code="ENGINE_ENV_MALFORMED")
    env: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, quoted = line.partition("=")
        try:
            words = shlex.split(quoted, posix=True)
        except ValueError:
            words = []
        if (
            not sep
            or not _ENV_KEY.fullmatch(key)
            or len(words) != 1
            or shlex.quote(words[0]) != quoted
            or key in env
        ):
            raise VerificationError(
                f"{source}:{number}: not a KEY=value line in the form k3kit renders",
                code="ENGINE_ENV_MALFORMED",
            )
        env[key] = words[0]
    return env


@overload
def pick_profile(info: lite.KitInfo, profile: str, topology: str | None) -> lite.KitProfile: ...
@overload
def pick_profile(info: KitInfo, profile: str, topology: str | None) -> KitProfile: ...
def pick_profile(
    info: KitInfo | lite.KitInfo, profile: str, topology: str | None
) -> KitProfile | lite.KitProfile:
    names = sorted({p.name for p in info.profiles})
    matches = [p for p in info.profiles if p.name == profile]
    if not matches:
        raise InputError(
            f"the kit has no profile {profile!r} (it has: {', '.join(names)})",
            code="PROFILE_UNKNOWN",
        )
    if topology is not None:
        matches = [p for p in matches if p.topology == topology]
        if not matches:
            raise InputError(
                f"profile {profile!r} has no topology {topology!r}", code="TOPOLOGY_UNKNOWN"
            )
    unchosen = pools_unchosen(matches, topology)
    if unchosen:
        raise InputError(unchosen, code="TOPOLOGY_UNKNOWN")
    if len(matches) > 1 and topology is None:
        # A multi-node topology needs node wiring; the plain invocation means one node.
        single = [p for p in matches if p.nodes == 1]
        matches = single if len(single) == 1 else matches
    if len(matches) > 1:
        raise InputError(
            f"profile {profile!r} has several topologies; pass --topology", code="TOPOLOGY_UNKNOWN"
        )
    return matches[0]


def _engine_path(engine: EngineAdapter, base_env: Mapping[str, str]) -> str:
    """The engine, looked up once on the caller's PATH (the only use of that PATH), by the one
    rule for programs found there (:func:`k3kit._fs.program_on_path`): the caller's PATH may
    lead through a folder others write (``/tmp/bin``, ``.``), so the engine found there must be
    a file only root or this user can have put or changed, in folders nobody else can swap it
    in, or it is not run (not even for ``--version``)."""
    found = program_on_path(engine.executable, base_env.get("PATH", os.defpath))
    if found is None:
        raise EnvironmentProblem(
            f"engine {engine.executable!r} not found on PATH", code="ENGINE_NOT_FOUND"
        )
    real, unsafe = found
    if unsafe is not None:
        raise EnvironmentProblem(
            f"the engine found on PATH, {real}, could have been put or changed by another user "
            f"({unsafe} is not owned by root or you, or others can write it)",
            code="ENGINE_PATH_UNSAFE",
            hint="put the engine's folder first on PATH from a location only root or you can "
            "write (its venv's bin)",
        )
    return str(real)


def check_engine_version(
    engine: EngineAdapter,
    path: str,
    pin: EnginePin | lite.EnginePin,
    env: Mapping[str, str],
    cwd: Path | None = None,
) -> str:
    """The kit was measured with one engine version; another one is a different product.

    ``env`` and ``cwd`` are the ones the engine will be exec'd with (its ``engine.env``
    included), so the version checked is the version that runs. The pin's rule decides
    (``exact``, or ``same-release``: any local label). Returns the version found; raises
    ``VerificationError`` ``ENGINE_VERSION_MISMATCH`` (exit 1), or ``EnvironmentProblem``
    ``ENGINE_CANNOT_START`` (exit 4, :func:`k3kit.engines.probe_version`)."""
    found = probe_version(engine, path, env, cwd)
    if not pin.accepts(found):
        rule = "" if pin.match_rule == "exact" else f" (or any {pin.release}+label build)"
        raise VerificationError(
            f"this kit was measured with {engine.executable} {pin.version}{rule}; {path} reports "
            f"{shown(found[:80]) or 'no version'}",
            code="ENGINE_VERSION_MISMATCH",
        )
    return found


def fixed_env(base_env: Mapping[str, str], executable: str, tmp: Path) -> dict[str, str]:
    """The environment every launched engine starts from, whatever the caller's was.

    The caller's :data:`PASSTHROUGH` variables; ``PATH`` = the engine's own folder (its venv's
    ``bin``, so the interpreter and tools installed with it) then :data:`SYSTEM_PATH`, because a
    caller's ``PATH`` may lead through folders others can write; ``TMPDIR`` = ``tmp``, a private
    folder, because compile caches live under the temporary folder (``/tmp/torchinductor_USER``)
    and a shared ``/tmp`` lets another user plant them."""
    folders = dict.fromkeys((os.path.dirname(executable), *SYSTEM_PATH))
    clean = {k: base_env[k] for k in PASSTHROUGH if k in base_env}
    return {**clean, "PATH": os.pathsep.join(folders), "TMPDIR": str(tmp)}


def check_address(site: Site) -> None:
    """The listen address by the site file's rule (:data:`k3kit.node.site.HOST_PATTERN`, never a
    leading ``-``), from ``--site`` or ``--host`` alike: it becomes an engine argv word."""
    if not re.fullmatch(HOST_PATTERN, site.host) or not 1 <= site.port <= 65535:
        raise InputError(
            f"listen address {site.host[:80]!r} port {site.port} is not usable",
            code="LAUNCH_ADDRESS_INVALID",
            hint="give a host name or IP address (no leading '-') and a port in 1-65535",
        )


def kit_engine_snapshot(
    kit_dir: Path, manifest: Manifest | lite.Manifest, info: KitInfo | lite.KitInfo
) -> EngineSnapshot:
    """The snapshot the kit was built against: k3kit's own for a shipped version, else the
    publisher's ``engine-snapshot.json`` (signed, listed, and the one ``kit.json`` names by
    digest). Its loads table is k3kit's derivation, never the file's (:mod:`k3kit.engines`).

    Raises ``VerificationError`` ``ENGINE_SNAPSHOT_REFUSED`` (exit 1) for a file that is not the
    named one, does not parse strictly, or is for another engine or release."""
    ref = info.engine_snapshot
    if ref is None:
        return snapshot(info.engine.name, info.engine.version)
    data = read_listed(kit_dir, manifest, ref.path, max_bytes=MAX_SNAPSHOT_BYTES)
    hint = "ask the publisher for a kit built with a snapshot made by `k3kit engine snapshot`"
    if sha256_hex(data) != ref.sha256:
        raise VerificationError(
            f"{ref.path} is not the snapshot kit.json names (sha256 {ref.sha256[:16]}...)",
            code="ENGINE_SNAPSHOT_REFUSED",
            hint=hint,
        )
    # a supplied snapshot's pydantic model: only a kit that carries one pays for it
    from k3kit.engines import parse_snapshot_file, to_engine_snapshot

    doc = parse_snapshot_file(
        data, source=ref.path, error=VerificationError, code="ENGINE_SNAPSHOT_REFUSED"
    )
    if not doc.is_for(info.engine.name, info.engine.release):
        raise VerificationError(
            f"{ref.path} is for {doc.engine} {doc.version}, but the kit pins "
            f"{info.engine.name} {info.engine.version}",
            code="ENGINE_SNAPSHOT_REFUSED",
            hint=hint,
        )
    return to_engine_snapshot(doc)


def serve_settings(
    info: KitInfo | lite.KitInfo,
    config: bytes,
    folder: str,
    snap: EngineSnapshot,
    engine_env: Mapping[str, str] | None = None,
    profile: KitProfile | lite.KitProfile | None = None,
) -> dict[str, Any]:
    """A profile's ``serve.yaml`` (and ``engine.env``, when given) held to the value rules build
    applies, and its settings: what launch starts the engine with and what preflight judges the
    node by, so neither reads a value build would refuse.

    A flag k3kit's launcher sets (``load-format``, paths, binding), one this engine version does
    not have, or a value of the wrong type is refused here too, so a kit built by an older k3kit
    (or by hand) cannot carry what build would refuse. Why preflight too: it ran before these
    rules and did arithmetic on whatever the signer wrote (``kv-cache-dtype: [1]`` ended
    ``preflight``, and ``launch`` on a GPU node, in an internal error). With ``profile``, the
    parallel sizes kit.json states for it must be the ones these settings set (build derives
    them from the settings; preflight sizes the memory budget by them and a multi-node launch
    wires its ranks by them). Raises ``VerificationError`` ``SERVE_CONFIG_MALFORMED`` /
    ``ENGINE_SETTING_REFUSED`` (exit 1)."""
    where = f"{folder}/serve.yaml"
    settings = parse_serve_config(config, source=where)
    engine = ADAPTERS[info.engine.name]
    typed = {k: Decimal(repr(v)) if isinstance(v, float) else v for k, v in settings.items()}
    problems = validate_settings(engine, snap, typed, where)
    if engine_env is not None:
        problems += validate_env(engine, snap, engine_env, f"{folder}/engine.env")
    if profile is not None:
        problems += _parallel_problems(info, profile, settings, where)
    if problems:
        raise VerificationError(
            "; ".join(problems[:3]),
            code="ENGINE_SETTING_REFUSED",
            hint="the kit's signed settings break the rules build applies; ask the publisher for "
            "a kit built by a current k3kit",
        )
    return settings


def _parallel_problems(
    info: KitInfo | lite.KitInfo,
    profile: KitProfile | lite.KitProfile,
    settings: Mapping[str, Any],
    where: str,
) -> list[str]:
    """Each parallel size kit.json states for ``profile`` that is not the one ``settings`` set
    (a size kit.json leaves out is read as 1 by its readers: the cautious answer)."""
    engine = ADAPTERS[info.engine.name]
    gpus = profile.gpus_per_node or info.hardware.gpus_per_node
    derived = engine.parallel(settings, profile.nodes, gpus).as_dict()
    return [
        f"{where}: kit.json says parallel {name} = {said}, the settings make it {derived.get(name)}"
        for name, said in sorted(profile.parallel.items())
        if derived.get(name) != said
    ]


def check_settings(
    info: KitInfo | lite.KitInfo,
    config: bytes,
    engine_env: Mapping[str, str],
    folder: str,
    snap: EngineSnapshot | None = None,
    profile: KitProfile | lite.KitProfile | None = None,
) -> dict[str, str]:
    """The verified profile judged by the build's value rules (a kit signed by an older k3kit
    never was); returns what it loads from outside the kit, with the publisher's reasons.
    With ``profile``, its parallel sizes in kit.json must be the ones serve.yaml sets.

    Raises ``VerificationError`` ``ENGINE_SETTING_REFUSED`` / ``ENGINE_VALUE_IS_OPTION`` /
    ``ENGINE_LOADS_UNDECLARED`` (exit 1).
    """
    snap = snap or snapshot(info.engine.name, info.engine.version)
    where = f"{folder}/serve.yaml"
    settings = serve_settings(info, config, folder, snap, engine_env, profile)
    review = review_profile(snap, settings, engine_env, where)
    if review.smuggled:
        raise VerificationError(
            "; ".join(review.smuggled[:3]),
            code="ENGINE_VALUE_IS_OPTION",
            hint="the kit's signed config would make the engine read a value as an option; "
            "ask the publisher for a kit built by a current k3kit",
        )
    declared = info.engine.loads or {}
    undeclared = review.undeclared(declared)
    if undeclared:
        shown = "; ".join(f"{name} {why}" for name, why in sorted(undeclared.items())[:3])
        raise VerificationError(
            f"{folder}: the kit makes {info.engine.name} load code or files from outside the kit "
            f"and the weights, and its publisher did not declare it: {shown}",
            code="ENGINE_LOADS_UNDECLARED",
            hint="ask the publisher to declare it under [engine.loads] (shown before launch) or "
            "to remove it",
        )
    return {name: declared[name] for name in sorted(review.loads)}


def plan_launch(
    kit_dir: Path,
    trusted: TrustSource,
    *,
    profile: str,
    weights: Path,
    runtime_dir: Path,
    base_env: Mapping[str, str],
    topology: str | None = None,
    site: Site | None = None,
    runtime: Runtime | None = None,
    weights_options: WeightsOptions | None = None,
    rollback: RollbackPolicy | None = None,
    on_step: Callable[[str], None] | None = None,
    check_node: Callable[[VerifiedKit, lite.KitProfile], None] | None = None,
    memo: SignatureMemo | None = None,
) -> LaunchPlan:
    """Verify ``kit_dir`` and ``weights`` and return the plan that runs what was verified.

    Order: kit and receipt (cheap), the profile's signed files read into memory, the engine's
    version (before hours of hashing a wrong node), the kit held to what was verified (a file
    changed meanwhile is refused; :func:`_verify_weights`), then the weights. Raises
    :class:`KitNotVerified` (exit 1) when a check fails, ``VerificationError``
    ``ENGINE_VERSION_MISMATCH`` / ``KIT_FILE_CHANGED`` / ``ENGINE_VALUE_IS_OPTION`` /
    ``ENGINE_LOADS_UNDECLARED`` (:func:`check_settings`, before the engine is run at all),
    ``InputError`` for an unknown profile or topology or an unusable listen address,
    ``EnvironmentProblem`` when the engine is missing or the runtime folder is unsafe. With a
    root of trust and ``rollback``, an older or conflicting kit is refused before anything else
    runs. ``memo``: the node's record of signature checks passed before
    (:mod:`k3kit.signing.memo`).
    """
    say = on_step or (lambda _text: None)
    site = site or Site()
    # Checked before any work: the folder the engine will read its config from must be this
    # user's alone, as must every folder above it (the one private-state check, k3kit._fs).
    runtime_real = private_dir(runtime_dir, what="runtime folder", code="RUNTIME_DIR_UNSAFE")
    check_address(site)
    kit_dir = Path(os.path.realpath(kit_dir))
    say("verifying the kit and its receipt")
    # the manifest, kit.json and lock as the checks read them, from the bytes the receipt signs
    kit = open_verified(kit_dir, trusted, rollback=rollback, memo=memo)
    kit_sha256, manifest, info = kit.kit_sha256, kit.manifest, kit.info
    chosen = pick_profile(info, profile, topology)
    # The caller's runtime values are judged before the node check and hours of hashing: a
    # multi-node launch without --node-rank/--leader is refused at once, not after the weights.
    runtime_args = _runtime_argv(ENGINES.get(info.engine.name), chosen, runtime)
    if check_node is not None:
        # The node check reads the kit's profile: only now, once the kit has verified, and
        # before hours of hashing on a node that cannot run the profile. It can only refuse.
        # It judges the kit verified above, never the path again (which may lead elsewhere now).
        say("checking the node (preflight)")
        check_node(kit, chosen)
    folder = chosen.folder
    config = read_listed(kit_dir, manifest, f"{folder}/serve.yaml", max_bytes=MAX_KIT_DOC_BYTES)
    engine_env = parse_engine_env(
        read_listed(kit_dir, manifest, f"{folder}/engine.env", max_bytes=MAX_KIT_DOC_BYTES),
        source=f"{folder}/engine.env",
    )
    engine = ENGINES.get(info.engine.name)
    if engine is None:
        raise VerificationError(
            f"no launcher for engine {info.engine.name!r}", code="ENGINE_NO_LAUNCHER"
        )
    snap = kit_engine_snapshot(kit_dir, manifest, info)
    loads = check_settings(info, config, engine_env, folder, snap, chosen)
    executable = _engine_path(engine, base_env)
    private = runtime_real
    tmp = private_dir(private / "tmp", what="runtime folder", code="RUNTIME_DIR_UNSAFE")
    clean = fixed_env(base_env, executable, tmp)
    env = {**clean, **engine_env}
    say(f"checking {engine.executable} {info.engine.version} at {executable}")
    check_engine_version(engine, executable, info.engine, env, cwd=private)
    say("verifying the weights")
    report = _verify_weights(kit, trusted, weights, weights_options, rollback, memo)
    if not report.ok:
        raise KitNotVerified(report)
    weights_root = Path(report.facts["weights"]["root"])
    if os.path.realpath(weights_root) != str(weights_root):
        # The verifier hashes under the real path it resolved; a path that still resolves through
        # a link could now lead somewhere else, so it is never handed to the engine.
        raise VerificationError(
            f"the verified weights folder {weights_root} is not a real path",
            code="WEIGHTS_ROOT_NOT_REAL",
        )
    config_sha256 = sha256_hex(config)
    # Checked again right before the write: the folder must still be this user's alone.
    config_path = private_dir(runtime_real, what="runtime folder", code="RUNTIME_DIR_UNSAFE")
    config_path /= f"serve-{config_sha256}.yaml"
    atomic_write(config_path, config, mode=0o400, force=True)
    argv = engine.serve_argv(executable, weights_root, config_path, site.host, site.port)
    argv += runtime_args
    return LaunchPlan(
        executable=executable,
        argv=argv,
        env=env,
        config_path=config_path,
        config_sha256=config_sha256,
        kit_sha256=kit_sha256,
        weights_root=weights_root,
        profile=chosen.name,
        topology=chosen.topology,
        engine=info.engine.name,
        engine_version=info.engine.version,
        report=report,
        cwd=private,
        loads=loads,
    )


def _verify_weights(
    kit: VerifiedKit,
    trusted: TrustSource,
    weights: Path,
    options: WeightsOptions | None,
    rollback: RollbackPolicy | None,
    memo: SignatureMemo | None = None,
) -> Report:
    """The weights, once the engine has answered, and the kit held to what was verified.

    With keys given as they are (``--trust``), only the folder can change the kit's verdict:
    its files are held to the bytes verified, and the weights checked against the lock held in
    memory (:func:`k3kit.node.verify.verify_weights_of`). Under a root of trust or with rollback
    state, the node's accepted roots and sequences can change too while the engine answers (an
    update verified meanwhile may revoke the kit's signer or supersede it), so the kit is
    verified again in full, and must still be the kit verified first."""
    if rollback is None and not isinstance(trusted, RootAnchor):
        return verify_weights_of(kit, weights, options)
    report = verify_dir(
        kit.path, trusted, weights=weights, weights_options=options, rollback=rollback, memo=memo
    )
    if report.ok and report.kit_sha256 != kit.kit_sha256:
        raise VerificationError(
            "the kit changed while the engine was asked its version", code="KIT_FILE_CHANGED"
        )
    return report


def _runtime_argv(
    engine: EngineAdapter | None, chosen: KitProfile | lite.KitProfile, runtime: Runtime | None
) -> list[str]:
    """A multi-node topology needs this node's rank and the leader's address, and nothing else
    may add them: they are the only values not taken from signed files. Pure (no I/O), so
    :func:`plan_launch` runs it before any work; ``engine`` None (no launcher) checks only."""
    if chosen.nodes == 1:
        if runtime is not None:
            raise InputError(
                f"{chosen.topology} is a single-node topology; --node-rank and --leader are "
                "for multi-node topologies",
                code="RUNTIME_NOT_MULTI_NODE",
            )
        return []
    if runtime is None:
        raise InputError(
            f"{chosen.topology} runs on {chosen.nodes} nodes: pass --node-rank and --leader",
            code="RUNTIME_VALUES_MISSING",
        )
    if not 0 <= runtime.node_rank < chosen.nodes:
        raise InputError(
            f"--node-rank {runtime.node_rank} is outside 0..{chosen.nodes - 1}",
            code="RUNTIME_VALUES_INVALID",
        )
    if not re.fullmatch(HOST_PATTERN, runtime.leader):
        raise InputError(
            f"--leader {runtime.leader!r} is not an address", code="RUNTIME_VALUES_INVALID"
        )
    p = chosen.parallel
    par = Parallel(
        p.get("tp", 1), p.get("pp", 1), p.get("dp", 1), 0, chosen.nodes, chosen.gpus_per_node or 1
    )
    return [] if engine is None else engine.runtime_argv(par, runtime)
