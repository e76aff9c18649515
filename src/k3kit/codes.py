"""The registry of every error and problem code k3kit reports, one ``StrEnum`` per area.

Scripts branch on these codes (``{"error": {"code": ...}}`` in ``--json`` output, a check's
``code``, a problem's ``code``), so each is a stable name with one meaning and ONE exit code:
:class:`k3kit.errors.K3kitError` takes its exit code from the registered member, so the same code
can never exit 1 in one verb and 3 in another. Members are ``str`` (``StrEnum``): comparing with
the plain string keeps working. ``docs/error-codes.md`` is generated from this module and a test
fails when a ``code="..."`` literal anywhere in ``src/`` is not registered here.

Areas follow who reads the code: archive, kit, receipt, trust, weights, hub/pull, input,
environment, audit, and the CLI's own.
"""

from __future__ import annotations

import enum

# Exit codes as plain ints: this module sits below k3kit.errors (which imports it).
# Short private names so that a member called BAD_INPUT or ENVIRONMENT cannot shadow them.
_FAIL, _USAGE, _INPUT, _ENV, _BUG = 1, 2, 3, 4, 70


class ErrorCode(enum.StrEnum):
    """A registered code: its string value, its exit code and a one-line description."""

    _value_: str
    exit: int
    description: str

    def __new__(cls, value: str, exit: int, description: str) -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.exit = exit
        member.description = description
        return member


class ArchiveCode(ErrorCode):
    """The strict archive reader (``k3kit.archive``)."""

    ARCHIVE_FORMAT = "ARCHIVE_FORMAT", _FAIL, "not a well-formed single-member gzip tar"
    ARCHIVE_MEMBER_UNSAFE = (
        "ARCHIVE_MEMBER_UNSAFE",
        _FAIL,
        "a member is a link, device, duplicate, collision or escapes the folder",
    )
    ARCHIVE_NAME_ENCODING = (
        "ARCHIVE_NAME_ENCODING",
        _FAIL,
        "a member name is not printable UTF-8",
    )
    ARCHIVE_TOO_LARGE = "ARCHIVE_TOO_LARGE", _FAIL, "over a size or member-count cap"
    ARCHIVE_NOT_A_KIT = (
        "ARCHIVE_NOT_A_KIT",
        _FAIL,
        "the archive's members are not the files its MANIFEST.json lists (refused unwritten)",
    )


class KitCode(ErrorCode):
    """A kit directory and its documents (manifest, kit.json), build and install."""

    KIT_CHANGED = "KIT_CHANGED", _FAIL, "the kit changed between verify and use"
    KIT_FILES_DIFFER = "KIT_FILES_DIFFER", _FAIL, "the kit departs from its manifest"
    KIT_RELEASE_MISMATCH = (
        "KIT_RELEASE_MISMATCH",
        _FAIL,
        "the receipt's package, version, sequence or channel is not kit.json's",
    )
    KIT_FILE_CHANGED = "KIT_FILE_CHANGED", _FAIL, "a listed file's size or sha256 differs"
    KIT_FILE_EXTRA = "KIT_FILE_EXTRA", _FAIL, "a file or folder not in MANIFEST.json"
    KIT_FILE_MISSING = "KIT_FILE_MISSING", _FAIL, "a file MANIFEST.json lists is absent"
    KIT_INCOMPLETE = "KIT_INCOMPLETE", _INPUT, "a kit document the verb needs is missing"
    KIT_INFO_MALFORMED = "KIT_INFO_MALFORMED", _FAIL, "kit.json is malformed"
    KIT_LOCK_MISMATCH = "KIT_LOCK_MISMATCH", _FAIL, "kit.json names another lock"
    KIT_NAME = "KIT_NAME", _FAIL, "the kit's name is not usable as a folder name"
    KIT_NOT_FOUND = "KIT_NOT_FOUND", _INPUT, "the kit path given does not exist"
    KIT_NOT_RECOGNISED = "KIT_NOT_RECOGNISED", _INPUT, "neither a kit folder nor an archive"
    KIT_NOT_A_FOLDER = (
        "KIT_NOT_A_FOLDER",
        _INPUT,
        "an archive, lock or receipt given to a verb that works on a kit folder",
    )
    KIT_NOT_REGULAR = "KIT_NOT_REGULAR", _FAIL, "a kit holds something not a regular file"
    KIT_NOT_VERIFIED = "KIT_NOT_VERIFIED", _FAIL, "the kit did not verify"
    KIT_PATH_UNSAFE = "KIT_PATH_UNSAFE", _FAIL, "a kit path the path policy refuses"
    KIT_SOURCE_NOT_REGULAR = (
        "KIT_SOURCE_NOT_REGULAR",
        _INPUT,
        "the folder to build or pack holds a link or special file",
    )
    KIT_SOURCE_PATH_UNSAFE = (
        "KIT_SOURCE_PATH_UNSAFE",
        _INPUT,
        "the folder to build holds a path the path policy refuses",
    )
    KIT_SPECIAL_FILE = "KIT_SPECIAL_FILE", _FAIL, "a FIFO, socket or device in the kit"
    KIT_SYMLINK = "KIT_SYMLINK", _FAIL, "a symlink in the kit"
    KIT_UNREADABLE = "KIT_UNREADABLE", _FAIL, "a kit file cannot be read"
    ENGINE_ENV_MALFORMED = "ENGINE_ENV_MALFORMED", _FAIL, "a kit's engine.env is malformed"
    ENGINE_NO_LAUNCHER = "ENGINE_NO_LAUNCHER", _FAIL, "no launcher for the kit's engine"
    ENGINE_VERSION_MISMATCH = "ENGINE_VERSION_MISMATCH", _FAIL, "not the pinned engine"
    NODE_NOT_READY = (
        "NODE_NOT_READY",
        _FAIL,
        "preflight: this node cannot be shown to run the profile (launch refused)",
    )
    ENGINE_SETTING_REFUSED = (
        "ENGINE_SETTING_REFUSED",
        _FAIL,
        "a signed engine setting breaks build's rules (launcher-set or unknown flag, bad type)",
    )
    ENGINE_VALUE_IS_OPTION = (
        "ENGINE_VALUE_IS_OPTION",
        _FAIL,
        "a signed setting's value would be read by the engine as an option",
    )
    ENGINE_LOADS_UNDECLARED = (
        "ENGINE_LOADS_UNDECLARED",
        _FAIL,
        "a signed setting loads code or files from outside the kit, undeclared",
    )
    ENGINE_SNAPSHOT_REFUSED = (
        "ENGINE_SNAPSHOT_REFUSED",
        _FAIL,
        "a kit's engine-snapshot.json is malformed or not the one kit.json names",
    )
    MANIFEST_MALFORMED = "MANIFEST_MALFORMED", _FAIL, "MANIFEST.json is malformed"
    EVIDENCE_FILE_CHANGED = (
        "EVIDENCE_FILE_CHANGED",
        _FAIL,
        "an evidence file's size or sha256 differs from the receipt's",
    )
    EVIDENCE_FILE_EXTRA = "EVIDENCE_FILE_EXTRA", _FAIL, "evidence not listed in the receipt"
    EVIDENCE_FILE_MISSING = "EVIDENCE_FILE_MISSING", _FAIL, "listed evidence is absent"
    INSTALL_CONFLICT = "INSTALL_CONFLICT", _FAIL, "another kit is installed there"
    INSTALL_DIR_INVALID = "INSTALL_DIR_INVALID", _INPUT, "the install folder is not usable"
    PACK_NOT_A_KIT = "PACK_NOT_A_KIT", _INPUT, "the folder to pack is not a kit"
    PACK_OPTIONS = "PACK_OPTIONS", _INPUT, "pack options exclude each other"
    PACK_SIGNED_NAME = "PACK_SIGNED_NAME", _INPUT, "a signed archive needs a plain name"
    PACK_UNSIGNED_HAS_RECEIPT = (
        "PACK_UNSIGNED_HAS_RECEIPT",
        _INPUT,
        "--unsigned given for a kit that has a receipt",
    )
    PACK_UNSIGNED_NAME = "PACK_UNSIGNED_NAME", _INPUT, "an unsigned archive must say so"
    OUTPUT_NOT_A_KIT = "OUTPUT_NOT_A_KIT", _INPUT, "--force would replace a non-kit folder"
    VERIFICATION_FAILED = "VERIFICATION_FAILED", _FAIL, "a check failed (generic)"
    NOT_VERIFIED = "NOT_VERIFIED", _FAIL, "a verdict was not a pass"


