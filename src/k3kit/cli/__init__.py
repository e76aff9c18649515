"""The ``k3kit`` command line: the only package that prints, reads argv/env, and exits.

``_app`` holds the group and the error mapping; the commands live in ``publish`` (keygen, pin,
build, sign, pack), ``buyer`` (pull, verify), ``deploy`` (install, launch), ``review``
(audit, demo), ``present`` (show, card, release-notes), ``accept``, ``trust`` (root …) and
``signing`` (countersign, sshsig), ``engine`` (engine snapshot). Importing them here
registers them on the group. Each command imports the library modules it needs inside its body,
so `k3kit verify` never pays for huggingface_hub or jinja2.
"""

from k3kit.cli import (
    accept,
    buyer,
    commerce,
    deploy,
    engine,
    preflight,
    present,
    publish,
    review,
    signing,
    trust,
)
from k3kit.cli._app import cli, main

__all__ = [
    "accept",
    "buyer",
    "cli",
    "commerce",
    "deploy",
    "engine",
    "main",
    "preflight",
    "present",
    "publish",
    "review",
    "signing",
    "trust",
]
