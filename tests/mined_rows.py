"""Rows mined by `swerl data mine --local` from a small real git history built on the spot (~1 s), for the
tests that feed swerl's rows to other trainers: the command line, not the pipeline's modules, so the
tests see the rows a user gets."""

from __future__ import annotations

from pathlib import Path

from swerl.cli.main import main
from swerl.cli.quickstart import build_repo


def mine_rows(root: Path, commits: int = 10) -> Path:
    """A history of `commits` one-line fixes in root/repo, mined into root/mined (returned)."""
    build_repo(root / "repo", files=4, lines=30, commits=commits, seed=1)
    argv = ["data", "mine", "--local", str(root / "repo"), "--repo-name", "acme/demo", "--quiet"]
    argv += ["--clones", str(root / "clones"), "--out", str(root / "mined"), "--max-extra-files", "0"]
    assert main([*argv, "--prompt-style", "compact"]) == 0
    return root / "mined"