class ReceiptCode(ErrorCode):
    """The signed receipt: DSSE envelope, Statement, subjects."""

    RECEIPT_KIT_MISMATCH = "RECEIPT_KIT_MISMATCH", _FAIL, "kit checksum != kit subject"
    RECEIPT_MALFORMED = "RECEIPT_MALFORMED", _FAIL, "the envelope or Statement is malformed"
    RECEIPT_MISSING = "RECEIPT_MISSING", _FAIL, "no readable receipt.dsse.json"
    RECEIPT_TOO_LARGE = "RECEIPT_TOO_LARGE", _FAIL, "the receipt is over the 1 MiB cap"
    RECEIPT_WOULD_BE_TOO_LARGE = (
        "RECEIPT_WOULD_BE_TOO_LARGE",
        _INPUT,
        "sign refuses to write a receipt no verifier will read",
    )
    RECEIPT_UNTRUSTED_KEY = "RECEIPT_UNTRUSTED_KEY", _FAIL, "no trusted key signed it"
    RECEIPT_WRONG_TYPE = "RECEIPT_WRONG_TYPE", _FAIL, "wrong payloadType or predicateType"
    RECEIPT_WEIGHTS_MISMATCH = (
        "RECEIPT_WEIGHTS_MISMATCH",
        _FAIL,
        "weight checksum != weights subject",
    )
    RECEIPT_KEY_OUTSIDE_VALIDITY = (
        "RECEIPT_KEY_OUTSIDE_VALIDITY",
        _FAIL,
        "signed outside the key's validity window",
    )
    RECEIPT_KEY_REVOKED = "RECEIPT_KEY_REVOKED", _FAIL, "signed by a revoked key"
    RECEIPT_THRESHOLD_NOT_MET = (
        "RECEIPT_THRESHOLD_NOT_MET",
        _FAIL,
        "fewer distinct trusted signatures than the threshold",
    )
    SIGN_KIT_CHANGED = "SIGN_KIT_CHANGED", _INPUT, "sign refuses a kit that left its manifest"
    ALREADY_SIGNED = "ALREADY_SIGNED", _INPUT, "the kit already has a receipt"
    CLAIMS_KIT_MISMATCH = "CLAIMS_KIT_MISMATCH", _INPUT, "the claims describe another kit"
    EVIDENCE_LEVEL_MISMATCH = (
        "EVIDENCE_LEVEL_MISMATCH",
        _INPUT,
        "the claims' evidence level disagrees with the files",
    )
    EVIDENCE_MALFORMED = "EVIDENCE_MALFORMED", _INPUT, "a benchmark result file is malformed"
    EVIDENCE_MISSING = "EVIDENCE_MISSING", _INPUT, "a benchmark result file named is absent"
    JSON_MALFORMED = "JSON_MALFORMED", _FAIL, "not strict JSON"
    JSON_NOT_CANONICAL = "JSON_NOT_CANONICAL", _FAIL, "signed JSON not in RFC 8785 form"


