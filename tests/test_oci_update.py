"""`k3kit update --from-registry oci://HOST/REPO`: the channel's signed TUF targets choose the
release and give its sha256 and length; the kit's bytes come from a real registry (Debian's
docker-registry on 127.0.0.1, its own storage folder) by that digest, never by tag, and are
installed exactly as `install` does. The attacks are the registry's: other bytes under the
digest, a moved tag, a missing blob (docs/distribution.md)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.channelkit import (
    PACKAGE,
    Channel,
    Releases,
    init_channel,
    make_releases,
    publish,
    serve,
    update,
)
from tests.conftest import GoldenKit, refusing_url, run_k3kit
from tests.ocikit import LiveRegistry, live_registry, needs_registry, sha256_digest

pytestmark = needs_registry
REPO = "kits/kimi-k3"


@pytest.fixture(scope="module")
def releases(golden: GoldenKit, tmp_path_factory: pytest.TempPathFactory) -> Releases:
    return make_releases(golden, tmp_path_factory.mktemp("releases"))


@pytest.fixture
def chan(tmp_path: Path, releases: Releases) -> Channel:
    made = init_channel(tmp_path)
    for archive in (releases.v100, releases.v110):
        done = publish(made, archive, releases.key.public)
        assert done.returncode == 0, done.stderr
    return made


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LiveRegistry]:
    with live_registry(tmp_path / "registry") as live:
        yield live


def metadata_only(chan: Channel, tmp_path: Path) -> Path:
    """The channel as served without its targets/ folder: whatever installs came from the
    registry, not from the channel's own server."""
    served = tmp_path / "served"
    shutil.copytree(chan.repo / "metadata", served / "metadata")
    return served


def push(reg: LiveRegistry, archive: Path, trust: Path, tag: str) -> str:
    done = run_k3kit("push", archive, reg.ref(REPO, tag), "--trust", trust, "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["digest"])


def update_from(
    reg: LiveRegistry, chan: Channel, served: Path, tmp_path: Path, trust: Path
) -> tuple[int, dict[str, Any], str]:
    into, state = tmp_path / "kits", tmp_path / "state"
    with serve(served) as url:
        done = update(url, chan, into, state, trust, "--from-registry", f"oci://{reg.host}/{REPO}")
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout or "{}"), done.stderr


def installed(tmp_path: Path) -> list[str]:
    into = tmp_path / "kits"
    return sorted(os.listdir(into)) if into.exists() else []


def test_update_from_a_registry_installs_the_release_the_signed_targets_name(
    chan: Channel, releases: Releases, registry: LiveRegistry, tmp_path: Path
) -> None:
    push(registry, releases.v100, releases.key.public, ":1.0.0")
    push(registry, releases.v110, releases.key.public, ":1.1.0")
    rc, out, stderr = update_from(
        registry, chan, metadata_only(chan, tmp_path), tmp_path, releases.key.public
    )
    assert rc == 0, stderr
    assert out["version"] == "1.1.0" and out["name"] == PACKAGE
    assert installed(tmp_path) == [f"{PACKAGE}-1.1.0"]
    # the label names the blob as a blob: written REPO@sha256:BLOB it read as a reference
    # `install oci://` takes (a manifest digest), and given back there it was OCI_NOT_FOUND
    blob = sha256_digest(releases.v110.read_bytes())
    assert out["kit"].endswith(f" from oci://{registry.host}/{REPO} (blob {blob})")
    assert "@sha256:" not in out["kit"] and f"(blob {blob})" in stderr
    target = tmp_path / "kits" / f"{PACKAGE}-1.1.0"
    assert run_k3kit("verify", target, "--trust", releases.key.public).returncode == 0


def test_attack_registry_storage_serves_other_bytes_under_the_kit_digest(
    chan: Channel, releases: Releases, registry: LiveRegistry, tmp_path: Path
) -> None:
    """Whoever can write the registry's storage flips one byte of the v1.1.0 kit's blob (the
    file the digest names): the download no longer hashes to the signed sha256."""
    push(registry, releases.v110, releases.key.public, ":1.1.0")
    blob = registry.blob_file(sha256_digest(releases.v110.read_bytes()))
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF  # always a change
    blob.write_bytes(bytes(data))
    rc, out, _ = update_from(
        registry, chan, metadata_only(chan, tmp_path), tmp_path, releases.key.public
    )
    assert rc != 0 and out["error"]["code"] == "OCI_DIGEST_MISMATCH"
    assert installed(tmp_path) == []


def test_attack_tag_moved_to_another_kit_does_not_change_what_update_installs(
    chan: Channel, releases: Releases, registry: LiveRegistry, tmp_path: Path
) -> None:
    """The tags 1.1.0 and latest are moved to the v1.0.0 kit: update never reads a tag, so it
    still installs the kit the signed targets name, byte for byte."""
    push(registry, releases.v110, releases.key.public, ":1.1.0")
    push(registry, releases.v100, releases.key.public, ":1.1.0")
    push(registry, releases.v100, releases.key.public, ":latest")
    rc, out, stderr = update_from(
        registry, chan, metadata_only(chan, tmp_path), tmp_path, releases.key.public
    )
    assert rc == 0, stderr
    assert out["version"] == "1.1.0"
    assert out["release"]["kit_sha256"] == out["kit_sha256"]
    assert installed(tmp_path) == [f"{PACKAGE}-1.1.0"]


def test_a_blob_missing_from_the_registry_is_not_found_and_nothing_is_installed(
    chan: Channel, releases: Releases, registry: LiveRegistry, tmp_path: Path
) -> None:
    """Only v1.0.0 was pushed; the channel's newest is v1.1.0: a 404, an environment error."""
    push(registry, releases.v100, releases.key.public, ":1.0.0")
    rc, out, _ = update_from(
        registry, chan, metadata_only(chan, tmp_path), tmp_path, releases.key.public
    )
    assert rc == 4 and out["error"]["code"] == "OCI_NOT_FOUND"
    assert installed(tmp_path) == []


@pytest.mark.parametrize("tail", [":1.1.0", "@sha256:" + "0" * 64])
def test_update_refuses_a_registry_reference_with_a_tag_or_digest(
    chan: Channel, releases: Releases, tmp_path: Path, tail: str
) -> None:
    """The digest is the signed target's: a tag or digest given beside it is refused before
    any request (the channel and the registry both refuse connections: a request would be
    CHANNEL_/OCI_REGISTRY_UNREACHABLE, not this code)."""
    into, state = tmp_path / "kits", tmp_path / "state"
    with refusing_url() as url:
        host = url.removeprefix("http://")
        done = update(
            url, chan, into, state, releases.key.public,
            "--from-registry", f"oci://{host}/{REPO}{tail}",
        )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "OCI_REF_INVALID"


def test_the_library_updates_from_a_registry_as_the_cli_does(
    chan: Channel, releases: Releases, registry: LiveRegistry, tmp_path: Path
) -> None:
    from k3kit import api
    from k3kit.signing.keys import load_public

    push(registry, releases.v110, releases.key.public, ":1.1.0")
    with serve(metadata_only(chan, tmp_path)) as url:
        done = api.update_from_channel(
            url, "stable", chan.root, tmp_path / "kits", [load_public(releases.key.public)],
            state_dir=tmp_path / "state", registry=f"oci://{registry.host}/{REPO}",
        )  # fmt: skip
    assert done.entry.version == "1.1.0" and done.installed.path.name == f"{PACKAGE}-1.1.0"
