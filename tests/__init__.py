"""k3kit's test suite (a package so that ``python -m tests.testhub.server`` works)."""