class TrustCode(ErrorCode):
    """Trusted keys, the root of trust, rollback state."""

    TRUST_EMPTY = (
        "TRUST_EMPTY",
        _USAGE,
        "no trusted key was given (--trust KEY.pub, or --root where the verb takes it)",
    )
    TRUST_DUPLICATE_KEY = "TRUST_DUPLICATE_KEY", _INPUT, "the same key was given twice"
    TRUST_NEEDS_KIT = "TRUST_NEEDS_KIT", _INPUT, "--trust needs a kit, not a bare lock"
    TRUST_ANCHOR_UNSAFE = (
        "TRUST_ANCHOR_UNSAFE",
        _ENV,
        "another user could have put or replaced a --trust key, --root or --site file",
    )
    ROOT_CHAIN_GAP = "ROOT_CHAIN_GAP", _FAIL, "a root version is missing from the chain"
    ROOT_CHAIN_MALFORMED = "ROOT_CHAIN_MALFORMED", _FAIL, "root/ holds a bad entry"
    ROOT_EXPIRED = "ROOT_EXPIRED", _FAIL, "the newest root has expired"
    ROOT_FORK = (
        "ROOT_FORK",
        _FAIL,
        "two different roots of one version, both offered or accepted (a root key was misused)",
    )
    ROOT_INVALID = "ROOT_INVALID", _INPUT, "a root edit or root file given is invalid"
    ROOT_MALFORMED = "ROOT_MALFORMED", _FAIL, "a root document is malformed"
    KEY_WEAK = (
        "KEY_WEAK",
        _FAIL,
        "an Ed25519 public key that is non-canonical or of small order (it verifies forgeries)",
    )
    ROOT_UNTRUSTED = "ROOT_UNTRUSTED", _FAIL, "a root is not signed by its threshold"
    ROOT_VERSION = "ROOT_VERSION", _FAIL, "a root's version is not the expected one"
    ROOT_WRONG_TYPE = "ROOT_WRONG_TYPE", _FAIL, "a root has the wrong payload type"
    ROLLBACK = "ROLLBACK", _FAIL, "the sequence is below one this node accepted"
    EQUIVOCATION = "EQUIVOCATION", _FAIL, "same sequence or same version, different kit"
    ROLLBACK_STATE_INVALID = "ROLLBACK_STATE_INVALID", _FAIL, "the state file is corrupt"
    ROLLBACK_STATE_UNAVAILABLE = (
        "ROLLBACK_STATE_UNAVAILABLE",
        _ENV,
        "the rollback state folder is absent or cannot be opened",
    )
    ROLLBACK_STATE_NOT_GIVEN = (
        "ROLLBACK_STATE_NOT_GIVEN",
        _FAIL,
        "a root promises rollback protection and no state folder was given (fails closed)",
    )
    SSHSIG_INVALID = "SSHSIG_INVALID", _FAIL, "an SSH signature does not verify"
    STATE_DIR_MISSING = "STATE_DIR_MISSING", _INPUT, "--root needs a state folder"
    STATE_LOST = (
        "STATE_LOST",
        _FAIL,
        "part of the node's rollback or root memory vanished from its state folder",
    )


class WeightsCode(ErrorCode):
    """A weights folder against its lock (``k3kit.weights``, ``k3kit.weights.layouts``)."""

    WEIGHTS_AMBIGUOUS = "WEIGHTS_AMBIGUOUS", _FAIL, "the folder has more than one meaning"
    WEIGHTS_BAD_NAME = "WEIGHTS_BAD_NAME", _FAIL, "a file name is not printable UTF-8"
    WEIGHTS_DIFFER = "WEIGHTS_DIFFER", _FAIL, "the weights depart from the lock"
    WEIGHTS_DIGEST_MISMATCH = "WEIGHTS_DIGEST_MISMATCH", _FAIL, "a file's digest differs"
    WEIGHTS_EMPTY = "WEIGHTS_EMPTY", _FAIL, "the lock lists no file"
    WEIGHTS_FILE_EXTRA = "WEIGHTS_FILE_EXTRA", _FAIL, "a file not in the lock"
    WEIGHTS_FILE_MISSING = "WEIGHTS_FILE_MISSING", _FAIL, "a locked file is absent"
    WEIGHTS_MISSING_SNAPSHOT = "WEIGHTS_MISSING_SNAPSHOT", _FAIL, "no snapshot for the commit"
    WEIGHTS_NOT_FOUND = "WEIGHTS_NOT_FOUND", _FAIL, "the weights folder does not exist"
    WEIGHTS_NOT_GIVEN = "WEIGHTS_NOT_GIVEN", _INPUT, "no weights folder was given"
    WEIGHTS_NOT_REGULAR = "WEIGHTS_NOT_REGULAR", _FAIL, "not a regular file"
    WEIGHTS_NO_BLAKE3 = "WEIGHTS_NO_BLAKE3", _FAIL, "blake3 asked for, the lock has none"
    WEIGHTS_ROOT_NOT_REAL = "WEIGHTS_ROOT_NOT_REAL", _FAIL, "the folder moved after hashing"
    WEIGHTS_SIZE_MISMATCH = "WEIGHTS_SIZE_MISMATCH", _FAIL, "a file is larger than locked"
    WEIGHTS_SYMLINK_CHAIN = "WEIGHTS_SYMLINK_CHAIN", _FAIL, "a link resolves via another"
    WEIGHTS_SYMLINK_ESCAPE = "WEIGHTS_SYMLINK_ESCAPE", _FAIL, "a link leaves the repo blobs"
    WEIGHTS_TRUNCATED = "WEIGHTS_TRUNCATED", _FAIL, "a file is smaller than locked"
    WEIGHTS_WALK_FAILED = "WEIGHTS_WALK_FAILED", _FAIL, "a folder entry cannot be read"
    WEIGHTS_WRONG_REPO = "WEIGHTS_WRONG_REPO", _FAIL, "the cache holds another repo"
    WEIGHTS_WRONG_REVISION = "WEIGHTS_WRONG_REVISION", _FAIL, "the snapshot is not the pin"
    LOCK_MALFORMED = "LOCK_MALFORMED", _INPUT, "weights.lock.json is malformed"
    LOCK_MISSING = "LOCK_MISSING", _INPUT, "no weights lock where one was named"
    LOCK_NOT_CANONICAL = "LOCK_NOT_CANONICAL", _INPUT, "a lock given is not in RFC 8785 form"
    LOCK_REPO_MISMATCH = "LOCK_REPO_MISMATCH", _INPUT, "the lock pins another repo"
    HASH_LOCAL_FILE_SET = "HASH_LOCAL_FILE_SET", _INPUT, "the local folder's file set differs"
    HASH_LOCAL_MISMATCH = "HASH_LOCAL_MISMATCH", _FAIL, "local bytes != hub's sha256"
    # Per-file outcomes of k3kit.weights.hashpool, mapped to WEIGHTS_* by its callers.
    TRUNCATED = "TRUNCATED", _FAIL, "hash pool: fewer bytes read than locked"
    DIGEST_MISMATCH = "DIGEST_MISMATCH", _FAIL, "hash pool: digest differs"
    NOT_REGULAR = "NOT_REGULAR", _FAIL, "hash pool: not a regular file"
    UNREADABLE = "UNREADABLE", _FAIL, "hash pool: cannot be read"


