"""Exit codes and the one exception tree k3kit raises.

Every failure a user can cause or meet is a :class:`K3kitError` subclass that carries its exit code,
a stable machine-readable ``code`` and an optional ``hint``. The CLI catches only this base class;
anything else is a bug and maps to :attr:`ExitCode.INTERNAL`. Grouping the classes by *who is at
fault* (the artifact, the caller, the environment) follows python-tuf's error design. The codes
themselves, with their one exit code each, are registered in :mod:`k3kit.codes`.
"""

from __future__ import annotations

import enum

from k3kit.codes import lookup


class ExitCode(enum.IntEnum):
    """The CLI contract of docs/design.md; scripts depend on these numbers."""

    OK = 0
    CHECK_FAILED = 1
    USAGE = 2
    BAD_INPUT = 3
    ENVIRONMENT = 4
    INTERNAL = 70


class K3kitError(Exception):
    """Base of every error k3kit reports to a user."""

    exit_code: ExitCode = ExitCode.INTERNAL
    default_code = "K3KIT_ERROR"

    def __init__(self, message: str, *, code: str | None = None, hint: str | None = None) -> None:
        """``code`` is a :mod:`k3kit.codes` member (or its string); a registered code decides the
        exit code, so one code never exits with two numbers whichever class carries it."""
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.hint = hint
        registered = lookup(self.code)
        if registered is not None:
            self.exit_code = ExitCode(registered.exit)


class VerificationError(K3kitError):
    """Something checked does not hold: tampered, untrusted, malformed or mismatched artifact."""

    exit_code = ExitCode.CHECK_FAILED
    default_code = "VERIFICATION_FAILED"


class UsageProblem(K3kitError):
    """The caller left out what the verb cannot run without (exit 2, as click's own usage
    errors): e.g. no trusted key at all (``TRUST_EMPTY``)."""

    exit_code = ExitCode.USAGE
    default_code = "USAGE"


class InputError(K3kitError):
    """The caller gave k3kit bad input: a malformed definition, a refused overwrite."""

    exit_code = ExitCode.BAD_INPUT
    default_code = "BAD_INPUT"


class EnvironmentProblem(K3kitError):
    """The machine or network got in the way: I/O failure, hub unreachable, unsafe key file."""

    exit_code = ExitCode.ENVIRONMENT
    default_code = "ENVIRONMENT"
