"""`--local PATH`: a clone on disk is a source of its own.

Squash merges (`Fix the parser (#123)`) and merge commits (`Merge pull request #123 from ...`) on the
first-parent line of the branch are PRs, and closing keywords in their text name the issues. The problem
text is what the history says of the PR, recorded in `problem_source` so users can filter:
`commit_message` for a squash commit (its whole message: GitHub puts the PR's commit messages or its
description there), `merge_commits` for a merge commit (its body, which GitHub fills with the PR's title,
then the messages of the commits it merged, oldest first: a merge commit's own message says little
else). Trailers (`Signed-off-by:`, `Co-authored-by:` ...) are left out. The clone is copied
into the cache as a bare clone first (hard links, so it is cheap), which pins the history a run mines
and keeps the user's repository configuration (hooks, filters) out of reach.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from data_pipeline.extract.commits import CommitInfo, first_parent_line, full_history
from data_pipeline.schema import Candidate, instance_id
from data_pipeline.sources.refs import (
    closing_issues,
    commit_problem_text,
    pr_number_from_commit,
    strip_trailers,
)
from swerl.git import GitError, run_git
from swerl.git.clones import ensure_bare_clone
from swerl.git.objects import resolve

_GITHUB_URL = re.compile(r"github\.com[:/]([\w.-]+/[\w.-]+?)(?:\.git)?/?$")


def guess_repo_name(path: Path) -> str:
    """`owner/name` from the clone's origin URL when it is on GitHub, else `local/<directory name>`."""
    try:
        url = run_git(_source_git_dir(path), "config", "--get", "remote.origin.url").decode().strip()
    except Exception:
        url = ""
    match = _GITHUB_URL.search(url)
    if match:
        return match.group(1)
    # The folder that names the clone: not `.git` or `repo` (a mirror kept as `owner+name/repo`), and
    # without a `.git` suffix.
    where = path.resolve()
    if where.name in (".git", "repo") and where.parent != where:
        where = where.parent
    name = where.name.removesuffix(".git") or where.name
    return f"local/{name}"


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
        """The cache's copy of this clone, named after the repository and the clone's path: two clones
        that share a directory name (`~/a/repo`, `~/b/repo`: both `local/repo`) never share a copy, whose
        history would then hold both (and a clone would be taken for what the other one is)."""
        where = hashlib.sha256(str(self.path.resolve()).encode()).hexdigest()[:12]
        return ensure_bare_clone(self.cache, f"{self.repo}@{where}", str(self.path.resolve()))

    def prepare(self, state: dict[str, Any]) -> None:
        git_dir = self.git_dir(self.repo)
        if "head" in state:
            return  # a resumed run keeps the head it started with (`resume_note` says when the clone moved)
        # A fresh run mines what the clone holds now. The cache is brought up to date only when it lacks
        # that commit: a fetch costs ~50 ms even when there is nothing to fetch, before any worker can
        # start, and a cache that holds the commit holds its whole history (the cache is made by clone
        # and fetch only, which never leave history out).
        head = _resolve_in_source(self.path, self._ref())
        if head is not None and _has_commit(git_dir, head):
            state["head"] = head
            return
        if head is None and self.ref == "HEAD":
            raise self._unknown_ref()
        run_git(
            git_dir,
            "fetch",
            "--quiet",
            "--force",
            str(self.path.resolve()),
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        )
        # What the user's clone names, now fetched; a ref it does not know is looked up in the cache.
        try:
            state["head"] = resolve(git_dir, head or self._ref())
        except GitError:
            raise self._unknown_ref() from None

    def check_ref(self) -> None:
        """Refuse a ref the user's clone does not name, before a run writes anything."""
        if _resolve_in_source(self.path, self._ref()) is None:
            raise self._unknown_ref()

    def _unknown_ref(self) -> GitError:
        if self.ref == "HEAD":
            return GitError(f"{self.path} has no commit checked out (HEAD names none)")
        return GitError(f"--ref {self.ref}: not a branch, tag or commit of {self.path}")

    def resume_note(self, state: dict[str, Any]) -> str | None:
        """What a rerun into an existing run directory should know: the run keeps mining the commit it
        started at, so commits made in the clone since then are not in it (None when there are none)."""
        started = state.get("head")
        now = _resolve_in_source(self.path, self._ref()) if started else None
        if now is None or now == started:
            return None
        return (
            f"this run mines {self.path} up to {started[:12]}, where it started; its {self.ref} is now "
            f"{now[:12]}: mine into a new --out to include what came since"
        )

    def _ref(self) -> str:
        """The ref as both clones name it: a name that is a branch of the user's clone is that branch (a
        tag of the same name does not win); anything else as git resolves it there (a tag such as
        `8.1.0`, `origin/main`, `HEAD~10`, a sha, a full ref)."""
        ref = self.ref
        if ref == "HEAD" or ref.startswith("refs/") or _is_sha(ref):
            return ref
        branch = f"refs/heads/{ref}"
        return branch if _resolve_in_source(self.path, branch) is not None else ref

    def candidates(self, state: dict[str, Any]) -> Iterator[Candidate]:
        git_dir = self.git_dir(self.repo)
        merged = MergedCommits(first_parent_line(git_dir, state["head"]))
        for commit in full_history(git_dir, state["head"]):
            if merged.off_line(commit):
                continue
            self.commits_scanned += 1
            number = pr_number_from_commit(commit.message)
            side = merged.messages(commit.parents) if len(commit.parents) > 1 else []
            if number is None:
                continue
            text = commit_problem_text(commit.message)
            extra = [m for m in side if m not in text]
            text = "\n\n".join([text, *extra]).strip()
            author = commit.author_name
            if "[bot]" in commit.author_email and "[bot]" not in author:
                author += "[bot]"
            signer = _BOT_SIGNER.search(commit.message)
            if signer is not None and "[bot]" not in author:
                author = signer.group(1)
            yield Candidate(
                instance_id=instance_id(self.repo, number),
                source=self.kind,
                repo=self.repo,
                pull_number=number,
                merge_commit=commit.sha,
                problem_statement=text,
                problem_source="merge_commits" if len(commit.parents) > 1 else "commit_message",
                issue_numbers=[n for n in closing_issues(text, self.repo) if n != number],
                created_at=commit.authored_at,
                merged=True,
                author=author,
                title=text.split("\n", 1)[0],  # a merge's: the PR title GitHub put in its body
            )