class HubCode(ErrorCode):
    """Pinning from and pulling from the Hugging Face Hub."""

    HUB_AUTH = "HUB_AUTH", _ENV, "the hub refused the token (401/403)"
    HUB_BAD_ANSWER = "HUB_BAD_ANSWER", _ENV, "the hub answered something unusable"
    HUB_DOWNLOAD_FAILED = "HUB_DOWNLOAD_FAILED", _ENV, "a download failed"
    HUB_FILE_NOT_FOUND = "HUB_FILE_NOT_FOUND", _ENV, "the file is not at that revision"
    HUB_HTTP_ERROR = "HUB_HTTP_ERROR", _ENV, "another HTTP error"
    HUB_NOT_FOUND = "HUB_NOT_FOUND", _ENV, "404 from the hub"
    HUB_OVERSIZED = "HUB_OVERSIZED", _FAIL, "the hub sent more bytes than locked"
    HUB_RATE_LIMITED = "HUB_RATE_LIMITED", _ENV, "429 from the hub"
    HUB_REPO_NOT_FOUND = "HUB_REPO_NOT_FOUND", _ENV, "no such repo (or no access)"
    HUB_REVISION_NOT_FOUND = "HUB_REVISION_NOT_FOUND", _ENV, "no such revision"
    HUB_SIZE_MISMATCH = "HUB_SIZE_MISMATCH", _FAIL, "downloaded size != locked size"
    HUB_TIMEOUT = "HUB_TIMEOUT", _ENV, "the hub did not answer in time"
    HUB_UNAVAILABLE = "HUB_UNAVAILABLE", _ENV, "5xx from the hub"
    HUB_UNREACHABLE = "HUB_UNREACHABLE", _ENV, "no connection to the hub"
    LOCAL_IO_ERROR = "LOCAL_IO_ERROR", _ENV, "a local write failed during a download"
    DIR_UNUSABLE = "DIR_UNUSABLE", _ENV, "the pull folder cannot be used"
    PULL_LINK_PLANTED = "PULL_LINK_PLANTED", _FAIL, "a link was planted in the folder"
    PULL_NOT_VERIFIED = "PULL_NOT_VERIFIED", _FAIL, "pulled bytes did not verify"
    PULL_PATH_BLOCKED = "PULL_PATH_BLOCKED", _FAIL, "something blocks a lock path"
    PULL_FILE_FOREIGN = (
        "PULL_FILE_FOREIGN",
        _FAIL,
        "a weight file found in place belongs to another user or others can write it",
    )
    PULL_QUARANTINE_FAILED = "PULL_QUARANTINE_FAILED", _ENV, "cannot move aside a bad file"
    PULL_QUARANTINE_UNSAFE = "PULL_QUARANTINE_UNSAFE", _ENV, "the quarantine is unsafe"
    PULL_STOPPED = "PULL_STOPPED", _ENV, "stopped after another file's failure"


