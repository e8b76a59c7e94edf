"""How swerl runs git: one safe configuration and environment for every git process it starts.

Repositories swerl reads are untrusted (mined from GitHub, or checked out to run their tests), so no git
process may run a program the repository or a user's configuration names (hooks, fsmonitor, external
diff drivers) or rewrite what it reads (autocrlf, quoted paths, mnemonic prefixes). System and global
configuration are ignored entirely; git never prompts and never pages.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from swerl.errors import UserError

SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.quotePath=false",
    "core.autocrlf=false",
    "diff.external=",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "log.showSignature=false",
    "color.ui=false",
    # Clones and fetches from a local path (a directory of mirrors) are the offline way in.
    "protocol.file.allow=always",
)


class GitError(UserError, RuntimeError):
    """A git command failed, or a repository or object is missing (the message holds git's stderr, never
    credentials: none are passed to git)."""


def safe_env() -> dict[str, str]:
    """The environment for every git process: no system/global config, no prompts, no pager."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "LC_ALL": "C",
        }
    )
    return env


def git_argv(git_dir: Path | None, *args: str) -> list[str]:
    """A git command line with the safe configuration, against `git_dir` when given (a bare repository,
    or a work tree's `.git`: the work tree is then the current directory)."""
    argv = ["git"] if git_dir is None else ["git", f"--git-dir={git_dir}"]
    for item in SAFE_CONFIG:
        argv += ["-c", item]
    return [*argv, *args]


def run_git(git_dir: Path | None, *args: str, stdin: bytes | None = None, cwd: Path | None = None) -> bytes:
    """Run git and return stdout as bytes (decoding is the caller's business: contents are byte-exact)."""
    proc = subprocess.run(
        git_argv(git_dir, *args), input=stdin, cwd=cwd, capture_output=True, env=safe_env(), check=False
    )
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed: {proc.stderr.decode('utf-8', 'replace').strip()}")
    return proc.stdout


def repo_slug(repo: str) -> str:
    """`owner/name` -> `owner__name`, the file-system name of a repository (as SWE-bench writes ids)."""
    if repo.count("/") != 1 or ".." in repo:
        raise ValueError(f"repository must be 'owner/name', got {repo!r}")
    return repo.replace("/", "__")
