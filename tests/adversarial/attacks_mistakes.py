"""First-hour mistakes a buyer is led into (by a runbook, a publisher's mail, a copied command):
each is refused with its registered code and exit code before any work, never exit 70."""

from __future__ import annotations

from tests.adversarial.corpus import Argv, Workbench, attack


@attack("KIT_NOT_A_FOLDER", exit_code=3)
def launch_given_the_downloaded_archive(w: Workbench) -> Argv:
    """`k3kit launch kimi.kit.tar.gz`: the archive is not the installed folder launch runs."""
    return ["launch", w.archive(), "--profile", "batch", "--trust", w.trust, "--no-preflight"]


@attack("KIT_NOT_A_FOLDER", exit_code=3)
def pack_given_the_released_archive(w: Workbench) -> Argv:
    """A release script handed the archive instead of the folder: pack reads a kit folder."""
    return ["pack", w.archive(), "-o", w.root / "again.kit.tar.gz"]


@attack("RUNTIME_VALUES_MISSING", exit_code=3)
def multi_node_launch_without_rank_or_leader(w: Workbench) -> Argv:
    """Refused before the weights are hashed (tests/test_first_hour_mistakes.py shows when)."""
    return [
        "launch", w.kit(), "--profile", "batch", "--topology", "multi-node-8x8gpu",
        "--trust", w.trust, "--weights", w.snapshot(), "--state-dir", w.root / "state",
        "--no-preflight",
    ]  # fmt: skip


@attack("TRUST_EMPTY", exit_code=2)
def launch_without_any_trusted_key(w: Workbench) -> Argv:
    """No --trust, no --root, no site key: the same exit 2 as every other verb."""
    return ["launch", w.kit(), "--profile", "batch", "--weights", w.snapshot(), "--no-preflight"]


@attack("TRUST_EMPTY", exit_code=2)
def show_without_any_trusted_key(w: Workbench) -> Argv:
    return ["show", w.archive()]
