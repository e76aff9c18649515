"""Attacks on `oci://` sources and `push` that the CLI refuses before a registry is asked
(tests/test_oci.py runs the ones that need a live registry: another manifest for a digest, an
oversized blob, a forged receipt referrer, a moved tag, a redirect to plain http)."""

from __future__ import annotations

from tests.adversarial.corpus import Argv, Workbench, attack

_DIGEST = "@sha256:" + "e" * 64


@attack("OCI_PLAIN_HTTP", exit_code=3)
def install_oci_over_plain_http_from_another_machine(w: Workbench) -> Argv:
    """Whoever is on the path could swap the kit's bytes (the digest check would catch it)
    and read what the node fetches: plain http is for a registry on this machine only."""
    ref = "oci+http://registry.example.com/kits/kimi-k3" + _DIGEST
    return ["install", ref, "--trust", w.trust, "--into", w.root / "kits"]


@attack("OCI_TAG_NOT_PINNED", exit_code=3)
def install_oci_by_a_tag_the_registry_can_move(w: Workbench) -> Argv:
    ref = "oci://registry.example.com/kits/kimi-k3:stable"
    return ["install", ref, "--trust", w.trust, "--into", w.root / "kits"]


@attack("OCI_REF_INVALID", exit_code=3)
def install_oci_with_credentials_in_the_reference(w: Workbench) -> Argv:
    """A user:password@ in the reference would be sent somewhere; it is not a reference."""
    ref = "oci://admin:hunter2@registry.example.com/kits/kimi-k3" + _DIGEST
    return ["install", ref, "--trust", w.trust, "--into", w.root / "kits"]


@attack("OCI_REF_INVALID", exit_code=3)
def install_oci_with_a_path_escape_in_the_repository(w: Workbench) -> Argv:
    ref = "oci://registry.example.com/kits/../../v2/other" + _DIGEST
    return ["install", ref, "--trust", w.trust, "--into", w.root / "kits"]


@attack("RECEIPT_UNTRUSTED_KEY")
def push_a_kit_the_trusted_key_did_not_sign(w: Workbench) -> Argv:
    """The archive is verified (a private copy) before any byte goes to the registry: a kit
    signed by another key is never published (the registry here refuses every connection)."""
    ref = "oci://127.0.0.1:9/kits/kimi-k3:1.0.0"
    return ["push", w.archive(), ref, "--trust", w.other_key.public]


@attack("OCI_TAG_NOT_PINNED", exit_code=3)
def render_site_kit_ref_by_tag(w: Workbench) -> Argv:
    site = w.root / "site.env"
    site.write_text("MODEL_DIR=/srv/models/kimi\nIMAGE=r.example/k@sha256:" + "b" * 64 + "\n")
    return [
        "render-site",
        w.kit(),
        "--trust",
        w.trust,
        "--site",
        site,
        "-o",
        w.root / "out",
        "--kit-ref",
        "oci://registry.example.com/kits/kimi-k3:latest",
    ]


@attack("KIT_NOT_RECOGNISED", exit_code=3)
def push_an_endless_device_as_the_archive(w: Workbench) -> Argv:
    """A name that reads forever (a device, a FIFO) would fill the private copy's disk."""
    endless = w.root / "kimi.kit.tar.gz"
    endless.symlink_to("/dev/zero")
    return ["push", endless, "oci://127.0.0.1:9/kits/kimi-k3:1.0.0", "--trust", w.trust]


def _update_from_registry(w: Workbench, registry: str) -> Argv:
    """``update --from-registry``: refused on the reference alone, before the channel (never
    contacted: example.com) or the registry is asked."""
    return [
        "update", "--channel", "stable", "--from", "https://channel.example.com/stable",
        "--from-registry", registry, "--channel-root", w.root / "1.root.json",
        "--into", w.root / "kits", "--trust", w.trust, "--state-dir", w.root / "state",
    ]  # fmt: skip


@attack("OCI_REF_INVALID", exit_code=3)
def update_from_registry_by_a_tag_the_registry_can_move(w: Workbench) -> Argv:
    """The kit's digest is the channel's signed sha256: a tag beside it would be the
    registry's word on which bytes to install."""
    return _update_from_registry(w, "oci://registry.example.com/kits/kimi-k3:latest")


@attack("OCI_REF_INVALID", exit_code=3)
def update_from_registry_with_credentials_in_the_reference(w: Workbench) -> Argv:
    """A password belongs in the credentials file (docs/oci.md), never in an argument that
    ends up in shell history, process lists and messages."""
    return _update_from_registry(w, "oci://admin:hunter2@registry.example.com/kits/kimi-k3")