class InputCode(ErrorCode):
    """Bad input from the caller (exit 3): definitions, options, refused overwrites."""

    BAD_INPUT = "BAD_INPUT", _INPUT, "malformed input (generic)"
    BAD_ENDPOINT = "BAD_ENDPOINT", _INPUT, "HF_ENDPOINT is not a usable URL"
    BAD_PROXY_SETTING = (
        "BAD_PROXY_SETTING",
        _INPUT,
        "a proxy or TLS variable of the environment (HTTPS_PROXY, ALL_PROXY, ...) is unusable",
    )
    BAD_REPO_ID = "BAD_REPO_ID", _INPUT, "not a hub repo id"
    DEPLOY_TARGET_UNKNOWN = (
        "DEPLOY_TARGET_UNKNOWN",
        _INPUT,
        "package.toml's [deploy] targets names a deploy target k3kit does not have",
    )
    DEPLOY_TARGET_NO_PD = (
        "DEPLOY_TARGET_NO_PD",
        _INPUT,
        "a chosen deploy target cannot run the package's prefill/decode pools",
    )
    ENGINE_SETTING_INVALID = "ENGINE_SETTING_INVALID", _INPUT, "a flag the engine refuses"
    ENGINE_UNKNOWN = "ENGINE_UNKNOWN", _INPUT, "no flag snapshot for the engine"
    ENGINE_SNAPSHOT_INVALID = (
        "ENGINE_SNAPSHOT_INVALID",
        _INPUT,
        "an --engine-snapshot file is malformed or for another engine version",
    )
    ENGINE_WHEEL_UNUSABLE = (
        "ENGINE_WHEEL_UNUSABLE",
        _INPUT,
        "the engine wheel cannot be read, or its parser not introspected",
    )
    ENV_VALUE = "ENV_VALUE", _INPUT, "a value that cannot be written to an env file"
    INPUT_MISSING = "INPUT_MISSING", _INPUT, "an input file is absent"
    NOTHING_TO_PIN = "NOTHING_TO_PIN", _INPUT, "the selection matches no file"
    OUTPUT_EXISTS = "OUTPUT_EXISTS", _INPUT, "the output exists and --force was not given"
    OUTPUT_NOT_OURS = (
        "OUTPUT_NOT_OURS",
        _INPUT,
        "--force would replace what k3kit did not write (a folder without its marker, a link)",
    )
    WEIGHTS_OPTION_INVALID = (
        "WEIGHTS_OPTION_INVALID",
        _INPUT,
        "a WeightsOptions value is out of range (workers, algorithm)",
    )
    PASSPHRASE_MISSING = "PASSPHRASE_MISSING", _INPUT, "the key needs a passphrase"
    SIGNER_URI_INVALID = (
        "SIGNER_URI_INVALID",
        _INPUT,
        "--key is an unknown scheme or a URI that does not name exactly one private key",
    )
    PATH_REFUSED = "PATH_REFUSED", _INPUT, "a path the path policy refuses"
    PATTERN_MATCHES_NOTHING = "PATTERN_MATCHES_NOTHING", _INPUT, "an --include matches nothing"
    PATTERN_REFUSED = (
        "PATTERN_REFUSED",
        _INPUT,
        "a regular expression does not compile, is too long or could backtrack for ever",
    )
    PROFILE_UNKNOWN = "PROFILE_UNKNOWN", _INPUT, "no such profile in the kit"
    REPO_MISMATCH = "REPO_MISMATCH", _INPUT, "the repo differs from the definition's"
    REVISION_MISMATCH = "REVISION_MISMATCH", _INPUT, "the revision differs from the definition's"
    REVISION_NOT_COMMIT = "REVISION_NOT_COMMIT", _INPUT, "not a 40-hex commit"
    SITE_INVALID = "SITE_INVALID", _INPUT, "the site env file is invalid"
    TEMPLATE_ERROR = "TEMPLATE_ERROR", _INPUT, "a template failed to render"
    TOKEN_ENV_EMPTY = "TOKEN_ENV_EMPTY", _INPUT, "the token variable is empty"
    TOKEN_OVER_HTTP = "TOKEN_OVER_HTTP", _INPUT, "a token would go over plain HTTP"
    TOPOLOGY_UNKNOWN = "TOPOLOGY_UNKNOWN", _INPUT, "no such topology in the profile"


class EnvironmentCode(ErrorCode):
    """The machine got in the way (exit 4): files, keys, engines, I/O."""

    ENVIRONMENT = "ENVIRONMENT", _ENV, "environment problem (generic)"
    DISK_UNWRITABLE = (
        "DISK_UNWRITABLE",
        _ENV,
        "a disk written to is full, over quota, read-only or failing (ENOSPC, EDQUOT, EROFS, EIO)",
    )
    DISK_TOO_SMALL = (
        "DISK_TOO_SMALL",
        _ENV,
        "the disk has less free space than the bytes still to be written (checked before any)",
    )
    ENGINE_NOT_FOUND = "ENGINE_NOT_FOUND", _ENV, "the engine executable is not installed"
    EXTRA_NOT_INSTALLED = (
        "EXTRA_NOT_INSTALLED",
        _ENV,
        "an optional dependency of this command is not installed (pip install 'k3kit[EXTRA]')",
    )
    ENGINE_CANNOT_START = (
        "ENGINE_CANNOT_START",
        _ENV,
        "the engine exits in error, dies by a signal or hangs when asked its version",
    )
    ENGINE_PATH_UNSAFE = (
        "ENGINE_PATH_UNSAFE",
        _ENV,
        "the engine found on PATH is one another user could have placed or changed",
    )
    INSTALL_DIR_UNSAFE = "INSTALL_DIR_UNSAFE", _ENV, "another user can write the install folder"
    INSTALL_INCOMPLETE = "INSTALL_INCOMPLETE", _ENV, "k3kit's own files are missing"
    INSTALL_TARGET_FOREIGN = (
        "INSTALL_TARGET_FOREIGN",
        _ENV,
        "NAME-VERSION exists but k3kit did not install it (owner, mode)",
    )
    HSM_KEY_NOT_FOUND = (
        "HSM_KEY_NOT_FOUND",
        _ENV,
        "no PKCS#11 token, private key or public key object matches the --key URI",
    )
    HSM_PIN = "HSM_PIN", _ENV, "the PKCS#11 token refused the PIN, or none was given"
    HSM_SIGN_FAILED = (
        "HSM_SIGN_FAILED",
        _ENV,
        "the token's signature does not verify with its own public key object",
    )
    HSM_UNAVAILABLE = (
        "HSM_UNAVAILABLE",
        _ENV,
        "PyKCS11 or the PKCS#11 module cannot be loaded, or the token failed",
    )
    IO_ERROR = "IO_ERROR", _ENV, "an OSError reached the CLI"
    KEY_IS_PUBLIC = "KEY_IS_PUBLIC", _ENV, "--key was given a public key, not the private key"
    KEY_PASSPHRASE = "KEY_PASSPHRASE", _ENV, "wrong passphrase for the key"
    KEY_TOO_PERMISSIVE = "KEY_TOO_PERMISSIVE", _ENV, "the private key file is readable"
    KEY_UNREADABLE = "KEY_UNREADABLE", _ENV, "the key file cannot be read"
    KEY_UNSUPPORTED = "KEY_UNSUPPORTED", _ENV, "not an Ed25519 key"
    RUNTIME_DIR_UNSAFE = "RUNTIME_DIR_UNSAFE", _ENV, "the runtime folder is unsafe"
    STATE_DIR_UNSAFE = (
        "STATE_DIR_UNSAFE",
        _ENV,
        "a state folder (or one above it) is not private to this user",
    )


