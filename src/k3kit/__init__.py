"""k3kit: pin, build, sign, verify and audit deployment kits for frontier LLMs.

The public API is the names in ``__all__`` (docs/api.md; semantic versioning applies to them
and to nothing else). They are loaded on first use (PEP 562), so ``import k3kit.node.verify`` on a
GPU node, or the CLI's start-up, does not pay for huggingface_hub and jinja2 that only pinning
and building need; type checkers see the imports below.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from k3kit._version import __version__

if TYPE_CHECKING:
    from k3kit.api import WeightsNotVerified as WeightsNotVerified
    from k3kit.api import audit_kit as audit_kit
    from k3kit.api import build_kit as build_kit
    from k3kit.api import check_kit as check_kit
    from k3kit.api import check_weights as check_weights
    from k3kit.api import init_channel as init_channel
    from k3kit.api import init_channel_from_root as init_channel_from_root
    from k3kit.api import install_kit as install_kit
    from k3kit.api import install_kit_from_registry as install_kit_from_registry
    from k3kit.api import pack_kit as pack_kit
    from k3kit.api import pin_hub as pin_hub
    from k3kit.api import pin_local as pin_local
    from k3kit.api import plan_launch as plan_launch
    from k3kit.api import publish_to_channel as publish_to_channel
    from k3kit.api import pull_weights as pull_weights
    from k3kit.api import push_kit as push_kit
    from k3kit.api import read_lock as read_lock
    from k3kit.api import renew_channel_timestamp as renew_channel_timestamp
    from k3kit.api import rotate_channel_keys as rotate_channel_keys
    from k3kit.api import sign_kit as sign_kit
    from k3kit.api import trust_root as trust_root
    from k3kit.api import trusted_keys as trusted_keys
    from k3kit.api import update_from_channel as update_from_channel
    from k3kit.api import verify_kit as verify_kit
    from k3kit.api import verify_weights as verify_weights
    from k3kit.api import write_lock as write_lock
    from k3kit.audit import AuditReport as AuditReport
    from k3kit.engines import Runtime as Runtime
    from k3kit.errors import EnvironmentProblem as EnvironmentProblem
    from k3kit.errors import InputError as InputError
    from k3kit.errors import K3kitError as K3kitError
    from k3kit.errors import VerificationError as VerificationError
    from k3kit.formats.kitpath import OpenedKit as OpenedKit
    from k3kit.formats.kitpath import classify as classify
    from k3kit.formats.kitpath import open_kit as open_kit
    from k3kit.models import Manifest as Manifest
    from k3kit.models import WeightsLock as WeightsLock
    from k3kit.node.install import Installed as Installed
    from k3kit.node.launch import LaunchPlan as LaunchPlan
    from k3kit.node.launch import Site as Site
    from k3kit.node.verify import KitNotVerified as KitNotVerified
    from k3kit.node.verify import Report as Report
    from k3kit.preflight import NodeNotReady as NodeNotReady
    from k3kit.publish.kitpack import Packed as Packed
    from k3kit.pull import PullReport as PullReport
    from k3kit.signing.keys import load_private as load_private
    from k3kit.signing.keys import load_public as load_public
    from k3kit.signing.keys import write_keypair as write_keypair
    from k3kit.signing.trust import RollbackPolicy as RollbackPolicy
    from k3kit.signing.trust import RootAnchor as RootAnchor
    from k3kit.signing.trust import Trust as Trust
    from k3kit.signing.trust import TrustSource as TrustSource
    from k3kit.weights import WeightsOptions as WeightsOptions
    from k3kit.weights import WeightsReport as WeightsReport

# name -> the module that defines it: the one table __getattr__ and __all__ come from.
_HOMES: dict[str, str] = {
    "WeightsNotVerified": "k3kit.api",
    "audit_kit": "k3kit.api",
    "build_kit": "k3kit.api",
    "check_kit": "k3kit.api",
    "check_weights": "k3kit.api",
    "init_channel": "k3kit.api",
    "init_channel_from_root": "k3kit.api",
    "install_kit": "k3kit.api",
    "install_kit_from_registry": "k3kit.api",
    "pack_kit": "k3kit.api",
    "pin_hub": "k3kit.api",
    "pin_local": "k3kit.api",
    "plan_launch": "k3kit.api",
    "publish_to_channel": "k3kit.api",
    "pull_weights": "k3kit.api",
    "push_kit": "k3kit.api",
    "read_lock": "k3kit.api",
    "renew_channel_timestamp": "k3kit.api",
    "rotate_channel_keys": "k3kit.api",
    "sign_kit": "k3kit.api",
    "trust_root": "k3kit.api",
    "trusted_keys": "k3kit.api",
    "update_from_channel": "k3kit.api",
    "verify_kit": "k3kit.api",
    "verify_weights": "k3kit.api",
    "write_lock": "k3kit.api",
    "AuditReport": "k3kit.audit",
    "Runtime": "k3kit.engines",
    "EnvironmentProblem": "k3kit.errors",
    "InputError": "k3kit.errors",
    "K3kitError": "k3kit.errors",
    "VerificationError": "k3kit.errors",
    "Installed": "k3kit.node.install",
    "load_private": "k3kit.signing.keys",
    "load_public": "k3kit.signing.keys",
    "write_keypair": "k3kit.signing.keys",
    "Packed": "k3kit.publish.kitpack",
    "LaunchPlan": "k3kit.node.launch",
    "Site": "k3kit.node.launch",
    "NodeNotReady": "k3kit.preflight",
    "Manifest": "k3kit.models",
    "WeightsLock": "k3kit.models",
    "PullReport": "k3kit.pull",
    "OpenedKit": "k3kit.formats.kitpath",
    "classify": "k3kit.formats.kitpath",
    "open_kit": "k3kit.formats.kitpath",
    "RollbackPolicy": "k3kit.signing.trust",
    "RootAnchor": "k3kit.signing.trust",
    "Trust": "k3kit.signing.trust",
    "TrustSource": "k3kit.signing.trust",
    "KitNotVerified": "k3kit.node.verify",
    "Report": "k3kit.node.verify",
    "WeightsOptions": "k3kit.weights",
    "WeightsReport": "k3kit.weights",
}

__all__ = ["__version__", *sorted(_HOMES)]

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module 'k3kit' has no attribute {name!r}")
        value = getattr(import_module(home), name)
        globals()[name] = value  # later look-ups skip this function
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
