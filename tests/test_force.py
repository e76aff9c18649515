"""`--force` replaces only what k3kit wrote (issue 19, class 9: data loss).

One rule (:func:`k3kit._fs.refuse_existing`) for every output: a folder output is replaced only if
it is empty or carries k3kit's own mark (``.k3kit-output`` for render-site's and demo's folders, a
kit for build's: only the files its ``MANIFEST.json`` lists and a kit's unlisted documents), is
owned by the user and does not hold the current folder; a file output only if it is a regular
file. Each test is the mistake or the trap as a user would meet it, run through the real CLI, and
checks that nothing of theirs was lost.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import EXAMPLE, DemoRun, GoldenKit, run_k3kit

SITE = "MODEL_DIR=/srv/models/kimi\nIMAGE=r.example/k3kit@sha256:" + "b" * 64 + "\n"


def _git_checkout(folder: Path) -> Path:
    """A real git repository with one committed file, as `git` itself makes it."""
    folder.mkdir()
    (folder / "main.py").write_text("print('mine')\n")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "u",
        "GIT_AUTHOR_EMAIL": "u@example.org",
        "GIT_COMMITTER_NAME": "u",
        "GIT_COMMITTER_EMAIL": "u@example.org",
    }
    for argv in (["init", "-q"], ["add", "main.py"], ["commit", "-qm", "mine"]):
        subprocess.run(["git", *argv], cwd=folder, env=env, check=True, capture_output=True)
    return folder


def _render(golden: GoldenKit, tmp_path: Path, out: Path) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site.env"
    site.write_text(SITE)
    return run_k3kit(
        "render-site",
        golden.kit,
        "--trust",
        golden.key.public,
        "--site",
        site,
        "-o",
        out,
        "--force",
        "--json",
    )


def test_render_site_force_over_a_git_checkout_is_refused_and_git_is_intact(
    golden: GoldenKit, tmp_path: Path
) -> None:
    repo = _git_checkout(tmp_path / "repo")
    head = (repo / ".git" / "HEAD").read_bytes()
    proc = _render(golden, tmp_path, repo)
    assert proc.returncode == 3, proc.stderr
    assert "OUTPUT_NOT_OURS" in proc.stdout
    assert (repo / ".git" / "HEAD").read_bytes() == head
    assert (repo / "main.py").read_text() == "print('mine')\n"
    log = subprocess.run(["git", "log", "--oneline"], cwd=repo, capture_output=True, text=True)
    assert log.returncode == 0 and "mine" in log.stdout


def test_render_site_force_replaces_the_folder_it_wrote(golden: GoldenKit, tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    assert _render(golden, tmp_path, out).returncode == 0
    assert (out / ".k3kit-output").is_file()
    (out / "site.env").write_text("stale\n")
    proc = _render(golden, tmp_path, out)
    assert proc.returncode == 0, proc.stderr
    assert (out / "site.env").read_text() != "stale\n"
    assert (out / ".k3kit-output").is_file()


def test_render_site_force_through_a_symlink_to_your_folder_is_refused(
    golden: GoldenKit, tmp_path: Path
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep\n")
    link = tmp_path / "deploy"
    link.symlink_to(mine)
    proc = _render(golden, tmp_path, link)
    assert proc.returncode == 3 and "OUTPUT_NOT_OURS" in proc.stdout
    assert link.is_symlink() and (mine / "notes.txt").read_text() == "keep\n"


def test_demo_force_on_a_folder_holding_your_file_is_refused_and_it_survives(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "thesis.tex").write_text("years of work\n")
    proc = run_k3kit("demo", "--workdir", work, "--force")
    assert proc.returncode == 3, proc.stderr
    assert "neither empty nor a folder k3kit wrote" in proc.stderr
    assert (work / "thesis.tex").read_text() == "years of work\n"
    assert os.listdir(work) == ["thesis.tex"]


def test_demo_force_replaces_its_own_workdir_but_never_the_current_folder(
    demo_run: DemoRun, tmp_path: Path
) -> None:
    work = tmp_path / "demo"
    shutil.copytree(demo_run.folder, work, symlinks=True)  # what a first `demo` wrote
    assert (work / ".k3kit-output").is_file()
    (work / "leftover").write_text("from the first run\n")
    again = run_k3kit("demo", "--workdir", work, "--force")
    assert again.returncode == 0, again.stderr
    assert not (work / "leftover").exists()
    # From inside it, `--workdir .` would delete the folder the shell stands in: refused.
    here = run_k3kit("demo", "--workdir", ".", "--force", cwd=work)
    assert here.returncode == 3, here.stderr
    assert "current folder" in here.stderr
    assert (work / "kimi-k3-b300x8-1.0.0.kit.tar.gz").is_file()


def test_demo_force_with_workdir_dot_in_your_project_is_refused(tmp_path: Path) -> None:
    project = _git_checkout(tmp_path / "project")
    proc = run_k3kit("demo", "--workdir", ".", "--force", cwd=project)
    assert proc.returncode == 3, proc.stderr
    assert sorted(os.listdir(project)) == [".git", "main.py"]


def test_build_force_over_a_git_checkout_is_refused(golden: GoldenKit, tmp_path: Path) -> None:
    repo = _git_checkout(tmp_path / "repo")
    proc = run_k3kit(
        "build", EXAMPLE / "package.toml", "--lock", golden.lock, "-o", repo, "--force", "--json"
    )
    assert proc.returncode == 3, proc.stderr
    assert "OUTPUT_NOT_A_KIT" in proc.stdout
    assert sorted(os.listdir(repo)) == [".git", "main.py"]


def test_build_force_over_a_checkout_holding_a_kits_two_documents_is_refused(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The attack (finding 6 of the outside pass): a git checkout that holds a real kit's
    ``kit.json`` and ``MANIFEST.json`` (committed for review) beside ``.git/`` and the user's own
    notes. The two documents used to be the whole test of "a kit", so ``build --force`` wiped the
    checkout. Now every entry must be one the manifest lists: refused, everything kept."""
    repo = _git_checkout(tmp_path / "repo")
    for name in ("kit.json", "MANIFEST.json"):
        (repo / name).write_bytes((golden.kit / name).read_bytes())
    (repo / "notes.txt").write_text("precious source\n")
    head = (repo / ".git" / "HEAD").read_bytes()
    proc = run_k3kit(
        "build", EXAMPLE / "package.toml", "--lock", golden.lock, "-o", repo, "--force", "--json"
    )
    assert proc.returncode == 3, proc.stderr
    assert "OUTPUT_NOT_A_KIT" in proc.stdout
    assert sorted(os.listdir(repo)) == [".git", "MANIFEST.json", "kit.json", "main.py", "notes.txt"]
    assert (repo / ".git" / "HEAD").read_bytes() == head
    assert (repo / "notes.txt").read_text() == "precious source\n"


