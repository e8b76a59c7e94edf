"""The floor of `bench/real_repos.py` (`git log -p --first-parent`) over a clone that lacks a blob: git
stops at the blob it cannot read, so the bench leaves that path out (`--floor-exclude`) and reads the
rest of the history."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("real_repos", ROOT / "bench/real_repos.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "A",
        "GIT_AUTHOR_EMAIL": "a@x",
        "GIT_COMMITTER_NAME": "A",
        "GIT_COMMITTER_EMAIL": "a@x",
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, check=True, env=env, text=True
    )
    return done.stdout.strip()


def test_the_floor_leaves_out_a_path_whose_blob_the_clone_lacks(tmp_path):
    bench = _bench()
    repo = tmp_path / "repo"
    _git(tmp_path, "init", "-q", "repo")
    (repo / "paper.pdf").write_bytes(b"%PDF large\n")
    (repo / "m.py").write_text("x = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    (repo / "m.py").write_text("x = 2\n")
    _git(repo, "commit", "-q", "-am", "two")
    missing = _git(repo, "rev-parse", "HEAD:paper.pdf")
    (repo / ".git" / "objects" / missing[:2] / missing[2:]).unlink()  # loose: the clone lacks it
    git_dir = repo / ".git"
    whole = subprocess.run(bench.floor_argv(git_dir, "HEAD"), capture_output=True)
    assert whole.returncode != 0
    rest = subprocess.run(bench.floor_argv(git_dir, "HEAD", ("paper.pdf",)), capture_output=True, check=True)
    assert b"+x = 2" in rest.stdout and b"+x = 1" in rest.stdout and b"paper.pdf" not in rest.stdout
