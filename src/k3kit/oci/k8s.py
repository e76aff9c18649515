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

A registry that needs a login: ``pull_secret`` names a ``kubernetes.io/dockerconfigjson``
Secret (the kind ``imagePullSecrets`` take, made by ``kubectl create secret docker-registry``).
It is mounted read-only, mode 0400, into ``fetch-kit`` only, and ``REGISTRY_AUTH_FILE`` points
at it, so ``k3kit install`` reads it as it reads podman's auth.json (:mod:`k3kit.oci.auth`).
Only the Secret's name is rendered, never its bytes: k3kit never reads it.
"""

from __future__ import annotations

import json
import re

from k3kit.errors import InputError, UsageProblem
from k3kit.oci.ref import parse

_INIT = re.compile(r"^( +)initContainers:\n", re.MULTILINE)
_MOUNT = "- {name: kit, mountPath: /kit, readOnly: true}"
_VOLUME = re.compile(r'(\n( +)- name: kit\n +)hostPath: \{path: "[^"\n]*", type: Directory\}')
_IMAGE = re.compile(r"\n +- name: verify\n +image: ([^\n]+)\n")
# The kubelet makes an emptyDir 0777; `install` refuses a folder others can write, so the init
# container (root in its own pod) closes it first.
_SCRIPT = 'chmod 0755 /kits && exec k3kit install "$0" --trust /trust/publisher.pub --into /kits'
# A Secret's name is a DNS-1123 subdomain (Kubernetes' own rule): nothing else is rendered.
_SECRET_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?")
_AUTH_DIR = "/registry-auth"


def install_from_registry(
    text: str, *, kit_ref: str, folder: str, pull_secret: str | None = None
) -> str:
    """``text`` (a kit's Deployment or LeaderWorkerSet, site values filled) with the kit
    installed from ``kit_ref`` (``oci://HOST/REPO@sha256:HEX``) into ``folder`` (NAME-VERSION),
    logging in with the Secret ``pull_secret`` when given. ``OCI_TAG_NOT_PINNED`` for a tag;
    ``SITE_INVALID`` for a file of another shape; ``USAGE`` for a name no Secret can have."""
    parse(kit_ref).require_digest("render-site --kit-ref")
    check_secret_name(pull_secret)
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
    text = _INIT.sub(
        lambda m: _fetch_container(m.group(1), image.group(1), command, pull_secret), text
    )
    return _VOLUME.sub(lambda m: _volumes(m, pull_secret), text.replace(_MOUNT, mount))


def check_secret_name(name: str | None) -> None:
    """Refuse a pull secret name Kubernetes would refuse (or that could break out of the YAML
    it is written into): a DNS-1123 subdomain, at most 253 characters."""
    if name is not None and not _SECRET_NAME.fullmatch(name):
        raise UsageProblem(
            f"--kit-pull-secret {name!r} is not a Kubernetes Secret name",
            hint="a Secret name is lower-case letters, digits, '-' and '.', starting and "
            "ending with a letter or digit (kubectl create secret docker-registry NAME ...)",
        )


def _volumes(found: re.Match[str], pull_secret: str | None) -> str:
    """The pod's ``kit`` volume as an ``emptyDir``, and the Secret's volume after it."""
    kit = found.group(1) + "emptyDir: {}"
    if pull_secret is None:
        return kit
    item, field = "\n" + found.group(2), "\n" + found.group(2) + "  "
    items = "[{key: .dockerconfigjson, path: config.json}]"
    return (
        f"{kit}{item}- name: registry-auth"
        f"{field}secret: {{secretName: {pull_secret}, defaultMode: 256, items: {items}}}"
    )


def _fetch_container(indent: str, image: str, command: str, pull_secret: str | None) -> str:
    """The ``fetch-kit`` init container, first under ``initContainers:`` at ``indent``; with
    ``pull_secret``, its Secret mounted read-only (0400: ``defaultMode: 256``, so the file is
    root's alone, as :func:`k3kit._fs.check_trust_anchor` requires of a credentials file) and
    named by ``REGISTRY_AUTH_FILE``."""
    item, field, mount = indent + "  ", indent + "    ", indent + "      "
    auth_env, auth_mount = "", ""
    if pull_secret is not None:
        value = f"{_AUTH_DIR}/config.json"
        auth_env = f"{field}env:\n{mount}- {{name: REGISTRY_AUTH_FILE, value: {value}}}\n"
        auth_mount = f"{mount}- {{name: registry-auth, mountPath: {_AUTH_DIR}, readOnly: true}}\n"
    return (
        f"{indent}initContainers:\n"
        f"{item}- name: fetch-kit\n"
        f"{field}image: {image}\n"
        f"{field}command: {command}\n"
        f"{auth_env}"
        f"{field}volumeMounts:\n"
        f"{mount}- {{name: kit, mountPath: /kits}}\n"
        f"{mount}- {{name: trust, mountPath: /trust/publisher.pub, readOnly: true}}\n"
        f"{auth_mount}"
    )