class AuditCode(ErrorCode):
    """``k3kit audit`` (its findings carry rule ids, not these codes)."""

    AUDIT_TARGET_NOT_FOUND = "AUDIT_TARGET_NOT_FOUND", _INPUT, "nothing to audit at that path"
    AUDIT_UNREADABLE = "AUDIT_UNREADABLE", _FAIL, "a file audit hashes cannot be read"


class DeployCode(ErrorCode):
    """Deploy files, site values, multi-node runtime values and the node check."""

    MODEL_CONFIG_MISMATCH = (
        "MODEL_CONFIG_MISMATCH",
        _INPUT,
        "the package's model facts disagree with the locked config.json",
    )
    MODEL_CONFIG_NOT_LOCKED = (
        "MODEL_CONFIG_NOT_LOCKED",
        _INPUT,
        "the config.json given is not the one the lock pins",
    )
    RUNTIME_NOT_MULTI_NODE = (
        "RUNTIME_NOT_MULTI_NODE",
        _INPUT,
        "node rank and leader were given for a single-node topology",
    )
    RUNTIME_VALUES_INVALID = "RUNTIME_VALUES_INVALID", _INPUT, "a node rank or leader is unusable"
    LAUNCH_ADDRESS_INVALID = (
        "LAUNCH_ADDRESS_INVALID",
        _INPUT,
        "the listen host or port given to launch is unusable",
    )
    RUNTIME_VALUES_MISSING = (
        "RUNTIME_VALUES_MISSING",
        _INPUT,
        "a multi-node launch needs both --node-rank and --leader",
    )
    SERVE_CONFIG_MALFORMED = (
        "SERVE_CONFIG_MALFORMED",
        _FAIL,
        "the signed serve configuration cannot be read",
    )
    DEPLOY_FILE_MALFORMED = (
        "DEPLOY_FILE_MALFORMED",
        _FAIL,
        "a signed deploy file render-site fills is not UTF-8 text",
    )
    SITE_LOCKED_VALUE = (
        "SITE_LOCKED_VALUE",
        _INPUT,
        "a site file tries to set a value the kit locks",
    )


class AcceptCode(ErrorCode):
    """The buyer's acceptance test (``k3kit accept``)."""

    ACCEPTANCE_INTERNAL = (
        "ACCEPTANCE_INTERNAL",
        _INPUT,
        "the acceptance report could not be assembled from the measured runs",
    )
    BAD_POINTS = "BAD_POINTS", _INPUT, "--points is not a list of concurrencies"
    BAD_URL = "BAD_URL", _INPUT, "--url is not an http(s) URL of a server"
    KIT_NOT_A_DIRECTORY = "KIT_NOT_A_DIRECTORY", _INPUT, "accept needs an installed kit folder"
    NO_POINTS = "NO_POINTS", _INPUT, "the receipt has no closed-loop runs to reproduce"
    PROFILE_REQUIRED = "PROFILE_REQUIRED", _INPUT, "the kit has several profiles: pass --profile"
    PROMPT_LENGTH = "PROMPT_LENGTH", _INPUT, "a prompt of the signed length cannot be built"
    TOKENIZER_CHANGED = (
        "TOKENIZER_CHANGED",
        _FAIL,
        "tokenizer.json changed after the weights were verified",
    )
    TOKENIZER_MISSING = "TOKENIZER_MISSING", _INPUT, "the weights carry no tokenizer.json"
    TOKENIZER_UNUSABLE = "TOKENIZER_UNUSABLE", _INPUT, "tokenizer.json cannot be loaded"


class CardCode(ErrorCode):
    """``show``, ``card`` and ``release-notes``."""

    BAD_GPU_HOUR_PRICE = "BAD_GPU_HOUR_PRICE", _INPUT, "--gpu-hour-usd is not a positive price"
    KIT_SETTINGS_MALFORMED = (
        "KIT_SETTINGS_MALFORMED",
        _FAIL,
        "a verified profile file cannot be read for the card",
    )


