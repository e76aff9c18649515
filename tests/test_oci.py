"""`k3kit push` and `install oci://…@sha256:…` against a real registry (Debian's docker-registry,
the reference `distribution` 2.8, which has no referrers API): push, pull by digest, referrers
listed and verified, skopeo reading what was pushed, and the attacks a registry (or whoever can
write to it or its storage) can make: another manifest for a digest, a blob longer than its
manifest says, a receipt referrer signed by another key, a tag moved to another kit.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from k3kit.archive import pack
from tests.conftest import GoldenKit, KeyFiles, make_kit, make_snapshot, refusing_url, run_k3kit
from tests.cotenant import COTENANT_UID, cotenant_python, needs_root, shared_folder
from tests.netkit import OFF_MACHINE, loopback, recording_server, redirector, self_signed, tls_env
from tests.ocikit import (
    SKOPEO_BIN,
    LiveRegistry,
    live_registry,
    needs_registry,
    needs_skopeo,
    sha256_digest,
)

pytestmark = needs_registry
FOLDER = "kimi-k3-b300x8-1.0.0"
REPO = "kits/kimi-k3"


@pytest.fixture(scope="module")
def archive(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("oci-archive") / f"{FOLDER}.kit.tar.gz"
    pack(golden.kit, out)
    return out


@pytest.fixture(scope="module")
def other_archive(signing_key: KeyFiles, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another kit of the same name and version, signed by the same trusted key: what a tag
    can be moved to, or a registry can serve instead, without any signature check noticing."""
    root = tmp_path_factory.mktemp("oci-other")
    other = make_kit(root, signing_key, make_snapshot(root / "hf-cache", shards=2))
    out = root / f"{FOLDER}.kit.tar.gz"
    pack(other.kit, out)
    return out


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LiveRegistry]:
    """A registry of this test's own (attacks change its storage)."""
    with live_registry(tmp_path / "registry") as live:
        yield live


