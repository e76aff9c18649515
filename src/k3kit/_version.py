"""The package version, in a module of its own at the bottom of the layers.

Why not in ``k3kit/__init__.py``: the package root re-exports the public API (``k3kit.api``,
the top layer), so a stage module that read the version from the root (``kit`` writes it into
``kit.json``) would depend on every layer above it.
"""

__version__ = "0.1.0"
