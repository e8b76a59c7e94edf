"""`--local PATH`: a clone on disk is a source of its own.

Squash merges (`Fix the parser (#123)`) and merge commits (`Merge pull request #123 from ...`) on the
first-parent line of the branch are PRs; their commit message is the problem text (marked with
`problem_source = "commit_message"`), and closing keywords in it name the issues. The clone is copied
into the cache as a bare clone first (hard links, so it is cheap), which pins the history a run mines
and keeps the user's repository configuration (hooks, filters) out of reach.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from data_pipeline.commits import first_parent_history
from data_pipeline.gitstore import GitError, ensure_bare_clone, resolve, run_git
from data_pipeline.refs import closing_issues, commit_problem_text, pr_number_from_commit
from data_pipeline.schema import Candidate, instance_id

_GITHUB_URL = re.compile(r"github\.com[:/]([\w.-]+/[\w.-]+?)(?:\.git)?/?$")


def guess_repo_name(path: Path) -> str:
    """`owner/name` from the clone's origin URL when it is on GitHub, else `local/<directory name>`."""
    try:
        url = run_git(_source_git_dir(path), "config", "--get", "remote.origin.url").decode().strip()
    except Exception:
        url = ""
    match = _GITHUB_URL.search(url)
    return match.group(1) if match else f"local/{path.resolve().name}"


class LocalSource:
    kind = "local"
    # Thousands of commits a second from the clone: the run can plan rounds of shards (`schedule.py`).
    lists_quickly = True

    def __init__(self, path: Path, cache: Path, repo: str | None = None, ref: str = "HEAD") -> None:
        self.path = path
        self.cache = cache
        self.repo = repo or guess_repo_name(path)
        self.ref = ref
        self.commits_scanned = 0

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path.resolve()), "repo": self.repo, "ref": self.ref}

    def git_dir(self, repo: str) -> Path:
        return ensure_bare_clone(self.cache, self.repo, str(self.path.resolve()))

    def prepare(self, state: dict[str, Any]) -> None:
        git_dir = self.git_dir(self.repo)
        if "head" in state:
            return  # a resumed run keeps the head it started with
        # A fresh run mines what the clone holds now. The cache is brought up to date only when it lacks
        # that commit: a fetch costs ~50 ms even when there is nothing to fetch, before any worker can
        # start, and a cache that holds the commit holds its whole history (the cache is made by clone
        # and fetch only, which never leave history out).
        head = _resolve_in_source(self.path, self._ref())
        if head is not None and _has_commit(git_dir, head):
            state["head"] = head
            return
        if head is None and self.ref == "HEAD":
            raise GitError(f"{self.path} has no commit checked out (HEAD names none)")
        run_git(
            git_dir, "fetch", "--quiet", "--force", str(self.path.resolve()), "+refs/heads/*:refs/heads/*"
        )
        # What the user's clone names, now fetched; a ref it does not know is looked up in the cache.
        state["head"] = resolve(git_dir, head or self._ref())

    def _ref(self) -> str:
        """The ref as both clones name it: a branch name is a head; HEAD, shas and full refs as given."""
        ref = self.ref
        if ref != "HEAD" and not ref.startswith("refs/") and not _is_sha(ref):
            return f"refs/heads/{ref}"
        return ref

    def candidates(self, state: dict[str, Any]) -> Iterator[Candidate]:
        git_dir = self.git_dir(self.repo)
        for commit in first_parent_history(git_dir, state["head"]):
            self.commits_scanned += 1
            number = pr_number_from_commit(commit.message)
            if number is None:
                continue
            author = commit.author_name
            if "[bot]" in commit.author_email and "[bot]" not in author:
                author += "[bot]"
            yield Candidate(
                instance_id=instance_id(self.repo, number),
                source=self.kind,
                repo=self.repo,
                pull_number=number,
                merge_commit=commit.sha,
                problem_statement=commit_problem_text(commit.message),
                problem_source="commit_message",
                issue_numbers=[n for n in closing_issues(commit.message, self.repo) if n != number],
                created_at=commit.authored_at,
                merged=True,
                author=author,
            )


def _is_sha(ref: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-f]{7,40}", ref))


def _source_git_dir(path: Path) -> Path:
    """The git directory of the user's clone: `.git` in a work tree, the directory itself when bare."""
    dot_git = path / ".git"
    return dot_git if dot_git.exists() else path


def _resolve_in_source(path: Path, ref: str) -> str | None:
    """The commit `ref` names in the user's clone now (read without touching its work tree), or None when
    it names none there."""
    try:
        return resolve(_source_git_dir(path), ref)
    except GitError:
        return None


def _has_commit(git_dir: Path, sha: str) -> bool:
    try:
        run_git(git_dir, "cat-file", "-e", f"{sha}^{{commit}}")
    except GitError:
        return False
    return True
