"""The Kubernetes files of a kit, changed at site time to install the kit from a registry.

Why at site time and not in the signed template: a kit cannot name its own registry digest
(the digest covers the kit), so the reference is the buyer's, given to ``render-site
--kit-ref``; the default kit's signed bytes stay as they are. The change is small and checked:
a first init container ``fetch-kit`` runs ``k3kit install REF@sha256:…`` (every byte checked
against the digest, then the signature and manifest verified) into the pod's ``kit`` volume, now
an ``emptyDir``; the kit's own ``verify`` init container and the server then mount the installed
``NAME-VERSION`` folder at ``/kit`` exactly as they mounted the host folder, so the kit is
verified again before ``launch`` verifies it once more. A file that is not of the shape k3kit
generates is refused, not patched by guess.
"""

from __future__ import annotations

import json
import re

from k3kit.errors import InputError
from k3kit.oci.ref import parse

_INIT = re.compile(r"^( +)initContainers:\n", re.MULTILINE)
_MOUNT = "- {name: kit, mountPath: /kit, readOnly: true}"
_VOLUME = re.compile(r'(\n +- name: kit\n +)hostPath: \{path: "[^"\n]*", type: Directory\}')
_IMAGE = re.compile(r"\n +- name: verify\n +image: ([^\n]+)\n")
# The kubelet makes an emptyDir 0777; `install` refuses a folder others can write, so the init
# container (root in its own pod) closes it first.
_SCRIPT = 'chmod 0755 /kits && exec k3kit install "$0" --trust /trust/publisher.pub --into /kits'


def install_from_registry(text: str, *, kit_ref: str, folder: str) -> str:
    """``text`` (a kit's Deployment or LeaderWorkerSet, site values filled) with the kit
    installed from ``kit_ref`` (``oci://HOST/REPO@sha256:HEX``) into ``folder`` (NAME-VERSION).
    ``OCI_TAG_NOT_PINNED`` for a tag; ``SITE_INVALID`` for a file of another shape."""
    parse(kit_ref).require_digest("render-site --kit-ref")
    pods = len(_INIT.findall(text))
    image = _IMAGE.search(text)
    if pods == 0 or image is None or len(_VOLUME.findall(text)) != pods or _MOUNT not in text:
        raise InputError(
            "--kit-ref: the kit's Kubernetes file is not of the shape k3kit generates "
            "(initContainers, a verify container, a kit hostPath volume); nothing was changed",
            code="SITE_INVALID",
            hint="render the kit with the k3kit version that built it",
        )
    command = json.dumps(["sh", "-c", _SCRIPT, kit_ref])
    mount = f"- {{name: kit, mountPath: /kit, subPath: {json.dumps(folder)}, readOnly: true}}"
    text = _INIT.sub(lambda m: _fetch_container(m.group(1), image.group(1), command), text)
    return _VOLUME.sub(r"\1emptyDir: {}", text.replace(_MOUNT, mount))


def _fetch_container(indent: str, image: str, command: str) -> str:
    """The ``fetch-kit`` init container, first under ``initContainers:`` at ``indent``."""
    item, field, mount = indent + "  ", indent + "    ", indent + "      "
    return (
        f"{indent}initContainers:\n"
        f"{item}- name: fetch-kit\n"
        f"{field}image: {image}\n"
        f"{field}command: {command}\n"
        f"{field}volumeMounts:\n"
        f"{mount}- {{name: kit, mountPath: /kits}}\n"
        f"{mount}- {{name: trust, mountPath: /trust/publisher.pub, readOnly: true}}\n"
    )
