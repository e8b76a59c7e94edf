"""`--gharchive DIR`: merged PRs and their issues from GH Archive hourly dumps, without the API.

Each dump (`YYYY-MM-DD-H.json.gz`) holds one JSON event per line. Two streaming passes read the files in
parallel, one line at a time:

1. `PullRequestEvent`s with action `closed` and `merged: true` give the PRs (number, merge commit,
   title, body, author, creation time); closing keywords in title and body name the issues.
2. `IssuesEvent`s give the text of exactly those issues (the latest title/body seen), and
   `IssueCommentEvent`s their comments; comments on PRs are ignored.

Memory per worker is one line plus what it keeps from one file; the parent keeps the PR and issue
records in `spill.SpillMap`s (memory up to a limit, sqlite beyond), never an event stream, so memory
stays flat however many dumps are read. Candidates come out sorted by (repo, PR number), whatever order
files finish in.
"""

from __future__ import annotations

import gzip
import json
import re
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from data_pipeline.gitstore import ensure_bare_clone
from data_pipeline.refs import closing_issues
from data_pipeline.schema import Candidate, instance_id
from data_pipeline.spill import Membership, SpillMap

R = TypeVar("R")
_NAME = re.compile(r"\d{4}-\d{2}-\d{2}-\d{1,2}\.json\.gz")


def archive_files(folder: Path) -> list[Path]:
    """The hourly dumps in `folder`, in time order."""

    def key(path: Path) -> tuple[str, int]:
        day, _, hour = path.name.removesuffix(".json.gz").rpartition("-")
        return day, int(hour)

    return sorted((p for p in folder.iterdir() if _NAME.fullmatch(p.name)), key=key)


def _events(path: Path, types: frozenset[str]) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            # Cheap pre-check before parsing: most lines are other event types.
            if not any(t in line for t in types):
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("type") in types:
                yield event


def scan_pulls(path: Path, repos: frozenset[str] | None) -> list[dict[str, Any]]:
    """Pass 1 over one file: the merged (and closed-unmerged) PRs, as small records."""
    found = []
    for event in _events(path, frozenset({"PullRequestEvent"})):
        payload = event.get("payload") or {}
        repo = (event.get("repo") or {}).get("name", "")
        pr = payload.get("pull_request") or {}
        if payload.get("action") != "closed" or (repos is not None and repo not in repos):
            continue
        found.append(
            {
                "repo": repo,
                "number": int(pr.get("number") or payload.get("number")),
                "merged": bool(pr.get("merged")),
                "merge_commit": pr.get("merge_commit_sha") or "",
                "title": pr.get("title") or "",
                "body": pr.get("body") or "",
                "author": (pr.get("user") or {}).get("login", ""),
                "created_at": pr.get("created_at") or "",
            }
        )
    return found


def _pr_key(repo: str, number: int) -> str:
    """A key whose string order is (repo, number) order: NUL sorts before any character of a name."""
    return f"{repo}\0{number:020d}"


def _issue_key(repo: str, number: int) -> str:
    return f"{repo}#{number}"


