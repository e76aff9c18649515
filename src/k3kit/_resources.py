"""What this installation of k3kit provides: the data shipped beside the code, and the extras.

Data: ``templates/`` and ``examples/``. In a wheel they are packaged inside ``k3kit/``; in a
source checkout (editable install, tests) they live at the repository root. Looking in both
places keeps one source of truth in the repo.

Extras: a GPU node verifies, installs and launches kits; it never opens the licence ledger, so
the ledger's database stack (SQLAlchemy and the PostgreSQL driver, the heaviest install k3kit
had) is the ``ledger`` extra (``pip install 'k3kit[ledger]'``; ``.[test]`` pulls it in), and a
PKCS#11 signer's library is the ``hsm`` extra. Without :func:`require_extra` a missing package
surfaced as ``ModuleNotFoundError`` deep in an import, an internal error (exit 70) that names no
fix.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from k3kit.errors import EnvironmentProblem

_PKG = Path(__file__).resolve().parent


def shipped_dir(name: str) -> Path:
    for candidate in (_PKG / name, _PKG.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise EnvironmentProblem(
        f"k3kit installation is incomplete: no {name}/ directory", code="INSTALL_INCOMPLETE"
    )


#: extra -> what it is for, for the message.
EXTRAS = {
    "ledger": "the licence ledger (`k3kit ledger`, `k3kit buyer-receipt issue`)",
    "hsm": "signing with a pkcs11: key",
    "channel": "the maintenance channel on TUF (`k3kit publish --channel`, `k3kit update`)",
}


def require_extra(extra: str, *modules: str) -> None:
    """Import ``modules`` or raise ``EXTRA_NOT_INSTALLED`` (exit 4) naming ``extra`` to install.

    Only a module that is itself absent is reported this way; an error raised while importing a
    module that is installed propagates unchanged (it is a broken install, not a missing one).
    """
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.split(".")[0] != name.split(".")[0]:
                raise
            raise EnvironmentProblem(
                f"{EXTRAS.get(extra, extra)} needs the Python package {name!r}, which this "
                "install of k3kit does not have",
                code="EXTRA_NOT_INSTALLED",
                hint=f"pip install 'k3kit[{extra}]'",
            ) from exc
