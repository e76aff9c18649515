"""k3kit: pin, build, sign, verify and audit deployment kits for frontier LLMs."""

__version__ = "0.1.0"
