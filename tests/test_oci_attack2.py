"""Attacks on the credential helpers and the head deadline of src/k3kit/oci/, made by an outsider
who read only docs/oci.md: a co-tenant (a real second user, uid 65534) who can write a folder on
the victim's PATH, a helper that misbehaves, a registry or token service that sends any bytes
with any timing. Every helper is a real program run as a real subprocess; every server is real,
on 127.0.0.1 on a port the kernel chose. Each test names the attack; it fails if the attack
works. No assertion on how long anything took: deadlines are lowered with their knobs.
"""

from __future__ import annotations

import os
from pathlib import Path

from k3kit._fs import program_on_path
from tests.conftest import GoldenKit
from tests.cotenant import cotenant_python, needs_root, shared_folder
from tests.test_oci_attacks import registry
from tests.test_oci_credhelper import _install, env_for


@needs_root
def test_attack_cotenant_links_a_helper_name_to_a_root_owned_program_that_runs_theirs(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The co-tenant cannot place a helper file that k3kit would run (it is theirs), so they
    place a LINK named ``docker-credential-ecr-login`` in the shared folder on the victim's PATH,
    pointing at ``/usr/bin/env`` (root's, safe by itself), and beside it their script ``get``:
    ``/usr/bin/env get`` looks ``get`` up on the victim's PATH and runs the co-tenant's code as
    the victim. Judging only where the link leads misses who chose the link."""
    with shared_folder() as shared, registry(challenge='Basic realm="reg"') as (host, handler):
        marker = shared / "ran"
        plant = (
            "import os, sys; d = sys.argv[1]; "
            "os.symlink('/usr/bin/env', os.path.join(d, 'docker-credential-ecr-login')); "
            "p = os.path.join(d, 'get'); "
            "open(p, 'w').write('#!/bin/sh\\ntouch ' + sys.argv[2] + "
            '\'\\necho {\\"Username\\": \\"x\\", \\"Secret\\": \\"y\\"}\\n\'); '
            "os.chmod(p, 0o755)"
        )
        cotenant_python(plant, str(shared), str(marker))
        env = env_for(tmp_path, {"credHelpers": {host: "ecr-login"}}, shared)
        rc, got = _install(env, host, golden, tmp_path / "kits")
        assert not marker.exists(), "the co-tenant's program ran as the victim"
    assert rc == 4 and got == "OCI_CRED_HELPER_UNSAFE"
    assert all(sent is None for _, sent in handler.seen)


@needs_root
def test_attack_cotenant_links_an_engine_name_on_path_to_a_root_owned_program(
    tmp_path: Path,
) -> None:
    """The same link, named as the engine ``launch`` runs (or ``nvidia-smi``): every program
    k3kit runs by name is found by one rule, so the link is refused for each of them."""
    with shared_folder() as shared:
        cotenant_python(
            "import os, sys; os.symlink('/usr/bin/env', os.path.join(sys.argv[1], 'vllm'))",
            str(shared),
        )
        found = program_on_path("vllm", f"{shared}:/usr/bin:/bin")
        assert found is not None and found[0] == Path("/usr/bin/env")
        assert found[1] == shared / "vllm"
        # the control: the same link made by the victim in their own folder is theirs to make
        own = tmp_path / "bin"
        own.mkdir()
        os.symlink("/usr/bin/env", own / "vllm")
        assert program_on_path("vllm", f"{own}:/usr/bin:/bin") == (Path("/usr/bin/env"), None)
