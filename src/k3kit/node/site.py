"""The buyer's site values: a fixed schema, validated, never able to change a locked value.

Deploy files have three tiers of values. **Locked** values (engine flags, engine environment,
parallelism, image digest when the kit pins one, profile and topology) are rendered at build time
and signed. **Site** values (paths, listen address, namespace, image when not pinned) are the
buyer's and are read from a ``KEY=value`` file against :data:`SITE_KEYS`. **Runtime** values (node
rank, leader address) are only known when a node starts and are passed by the launcher or injected
by the orchestrator. A site file that names a locked or runtime value is refused with the file, the
line, the key and what to do instead: editing a site file must never silently change a signed knob.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from k3kit._immutable import NamedTuple
from k3kit.errors import InputError

_ABS_PATH = r"^/[A-Za-z0-9._/@+-]{0,4095}$"
# Never a leading "-": a value that could pass for an option on the engine's command line.
HOST_PATTERN = r"^[A-Za-z0-9.:_\[\]][A-Za-z0-9.:_\[\]-]{0,252}$"
IMAGE_DIGEST = r"^[a-z0-9./_-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$"


# A NamedTuple, not a frozen dataclass: immutable all the same, read by attribute only, and
# every launch imports this module (a frozen dataclass is ~0.5 ms of CPU to create at import,
# docs/performance.md).
class SiteKey(NamedTuple):
    pattern: str
    default: str | None
    about: str


SITE_KEYS: dict[str, SiteKey] = {
    "MODEL_DIR": SiteKey(_ABS_PATH, None, "weights folder at the pinned commit (read-only)"),
    "K3KIT_TRUST_KEY": SiteKey(
        _ABS_PATH, "/etc/k3kit/publisher.pub", "publisher public key, obtained out of band"
    ),
    "KIT_DIR": SiteKey(_ABS_PATH, None, "the installed kit folder (k3kit install)"),
    "HOST": SiteKey(HOST_PATTERN, "127.0.0.1", "listen address of the API server"),
    "PORT": SiteKey(r"^[1-9][0-9]{0,4}$", None, "listen port of the API server"),
    "STATE_DIR": SiteKey(_ABS_PATH, "/var/lib/k3kit", "verification cache, config copies"),
    "IMAGE": SiteKey(IMAGE_DIGEST, None, "engine + k3kit container image, by digest"),
    "NAMESPACE": SiteKey(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", "default", "Kubernetes ns"),
    "LEADER_ADDRESS": SiteKey(HOST_PATTERN, None, "multi-node: address of node rank 0"),
    "RDZV_PORT": SiteKey(r"^[1-9][0-9]{0,4}$", None, "multi-node: rendezvous port"),
}
_PORTS = ("PORT", "RDZV_PORT")
#: Values only a starting node knows; a site file must not fix them.
RUNTIME_KEYS = {
    "NODE_RANK": "passed per node (--node-rank; LWS_WORKER_INDEX on Kubernetes, %i in systemd)",
    "LWS_WORKER_INDEX": "injected by LeaderWorkerSet",
    "LWS_LEADER_ADDRESS": "injected by LeaderWorkerSet",
    "LWS_GROUP_SIZE": "the topology's node count, locked",
}
#: Site keys the launcher reads from ``--site`` (the rest are for compose, systemd, Kubernetes).
LAUNCH_KEYS = ("MODEL_DIR", "K3KIT_TRUST_KEY", "HOST", "PORT")


def _closest(word: str, names: list[str]) -> str | None:
    import difflib  # only a refused key is given a suggestion: a launch does not pay for it

    found = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return found[0] if found else None


def parse_site(
    text: str,
    *,
    source: str,
    locked: Mapping[str, str],
    defaults: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Read ``KEY=value`` lines against the schema; every value, defaulted ones included.

    ``locked`` maps a name the kit fixes (``TENSOR_PARALLEL_SIZE``, ``VLLM_X``, ``IMAGE`` when
    pinned) to where it is locked; such a key is refused (``SITE_LOCKED_VALUE``, exit 3).
    """
    values = site_values(text, source=source, locked=locked)
    merged = {k: v.default for k, v in SITE_KEYS.items() if v.default is not None}
    merged.update(defaults or {})
    merged.update(values)
    return merged


def site_values(text: str, *, source: str, locked: Mapping[str, str]) -> dict[str, str]:
    """Only the values the file sets, each checked against the schema (see :func:`parse_site`).

    ``launch`` reads the same file through this, so one site file means the same to every target
    and a value absent from it stays absent (no schema default stands in for the buyer).
    """
    values: dict[str, str] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        at = f"{source}:{number}"
        if not sep:
            raise InputError(f"{at}: not a KEY=value line", code="SITE_INVALID")
        if key in locked:
            raise InputError(
                f"{at}: {key} is locked by the signed kit ({locked[key]}); a site file cannot "
                "change it",
                code="SITE_LOCKED_VALUE",
                hint="remove the line; to change a locked value, edit package.toml, rebuild, "
                "re-measure and re-sign the kit",
            )
        if key in RUNTIME_KEYS:
            raise InputError(
                f"{at}: {key} is a runtime value ({RUNTIME_KEYS[key]}), not a site value",
                code="SITE_LOCKED_VALUE",
                hint="remove the line",
            )
        if key not in SITE_KEYS:
            near = _closest(key, sorted(SITE_KEYS))
            raise InputError(
                f"{at}: {key!r} is not a site key" + (f"; did you mean {near}?" if near else ""),
                code="SITE_INVALID",
                hint=f"site keys: {', '.join(SITE_KEYS)}",
            )
        if key in values:
            raise InputError(f"{at}: {key} is set twice", code="SITE_INVALID")
        if not re.fullmatch(SITE_KEYS[key].pattern, value):
            raise InputError(
                f"{at}: {key}={value[:80]!r} is not valid ({SITE_KEYS[key].about})",
                code="SITE_INVALID",
            )
        if key in _PORTS and not 1 <= int(value) <= 65535:
            raise InputError(f"{at}: {key} must be 1-65535", code="SITE_INVALID")
        values[key] = value
    return values


def env_name(flag: str) -> str:
    """``tensor-parallel-size`` -> ``TENSOR_PARALLEL_SIZE``: how a flag would look as a site key."""
    return flag.replace("-", "_").upper()
