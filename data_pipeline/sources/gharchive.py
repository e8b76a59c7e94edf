"""`--gharchive DIR`: merged PRs and their issues from GH Archive hourly dumps, without the API.

Each dump (`YYYY-MM-DD-H.json.gz`) holds one JSON event per line. Two streaming passes read the files in
parallel, one line at a time:

1. `PullRequestEvent`s with action `closed` and `merged: true` give the PRs (number, merge commit,
   title, body, author, creation time); closing keywords in title and body name the issues.
2. `IssuesEvent`s give the text of exactly those issues (the latest title/body seen), and
   `IssueCommentEvent`s their comments; comments on PRs are ignored.

Memory per worker is one line plus what it keeps; the parent keeps the merged PRs' small records and the
keys of the issues they reference, never an event stream. Candidates come out sorted by (repo, PR
number), whatever order files finish in.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from data_pipeline.gitstore import ensure_bare_clone
from data_pipeline.refs import closing_issues
from data_pipeline.schema import Candidate, instance_id

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


def scan_issues(path: Path, wanted: frozenset[tuple[str, int]]) -> dict[str, Any]:
    """Pass 2 over one file: text and comments of the wanted issues only."""
    issues: dict[str, dict[str, Any]] = {}
    for event in _events(path, frozenset({"IssuesEvent", "IssueCommentEvent"})):
        repo = (event.get("repo") or {}).get("name", "")
        issue = (event.get("payload") or {}).get("issue") or {}
        key = (repo, int(issue.get("number") or 0))
        if key not in wanted or issue.get("pull_request"):
            continue
        record = issues.setdefault(f"{repo}#{key[1]}", {"title": "", "body": "", "at": "", "comments": []})
        at = event.get("created_at") or ""
        has_text = issue.get("title") is not None and issue.get("body") is not None
        if has_text and at >= record["at"]:  # comment events may carry a truncated issue: text needs both
            record.update(title=issue["title"] or "", body=issue["body"] or "", at=at)
        if event["type"] == "IssueCommentEvent":
            comment = event["payload"].get("comment") or {}
            record["comments"].append((comment.get("created_at") or at, comment.get("body") or ""))
    return issues


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
    ) -> None:
        self.folder = folder
        self.cache = cache
        self.clone_url = clone_url
        self.repos = frozenset(repos) if repos else None
        self.workers = workers

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "folder": str(self.folder.resolve()), "repos": sorted(self.repos or [])}

    def prepare(self, state: dict[str, Any]) -> None:
        if "files" not in state:
            state["files"] = [p.name for p in archive_files(self.folder)]

    def git_dir(self, repo: str) -> Path:
        return ensure_bare_clone(self.cache, repo, self.clone_url.format(repo=repo))

    def candidates(self, state: dict[str, Any]) -> Iterator[Candidate]:
        files = [self.folder / name for name in state["files"]]
        with ProcessPoolExecutor(max_workers=max(1, self.workers)) as pool:
            pulls: dict[tuple[str, int], dict[str, Any]] = {}
            for found in pool.map(scan_pulls, files, [self.repos] * len(files)):
                for pr in found:
                    key = (pr["repo"], pr["number"])
                    if key not in pulls or pr["merged"]:  # a reopened-then-merged PR counts as merged
                        pulls[key] = pr
            links = {key: closing_issues(f"{pr['title']}\n{pr['body']}", key[0]) for key, pr in pulls.items()}
            wanted = frozenset((repo, n) for (repo, _), numbers in links.items() for n in numbers)
            issues: dict[str, dict[str, Any]] = {}
            for part in pool.map(scan_issues, files, [wanted] * len(files)):
                for name, record in part.items():
                    mine = issues.setdefault(name, {"title": "", "body": "", "at": "", "comments": []})
                    if record["at"] and record["at"] >= mine["at"]:
                        mine.update(title=record["title"], body=record["body"], at=record["at"])
                    mine["comments"] += record["comments"]
        for (repo, number), pr in sorted(pulls.items()):
            texts, linked = [], []
            for n in links[(repo, number)]:
                issue = issues.get(f"{repo}#{n}")
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