def k3kit_json(*args: str | Path) -> tuple[int, dict[str, Any], str]:
    proc = run_k3kit(*args, "--json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout or "{}"), proc.stderr


def push(
    reg: LiveRegistry, archive: Path, trust: Path, tag: str = ":1.0.0", *extra: str | Path
) -> str:
    rc, out, stderr = k3kit_json("push", archive, reg.ref(REPO, tag), "--trust", trust, *extra)
    assert rc == 0, stderr
    return str(out["digest"])


def install(ref: str, trust: Path, into: Path) -> tuple[int, dict[str, Any], str]:
    return k3kit_json("install", ref, "--trust", trust, "--into", into)


def error_code(out: dict[str, Any]) -> str:
    if "error" in out:
        return str(out["error"]["code"])
    failed = [c for c in out.get("checks", []) if c.get("status") == "failed"]
    return str(failed[0]["code"]) if failed else ""


# -- the genuine path -------------------------------------------------------------------------


def test_push_then_install_by_digest_installs_the_same_kit(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    digest = push(registry, archive, golden.key.public)
    rc, out, stderr = install(
        registry.ref(REPO, f"@{digest}"), golden.key.public, tmp_path / "kits"
    )
    assert rc == 0, stderr
    assert Path(out["installed"]).name == FOLDER and out["oci_digest"] == digest
    local_rc, local, _ = install(str(archive), golden.key.public, tmp_path / "local")
    assert local_rc == 0
    assert out["kit_sha256"] == local["kit_sha256"]
    assert out["archive_sha256"] == local["archive_sha256"]  # the very archive that was pushed
    assert sorted(os.listdir(tmp_path / "kits")) == [FOLDER]  # no staging left behind


def test_install_by_digest_reports_the_reference_not_its_deleted_download(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The kit is downloaded into a staging folder that is gone when install returns: the
    report's ``kit`` (in --json and from the library) names the reference it came from."""
    from k3kit import api
    from k3kit.signing.keys import load_public

    ref = registry.ref(REPO, f"@{push(registry, archive, golden.key.public)}")
    rc, out, stderr = install(ref, golden.key.public, tmp_path / "kits")
    assert rc == 0, stderr
    assert out["kit"] == ref and ".install-" not in stderr
    done, _ = api.install_kit_from_registry(
        ref, [load_public(golden.key.public)], tmp_path / "again"
    )
    assert done.report.kit == ref and done.path.is_dir()


def test_pushing_the_same_kit_twice_gives_the_same_digest(
    registry: LiveRegistry, archive: Path, golden: GoldenKit
) -> None:
    first = push(registry, archive, golden.key.public)
    assert push(registry, archive, golden.key.public, ":again") == first


def test_push_refuses_a_kit_that_does_not_verify_and_pushes_nothing(
    registry: LiveRegistry, archive: Path, other_key: KeyFiles
) -> None:
    rc, out, _ = k3kit_json(
        "push", archive, registry.ref(REPO, ":1.0.0"), "--trust", other_key.public
    )
    assert rc == 1 and out["pushed"] is None
    assert not (registry.storage / "docker/registry/v2/repositories").exists()


@needs_skopeo
def test_skopeo_inspect_reads_what_was_pushed(
    registry: LiveRegistry, archive: Path, golden: GoldenKit
) -> None:
    digest = push(registry, archive, golden.key.public)
    assert SKOPEO_BIN is not None
    where = f"docker://{registry.host}/{REPO}:1.0.0"
    raw = subprocess.run(
        [SKOPEO_BIN, "inspect", "--tls-verify=false", "--raw", where],
        capture_output=True,
        check=True,
    ).stdout
    assert sha256_digest(raw) == digest
    manifest = json.loads(raw)
    assert manifest["artifactType"] == "application/vnd.k3kit.kit.v1"
    assert manifest["config"]["mediaType"] == "application/vnd.oci.empty.v1+json"
    (layer,) = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.k3kit.kit.v1+tar+gzip"
    assert layer["size"] == archive.stat().st_size
    # Without --raw, skopeo 1.9 refuses any artifact that is not a container image ("unsupported
    # image-specific operation on artifact"): --raw is the way to read an artifact's manifest.
    fallback = subprocess.run(
        [
            SKOPEO_BIN,
            "inspect",
            "--tls-verify=false",
            "--raw",
            f"docker://{registry.host}/{REPO}:{digest.replace(':', '-')}",
        ],
        capture_output=True,
        check=True,
    ).stdout
    listed = json.loads(fallback)["manifests"]
    assert [m["artifactType"] for m in listed] == ["application/vnd.k3kit.receipt.v1"]


def test_referrers_are_listed_and_verified_through_the_fallback_tag(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    report = tmp_path / "acceptance.json"
    report.write_text('{"ok": true}\n')
    digest = push(registry, archive, golden.key.public, ":1.0.0", "--attach", report)
    rc, out, stderr = k3kit_json(
        "push", "--list-referrers", registry.ref(REPO, f"@{digest}"), "--trust", golden.key.public
    )
    assert rc == 0, stderr
    assert out["ok"] is True and out["oci_digest"] == digest
    assert out["referrers_from"] == f"tag {digest.replace(':', '-')}"  # registry 2.8: no API
    by_title = {r["title"]: r for r in out["referrers"]}
    assert set(by_title) == {"receipt.dsse.json", "acceptance.json"}
    assert by_title["receipt.dsse.json"]["status"] == "verified"
    assert by_title["acceptance.json"]["status"] == "unchecked"


def test_install_by_tag_is_refused_with_the_digest_form(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    push(registry, archive, golden.key.public)
    rc, out, _ = install(registry.ref(REPO, ":1.0.0"), golden.key.public, tmp_path / "kits")
    assert rc == 3 and error_code(out) == "OCI_TAG_NOT_PINNED"
    assert "@sha256:" in out["error"]["hint"]
    assert not (tmp_path / "kits" / FOLDER).exists()


# -- attacks ----------------------------------------------------------------------------------


def test_attack_registry_serves_another_kits_manifest_for_the_digest(
    registry: LiveRegistry, archive: Path, other_archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """Whoever controls the registry's storage swaps the manifest the buyer's digest names for
    the one of another kit signed by the same key: signatures alone would accept it."""
    genuine = push(registry, archive, golden.key.public)
    other = push(registry, other_archive, golden.key.public, ":other")
    stored = registry.blob_file(genuine)
    os.chmod(stored, 0o644)
    shutil.copyfile(registry.blob_file(other), stored)
    rc, out, _ = install(registry.ref(REPO, f"@{genuine}"), golden.key.public, tmp_path / "kits")
    assert rc == 1 and error_code(out) == "OCI_DIGEST_MISMATCH"
    assert not (tmp_path / "kits" / FOLDER).exists()


def test_attack_blob_larger_than_the_manifest_says(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The kit's layer grows in the registry's storage: the download stops at the size the
    digest-checked manifest gives, and nothing is installed."""
    digest = push(registry, archive, golden.key.public)
    manifest = json.loads(registry.blob_file(digest).read_bytes())
    layer = registry.blob_file(manifest["layers"][0]["digest"])
    with layer.open("ab") as f:
        f.write(b"\0" * 4096)
    rc, out, _ = install(registry.ref(REPO, f"@{digest}"), golden.key.public, tmp_path / "kits")
    assert rc == 1 and error_code(out) == "OCI_BLOB_OVERSIZED"
    assert not (tmp_path / "kits" / FOLDER).exists()


def test_attack_kit_blob_changed_in_storage_at_the_same_size(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    digest = push(registry, archive, golden.key.public)
    manifest = json.loads(registry.blob_file(digest).read_bytes())
    layer = registry.blob_file(manifest["layers"][0]["digest"])
    data = bytearray(layer.read_bytes())
    data[-1] ^= 0xFF  # always a change: a byte xor 0xFF is never itself
    layer.write_bytes(bytes(data))
    rc, out, _ = install(registry.ref(REPO, f"@{digest}"), golden.key.public, tmp_path / "kits")
    assert rc == 1 and error_code(out) == "OCI_DIGEST_MISMATCH"


def test_attack_receipt_referrer_signed_by_another_key(
    registry: LiveRegistry,
    archive: Path,
    golden: GoldenKit,
    other_key: KeyFiles,
    tmp_path: Path,
) -> None:
    """Someone who can push to the repository attaches a receipt of their own (a kit signed by
    their key) to the genuine kit's manifest, as any OCI client can."""
    digest = push(registry, archive, golden.key.public)
    forged = make_kit(tmp_path / "forger", other_key, make_snapshot(tmp_path / "fc", shards=2))
    attach_as_referrer(registry, digest, (forged.kit / "receipt.dsse.json").read_bytes())
    rc, out, _ = k3kit_json(
        "push", "--list-referrers", registry.ref(REPO, f"@{digest}"), "--trust", golden.key.public
    )
    assert rc == 1 and out["ok"] is False
    failed = [r for r in out["referrers"] if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["code"] == "OCI_REFERRER_NOT_VERIFIED"
    assert [r["status"] for r in out["referrers"]].count("verified") == 1  # the genuine one


def test_attack_tag_moved_to_another_kit(
    registry: LiveRegistry, archive: Path, other_archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The tag the buyer was told about now names another (validly signed) kit: the digest the
    buyer installs by still gets the kit it names, and the tag itself is refused."""
    genuine = push(registry, archive, golden.key.public, ":stable")
    moved = push(registry, other_archive, golden.key.public, ":stable")
    assert moved != genuine
    rc, out, stderr = install(registry.ref(REPO, f"@{genuine}"), golden.key.public, tmp_path / "a")
    assert rc == 0, stderr
    _, local, _ = install(str(archive), golden.key.public, tmp_path / "local")
    assert out["kit_sha256"] == local["kit_sha256"]
    rc, out, _ = install(registry.ref(REPO, ":stable"), golden.key.public, tmp_path / "b")
    assert rc == 3 and error_code(out) == "OCI_TAG_NOT_PINNED"


def test_attack_plain_http_to_a_registry_off_this_machine(
    golden: GoldenKit, tmp_path: Path
) -> None:
    ref = "oci+http://registry.example.com/kits/kimi-k3@sha256:" + "a" * 64
    rc, out, _ = install(ref, golden.key.public, tmp_path / "kits")
    assert rc == 3 and error_code(out) == "OCI_PLAIN_HTTP"
    assert not (tmp_path / "kits").exists() or not os.listdir(tmp_path / "kits")


def attach_as_referrer(
    reg: LiveRegistry,
    subject: str,
    receipt: bytes,
    *,
    artifact_type: str = "application/vnd.k3kit.receipt.v1",
    title: str = "receipt.dsse.json",
) -> None:
    """What an attacker with push rights does with any OCI client: a receipt artifact whose
    subject is the genuine kit, listed in the fallback index."""
    from k3kit.oci import artifact as art
    from k3kit.oci._http import Registry

    with Registry(f"http://{reg.host}") as client:
        manifest = client.get_small(
            f"/v2/{REPO}/manifests/{subject}", accept=art.MANIFEST_TYPE, cap=1 << 20
        )
        assert manifest is not None
        layer = art.describe(art.RECEIPT_LAYER, receipt, title=title)
        client.push_blob(REPO, layer.digest, layer.size, receipt)
        data = art.manifest_bytes(
            artifact_type,
            [layer],
            subject=art.describe(art.MANIFEST_TYPE, manifest),
            annotations={art.TITLE: title},
        )
        client.put_manifest(REPO, art.digest_of(data), data, art.MANIFEST_TYPE)
        tag = art.fallback_tag(subject)
        old = client.get_small(f"/v2/{REPO}/manifests/{tag}", accept=art.INDEX_TYPE, cap=1 << 20)
        listed = art.parse_index(old, label="index") if old else []
        listed.append(
            art.Descriptor(art.MANIFEST_TYPE, art.digest_of(data), len(data), None, artifact_type)
        )
        client.put_manifest(REPO, tag, art.index_bytes(listed), art.INDEX_TYPE)


class _LyingProxy(http.server.BaseHTTPRequestHandler):
    """A registry front that forwards reads to the real registry, except what a test rewrites:
    ``swap`` maps a manifest digest to the bytes served for it instead (with the requested
    digest in ``Docker-Content-Digest``, as a lying registry would), ``redirect_blobs`` answers
    every blob read with a redirect there."""

    upstream = ""
    swap: ClassVar[dict[str, bytes]] = {}
    redirect_blobs = ""
    cut_blobs = False

    def do_GET(self) -> None:
        asked = self.path.rsplit("/", 1)[-1]
        if "/manifests/" in self.path and asked in self.swap:
            return self._answer(200, self.swap[asked], {"Docker-Content-Digest": asked})
        if "/blobs/" in self.path and self.redirect_blobs:
            return self._answer(307, b"", {"Location": self.redirect_blobs + self.path})
        if "/blobs/" in self.path and self.cut_blobs:
            return self._cut(self.upstream + self.path)
        request = urllib.request.Request(self.upstream + self.path, headers=dict(self.headers))
        try:
            with urllib.request.urlopen(request) as resp:
                self._answer(resp.status, resp.read(), dict(resp.headers))
        except urllib.error.HTTPError as exc:
            self._answer(exc.code, exc.read(), {})

    def _cut(self, url: str) -> None:
        """Announce the whole blob, send half of it, close the connection."""
        with urllib.request.urlopen(url) as resp:
            body = resp.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2])
        self.wfile.flush()
        self.close_connection = True

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "transfer-encoding", "connection", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def lying_proxy(reg: LiveRegistry, **rewrite: Any) -> Iterator[str]:
    """A proxy on 127.0.0.1 (port 0) in front of ``reg``; yields its ``HOST:PORT``."""
    handler = type("Proxy", (_LyingProxy,), {"upstream": f"http://{reg.host}", **rewrite})
    with loopback(handler) as host:
        yield host


def test_attack_proxy_serves_another_kit_with_the_asked_digest_in_its_header(
    registry: LiveRegistry, archive: Path, other_archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """A registry (or a proxy in front of it) answers the buyer's digest with another validly
    signed kit's manifest and names the asked digest in Docker-Content-Digest: the header is
    never read, the bytes are hashed."""
    genuine = push(registry, archive, golden.key.public)
    other = push(registry, other_archive, golden.key.public, ":other")
    swap = {genuine: registry.blob_file(other).read_bytes()}
    with lying_proxy(registry, swap=swap) as host:
        rc, out, _ = install(f"oci://{host}/{REPO}@{genuine}", golden.key.public, tmp_path / "k")
    assert rc == 1 and error_code(out) == "OCI_DIGEST_MISMATCH"
    assert not (tmp_path / "k" / FOLDER).exists()


def test_attack_registry_redirects_the_kit_blob_to_plain_http_elsewhere(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    digest = push(registry, archive, golden.key.public)
    with lying_proxy(registry, redirect_blobs="http://blobs.example.com") as host:
        rc, out, _ = install(f"oci://{host}/{REPO}@{digest}", golden.key.public, tmp_path / "k")
    assert rc == 4 and error_code(out) == "OCI_REDIRECT_REFUSED"
    assert not (tmp_path / "k" / FOLDER).exists()


def test_verify_of_an_oci_digest_checks_the_kit_and_its_referrers(
    registry: LiveRegistry, archive: Path, golden: GoldenKit
) -> None:
    digest = push(registry, archive, golden.key.public)
    rc, out, stderr = k3kit_json(
        "verify", registry.ref(REPO, f"@{digest}"), "--trust", golden.key.public
    )
    assert rc == 0, stderr
    assert out["ok"] is True and [r["status"] for r in out["referrers"]] == ["verified"]
    rc, out, _ = k3kit_json("verify", registry.ref(REPO, ":1.0.0"), "--trust", golden.key.public)
    assert rc == 3 and error_code(out) == "OCI_TAG_NOT_PINNED"


@needs_skopeo
def test_a_mirror_made_with_skopeo_copy_keeps_the_digest_and_the_referrers(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """The operator's mirror (docs/oci.md): the kit by digest, then the referrers index tag;
    the same digest installs from the mirror and its receipt verifies there."""
    digest = push(registry, archive, golden.key.public)
    assert SKOPEO_BIN is not None
    src, dst = f"docker://{registry.host}/{REPO}", f"docker://{registry.host}/mirror/kimi-k3"
    tls = ["--src-tls-verify=false", "--dest-tls-verify=false"]
    fallback = digest.replace(":", "-")
    # skopeo 1.9 re-writes an index it copies (and refuses to with --preserve-digests): the
    # index is only a tag; the manifests it lists keep their digests either way.
    for source, dest, keep in (
        (f"{src}@{digest}", f"{dst}:1.0.0", ["--preserve-digests"]),
        (f"{src}:{fallback}", f"{dst}:{fallback}", []),
    ):
        copy = subprocess.run(
            [SKOPEO_BIN, "copy", "--all", *keep, *tls, source, dest],
            capture_output=True,
            text=True,
        )
        assert copy.returncode == 0, copy.stderr
    mirrored = f"oci://{registry.host}/mirror/kimi-k3@{digest}"
    rc, out, stderr = k3kit_json("verify", mirrored, "--trust", golden.key.public)
    assert rc == 0, stderr
    assert [r["status"] for r in out["referrers"]] == ["verified"]
    rc, _, stderr = install(mirrored, golden.key.public, tmp_path / "kits")
    assert rc == 0, stderr


def test_a_registry_that_closes_the_connection_mid_blob_is_an_environment_error(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    digest = push(registry, archive, golden.key.public)
    with lying_proxy(registry, cut_blobs=True) as host:
        rc, out, _ = install(f"oci://{host}/{REPO}@{digest}", golden.key.public, tmp_path / "k")
    assert rc == 4 and error_code(out) == "OCI_REGISTRY_UNREACHABLE"
    assert sorted(os.listdir(tmp_path / "k")) == []  # the staging folder went with it


def test_attack_card_referrer_the_kit_does_not_carry(
    registry: LiveRegistry, archive: Path, golden: GoldenKit
) -> None:
    """A "card" attached by someone with push rights (the kit has none): listed as failed."""
    digest = push(registry, archive, golden.key.public)
    page = b"<html>a better benchmark than the kit measured</html>"
    attach_as_referrer(
        registry, digest, page, artifact_type="application/vnd.k3kit.card.v1", title="card.html"
    )
    rc, out, _ = k3kit_json(
        "verify", registry.ref(REPO, f"@{digest}"), "--trust", golden.key.public
    )
    assert rc == 1
    card = next(r for r in out["referrers"] if r["title"] == "card.html")
    assert card["status"] == "failed" and card["code"] == "OCI_REFERRER_NOT_VERIFIED"


def test_attack_referrers_list_flooded(
    registry: LiveRegistry, archive: Path, golden: GoldenKit
) -> None:
    """Someone with push rights lists thousands of referrers under the fallback tag: refused
    before one is read."""
    from k3kit.oci import artifact as art
    from k3kit.oci._http import Registry

    digest = push(registry, archive, golden.key.public)
    with Registry(f"http://{registry.host}") as client:
        tag = art.fallback_tag(digest)
        index = client.get_small(f"/v2/{REPO}/manifests/{tag}", accept=art.INDEX_TYPE, cap=1 << 20)
        assert index is not None
        (genuine,) = art.parse_index(index, label="index")  # the registry checks each exists
        client.put_manifest(REPO, tag, art.index_bytes([genuine] * 1000), art.INDEX_TYPE)
    rc, out, _ = k3kit_json(
        "verify", registry.ref(REPO, f"@{digest}"), "--trust", golden.key.public
    )
    assert rc == 1 and error_code(out) == "OCI_MANIFEST_INVALID"


def test_the_library_installs_from_the_registry_by_digest_as_the_cli_does(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    from k3kit import api
    from k3kit.errors import InputError
    from k3kit.signing.keys import load_public

    digest = push(registry, archive, golden.key.public)
    keys = [load_public(golden.key.public)]
    done, got = api.install_kit_from_registry(
        registry.ref(REPO, f"@{digest}"), keys, tmp_path / "kits"
    )
    assert got == digest and done.path.name == FOLDER and not done.already_installed
    with pytest.raises(InputError) as refused:
        api.install_kit_from_registry(registry.ref(REPO, ":1.0.0"), keys, tmp_path / "kits")
    assert refused.value.code == "OCI_TAG_NOT_PINNED"


_LINK_INTO = """
import os, sys
os.symlink(sys.argv[1], sys.argv[2])
"""


@needs_root
def test_a_cotenant_into_is_refused_before_the_registry_is_asked(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A co-tenant (uid 65534) names the install folder through a link of theirs in a sticky
    shared folder: the download would land where they can re-point. The folder is judged first:
    with a registry that refuses every connection, the answer is INSTALL_DIR_UNSAFE, not an
    unreachable registry, and nothing is written in the real folder."""
    real = tmp_path / "kits"
    real.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    with shared_folder() as shared, refusing_url() as url:
        link = shared / "into"
        cotenant_python(_LINK_INTO, str(real), str(link))
        assert link.lstat().st_uid == COTENANT_UID
        ref = f"oci://{url.removeprefix('http://')}/{REPO}@sha256:" + "f" * 64
        rc, out, stderr = install(ref, golden.key.public, link)
    assert (rc, error_code(out)) == (4, "INSTALL_DIR_UNSAFE"), stderr
    assert os.listdir(real) == []


def test_push_and_install_with_a_root_of_trust(
    registry: LiveRegistry, archive: Path, golden: GoldenKit, tmp_path: Path
) -> None:
    """--root instead of --trust, with its state folder, on both ends (as `verify` takes it)."""
    from tests.trustkit import keypair, root_v1, write_root

    owner = keypair(tmp_path / "keys", "root")
    root = write_root(tmp_path / "1.root.json", root_v1([owner], [golden.key]), [owner])
    state = tmp_path / "state"
    rc, out, stderr = k3kit_json(
        "push", archive, registry.ref(REPO, ":1.0.0"), "--root", root, "--state-dir", state
    )
    assert rc == 0, stderr
    proc = run_k3kit(
        "install",
        registry.ref(REPO, f"@{out['digest']}"),
        "--root",
        root,
        "--state-dir",
        tmp_path / "node-state",
        "--into",
        tmp_path / "kits",
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "kits" / FOLDER).is_dir()


def test_attack_many_referrers_share_one_large_blob(
    registry: LiveRegistry, archive: Path, golden: GoldenKit
) -> None:
    """Someone with push rights uploads ONE 16 MiB blob and lists eight referrers that all point
    at it (plus the genuine one twice more): each passes the per-referrer cap, so a verifier
    that reads them all holds 128 MiB for 16 MiB of the attacker's storage, and 256 of them
    would be 4 GiB. The referrers' bytes are bounded in total, counted before each blob is
    read, and a digest listed twice is read once."""
    from k3kit.oci import artifact as art
    from k3kit.oci._http import Registry

    digest = push(registry, archive, golden.key.public)
    big = bytes(range(256)) * (art.MAX_REFERRER_BYTES // 256)
    with Registry(f"http://{registry.host}") as client:
        manifest = client.get_small(
            f"/v2/{REPO}/manifests/{digest}", accept=art.MANIFEST_TYPE, cap=1 << 20
        )
        assert manifest is not None
        subject = art.describe(art.MANIFEST_TYPE, manifest)
        layer = art.describe(art.ATTACHMENT_LAYER, big, title="report.bin")
        client.push_blob(REPO, layer.digest, layer.size, big)
        tag = art.fallback_tag(digest)
        old = client.get_small(f"/v2/{REPO}/manifests/{tag}", accept=art.INDEX_TYPE, cap=1 << 20)
        listed = art.parse_index(old, label="index") if old else []
        listed = listed * 3  # the genuine receipt, listed three times
        for n in range(8):
            data = art.manifest_bytes(
                art.ATTACHMENT_ARTIFACT, [layer], subject=subject, annotations={art.TITLE: f"r{n}"}
            )
            client.put_manifest(REPO, art.digest_of(data), data, art.MANIFEST_TYPE)
            listed.append(
                art.Descriptor(
                    art.MANIFEST_TYPE, art.digest_of(data), len(data), None, art.ATTACHMENT_ARTIFACT
                )
            )
        client.put_manifest(REPO, tag, art.index_bytes(listed), art.INDEX_TYPE)
    rc, out, _ = k3kit_json(
        "verify", registry.ref(REPO, f"@{digest}"), "--trust", golden.key.public
    )
    assert rc == 1 and error_code(out) == "OCI_MANIFEST_INVALID", out


def test_attack_remote_registry_redirects_into_this_machine(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A registry off this machine (https, a valid certificate) answers the manifest with a
    redirect to http://127.0.0.1:PORT/admin/wipe: the node's own local services, which trust
    requests from this machine. The node must not make that request (a GET with side effects,
    a request forgery); only a registry on this machine may redirect to this machine."""
    hits: list[str] = []
    local = recording_server(hits)
    target = f"http://127.0.0.1:{local.server_address[1]}/admin/wipe"
    cert, key = self_signed(tmp_path, OFF_MACHINE)
    try:
        with redirector(OFF_MACHINE, target, tls=(cert, key)) as port:
            ref = f"oci://{OFF_MACHINE}:{port}/{REPO}@sha256:{'a' * 64}"
            proc = run_k3kit(
                "install", ref, "--trust", golden.key.public, "--into", tmp_path / "kits",
                "--json", env=tls_env(cert),
            )  # fmt: skip
    finally:
        local.shutdown()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert hits == [], f"the node requested {hits} on this machine for a remote registry"
    out = json.loads(proc.stdout)
    assert out["error"]["code"] == "OCI_REDIRECT_REFUSED", out
