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
import sys
import tempfile
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from data_pipeline.engines.pools import worker_pool
from data_pipeline.engines.spill import Membership, SpillMap
from data_pipeline.extract.commits import CommitInfo, first_parent_history
from data_pipeline.schema import Candidate, instance_id
from data_pipeline.sources.refs import closing_issues, commit_problem_text, pr_number_from_commit
from swerl.errors import UserError
from swerl.git import GitError
from swerl.git.clones import ensure_bare_clone
from swerl.git.objects import resolve

if TYPE_CHECKING:  # PyGithub is imported only where a token makes the API worth asking
    from data_pipeline.sources.github import PullLookup

R = TypeVar("R")
_NAME = re.compile(r"\d{4}-\d{2}-\d{2}-\d{1,2}\.json\.gz")


def archive_files(folder: Path) -> list[Path]:
    """The hourly dumps in `folder`, in time order."""

    def key(path: Path) -> tuple[str, int]:
        day, _, hour = path.name.removesuffix(".json.gz").rpartition("-")
        return day, int(hour)

    return sorted((p for p in folder.iterdir() if _NAME.fullmatch(p.name)), key=key)


class DumpError(Exception):
    """A dump that cannot be read to its end (truncated, not gzip, damaged)."""


def _events(path: Path, types: frozenset[str], stats: dict[str, int]) -> Iterator[dict[str, Any]]:
    """The events of `types` in one dump. A line that names one of them but is not JSON is counted in
    `stats["bad_lines"]` and skipped; a dump gzip cannot read to its end raises `DumpError`, and so does
    an empty file, which gzip reads as a valid dump of no events (a download that failed)."""
    try:
        if path.stat().st_size == 0:
            raise DumpError("empty file (0 bytes), not a gzip dump: download it again")
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                # Cheap pre-check before parsing: most lines are other event types.
                if not any(t in line for t in types):
                    continue
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    stats["bad_lines"] = stats.get("bad_lines", 0) + 1
                    continue
                if isinstance(event, dict) and event.get("type") in types:
                    yield event
    except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        raise DumpError(f"{type(err).__name__}: {err}") from None


def _scanned(fn: Callable[[Path, Any, dict[str, int]], R], path: Path, arg: Any) -> dict[str, Any]:
    """`fn`'s result for one dump with the dump's counts; a dump that cannot be read gives no result and
    says why (it is left out of both passes, so they agree)."""
    stats: dict[str, int] = {}
    try:
        return {"result": fn(path, arg, stats), "stats": stats, "error": None}
    except DumpError as err:
        return {"result": None, "stats": stats, "error": str(err)}
    except FileNotFoundError:
        return {"result": None, "stats": stats, "error": "missing (removed since the run started)"}


def scan_pulls(path: Path, repos: frozenset[str] | None, stats: dict[str, int]) -> list[dict[str, Any]]:
    """Pass 1 over one file: a small record per `PullRequestEvent` that opens or closes a PR.

    Two shapes. Until October 2025 the event carried the whole PR (title, body, author, `merged`,
    `merge_commit_sha`, `commits`). Since then it carries the action, the number, `head` and `base`
    (ref and sha) and little else (GitHub changelog 2025-08-08, "Upcoming changes to GitHub Events API
    payloads"; gharchive.org issue #312): the author is the actor of the `opened` event, its time the
    PR's creation, and whether and how it was merged is left unknown (`merged: None`) for the
    repository's history to say (`GHArchiveSource._resolve`)."""
    found = []
    for event in _events(path, frozenset({"PullRequestEvent"}), stats):
        payload = event.get("payload") or {}
        repo = (event.get("repo") or {}).get("name", "")
        pr = payload.get("pull_request") or {}
        action = payload.get("action")
        if action not in ("opened", "closed") or (repos is not None and repo not in repos):
            continue
        at = event.get("created_at") or ""
        full = "merged" in pr or "title" in pr
        actor = (event.get("actor") or {}).get("login", "")
        found.append(
            {
                "repo": repo,
                "number": int(pr.get("number") or payload.get("number")),
                "closed": action == "closed",
                "merged": bool(pr.get("merged")) if full else None,
                "merge_commit": pr.get("merge_commit_sha") or "",
                "commits": int(pr.get("commits") or 0),
                "title": pr.get("title") or "",
                "body": pr.get("body") or "",
                "author": (pr.get("user") or {}).get("login", "")
                if full
                else (actor if action == "opened" else ""),
                "created_at": pr.get("created_at") or (at if action == "opened" else ""),
                "base_ref": (pr.get("base") or {}).get("ref") or "",
                "at": at,
            }
        )
    return found


