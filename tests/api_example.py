"""A small program that uses only ``k3kit``'s public API; ``make test``'s typecheck step runs
mypy --strict over it (``tests/test_api.py`` holds that it does), so a public name that loses its
types (or its export) fails the build."""

from __future__ import annotations

import sys
from pathlib import Path

import k3kit


def gate(kit: Path, key: Path, weights: Path | None) -> int:
    """Exit status for a deploy gate: 0 only for a kit (and weights) that verified."""
    options = k3kit.WeightsOptions(workers=4, all_errors=True)
    try:
        report: k3kit.Report = k3kit.verify_kit(
            kit, [k3kit.load_public(key)], weights=weights, options=options
        )
    except k3kit.KitNotVerified as exc:
        failed = [c.id for c in exc.report.checks if c.status == "failed"]
        print(f"refused: {exc.code} ({', '.join(failed)})", file=sys.stderr)
        return exc.exit_code
    except k3kit.K3kitError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return exc.exit_code
    kit_sha256: object = report.facts.get("kit_sha256")
    print(f"verified {kit_sha256}")
    return 0


def pin_and_write(folder: Path, out: Path) -> str:
    lock: k3kit.WeightsLock = k3kit.pin_local(folder, repo="org/name", revision="0" * 40)
    return k3kit.write_lock(lock, out)


if __name__ == "__main__":
    sys.exit(gate(Path(sys.argv[1]), Path(sys.argv[2]), None))
