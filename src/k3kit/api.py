"""The public, typed Python API of k3kit, re-exported from ``k3kit`` (see docs/api.md).

Why a separate module: the stage modules keep the names other modules build on (``verify_path``,
``kit.build``, ``install.install``...), while this module gives a caller one verb per job with
one options type, keyword arguments and documented failures. Each function only translates its
arguments and calls the stage that does the work; nothing here re-implements a check, and no
policy lives here or in the CLI alone (a token over plain http, the endpoint, trust loading, the
node check before launch): both front doors call the same library function for it, and
tests/test_api_cli_parity.py holds them to the same verdict for the same input.

Trust: every verb that checks a signature takes a ``TrustSource``: a list of Ed25519 public
keys, a ``Trust`` or a ``RootAnchor`` (:func:`trusted_keys` and :func:`trust_root` load them
from files by the CLI's rules).

Verbs that *judge* come in pairs, as in python-tuf: ``check_*`` returns the report (the caller
reads ``.ok``), ``verify_*`` returns it only when it passed and raises otherwise, so a
forgotten ``.ok`` cannot accept a bad kit. Every error is a :class:`k3kit.errors.K3kitError`
with a stable ``code`` and an ``exit_code`` (1 check failed, 3 bad input, 4 environment).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from k3kit._values import utc_timestamp
from k3kit.audit import AuditReport, Policy, audit_path
from k3kit.engines import Runtime
from k3kit.errors import InputError, VerificationError
from k3kit.models import KitProfile, Manifest, WeightsLock, lite
from k3kit.node.install import Installed, install
from k3kit.node.launch import LaunchPlan, Site
from k3kit.node.launch import plan_launch as _plan_launch
from k3kit.node.verify import KitNotVerified, Report, VerifiedKit, verify_path
from k3kit.publish.kit import build, load_lock, readme_signer_line, sign
from k3kit.publish.kitpack import Packed
from k3kit.publish.kitpack import pack_kit as _pack_kit
from k3kit.pull import Downloader, PullReport, pull, read_kit_lock
from k3kit.signing.keys import PublicKey
from k3kit.signing.trust import RollbackPolicy, RootAnchor
from k3kit.signing.trust.source import TrustSource, load_trusted_keys, root_trust
from k3kit.weights import WeightsOptions, WeightsReport
from k3kit.weights import check_weights as _check_weights
from k3kit.weights.pin import HubClient, pin_into
from k3kit.weights.pin import pin_hub as _pin_hub
from k3kit.weights.pin import pin_local as _pin_local
from k3kit.weights.pin import write_lock as _write_lock

if TYPE_CHECKING:  # python-tuf and httpx stay off ``import k3kit``: loaded inside the verbs
    from k3kit.channel.client import Updated
    from k3kit.channel.repository import Expiries, Rotation
    from k3kit.oci import Pushed
    from k3kit.signing.signers import Signer

#: How long a channel timestamp stays valid unless told (``--timestamp-hours``' default).
CHANNEL_TIMESTAMP_LIFETIME = timedelta(hours=24)


def _now() -> str:
    return utc_timestamp()


def check_kit(
    kit: Path,
    trusted: TrustSource,
    *,
    weights: Path | None = None,
    options: WeightsOptions | None = None,
    rollback: RollbackPolicy | None = None,
    buyer_receipt: Path | None = None,
    licence: Path | None = None,
) -> Report:
    """Run every check on a kit directory or ``.kit.tar.gz`` and return the report.

    ``trusted``: a list of Ed25519 public keys, a ``Trust`` or a ``RootAnchor``. ``weights``:
    a weights folder to check against the kit's lock (without it the weights check is "not
    checked" and does not fail the report). ``buyer_receipt`` (and ``licence``, which needs it):
    also check that this buyer receipt belongs to the kit, as ``verify --buyer-receipt`` does.
    Returns a :class:`Report` whose ``ok`` is True only when every check ran and passed; a
    failed check is in the report, not raised. Raises ``InputError`` ``KIT_NOT_FOUND`` /
    ``KIT_NOT_RECOGNISED`` (exit 3) for a path that is not a kit, ``InputError``
    ``WEIGHTS_OPTION_INVALID`` for bad options, ``BAD_INPUT`` for a licence without a buyer
    receipt.
    """
    if licence is not None and buyer_receipt is None:
        message = "a licence is checked against a buyer receipt: give both"
        raise InputError(message, code="BAD_INPUT")
    report = verify_path(kit, trusted, weights=weights, weights_options=options, rollback=rollback)
    if buyer_receipt is None:
        return report
    from k3kit.commerce.buyer_receipt import add_buyer_receipt_check  # no database is loaded

    return add_buyer_receipt_check(report, buyer_receipt, trusted, licence=licence)


def verify_kit(
    kit: Path,
    trusted: TrustSource,
    *,
    weights: Path | None = None,
    options: WeightsOptions | None = None,
    rollback: RollbackPolicy | None = None,
    buyer_receipt: Path | None = None,
    licence: Path | None = None,
) -> Report:
    """:func:`check_kit`, raising unless the kit (and its weights, where given) verified.

    Returns the passing :class:`Report`. Raises :class:`KitNotVerified` (exit 1; its ``code``
    is the first failed check's, e.g. ``RECEIPT_THRESHOLD_NOT_MET``, ``KIT_FILE_CHANGED``,
    ``WEIGHTS_DIGEST_MISMATCH``; ``.report`` holds every check) and what :func:`check_kit`
    raises.
    """
    report = check_kit(
        kit,
        trusted,
        weights=weights,
        options=options,
        rollback=rollback,
        buyer_receipt=buyer_receipt,
        licence=licence,
    )
    if not report.ok:
        raise KitNotVerified(report)
    return report


def read_lock(path: Path) -> WeightsLock:
    """Read a ``weights.lock.json`` (capped, strict, canonical bytes, validated).

    Returns the :class:`WeightsLock`. Raises ``InputError`` ``INPUT_MISSING`` (missing,
    not a regular file, over 16 MiB) or ``BAD_INPUT`` (not a valid, canonical lock), exit 3.
    """
    return load_lock(path)


class WeightsNotVerified(VerificationError):
    """Weights did not match their lock; ``report`` lists every problem found (exit 1)."""

    def __init__(self, report: WeightsReport) -> None:
        codes = sorted({p.code for p in report.problems})
        first = report.problems[0]
        super().__init__(
            f"weights do not match the lock: {len(report.problems)} problem(s), first "
            f"{first.code} at {first.path}: {first.detail}",
            code=codes[0] if len(codes) == 1 else "WEIGHTS_DIFFER",
        )
        self.report = report


def check_weights(
    weights: Path, lock: WeightsLock | Path, options: WeightsOptions | None = None
) -> WeightsReport:
    """Check a weights folder against a lock and return the report (``.ok``, ``.problems``).

    ``weights``: a plain folder, a Hugging Face cache snapshot, its repo folder or a cache
    root; ``lock``: a :class:`WeightsLock` or the path of one. A wrong file is a problem in the
    report (``WEIGHTS_FILE_MISSING``, ``WEIGHTS_FILE_EXTRA``, ``WEIGHTS_SIZE_MISMATCH``,
    ``WEIGHTS_DIGEST_MISMATCH``...), not an exception. Raises ``VerificationError``
    ``WEIGHTS_AMBIGUOUS`` / ``WEIGHTS_NOT_FOUND`` (exit 1) for a folder with no single
    meaning, ``WEIGHTS_NO_BLAKE3`` when blake3 is forced on a lock without it, and what
    :func:`read_lock` raises.
    """
    o = options or WeightsOptions()
    pinned = read_lock(lock) if isinstance(lock, Path) else lock
    return _check_weights(
        weights,
        pinned,
        algorithm=o.algorithm,
        workers=o.workers,
        all_errors=o.all_errors,
        state_dir=o.state_dir,
        full=o.full,
        on_progress=o.on_progress,
    )


def verify_weights(
    weights: Path, lock: WeightsLock | Path, options: WeightsOptions | None = None
) -> WeightsReport:
    """:func:`check_weights`, raising :class:`WeightsNotVerified` (exit 1) unless it passed."""
    report = check_weights(weights, lock, options)
    if not report.ok:
        raise WeightsNotVerified(report)
    return report


def pin_hub(
    repo: str,
    revision: str,
    *,
    client: HubClient | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    hash_local: Path | None = None,
    pinned_at: str | None = None,
    workers: int | None = None,
    output: Path | None = None,
    force: bool = False,
) -> WeightsLock:
    """Pin ``repo`` at the commit ``revision`` resolves to now, from the hub's metadata.

    ``client``: any :class:`k3kit.weights.pin.HubClient` (default: huggingface_hub against
    ``endpoint``, else the public Hub, with ``token``; the environment is not read, so pass
    ``HF_ENDPOINT``'s value as ``endpoint``). A token is refused over plain http to anything but
    loopback, as the CLI refuses it. No LFS byte is downloaded unless ``hash_local`` names a
    local copy to check the hub's sha256 values against (``workers`` hashing threads). With
    ``output``, the lock is also written there as ``k3kit pin -o`` writes it: an existing file
    is refused before any request unless ``force``. Returns the :class:`WeightsLock`. Raises
    ``InputError`` (``BAD_REPO_ID``, ``PATH_REFUSED``, ``PATTERN_MATCHES_NOTHING``,
    ``NOTHING_TO_PIN``, ``BAD_ENDPOINT``, ``TOKEN_OVER_HTTP``, ``OUTPUT_EXISTS``...; exit 3) and
    ``EnvironmentProblem`` (``HUB_*``: hub or network trouble; exit 4).
    """

    def make() -> WeightsLock:
        chosen = client
        if chosen is None:
            from k3kit.hub import HfHub
            from k3kit.hub.policy import hub_endpoint

            chosen = HfHub(hub_endpoint(endpoint, token), token)
        return _pin_hub(
            chosen,
            repo=repo,
            revision=revision,
            pinned_at=pinned_at or _now(),
            include=include,
            exclude=exclude,
            hash_local=hash_local,
            workers=workers,
        )

    return make() if output is None else pin_into(output, make, force=force)


def pin_local(
    folder: Path,
    *,
    repo: str,
    revision: str,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    pinned_at: str | None = None,
    workers: int | None = None,
    output: Path | None = None,
    force: bool = False,
) -> WeightsLock:
    """Pin a local copy of ``repo`` at the 40-hex commit ``revision`` by hashing every file.

    ``workers``: hashing threads (default: the cores). With ``output``, the lock is also written
    there as ``k3kit pin --local -o`` writes it (an existing file refused before hashing unless
    ``force``). Returns the :class:`WeightsLock` (sha256 and blake3 of every selected file).
    Raises ``InputError`` (exit 3): ``BAD_REPO_ID``, ``REVISION_NOT_COMMIT``, ``PATH_REFUSED``,
    ``OUTPUT_EXISTS``, a snapshot of another repo or commit, an unreadable or special file in
    ``folder``.
    """

    def make() -> WeightsLock:
        return _pin_local(
            folder,
            repo=repo,
            revision=revision,
            pinned_at=pinned_at or _now(),
            include=include,
            exclude=exclude,
            workers=workers,
        )

    return make() if output is None else pin_into(output, make, force=force)


def write_lock(lock: WeightsLock, path: Path, *, force: bool = False) -> str:
    """Write ``lock`` as canonical (RFC 8785) bytes, atomically; returns its sha256 (hex).

    That sha256 is the weight checksum a receipt signs. Raises ``InputError``
    ``OUTPUT_EXISTS`` (exit 3) when ``path`` exists and ``force`` is False.
    """
    return _write_lock(lock, path, force=force)


def build_kit(
    package: Path,
    lock: Path,
    out: Path,
    *,
    force: bool = False,
    model_config: Path | None = None,
    ssh_signer: Path | None = None,
    principal: str = "release@k3kit",
) -> Manifest:
    """Build the kit directory ``out`` from ``package.toml`` and ``weights.lock.json``.

    ``model_config``: the weights' ``config.json`` (its sha256 must be the lock's) for the
    context-length check and preflight's memory budget. ``ssh_signer``: the publisher's public
    key file; the kit README then carries its ``allowed_signers`` line for ``principal``.

    Returns its :class:`Manifest` (the kit checksum is the sha256 of ``out/MANIFEST.json``).
    Raises ``InputError`` (exit 3): ``BAD_INPUT`` for a malformed package or lock, a template
    or engine-flag error, ``OUTPUT_EXISTS`` without ``force``.
    """
    allowed = readme_signer_line(ssh_signer, principal) if ssh_signer is not None else None
    return build(
        package, lock, out, force=force, model_config=model_config, allowed_signers=allowed
    )


def sign_kit(
    kit: Path,
    key: Ed25519PrivateKey,
    claims: Path,
    *,
    issued_at: str | None = None,
    force: bool = False,
) -> None:
    """Sign the built kit ``kit``: write ``receipt.dsse.json`` and ``evidence/`` into it.

    ``key``: the publisher's private key (``k3kit.signing.keys.load_private``); ``claims``: the
    benchmark claims TOML (its evidence files are read relative to it). Raises ``InputError``
    (exit 3): ``KIT_FILES_DIFFER`` (the kit changed since it was built), ``OUTPUT_EXISTS``
    without ``force``, ``RECEIPT_TOO_LARGE``, ``EVIDENCE_MISSING``, ``BAD_INPUT``.
    """
    sign(kit, key, claims, issued_at=issued_at or _now(), force=force)


def pack_kit(
    kit: Path,
    output: Path | None = None,
    *,
    trusted: TrustSource | None = None,
    unsigned: bool = False,
    force: bool = False,
    rollback: RollbackPolicy | None = None,
) -> Packed:
    """Check the kit as the verifier would, then write its deterministic ``.kit.tar.gz``.

    ``trusted``: keys, a ``Trust`` or a ``RootAnchor`` to check the receipt's signature with (a
    root needs ``rollback``, as in :func:`verify_kit`); without, the signature is not checked
    and ``Packed.checked`` says so. Returns :class:`Packed` (path, sha256, size). Raises
    ``VerificationError`` (exit 1) for a kit that does not verify (``RECEIPT_MISSING``,
    ``KIT_FILES_DIFFER``...), ``InputError`` (exit 3) ``PACK_NOT_A_KIT``, ``PACK_OPTIONS``,
    ``OUTPUT_EXISTS``.
    """
    return _pack_kit(
        kit, output, trusted=trusted, unsigned=unsigned, force=force, rollback=rollback
    )


def install_kit(
    kit: Path, trusted: TrustSource, into: Path, *, rollback: RollbackPolicy | None = None
) -> Installed:
    """Verify ``kit`` and install exactly the verified bytes, read-only, as ``into/NAME-VERSION``.

    Returns :class:`Installed`. Raises :class:`KitNotVerified` (exit 1), ``VerificationError``
    ``INSTALL_CONFLICT``, ``InputError`` ``KIT_NOT_FOUND`` / ``INSTALL_DIR_INVALID``,
    ``EnvironmentProblem`` ``INSTALL_DIR_UNSAFE`` (another user can write ``into`` or a folder
    above it) and I/O errors.
    """
    return install(kit, trusted, into, rollback=rollback)


def install_kit_from_registry(
    reference: str, trusted: TrustSource, into: Path, *, rollback: RollbackPolicy | None = None
) -> tuple[Installed, str]:
    """:func:`install_kit` of the kit ``oci://HOST/REPO@sha256:HEX`` names; returns the
    installed kit and the manifest digest (docs/oci.md).

    The manifest and the kit blob are checked against the digest on the bytes received, then
    the kit is verified and installed exactly as an archive. Raises ``InputError``
    ``OCI_TAG_NOT_PINNED`` / ``OCI_PLAIN_HTTP`` / ``OCI_REF_INVALID`` (exit 3),
    ``VerificationError`` ``OCI_DIGEST_MISMATCH`` / ``OCI_BLOB_OVERSIZED`` /
    ``OCI_MANIFEST_INVALID`` (exit 1), ``EnvironmentProblem`` ``OCI_REGISTRY_*`` (exit 4), and
    whatever :func:`install_kit` raises. httpx is imported only when this is called.
    """
    from k3kit.node.registry import install_from_registry

    return install_from_registry(reference, trusted, into, rollback=rollback)


def plan_launch(
    kit: Path,
    trusted: TrustSource,
    *,
    profile: str,
    weights: Path,
    runtime_dir: Path,
    base_env: Mapping[str, str],
    topology: str | None = None,
    site: Site | None = None,
    options: WeightsOptions | None = None,
    rollback: RollbackPolicy | None = None,
    on_step: Callable[[str], None] | None = None,
    runtime: Runtime | None = None,
    preflight: bool = False,
) -> LaunchPlan:
    """Verify an installed kit and its weights; return the engine command that runs them.

    ``runtime``: this node's rank, the leader's address and the rendezvous port, which a
    multi-node topology needs (the only values not signed). ``preflight``: check the node for the
    chosen profile once the kit verified, before any weight is hashed, as ``k3kit launch`` does
    unless ``--no-preflight``; a node that cannot be shown to run it raises
    :class:`k3kit.preflight.NodeNotReady` (``NODE_NOT_READY``, exit 1).

    Nothing is started: the caller execs ``plan.argv`` with ``plan.env`` in ``plan.cwd``. Raises
    :class:`KitNotVerified` (exit 1), ``VerificationError`` ``ENGINE_VERSION_MISMATCH`` /
    ``KIT_FILE_CHANGED`` / ``ENGINE_UNKNOWN`` / ``ENGINE_VALUE_IS_OPTION`` /
    ``ENGINE_LOADS_UNDECLARED``, ``InputError`` for an unknown profile or topology or an unusable
    listen address (``LAUNCH_ADDRESS_INVALID``), ``EnvironmentProblem`` for a missing engine or an
    unsafe runtime folder. ``plan.loads`` lists what the publisher declared the engine loads from
    outside the kit: show it to whoever decides to start the engine.
    """
    return _plan_launch(
        kit,
        trusted,
        profile=profile,
        weights=weights,
        runtime_dir=runtime_dir,
        base_env=base_env,
        topology=topology,
        site=site,
        weights_options=options,
        rollback=rollback,
        on_step=on_step,
        runtime=runtime,
        check_node=_node_check(weights) if preflight else None,
    )


def _node_check(weights: Path) -> Callable[[VerifiedKit, KitProfile | lite.KitProfile], None]:
    from k3kit.preflight import launch_node_check  # reads GPUs: loaded only when asked for

    return launch_node_check(weights=weights)


def audit_kit(target: Path, trusted: TrustSource, *, policy: Policy | None = None) -> AuditReport:
    """Audit a kit directory, a ``.kit.tar.gz`` or a lone ``*.dsse.json`` receipt.

    ``trusted``: keys, a ``Trust`` or a ``RootAnchor`` (resolved against the kit's ``root/``).

    Returns the :class:`AuditReport` (findings by rule, ``at_or_above("error")`` for a gate);
    an untrusted receipt is finding R01, not an exception. Raises ``InputError``
    ``KIT_NOT_FOUND`` / ``KIT_NOT_RECOGNISED`` (exit 3) and the archive reader's
    ``VerificationError`` (exit 1).
    """
    return audit_path(target, trusted, policy)


def pull_weights(
    kit: Path,
    dest: Path,
    *,
    trusted: TrustSource | None = None,
    downloader: Downloader | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    layout: Literal["cache", "plain"] = "cache",
    workers: int = 8,
    timeout: float = 10.0,
    on_file_done: Callable[[str, int], None] | None = None,
    rollback: RollbackPolicy | None = None,
) -> PullReport:
    """Pull the weights that ``kit`` (directory, archive or lock) pins into ``dest``.

    With ``trusted`` (keys, a ``Trust`` or a ``RootAnchor``, which needs ``rollback``) the kit is
    verified first; without, the lock is only parsed. The default downloader is huggingface_hub
    against ``endpoint`` (else the verified lock's own, else the public Hub; no environment),
    waiting ``timeout`` seconds for the hub; a ``token`` is refused over plain http to anything
    but loopback (``TOKEN_OVER_HTTP``, exit 3), as the CLI does. Returns the
    :class:`PullReport` (``.ok``); wrong bytes are in it, not raised. Raises
    ``VerificationError`` ``KIT_NOT_VERIFIED`` (exit 1), ``InputError`` ``KIT_NOT_FOUND`` /
    ``KIT_NOT_RECOGNISED`` / ``LOCK_MALFORMED`` / ``TRUST_NEEDS_KIT`` / ``BAD_ENDPOINT`` /
    ``TOKEN_OVER_HTTP`` (exit 3), ``EnvironmentProblem`` ``DIR_UNUSABLE`` and hub errors
    (exit 4).
    """
    kit_lock = read_kit_lock(kit, trusted, rollback=rollback)
    if downloader is None:
        from k3kit.hub import HfHub
        from k3kit.hub.policy import hub_endpoint

        own = kit_lock.lock.source.endpoint if kit_lock.verified else None
        downloader = HfHub(hub_endpoint(endpoint, token, fallback=own), token, timeout=timeout)
    return pull(
        kit_lock.lock,
        dest,
        downloader=downloader,
        layout=layout,
        workers=workers,
        on_file_done=on_file_done,
    )


def trusted_keys(paths: Sequence[Path]) -> list[PublicKey]:
    """Load publisher public keys from files, by the rule ``--trust`` uses.

    Returns the keys, in order, for any verb's ``trusted``. Raises ``InputError`` (exit 3):
    ``TRUST_DUPLICATE_KEY`` for a key given twice (it would look like two signers);
    ``EnvironmentProblem`` ``KEY_UNREADABLE`` / ``KEY_UNSUPPORTED`` for a file that is not an
    Ed25519 public key.
    """
    return load_trusted_keys(paths)


def trust_root(
    root: Path, *, state_dir: Path | None = None, allow_rollback: bool = False
) -> tuple[RootAnchor, RollbackPolicy | None]:
    """A pinned root of trust (``N.root.json``) and the rollback policy for ``state_dir``, as
    ``--root`` and ``--state-dir`` make them (the clock is read once, now). Pass both to the
    verbs that take ``trusted`` and ``rollback``. Raises ``InputError`` ``ROOT_INVALID``."""
    return root_trust(root, state_dir, now=_now(), allow_rollback=allow_rollback)


# -- the maintenance channel (python-tuf, the ``channel`` extra) and OCI push ---------------------


def _need_channel() -> None:
    """The channel verbs need python-tuf (the ``channel`` extra): refused, naming the extra to
    install, as the CLI refuses it (``EXTRA_NOT_INSTALLED``, exit 4)."""
    from k3kit._resources import require_extra

    require_extra("channel", "tuf")


def _channel_expiries(timestamp_lifetime: timedelta) -> Expiries:
    _need_channel()
    from k3kit.channel.repository import timestamp_expiries

    return timestamp_expiries(timestamp_lifetime)


def publish_to_channel(
    archive: Path,
    channel: str,
    repo: Path,
    trusted: TrustSource,
    signers: Sequence[Signer],
    *,
    timestamp_lifetime: timedelta = CHANNEL_TIMESTAMP_LIFETIME,
) -> dict[str, Any]:
    """Add the ``.kit.tar.gz`` ``archive`` to ``channel`` of the TUF repository ``repo``, as
    ``k3kit publish --channel`` does.

    The archive must first verify against ``trusted`` (the publisher's own keys or root);
    ``signers`` (``k3kit.signing.schemes.signer_from_uri``) sign the new targets, snapshot and
    timestamp, the timestamp valid for ``timestamp_lifetime``. Returns the target's name and
    whether it was newly published. Raises ``VerificationError`` ``CHANNEL_KIT_UNVERIFIED``
    (exit 1, nothing written), ``InputError`` ``KIT_NOT_FOUND`` / ``BAD_INPUT`` /
    ``CHANNEL_VERSION_EXISTS`` / ``CHANNEL_KEYS_MISSING`` (exit 3; ``BAD_INPUT`` also for a
    ``timestamp_lifetime`` outside 1 hour to 31 days, as ``--timestamp-hours``),
    ``EnvironmentProblem`` ``EXTRA_NOT_INSTALLED`` (exit 4) without python-tuf.
    """
    expires = _channel_expiries(timestamp_lifetime)
    from k3kit.channel.publish import publish_archive
    from k3kit.channel.repository import utc_now

    return publish_archive(archive, channel, repo, trusted, signers, now=utc_now(), expires=expires)


def init_channel(
    repo: Path,
    role_keys: Mapping[str, Sequence[PublicKey]],
    root_signers: Sequence[Signer],
    *,
    thresholds: Mapping[str, int] | None = None,
) -> Path:
    """Create ``repo/metadata/1.root.json`` naming each role's public keys (``role_keys``: root,
    targets, snapshot, timestamp) and ``thresholds`` (default 1), signed by ``root_signers``,
    as ``k3kit channel init`` does. Returns the root's path: buyers pin it. Raises
    ``InputError`` (``CHANNEL_REPO_INVALID`` for an existing channel...; exit 3)."""
    _need_channel()
    from k3kit.channel.repository import init_channel as _init_channel
    from k3kit.channel.repository import utc_now

    keys = {role: list(found) for role, found in role_keys.items()}
    wanted = {"root": 1, "targets": 1, **(thresholds or {})}
    return _init_channel(repo, keys, wanted, root_signers, now=utc_now())


def init_channel_from_root(repo: Path, roots: Sequence[Path]) -> Path:
    """Start a channel in ``repo`` from the publisher's root of trust (``k3kit root create``'s
    ``1.root.json``, then any later versions in order), as ``k3kit channel init --root`` does:
    verified as a node verifies it and copied byte for byte. Returns ``1.root.json``, which
    buyers pin for ``update_from_channel`` and ``trust_root`` alike. Raises ``InputError``
    (``CHANNEL_REPO_INVALID``: an existing channel, a chain not starting at 1; exit 3) or
    ``VerificationError`` (``ROOT_UNTRUSTED``, ``ROOT_MALFORMED``...; exit 1)."""
    _need_channel()
    from k3kit.channel.repository import adopt_roots
    from k3kit.signing.trust.source import read_root_file

    return adopt_roots(repo, [(read_root_file(p), str(p)) for p in roots])


def renew_channel_timestamp(
    repo: Path,
    signers: Sequence[Signer],
    *,
    timestamp_lifetime: timedelta = CHANNEL_TIMESTAMP_LIFETIME,
) -> int:
    """Re-sign ``repo``'s timestamp for ``timestamp_lifetime``, as ``k3kit channel timestamp``
    does; returns the version it renewed. Raises ``InputError`` ``CHANNEL_REPO_INVALID`` /
    ``CHANNEL_KEYS_MISSING`` / ``BAD_INPUT`` (a lifetime outside 1 hour to 31 days; exit 3)."""
    expires = _channel_expiries(timestamp_lifetime)
    from k3kit.channel.repository import renew_timestamp, utc_now

    return renew_timestamp(repo, signers, now=utc_now(), expires=expires)


def rotate_channel_keys(
    repo: Path,
    role: str,
    signers: Sequence[Signer],
    *,
    add: Sequence[PublicKey] = (),
    remove: Sequence[PublicKey | str] = (),
    threshold: int | None = None,
    timestamp_lifetime: timedelta = CHANNEL_TIMESTAMP_LIFETIME,
) -> Rotation:
    """Give ``role`` the keys ``add``, revoke ``remove`` (public keys or TUF key ids) and set its
    ``threshold``: writes root N+1 and re-signs what the change made stale, as ``k3kit channel
    rotate`` does (``signers``: the old and new root's keys and those of the re-signed roles).
    Returns the :class:`k3kit.channel.repository.Rotation`. Raises ``InputError``
    ``CHANNEL_KEYS_MISSING`` / ``CHANNEL_ROTATION_INVALID`` (exit 3), writing nothing."""
    expires = _channel_expiries(timestamp_lifetime)
    from k3kit.channel.repository import KeyChange, rotate_keys, utc_now
    from k3kit.channel.tufsigner import tuf_key

    gone = tuple(k if isinstance(k, str) else tuf_key(k).keyid for k in remove)
    change = KeyChange(role, tuple(add), gone, threshold)
    return rotate_keys(repo, change, signers, now=utc_now(), expires=expires)


def update_from_channel(
    url: str,
    channel: str,
    channel_root: Path,
    into: Path,
    trusted: TrustSource,
    *,
    state_dir: Path,
    package: str | None = None,
    version: str | None = None,
    buyer_receipt: Path | None = None,
    licence: Path | None = None,
    rollback: RollbackPolicy | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    registry: str | None = None,
) -> Updated:
    """Install the newest release of ``channel`` served at ``url`` that this buyer is entitled
    to, as ``k3kit update`` does: python-tuf reads the channel from the pinned ``channel_root``
    (metadata kept in ``state_dir``), then the kit is verified against ``trusted`` and installed
    into ``into/NAME-VERSION``. ``buyer_receipt`` and ``licence`` (together) hold it to the
    entitlement's term. Raises ``InputError`` ``CHANNEL_URL_REFUSED`` (plain http off this
    machine, a password in the URL; exit 3, before any request), ``VerificationError``
    ``CHANNEL_FROZEN`` / ``CHANNEL_ROLLBACK`` / ``CHANNEL_INCONSISTENT`` / ``CHANNEL_UNTRUSTED``
    / ``CHANNEL_OUT_OF_TERM`` / ``BUYER_RECEIPT_NEEDS_TRUST`` and :class:`KitNotVerified`
    (exit 1), ``UsageProblem`` ``USAGE`` for one entitlement document without the other.
    ``registry`` (``oci://HOST/REPO``): the kit's bytes from there, by the signed sha256, as
    ``update --from-registry`` (docs/distribution.md)."""
    _need_channel()
    from k3kit.channel.client import Request, update
    from k3kit.channel.term import term_for

    term = term_for(buyer_receipt, licence, trusted)
    request = Request(url, channel, channel_root, into, state_dir, package, version, term, registry)
    return update(request, trusted, rollback=rollback, on_progress=on_progress)


def push_kit(
    archive: Path,
    reference: str,
    trusted: TrustSource,
    *,
    attach: Sequence[Path] = (),
    rollback: RollbackPolicy | None = None,
) -> tuple[Pushed, Report]:
    """Verify a private copy of ``archive`` against ``trusted`` and push it to
    ``oci://HOST/REPO:TAG`` with its receipt, card and ``attach`` files as referrers, as
    ``k3kit push`` does. Returns what was pushed (``.digest``: install by it) and the passing
    :class:`Report`. Raises :class:`KitNotVerified` (exit 1, nothing pushed), ``InputError``
    ``OCI_REF_INVALID`` / ``OCI_PLAIN_HTTP`` (exit 3, before the archive is read),
    ``EnvironmentProblem`` ``OCI_REGISTRY_*`` (exit 4). httpx is imported only when called."""
    from k3kit.node.registry import push_archive

    return push_archive(archive, reference, trusted, attach=list(attach), rollback=rollback)