class CommerceCode(ErrorCode):
    """The enterprise tier: licences, the ledger, buyer receipts."""

    BUYER_RECEIPT_MISSING = "BUYER_RECEIPT_MISSING", _FAIL, "the buyer receipt cannot be read"
    BUYER_RECEIPT_NEEDS_TRUST = (
        "BUYER_RECEIPT_NEEDS_TRUST",
        _FAIL,
        "a buyer receipt is checked with --trust keys, not --root",
    )
    BUYER_RECEIPT_WRONG_KIT = (
        "BUYER_RECEIPT_WRONG_KIT",
        _FAIL,
        "the buyer receipt is for another kit",
    )
    BUYER_RECEIPT_WRONG_LICENCE = (
        "BUYER_RECEIPT_WRONG_LICENCE",
        _FAIL,
        "the buyer receipt is bound to another licence",
    )
    ENTITLEMENT_NOT_VALID_AT_RELEASE = (
        "ENTITLEMENT_NOT_VALID_AT_RELEASE",
        _FAIL,
        "the kit was released outside the entitlement's term",
    )
    ENTITLEMENT_OTHER_PACKAGE = (
        "ENTITLEMENT_OTHER_PACKAGE",
        _FAIL,
        "the entitlement is for another package",
    )
    ENTITLEMENT_UNKNOWN = "ENTITLEMENT_UNKNOWN", _INPUT, "no such entitlement in the ledger"
    LEDGER_ANCHOR_BROKEN = (
        "LEDGER_ANCHOR_BROKEN",
        _FAIL,
        "the chain does not extend a head the seller signed (rewritten or cut at or before it)",
    )
    LEDGER_ANCHOR_NEEDS_TRUST = (
        "LEDGER_ANCHOR_NEEDS_TRUST",
        _INPUT,
        "a signed head (--checkpoint) is checked with --trust keys",
    )
    LEDGER_CHECKPOINT_MALFORMED = (
        "LEDGER_CHECKPOINT_MALFORMED",
        _FAIL,
        "a ledger checkpoint is malformed",
    )
    LEDGER_CHECKPOINT_UNTRUSTED_KEY = (
        "LEDGER_CHECKPOINT_UNTRUSTED_KEY",
        _FAIL,
        "no --trust key signed the ledger checkpoint",
    )
    LEDGER_CHECKPOINT_WRONG_TYPE = (
        "LEDGER_CHECKPOINT_WRONG_TYPE",
        _FAIL,
        "the file is neither a ledger checkpoint nor a buyer receipt",
    )
    LEDGER_NOT_INTACT = (
        "LEDGER_NOT_INTACT",
        _FAIL,
        "ledger checkpoint: the ledger does not verify, so no head is signed",
    )
    LEDGER_APPEND_ONLY = "LEDGER_APPEND_ONLY", _INPUT, "the database refused an UPDATE or DELETE"
    LEDGER_CONSTRAINT = "LEDGER_CONSTRAINT", _INPUT, "the database refused a row (a constraint)"
    LEDGER_NOT_FOUND = (
        "LEDGER_NOT_FOUND",
        _INPUT,
        "no SQLite ledger at --db (a verb that only reads never creates one)",
    )
    LEDGER_NOT_INITIALISED = "LEDGER_NOT_INITIALISED", _INPUT, "run `k3kit ledger init` first"
    LEDGER_ROW = "LEDGER_ROW", _FAIL, "a ledger row breaks the hash chain or its signature"
    LEDGER_UNAVAILABLE = "LEDGER_UNAVAILABLE", _ENV, "the ledger database cannot be reached"
    LEDGER_UNTRUSTED_ISSUER = (
        "LEDGER_UNTRUSTED_ISSUER",
        _FAIL,
        "a buyer receipt in the ledger is signed by a key not trusted",
    )
    LEDGER_URL = "LEDGER_URL", _INPUT, "not a sqlite:/// or postgresql:// URL"
    LICENCE_AFFIRMATION_DUPLICATE = (
        "LICENCE_AFFIRMATION_DUPLICATE",
        _INPUT,
        "an affirmation was given twice",
    )
    LICENCE_AFFIRMATION_MISSING = (
        "LICENCE_AFFIRMATION_MISSING",
        _FAIL,
        "a signed licence lacks one of the required affirmations",
    )
    LICENCE_AFFIRMATION_NOT_GIVEN = (
        "LICENCE_AFFIRMATION_NOT_GIVEN",
        _INPUT,
        "licence sign: each affirmation must be given with its own --affirm",
    )
    LICENCE_AFFIRMATION_TEXT = (
        "LICENCE_AFFIRMATION_TEXT",
        _FAIL,
        "an affirmation was signed with another text",
    )
    LICENCE_AFFIRMATION_UNKNOWN = (
        "LICENCE_AFFIRMATION_UNKNOWN",
        _INPUT,
        "no affirmation has that id",
    )
    LICENCE_MISSING = "LICENCE_MISSING", _FAIL, "the licence file cannot be read"
    LICENCE_OTHER_PACKAGE = (
        "LICENCE_OTHER_PACKAGE",
        _FAIL,
        "the licence was signed for another package",
    )
    LICENCE_OTHER_PRICE = (
        "LICENCE_OTHER_PRICE",
        _FAIL,
        "the payment or term differs from the price the licence signs",
    )
    LICENCE_TERMS_MISMATCH = "LICENCE_TERMS_MISMATCH", _FAIL, "the licence signs other terms"
    LICENCE_UNTRUSTED_KEY = "LICENCE_UNTRUSTED_KEY", _FAIL, "the licence's signer is not trusted"
    PAYMENT_EXISTS = "PAYMENT_EXISTS", _INPUT, "a payment with that reference is recorded"
    BUYER_RECEIPT_EXISTS = (
        "BUYER_RECEIPT_EXISTS",
        _INPUT,
        "the entitlement already has a buyer receipt for this kit (one per entitlement and kit)",
    )


class ChannelCode(ErrorCode):
    """The maintenance channel on TUF (``k3kit publish --channel``, ``k3kit update``)."""

    CHANNEL_FROZEN = (
        "CHANNEL_FROZEN",
        _FAIL,
        "the channel's signed metadata has expired: the server is frozen or replaying old files",
    )
    CHANNEL_ROLLBACK = (
        "CHANNEL_ROLLBACK",
        _FAIL,
        "the channel served metadata older than what this node already trusts",
    )
    CHANNEL_INCONSISTENT = (
        "CHANNEL_INCONSISTENT",
        _FAIL,
        "metadata or a kit does not match the length and hashes its signed parent lists",
    )
    CHANNEL_UNTRUSTED = (
        "CHANNEL_UNTRUSTED",
        _FAIL,
        "channel metadata is not signed by its role's threshold of keys in the trusted root",
    )
    CHANNEL_OUT_OF_TERM = (
        "CHANNEL_OUT_OF_TERM",
        _FAIL,
        "the version was released after the buyer's entitlement term ended",
    )
    CHANNEL_INVALID = (
        "CHANNEL_INVALID",
        _FAIL,
        "the channel's metadata or a release entry in it is malformed or refused",
    )
    CHANNEL_NO_RELEASE = (
        "CHANNEL_NO_RELEASE",
        _FAIL,
        "the channel lists no release of that package (or not the version asked for)",
    )
    CHANNEL_PACKAGE_AMBIGUOUS = (
        "CHANNEL_PACKAGE_AMBIGUOUS",
        _INPUT,
        "the channel holds several packages and --package was not given",
    )
    CHANNEL_TARGET_MISMATCH = (
        "CHANNEL_TARGET_MISMATCH",
        _FAIL,
        "the kit's own receipt names another package, version or checksum than its channel entry",
    )
    CHANNEL_UNREACHABLE = (
        "CHANNEL_UNREACHABLE",
        _ENV,
        "the channel's server cannot be reached or answered with an HTTP error",
    )
    CHANNEL_URL_REFUSED = (
        "CHANNEL_URL_REFUSED",
        _INPUT,
        "the channel URL is not https (or http to this machine), or carries credentials",
    )
    CHANNEL_REDIRECT_REFUSED = (
        "CHANNEL_REDIRECT_REFUSED",
        _ENV,
        "the channel's server redirected to plain http elsewhere, or into this machine",
    )
    CHANNEL_KEYS_MISSING = (
        "CHANNEL_KEYS_MISSING",
        _INPUT,
        "the --key signers given do not reach a role's threshold in the channel's root",
    )
    CHANNEL_REPO_INVALID = (
        "CHANNEL_REPO_INVALID",
        _INPUT,
        "the --repo folder is not a channel repository k3kit can extend",
    )
    CHANNEL_VERSION_EXISTS = (
        "CHANNEL_VERSION_EXISTS",
        _INPUT,
        "the channel already holds another kit under that package and version",
    )
    CHANNEL_KIT_UNVERIFIED = (
        "CHANNEL_KIT_UNVERIFIED",
        _FAIL,
        "publish refused a kit archive that does not verify against the publisher's trust",
    )
    CHANNEL_ROTATION_INVALID = (
        "CHANNEL_ROTATION_INVALID",
        _INPUT,
        "a key rotation would leave a role without keys or with a threshold it cannot meet",
    )


