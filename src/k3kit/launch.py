"""Plan an engine launch that runs exactly what was verified.

``verify`` answers "do these bytes match what the publisher signed?"; a launcher must make sure the
engine then runs on *those* bytes, not on something a path can also mean. So a launch plan is made
only from:

- the kit documents the plan needs (``kit.json``, the profile's ``serve.yaml`` and
  ``engine.env``), read once into memory and each compared with the sha256 that the verified
  ``MANIFEST.json`` lists (whose own sha256 is the kit checksum the receipt signs);
- the weights folder as the verifier resolved and hashed it (``Layout.root``, a real path with no
  link left in it), never the path the caller typed;
- the engine found on the caller's ``PATH`` once, by absolute path, whose ``--version`` must be the
  kit's engine version, and which is the same file the plan executes;
- an environment built from scratch: a short allow-list of the caller's variables, the profile's
  ``engine.env`` parsed as data (never sourced by a shell), and the site's host and port.

The serve configuration reaches the engine as a private copy of the verified bytes, written
read-only under the caller's runtime folder and named by its sha256. What can still change between
this check and the engine opening its files is stated in ``docs/threat-model.md``.

This module plans; the CLI executes the plan (``os.execve``), because levels below the CLI never
exit or replace the process.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k3kit._fs import atomic_write, private_dir
from k3kit.documents import read_bounded, read_kit_documents, read_listed
from k3kit.engines import ADAPTERS, EngineAdapter, Parallel, Runtime
from k3kit.errors import EnvironmentProblem, InputError, VerificationError
from k3kit.models import KitInfo, KitProfile
from k3kit.site import HOST_PATTERN, site_values
from k3kit.trust import RollbackPolicy
from k3kit.verify import KitNotVerified, Report, TrustSource, verify_dir
from k3kit.weights import WeightsOptions

MAX_KIT_DOC_BYTES = 16 * 1024 * 1024
MAX_SITE_BYTES = 64 * 1024
ENGINE_VERSION_TIMEOUT_S = 120.0

#: The caller's variables a launched engine may see; everything else (LD_PRELOAD, PYTHONPATH,
#: VLLM_*, HF_*, CUDA_*) is dropped, so the engine's behaviour comes from signed files.
PASSTHROUGH = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM")

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


#: How each engine is asked its version, told to serve and wired across nodes (issue 11).
ENGINES: dict[str, EngineAdapter] = ADAPTERS


@dataclass(frozen=True)
class Site:
    """The buyer's own values (not signed): weights folder, trust key, listen address."""

    model_dir: Path | None = None
    trust_key: Path | None = None
    host: str = "127.0.0.1"
    port: int = 8000


@dataclass(frozen=True)
class LaunchPlan:
    """Everything the CLI needs to ``execve`` the engine, plus what it was derived from."""

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
    report: Report = field(repr=False)

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
        }


def read_site(path: Path) -> Site:
    """The launcher's values from a site file: the same file, schema and refusals as
    ``render-site`` (:func:`k3kit.site.site_values`); only :data:`k3kit.site.LAUNCH_KEYS` are
    used, the deploy-only keys are accepted and left to the other targets.

    Raises ``InputError`` ``SITE_INVALID`` / ``SITE_LOCKED_VALUE`` (exit 3) naming the line: a
    site file is the operator's own input, and no value may pass for an option.
    """
    data = read_bounded(
        path, MAX_SITE_BYTES, what="site file", error=InputError, code="SITE_INVALID"
    )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8", code="SITE_INVALID") from exc
    values = site_values(text, source=str(path), locked={})
    return Site(
        model_dir=Path(values["MODEL_DIR"]) if "MODEL_DIR" in values else None,
        trust_key=Path(values["K3KIT_TRUST_KEY"]) if "K3KIT_TRUST_KEY" in values else None,
        host=values.get("HOST", "127.0.0.1"),
        port=int(values.get("PORT", "8000")),
    )


