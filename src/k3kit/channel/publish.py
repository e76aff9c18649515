"""``k3kit publish ARCHIVE --channel NAME``: a kit archive that verifies becomes a release.

Why verify first: the channel vouches for what it lists. A kit whose receipt does not verify
against the publisher's own trust would be signed into the channel's targets and reach every
buyer's ``update``, which would then refuse it on every node; it is refused here instead, once.
The release's fields come from the verified receipt, never from the file name.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from k3kit.channel.repository import Expiries, Release, publish_release
from k3kit.errors import InputError, VerificationError
from k3kit.node.verify import FAILED, Report, TrustSource, verify_path
from k3kit.signing.signers import Signer


def release_of(report: Report, channel: str) -> Release:
    receipt = report.facts["receipt"]
    package, version = str(receipt["kit"]), str(receipt["version"])
    return Release(
        path=f"{channel}/{package}/{version}.kit.tar.gz",
        package=package,
        version=version,
        sequence=int(receipt["sequence"]),
        kit_sha256=report.kit_sha256,
        released_at=str(receipt["issued_at"]),
    )


def publish_archive(
    archive: Path,
    channel: str,
    repo: Path,
    trusted: TrustSource,
    signers: Sequence[Signer],
    *,
    now: datetime,
    expires: Expiries,
) -> dict[str, Any]:
    """Verify ``archive``, then add it to ``channel`` in ``repo``; returns what was done."""
    if not channel.replace("-", "").replace("_", "").isalnum() or not channel.isascii():
        raise InputError(
            f"channel name {channel!r}: letters, digits, '-' and '_' only", code="BAD_INPUT"
        )
    if not archive.is_file():
        raise InputError(
            f"{archive} is not a kit archive file",
            code="KIT_NOT_FOUND",
            hint="publish the .kit.tar.gz that `k3kit pack` wrote",
        )
    report = verify_path(archive, trusted)
    if not report.ok:
        failed = [f"{c.id} ({c.code})" for c in report.checks if c.status == FAILED]
        raise VerificationError(
            f"{archive} does not verify: {', '.join(failed) or 'not every check passed'}; "
            "nothing was published",
            code="CHANNEL_KIT_UNVERIFIED",
            hint=f"run `k3kit verify {archive} --trust KEY.pub` and fix the kit first",
        )
    release = release_of(report, channel)
    added = publish_release(repo, archive, release, signers, now=now, expires=expires)
    return {"published": added, "target": release.path, **release.custom()}