class CliCode(ErrorCode):
    """Codes only the CLI's error mapping emits."""

    K3KIT_ERROR = "K3KIT_ERROR", _BUG, "an error without a code (a bug)"
    INTERNAL_ERROR = "INTERNAL_ERROR", _BUG, "an unexpected exception (a bug)"
    CLICK_ERROR = "CLICK_ERROR", _USAGE, "a usage error found by click"
    USAGE = "USAGE", _USAGE, "a usage error: an option missing or malformed (see --help)"


class OciCode(ErrorCode):
    """OCI registries: ``push`` and ``oci://`` sources (``k3kit.oci``, docs/oci.md)."""

    OCI_REF_INVALID = (
        "OCI_REF_INVALID",
        _INPUT,
        "not an oci://HOST/REPO:TAG or oci://HOST/REPO@sha256:HEX reference",
    )
    OCI_PLAIN_HTTP = (
        "OCI_PLAIN_HTTP",
        _INPUT,
        "plain http to a registry that is not on this machine (loopback only)",
    )
    OCI_TAG_NOT_PINNED = (
        "OCI_TAG_NOT_PINNED",
        _INPUT,
        "a tag where a digest is needed (a registry can move a tag): use REPO@sha256:HEX",
    )
    OCI_DIGEST_MISMATCH = (
        "OCI_DIGEST_MISMATCH",
        _FAIL,
        "the registry's bytes do not hash to the digest asked for (manifest or blob)",
    )
    OCI_BLOB_OVERSIZED = (
        "OCI_BLOB_OVERSIZED",
        _FAIL,
        "a blob is longer than its descriptor says, or over the kit size cap",
    )
    OCI_MANIFEST_INVALID = (
        "OCI_MANIFEST_INVALID",
        _FAIL,
        "the manifest is not a k3kit kit artifact (media types, layers, size)",
    )
    OCI_REFERRER_NOT_VERIFIED = (
        "OCI_REFERRER_NOT_VERIFIED",
        _FAIL,
        "an attached receipt or card does not verify against the trust given and the kit",
    )
    OCI_REDIRECT_REFUSED = (
        "OCI_REDIRECT_REFUSED",
        _ENV,
        "the registry redirected to plain http off this machine, or too many times",
    )
    OCI_AUTH_REQUIRED = (
        "OCI_AUTH_REQUIRED",
        _ENV,
        "the registry asks for credentials and none is stored for it (podman/docker login)",
    )
    OCI_AUTH_FAILED = (
        "OCI_AUTH_FAILED",
        _ENV,
        "the registry (or its token service) refused the stored credentials",
    )
    OCI_AUTH_FILE_INVALID = (
        "OCI_AUTH_FILE_INVALID",
        _INPUT,
        "the registry credentials file (auth.json, config.json) is not usable",
    )
    OCI_AUTH_FILE_UNSAFE = (
        "OCI_AUTH_FILE_UNSAFE",
        _ENV,
        "another user could have written or replaced the registry credentials file",
    )
    OCI_CRED_HELPER_UNSAFE = (
        "OCI_CRED_HELPER_UNSAFE",
        _ENV,
        "the credential helper found on PATH is one another user could have placed or changed",
    )
    OCI_CRED_HELPER_FAILED = (
        "OCI_CRED_HELPER_FAILED",
        _ENV,
        "the credential helper is missing, failed, hung, or gave no usable credentials",
    )
    OCI_AUTH_REALM_REFUSED = (
        "OCI_AUTH_REALM_REFUSED",
        _ENV,
        "the registry's token service is plain http off this machine or carries a password",
    )
    OCI_NOT_FOUND = "OCI_NOT_FOUND", _ENV, "the registry has no such repository, tag or digest"
    OCI_REGISTRY_ERROR = "OCI_REGISTRY_ERROR", _ENV, "the registry refused or failed a request"
    OCI_REGISTRY_UNREACHABLE = (
        "OCI_REGISTRY_UNREACHABLE",
        _ENV,
        "no connection to the registry, or it did not answer in time",
    )


AREAS: tuple[type[ErrorCode], ...] = (
    ArchiveCode,
    KitCode,
    ReceiptCode,
    TrustCode,
    WeightsCode,
    HubCode,
    InputCode,
    EnvironmentCode,
    AuditCode,
    DeployCode,
    AcceptCode,
    CardCode,
    CommerceCode,
    ChannelCode,
    CliCode,
    OciCode,
)

REGISTRY: dict[str, ErrorCode] = {m.value: m for area in AREAS for m in area}


def lookup(code: str) -> ErrorCode | None:
    """The registered member for ``code`` (a member or its plain string), or None."""
    return REGISTRY.get(str(code))