# A commit signed off by a bot (Dependabot signs its commits) is the bot's, whoever squash-merged it.
_BOT_SIGNER = re.compile(r"^Signed-off-by: ([^<\n]*\[bot\])", re.MULTILINE)


class MergedCommits:
    """The messages of the commits each merge on the first-parent line brings in: the history of its
    second (and further) parents that is not already behind the line.

    The whole history is listed once, each commit after its parents (`commits.full_history`); the
    commits off the line wait here until the merge that brings them in. Every commit that a walk from a
    merge's side parents reaches is claimed by that merge, and later walks stop at claimed commits and
    at commits of the line: by induction, whatever an older commit of the line reaches is claimed
    already, so each walk finds exactly `first-parent..side-parent` without asking git for a merge base.
    Memory holds the ids of the line and of the claimed commits (tens of bytes each), and the commits of
    branches not merged yet, which their merge takes out.
    """

    # Messages kept per merge, and characters in all: a merge of a long-lived branch says enough early.
    MAX_MESSAGES = 30
    MAX_CHARS = 8_000

    def __init__(self, line: set[str]) -> None:
        self.line = line
        self.claimed: set[str] = set()
        self.waiting: dict[str, CommitInfo] = {}

    def off_line(self, commit: CommitInfo) -> bool:
        """Keep `commit` for the merge that brings it in when it is off the line (True), else False."""
        if commit.sha in self.line:
            return False
        self.waiting[commit.sha] = commit
        return True

    def messages(self, parents: tuple[str, ...]) -> list[str]:
        """Messages (trailers left out) of the non-merge commits the merge with `parents` brings in,
        oldest first, no repeats, within the limits."""
        found: list[str] = []
        frontier = list(parents[1:])
        while frontier:
            wanted = [s for s in dict.fromkeys(frontier) if s not in self.line and s not in self.claimed]
            self.claimed.update(wanted)
            frontier = []
            for sha in wanted:
                commit = self.waiting.pop(sha, None)
                if commit is None:
                    continue  # a shallow or damaged history: the walk ends there
                frontier += commit.parents
                if len(commit.parents) == 1:  # merges of the base branch into the PR say nothing
                    found.append(strip_trailers(commit.message))
        kept: list[str] = []
        size = 0
        for message in dict.fromkeys(reversed(found)):
            if message and len(kept) < self.MAX_MESSAGES and size + len(message) <= self.MAX_CHARS:
                kept.append(message)
                size += len(message)
        return kept


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
