"""The ``k3kit`` command line: the only package that prints, reads argv/env, and exits.

``_app`` holds the group and the error mapping; the commands live in ``publish`` (keygen, pin,
build, sign, pack), ``buyer`` (pull, verify), ``deploy`` (install, launch), ``review``
(audit, demo), ``present`` (show, card, release-notes), ``accept``, ``trust`` (root …) and
``signing`` (countersign, sshsig), ``engine`` (engine snapshot). The group imports a verb's
module when that verb is asked for (:class:`k3kit.cli._app.VerbGroup`), and each command imports
the library modules it needs inside its body, so `k3kit verify` pays neither for the publisher's
modules nor for huggingface_hub or jinja2.
"""

from k3kit.cli._app import cli, main

__all__ = ["cli", "main"]