def parse_engine_env(data: bytes, *, source: str) -> dict[str, str]:
    """Parse a signed ``engine.env`` as data.

    Each value must be written exactly as ``shlex.quote`` writes it (what ``build`` renders), so
    the one file means the same to this parser, to systemd, to Docker and to a shell; anything
    else is refused (``ENGINE_ENV_MALFORMED``, exit 1) rather than interpreted.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VerificationError(f"{source}: not UTF-8", code="ENGINE_ENV_MALFORMED") from exc
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
            or not _ENV_KEY.match(key)
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


def pick_profile(info: KitInfo, profile: str, topology: str | None) -> KitProfile:
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
    found = shutil.which(engine.executable, path=base_env.get("PATH", os.defpath))
    if found is None:
        raise EnvironmentProblem(
            f"engine {engine.executable!r} not found on PATH", code="ENGINE_NOT_FOUND"
        )
    return os.path.realpath(found)


def check_engine_version(
    engine: EngineAdapter, path: str, expected: str, base_env: Mapping[str, str]
) -> None:
    """The kit was measured with one engine version; another one is a different product."""
    try:
        proc = subprocess.run(
            engine.version_argv(path),
            env=dict(base_env),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=ENGINE_VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(
            f"cannot ask {path} for its version: {exc}", code="ENGINE_NOT_FOUND"
        ) from exc
    found = engine.parse_version(proc.stdout) if proc.returncode == 0 else ""
    if found != expected:
        shown = found[:80] if found.isprintable() else repr(found[:80])
        raise VerificationError(
            f"this kit was measured with {engine.executable} {expected}; {path} reports "
            f"{shown or 'no version'}",
            code="ENGINE_VERSION_MISMATCH",
        )


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
    check_node: Callable[[KitProfile], None] | None = None,
) -> LaunchPlan:
    """Verify ``kit_dir`` and ``weights`` and return the plan that runs what was verified.

    Order: kit and receipt (cheap), the profile's signed files read into memory, the engine's
    version (before hours of hashing a wrong node), the weights, and finally a check that the kit
    checksum did not change while the weights were hashed. Raises :class:`KitNotVerified` (exit 1)
    when a check fails, ``VerificationError`` ``ENGINE_VERSION_MISMATCH`` / ``KIT_FILE_CHANGED``,
    ``InputError`` for an unknown profile or topology, ``EnvironmentProblem`` when the engine is
    missing or the runtime folder is unsafe. With a root of trust and ``rollback``, an older or
    conflicting kit is refused before anything else runs.
    """
    say = on_step or (lambda _text: None)
    site = site or Site()
    # Checked before any work: the folder the engine will read its config from must be this
    # user's alone, as must every folder above it (the one private-state check, k3kit._fs).
    runtime_real = private_dir(runtime_dir, what="runtime folder", code="RUNTIME_DIR_UNSAFE")
    kit_dir = Path(os.path.realpath(kit_dir))
    say("verifying the kit and its receipt")
    first = verify_dir(kit_dir, trusted, rollback=rollback)
    if not first.ok:
        raise KitNotVerified(first)
    kit_sha256 = str(first.facts["kit_sha256"])
    # Read once and compared with what was just verified; a file swapped since is refused.
    manifest, info = read_kit_documents(
        kit_dir,
        max_bytes=MAX_KIT_DOC_BYTES,
        kit_sha256=kit_sha256,
        mismatch_code="KIT_FILE_CHANGED",
    )
    chosen = pick_profile(info, profile, topology)
    if check_node is not None:
        # The node check reads the kit's profile: only now, once the kit has verified, and
        # before hours of hashing on a node that cannot run the profile. It can only refuse.
        say("checking the node (preflight)")
        check_node(chosen)
    folder = f"profiles/{chosen.name}/{chosen.topology}"
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
    clean = {k: base_env[k] for k in PASSTHROUGH if k in base_env}
    executable = _engine_path(engine, clean)
    say(f"checking {engine.executable} {info.engine.version} at {executable}")
    check_engine_version(engine, executable, info.engine.version, clean)
    say("verifying the weights")
    report = verify_dir(
        kit_dir, trusted, weights=weights, weights_options=weights_options, rollback=rollback
    )
    if not report.ok:
        raise KitNotVerified(report)
    if report.facts.get("kit_sha256") != kit_sha256:
        raise VerificationError(
            "the kit changed while the weights were verified", code="KIT_FILE_CHANGED"
        )
    weights_root = Path(str(report.facts["weights"]["root"]))
    if os.path.realpath(weights_root) != str(weights_root):
        # The verifier hashes under the real path it resolved; a path that still resolves through
        # a link could now lead somewhere else, so it is never handed to the engine.
        raise VerificationError(
            f"the verified weights folder {weights_root} is not a real path",
            code="WEIGHTS_ROOT_NOT_REAL",
        )
    config_sha256 = hashlib.sha256(config).hexdigest()
    config_path = private_dir(runtime_real, what="runtime folder", code="RUNTIME_DIR_UNSAFE")
    config_path /= f"serve-{config_sha256}.yaml"
    atomic_write(config_path, config, mode=0o400, force=True)
    env = {**clean, **engine_env}
    argv = engine.serve_argv(executable, weights_root, config_path, site.host, site.port)
    argv += _runtime_argv(engine, chosen, runtime)
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
    )


def _runtime_argv(engine: EngineAdapter, chosen: KitProfile, runtime: Runtime | None) -> list[str]:
    """A multi-node topology needs this node's rank and the leader's address, and nothing else
    may add them: they are the only values not taken from signed files."""
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
    return engine.runtime_argv(par, runtime)
