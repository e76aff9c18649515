"""Loopback Hugging Face Hub for k3kit's tests: ``server`` (HTTP), ``gitobjects`` (hashes).

Import from the submodules (``from tests.testhub.server import TestHub``). This file imports
nothing so that ``python -m tests.testhub.server`` runs the module exactly once.
"""
