"""``python -m k3kit``."""

from k3kit.cli import main

main()