def _pr_key(repo: str, number: int) -> str:
    """A key whose string order is (repo, number) order: NUL sorts before any character of a name."""
    return f"{repo}\0{number:020d}"


def _issue_key(repo: str, number: int) -> str:
    return f"{repo}#{number}"


def _combine_pr(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """One PR's events, in any order: the text and author as the earliest event has them (the PR as it
    was opened: a later edit may describe the fix), the outcome from its closing events (a PR reopened
    and merged later counts as merged; a merge is known over an unknown)."""
    first, last = (old, new) if (old["at"], old["closed"]) <= (new["at"], new["closed"]) else (new, old)
    merged = dict(last)
    for key in ("title", "body", "author", "created_at", "base_ref"):
        merged[key] = first[key] or last[key]
    merged["closed"] = old["closed"] or new["closed"]
    closing = [r for r in (old, new) if r["closed"]]
    rank = {True: 2, None: 1, False: 0}
    winner = max(closing, key=lambda r: (rank[r["merged"]], r["at"])) if closing else last
    for key in ("merged", "merge_commit", "commits"):
        merged[key] = winner[key]
    merged["at"] = max(old["at"], new["at"])
    return merged


def _merge_issue(mine: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """Every version of the issue's text with the first time it was seen; comments from every file."""
    versions = {(title, body): at for at, title, body in mine["versions"]}
    for at, title, body in record["versions"]:
        versions[(title, body)] = min(at, versions.get((title, body), at))
    return {
        "versions": sorted([at, title, body] for (title, body), at in versions.items()),
        "comments": mine["comments"] + record["comments"],
    }


def scan_issues(path: Path, wanted: Membership, stats: dict[str, int]) -> dict[str, Any]:
    """Pass 2 over one file: text versions and comments of the wanted issues only."""
    issues: dict[str, dict[str, Any]] = {}
    for event in _events(path, frozenset({"IssuesEvent", "IssueCommentEvent"}), stats):
        repo = (event.get("repo") or {}).get("name", "")
        issue = (event.get("payload") or {}).get("issue") or {}
        name = _issue_key(repo, int(issue.get("number") or 0))
        if issue.get("pull_request") or name not in wanted:
            continue
        record = issues.setdefault(name, {"versions": [], "comments": []})
        at = event.get("created_at") or ""
        # Comment events may carry a truncated issue: a version needs both title and body.
        if issue.get("title") is not None and issue.get("body") is not None:
            record = _merge_issue(
                record, {"versions": [[at, issue["title"] or "", issue["body"] or ""]], "comments": []}
            )
            issues[name] = record
        if event["type"] == "IssueCommentEvent":
            comment = event["payload"].get("comment") or {}
            record["comments"].append((comment.get("created_at") or at, comment.get("body") or ""))
    return issues


def issue_text_at(versions: list[list[str]], when: str) -> tuple[str, str]:
    """(title, body) of an issue as of `when` (the PR's opening): the last version seen at or before
    it; when the dumps hold none that early, the first version seen (the closest to it)."""
    before = [v for v in versions if v[0] <= when] if when else []
    _, title, body = (before or versions)[-1 if before else 0]
    return title, body


def _bounded_map(
    pool: ProcessPoolExecutor,
    fn: Callable[[Path, Any, dict[str, int]], R],
    files: list[Path],
    arg: Any,
    window: int,
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(file, `_scanned(fn, file, arg)`) per file in file order, with at most `window` files in flight:
    `Executor.map` submits everything at once, and results that finish early would pile up in the
    parent."""
    pending: deque[tuple[Path, Future[dict[str, Any]]]] = deque()
    for path in files:
        pending.append((path, pool.submit(_scanned, fn, path, arg)))
        if len(pending) >= max(1, window):
            done, future = pending.popleft()
            yield done, future.result()
    while pending:
        done, future = pending.popleft()
        yield done, future.result()


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
        api: PullLookup | None = None,
    ) -> None:
        """`api`: where to ask about trimmed events the history cannot settle (a token's REST API)."""
        self.folder = folder
        self.api = api
        self.cache = cache
        self.clone_url = clone_url
        self.repos = frozenset(repos) if repos else None
        self.workers = workers
        self.spill_limit = spill_limit
        self.scratch = scratch
        # What the dumps could not give, for the run's report (`runner.collect` records it).
        self.faults: Counter[str] = Counter()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "folder": str(self.folder.resolve()), "repos": sorted(self.repos or [])}

    def prepare(self, state: dict[str, Any]) -> None:
        if "files" not in state:
            state["files"] = [p.name for p in archive_files(self.folder)]
            if not state["files"]:
                raise UserError(
                    f"{self.folder}: no GH Archive dumps (YYYY-MM-DD-H.json.gz) in this directory"
                )

    def git_dir(self, repo: str) -> Path:
        return ensure_bare_clone(self.cache, repo, self.clone_url.format(repo=repo))

    def _scan(
        self,
        pool: ProcessPoolExecutor,
        fn: Callable[[Path, Any, dict[str, int]], R],
        files: list[Path],
        arg: Any,
    ) -> Iterator[tuple[Path, R]]:
        """(dump, `fn`'s result) for every readable dump (see `_scanned`), with a warning that names
        each one that is not, and its count."""
        for path, scanned in _bounded_map(pool, fn, files, arg, 2 * self.workers):
            self.faults["bad_json_lines"] += scanned["stats"].get("bad_lines", 0)
            if scanned["error"] is not None:
                self.faults["dumps_skipped"] += 1
                print(f"swerl: warning: skipping {path}: {scanned['error']}", file=sys.stderr)
                continue
            yield path, scanned["result"]

    def candidates(self, state: dict[str, Any]) -> Iterator[Candidate]:
        files = [self.folder / name for name in state["files"]]
        readable: list[Path] = []  # pass 2 reads the dumps pass 1 could read: the two passes agree
        # Records of every PR and wanted issue would grow with the archive: they spill to sqlite files
        # in a scratch directory past `spill_limit` entries each (see `spill.SpillMap`).
        with tempfile.TemporaryDirectory(prefix="swerl-gharchive-", dir=self.scratch) as tmp:
            scratch = Path(tmp)
            pulls = SpillMap(scratch / "pulls.sqlite", self.spill_limit, _combine_pr)
            closed = SpillMap(scratch / "closed.sqlite", self.spill_limit)
            issues = SpillMap(scratch / "issues.sqlite", self.spill_limit, _merge_issue)
            wanted = SpillMap(scratch / "wanted.sqlite", self.spill_limit)
            try:
                with worker_pool(max(1, self.workers)) as pool:
                    for path, found in self._scan(pool, scan_pulls, files, self.repos):
                        readable.append(path)
                        for pr in found:
                            pulls.put(_pr_key(pr["repo"], pr["number"]), pr)
                    if files and not readable:  # a result of 0 rows would pass for "nothing to mine"
                        raise UserError(f"{self.folder}: none of its {len(files)} dumps could be read")
                    # The closed PRs, completed where their events were trimmed (their text names the
                    # issues to read in pass 2).
                    for key, pr in self._closed(pulls):
                        closed.put(key, pr)
                        for n in closing_issues(f"{pr['title']}\n{pr['body']}", pr["repo"]):
                            wanted.put(_issue_key(pr["repo"], n), 1)
                    members = wanted.membership()
                    for _, part in self._scan(pool, scan_issues, readable, members):
                        for name, record in part.items():
                            issues.put(name, record)
                yield from self._candidates(closed, issues)
            finally:
                for index in (pulls, closed, issues, wanted):
                    index.close()

    def _closed(self, pulls: SpillMap) -> Iterator[tuple[str, dict[str, Any]]]:
        """The PRs whose closing the dumps hold, in (repo, number) order; a trimmed one completed from
        its repository's history (`_MergeIndex`), with `drop_reason` set when that cannot tell."""
        history: _MergeIndex | None = None
        for key, pr in pulls.items():
            if not pr["closed"]:
                continue
            pr["drop_reason"] = ""
            if pr["merged"] is None:
                if history is None or history.repo != pr["repo"]:
                    history = _MergeIndex(pr["repo"], self.git_dir(pr["repo"]), self.api)
                pr["drop_reason"] = history.resolve(pr)
            yield key, pr

    def _candidates(self, pulls: SpillMap, issues: SpillMap) -> Iterator[Candidate]:
        """Candidates in (repo, PR number) order, each with the text of the issues it closes as they
        read when the PR was opened."""
        for _, pr in pulls.items():
            repo, number = pr["repo"], pr["number"]
            texts, linked = [], []
            for n in closing_issues(f"{pr['title']}\n{pr['body']}", repo):
                issue = issues.get(_issue_key(repo, n))
                if issue is None or not issue["versions"]:
                    continue
                title, body = issue_text_at(issue["versions"], pr["created_at"])
                comments = [text for at, text in sorted(issue["comments"]) if at < pr["created_at"]]
                texts.append("\n\n".join(part.strip() for part in [title, body, *comments] if part.strip()))
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
                merged=bool(pr["merged"]),
                author=pr["author"],
                title=pr["title"],
                commits=pr["commits"],
                drop_reason=pr["drop_reason"],
            )


class _MergeIndex:
    """The PRs a repository's history says were merged: merge commits (`Merge pull request #N ...`) and
    squash commits (`Title (#N)`) on the first-parent line of the branch the PR targeted (the default
    branch when its name is unknown or the clone lacks it), read once per repository and branch."""

    def __init__(self, repo: str, git_dir: Path, api: PullLookup | None = None) -> None:
        self.repo = repo
        self.git_dir = git_dir
        self.api = api
        self._by_branch: dict[str, dict[int, CommitInfo]] = {}

    def _merges(self, branch: str) -> dict[int, CommitInfo]:
        if branch not in self._by_branch:
            try:
                head = resolve(self.git_dir, f"refs/heads/{branch}" if branch else "HEAD")
            except GitError:
                head = resolve(self.git_dir, "HEAD")
            found: dict[int, CommitInfo] = {}
            for commit in first_parent_history(self.git_dir, head):
                number = pr_number_from_commit(commit.message)
                if number is not None:
                    found[number] = commit  # the newest naming a number wins (a revert names it again)
            self._by_branch[branch] = found
        return self._by_branch[branch]

    def resolve(self, pr: dict[str, Any]) -> str:
        """Fill in what a trimmed event no longer carries (merged, merge commit, title, body; author and
        creation time when no `opened` event was seen) from the commit that names the PR, else from the
        API when there is one (which also gives the number of commits: a rebase merge's whole change);
        returns the drop reason when neither can tell (`merge_not_found`: closed unmerged, or merged in
        a way the history does not name, such as a rebase merge)."""
        commit = self._merges(pr["base_ref"]).get(pr["number"])
        found = self.api.get(self.repo, pr["number"]) if commit is None and self.api is not None else None
        if found is not None:
            pr.update({key: value for key, value in found.items() if value or key == "merged"})
            return ""  # a PR the API says was not merged is dropped as `not_merged`
        if commit is None:
            pr["merged"] = False
            return "merge_not_found"
        title, _, body = commit_problem_text(commit.message).partition("\n")
        pr.update(merged=True, merge_commit=commit.sha)
        pr["title"] = pr["title"] or title
        pr["body"] = pr["body"] or body.strip()
        pr["author"] = pr["author"] or commit.author_name
        pr["created_at"] = pr["created_at"] or commit.authored_at
        return ""