def test_build_force_over_a_kit_with_one_extra_file_is_refused(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """A complete signed kit plus one file of the user's (a note dropped into the folder): not
    what k3kit wrote, so not replaced."""
    kit = tmp_path / "kit"
    subprocess.run(["cp", "-a", str(golden.kit), str(kit)], check=True)
    (kit / "TODO.md").write_text("mine\n")
    proc = run_k3kit(
        "build", EXAMPLE / "package.toml", "--lock", golden.lock, "-o", kit, "--force", "--json"
    )
    assert proc.returncode == 3, proc.stderr
    assert "OUTPUT_NOT_A_KIT" in proc.stdout
    assert (kit / "TODO.md").read_text() == "mine\n"


def test_build_force_replaces_a_signed_kit_it_wrote(golden: GoldenKit, tmp_path: Path) -> None:
    """The other side of the rule: a signed kit (receipt, evidence and all) is k3kit's and is
    replaced by the new build."""
    kit = tmp_path / "kit"
    subprocess.run(["cp", "-a", str(golden.kit), str(kit)], check=True)
    assert (kit / "receipt.dsse.json").exists()
    proc = run_k3kit(
        "build", EXAMPLE / "package.toml", "--lock", golden.lock, "-o", kit, "--force", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    assert not (kit / "receipt.dsse.json").exists()  # the fresh build is not signed yet


def test_a_file_output_behind_a_symlink_is_not_replaced_with_force(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """`pack -o LINK --force`: the rule for files is "a regular file only", so neither the link
    nor what it points at is touched (a link is not the file the user named)."""
    target = tmp_path / "precious.bin"
    target.write_bytes(b"mine")
    link = tmp_path / "kit.kit.tar.gz"
    link.symlink_to(target)
    proc = run_k3kit("pack", golden.kit, "-o", link, "--force", "--json")
    assert proc.returncode == 3, proc.stderr
    assert "OUTPUT_NOT_OURS" in proc.stdout
    assert link.is_symlink() and target.read_bytes() == b"mine"


def test_a_file_output_that_is_a_folder_is_not_replaced_with_force(
    golden: GoldenKit, tmp_path: Path
) -> None:
    out = tmp_path / "weights.lock.json"
    out.mkdir()
    (out / "inside").write_text("mine\n")
    revision = golden.snapshot.name
    proc = run_k3kit(
        "pin", "--local", golden.snapshot, "--repo", "moonshotai/Kimi-K3", "--revision", revision,
        "-o", out, "--force", "--json",
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "OUTPUT_NOT_OURS" in proc.stdout
    assert (out / "inside").read_text() == "mine\n"
