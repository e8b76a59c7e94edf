"""Git for the whole of swerl: one safe way to run it (`command`), readers of raw objects that never
check anything out (`objects`), and clones: bare mirrors, directories of clones, work trees (`clones`).
Mining, localization, validation and evaluation all read repositories through this package."""

from swerl.git.command import SAFE_CONFIG, GitError, git_argv, repo_slug, run_git, safe_env

__all__ = ["SAFE_CONFIG", "GitError", "git_argv", "repo_slug", "run_git", "safe_env"]
