"""Fuzz the weights-layout locator with random trees of folders, files and links named like a
Hugging Face cache (``models--*``, ``snapshots``, ``blobs``, the commit, model file names).

Property: for any tree and any path in it, :func:`k3kit.weights.check_file_set` either raises a
:class:`VerificationError` or returns a layout whose root is a real directory with no symlink
component, and every file it passed resolves to a path with no symlink component (what an engine
opening that file reads). Any other exception is a bug. Bounded (examples, tree size) so that CI
spends well under 30 s; a longer run's figures are in docs/verification.md.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from k3kit.errors import VerificationError
from k3kit.models import WeightsLock
from k3kit.publish.kit import load_lock
from k3kit.weights import check_file_set
from tests.conftest import GoldenKit

EXAMPLES = int(os.environ.get("K3KIT_FUZZ_EXAMPLES", "120"))
LOCK: dict[str, WeightsLock] = {}


def _names(lock: WeightsLock) -> list[str]:
    return [
        "models--moonshotai--Kimi-K3",
        "models--other--repo",
        "snapshots",
        "blobs",
        "refs",
        lock.commit,
        "0" * 40,
        ".locks",
        "CACHEDIR.TAG",
        ".no_exist",
        *sorted({f.path.split("/")[0] for f in lock.files}),
        "evil.py",
    ]


@dataclass(frozen=True)
class Op:
    parent: int  # index into the folders made so far
    name: int  # index into the name list
    kind: str  # dir | file | link
    target: int  # index into the link targets


TARGETS = [
    "abs-outside",  # an absolute path out of the tree (see _build)
    "..",
    "../..",
    "../../blobs",
    "../../blobs/NAME",
    "../../../blobs/NAME",
    "../NAME",
    "missing",
    ".",
    "abs-node",
    "self",
]

ops = st.lists(
    st.builds(
        Op,
        parent=st.integers(0, 20),
        name=st.integers(0, 40),
        kind=st.sampled_from(["dir", "dir", "file", "link"]),
        target=st.integers(0, len(TARGETS) - 1),
    ),
    max_size=24,
)


def _outside(root: Path) -> Path:
    """A folder with a file, outside the tree but inside the test's own temporary folder: what a
    link to an absolute path elsewhere meets. It used to be "/" itself, and the locator, given
    that link, walked the whole machine (10 s an example, and what it met was anyone's files)."""
    outside = root.parents[3] / "outside"
    if not outside.exists():
        outside.mkdir()
        (outside / "config.json").write_bytes(b"{}")
    return outside


def _build(root: Path, tree: list[Op], names: list[str], sizes: dict[str, int]) -> list[Path]:
    """Make the tree. Children go only into real folders made here, never through a link: a
    link to "/" must be something the locator meets, not somewhere this test writes."""
    dirs = [root]
    nodes = [root]
    for op in tree:
        parent = dirs[op.parent % len(dirs)]
        path = parent / names[op.name % len(names)]
        assert os.path.realpath(parent) == str(parent) and root in [parent, *parent.parents]
        if os.path.lexists(path):
            continue
        if op.kind == "dir":
            path.mkdir()
            dirs.append(path)
        elif op.kind == "file":  # the locked size when the name is locked, so sizes can match
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            os.ftruncate(fd, sizes.get(path.name, 2))
            os.close(fd)
        else:
            target = TARGETS[op.target]
            if target == "abs-node":
                target = str(nodes[op.parent % len(nodes)])
            elif target == "abs-outside":
                target = str(_outside(root))
            elif target == "self":
                target = path.name
            path.symlink_to(target.replace("NAME", path.name))
        nodes.append(path)
    return nodes


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tree=ops, pick=st.integers(0, 40))
def test_locator_returns_a_real_root_or_refuses(
    golden: GoldenKit, tree: list[Op], pick: int
) -> None:
    lock = LOCK.setdefault("lock", load_lock(golden.lock))
    base = Path(tempfile.mkdtemp(prefix="k3kit-fuzz-"))
    try:
        # Three private folders above the tree: the deepest relative target ("../../../blobs")
        # of a link in the tree stays inside ``base``. With the tree right under the temporary
        # folder, a link to ".." or "../.." made the locator walk the whole of /tmp (everyone's
        # files): each such example cost ~1 s there, the test 200 s in a full run, and its work
        # depended on what other programs had left in /tmp.
        root = base / "a" / "b" / "c" / "w"
        root.mkdir(parents=True)
        nodes = _build(root, tree, _names(lock), {f.path: f.size for f in lock.files})
        given_path = nodes[pick % len(nodes)]
        try:
            layout, _, present = check_file_set(given_path, lock)
        except VerificationError:
            return
        assert layout.kind in ("plain", "snapshot")
        assert layout.root.is_absolute() and not layout.root.is_symlink()
        assert os.path.realpath(layout.root) == str(layout.root), layout
        assert layout.root.is_dir()
        for real in present.values():
            assert os.path.realpath(real) == str(real), real
            assert real.is_file()
    finally:
        shutil.rmtree(base, ignore_errors=True)