def _merged_wins(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A later record replaces an earlier one only if merged (a reopened-then-merged PR counts as merged)."""
    return new if new["merged"] else old


def _merge_issue(mine: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """Latest title/body by event time; comments from every file."""
    merged = dict(mine)
    if record["at"] and record["at"] >= mine["at"]:
        merged.update(title=record["title"], body=record["body"], at=record["at"])
    merged["comments"] = mine["comments"] + record["comments"]
    return merged


def scan_issues(path: Path, wanted: Membership) -> dict[str, Any]:
    """Pass 2 over one file: text and comments of the wanted issues only."""
    issues: dict[str, dict[str, Any]] = {}
    for event in _events(path, frozenset({"IssuesEvent", "IssueCommentEvent"})):
        repo = (event.get("repo") or {}).get("name", "")
        issue = (event.get("payload") or {}).get("issue") or {}
        name = _issue_key(repo, int(issue.get("number") or 0))
        if issue.get("pull_request") or name not in wanted:
            continue
        record = issues.setdefault(name, {"title": "", "body": "", "at": "", "comments": []})
        at = event.get("created_at") or ""
        has_text = issue.get("title") is not None and issue.get("body") is not None
        if has_text and at >= record["at"]:  # comment events may carry a truncated issue: text needs both
            record.update(title=issue["title"] or "", body=issue["body"] or "", at=at)
        if event["type"] == "IssueCommentEvent":
            comment = event["payload"].get("comment") or {}
            record["comments"].append((comment.get("created_at") or at, comment.get("body") or ""))
    return issues


def _bounded_map(
    pool: ProcessPoolExecutor, fn: Callable[[Path, Any], R], files: list[Path], arg: Any, window: int
) -> Iterator[R]:
    """`fn(file, arg)` per file in file order, with at most `window` files in flight: `Executor.map`
    submits everything at once, and results that finish early would pile up in the parent."""
    pending: deque[Future[R]] = deque()
    for path in files:
        pending.append(pool.submit(fn, path, arg))
        if len(pending) >= max(1, window):
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


class GHArchiveSource:
    kind = "gharchive"

    def __init__(
        self,
        folder: Path,
        cache: Path,
        *,
        clone_url: str = "https://github.com/{repo}.git",
        repos: list[str] | None = None,
        workers: int = 2,
        spill_limit: int = 200_000,
        scratch: Path | None = None,
    ) -> None:
        self.folder = folder
        self.cache = cache
        self.clone_url = clone_url
        self.repos = frozenset(repos) if repos else None
        self.workers = workers
        self.spill_limit = spill_limit
        self.scratch = scratch

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "folder": str(self.folder.resolve()), "repos": sorted(self.repos or [])}

    def prepare(self, state: dict[str, Any]) -> None:
        if "files" not in state:
            state["files"] = [p.name for p in archive_files(self.folder)]

    def git_dir(self, repo: str) -> Path:
        return ensure_bare_clone(self.cache, repo, self.clone_url.format(repo=repo))

    def candidates(self, state: dict[str, Any]) -> Iterator[Candidate]:
        files = [self.folder / name for name in state["files"]]
        # Records of every PR and wanted issue would grow with the archive: they spill to sqlite files
        # in a scratch directory past `spill_limit` entries each (see `spill.SpillMap`).
        with tempfile.TemporaryDirectory(prefix="swerl-gharchive-", dir=self.scratch) as tmp:
            scratch = Path(tmp)
            pulls = SpillMap(scratch / "pulls.sqlite", self.spill_limit, _merged_wins)
            issues = SpillMap(scratch / "issues.sqlite", self.spill_limit, _merge_issue)
            wanted = SpillMap(scratch / "wanted.sqlite", self.spill_limit)
            try:
                with ProcessPoolExecutor(max_workers=max(1, self.workers)) as pool:
                    for found in _bounded_map(pool, scan_pulls, files, self.repos, 2 * self.workers):
                        for pr in found:
                            pulls.put(_pr_key(pr["repo"], pr["number"]), pr)
                    for _, pr in pulls.items():
                        for n in closing_issues(f"{pr['title']}\n{pr['body']}", pr["repo"]):
                            wanted.put(_issue_key(pr["repo"], n), 1)
                    members = wanted.membership()
                    for part in _bounded_map(pool, scan_issues, files, members, 2 * self.workers):
                        for name, record in part.items():
                            issues.put(name, record)
                yield from self._candidates(pulls, issues)
            finally:
                for index in (pulls, issues, wanted):
                    index.close()

    def _candidates(self, pulls: SpillMap, issues: SpillMap) -> Iterator[Candidate]:
        """Candidates in (repo, PR number) order, each with the text of the issues it closes."""
        for _, pr in pulls.items():
            repo, number = pr["repo"], pr["number"]
            texts, linked = [], []
            for n in closing_issues(f"{pr['title']}\n{pr['body']}", repo):
                issue = issues.get(_issue_key(repo, n))
                if issue is None:
                    continue
                comments = [body for at, body in sorted(issue["comments"]) if at < pr["created_at"]]
                text = "\n\n".join(
                    part.strip() for part in [issue["title"], issue["body"], *comments] if part.strip()
                )
                texts.append(text)
                linked.append(n)
            yield Candidate(
                instance_id=instance_id(repo, number),
                source=self.kind,
                repo=repo,
                pull_number=number,
                merge_commit=pr["merge_commit"],
                problem_statement="\n\n".join(texts),
                problem_source="issue",
                issue_numbers=linked,
                created_at=pr["created_at"],
                merged=pr["merged"],
                author=pr["author"],
            )
